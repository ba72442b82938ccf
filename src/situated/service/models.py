"""The request and response documents of the service layer: one set for the CLI, HTTP and MCP.

Requests never carry a principal: who asks comes from the door (the CLI's options, an API key,
the MCP launch configuration). Every request model forbids unknown fields, so a body naming a
tenant, roles or clearance is refused, not ignored. Lists are bounded here; text lengths and
every other rule are `Memory`'s own (`situated.arguments`), so a rule exists once.

Responses are what every door prints or returns: times are ISO 8601 (UTC), an open end of
validity is `null`, enums are their names in lower case as the CLI has always shown them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from situated import arguments as args
from situated.models import MAX_FACTS, MemoryRecord
from situated.recall.briefing import Briefing
from situated.store.ledger import LedgerEvent
from situated.store.recall_reads import RecallView

MAX_ITEMS = 1000
"""Items of one `add_many` request over a door (a larger import goes in several requests)."""
MAX_LIST = args.MAX_ITEMS
"""Entries of any other list in a request (facts, conditions, ids, tools): `Memory`'s bound."""

Scalar = str | int | float | bool | None
ClassificationName = Literal["public", "internal", "confidential", "restricted"]
AuthorityName = Literal["inferred", "user_declared", "system_observed", "externally_verified"]
KindName = Literal["lesson", "fact", "preference", "note"]
StateName = Literal["PROPOSED", "ACTIVE", "LOW_VALUE", "ARCHIVED", "INVALIDATED", "REJECTED",
                    "REVOKED", "ERASED"]
TimeIn = datetime | float | None
"""A time in a request: ISO 8601 or epoch seconds."""


class _Request(BaseModel):
    """A request document: an argument it does not take is refused (`unknown_argument`,
    naming it and the accepted ones), never dropped."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in data:
                if name not in cls.model_fields:
                    raise PydanticCustomError(
                        "unknown_argument", "{name}: unknown argument; accepted: {accepted}",
                        {"name": str(name)[:60], "accepted": ", ".join(cls.model_fields)},
                    )
        return data


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests --------------------------------------------------------------------------------


class StateIn(_Request):
    """A situation: text and flat facts (a request may give its text alone, as a string)."""

    text: str = ""
    facts: dict[str, Scalar] = Field(default_factory=dict, max_length=MAX_FACTS)


def _text_alone(value: Any) -> Any:
    return {"text": value} if isinstance(value, str) else value


StateArg = Annotated[StateIn, BeforeValidator(_text_alone),
                     Field(description='The situation: {"text": ..., "facts": {...}}, or its '
                           "text alone as a string")]


class AddRequest(_Request):
    """Propose a memory (the arguments of `Memory.add`)."""

    content: str
    kind: str = Field(default="lesson", description="lesson, fact, preference or note")
    namespace: str = "default"
    state: StateArg | None = None
    action: str | None = None
    success: bool | None = None
    reward: float | None = None
    episode_id: str | None = None
    step: int | None = None
    evidence: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    conditions: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    entity: str | None = None
    attribute: str | None = None
    value: Scalar = None
    multi_valued: bool = False
    roles: list[str] = Field(default_factory=list, max_length=MAX_LIST,
                             description="Roles a reader needs (ones the key holds)")
    classification: str | None = Field(
        default=None, description="public, internal, confidential or restricted (at most the key's "
        "clearance; default internal, or the clearance if lower)")
    consent: str | None = None
    authority: str = Field(
        default="inferred", description="inferred, user_declared, system_observed or "
        "externally_verified")
    valid_from: TimeIn = None
    valid_until: TimeIn = None
    policy_version: str | None = None

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of `Memory.add` (the state as a `State` value)."""
        out = self.model_dump(exclude={"state"})
        out["state"] = None if self.state is None else _state(self.state)
        return out


class AddManyRequest(_Request):
    """Propose many memories at once (each item validated before anything is written)."""

    items: list[AddRequest] = Field(max_length=MAX_ITEMS)


class RecallRequest(_Request):
    """Compile guidance for the present situation."""

    state: StateArg
    intent: str = ""
    namespace: str | None = None
    k: int = 5
    budget_tokens: int = 800
    as_of: TimeIn = None
    known_at: TimeIn = None
    allowed_tools: list[str] | None = Field(default=None, max_length=MAX_LIST)
    prohibited_effects: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    policy_version: str | None = None
    explain: bool = False


class FeedbackRequest(_Request):
    """How the task went after a recall, and which served memories were used."""

    recall_id: str
    success: bool
    used: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    reward: float | None = None
    cited: str | None = None


class ListQuery(_Request):
    namespace: str | None = None
    states: list[str] | None = Field(default=None, max_length=MAX_LIST)
    limit: int = 100
    offset: int = 0


class ReviewDecision(_Request):
    reason: str = "approved"


class RejectDecision(_Request):
    reason: str


class LearnRequest(_Request):
    """A finished episode (`situated.write.distill.Trajectory`) to distil into lessons."""

    trajectory: dict[str, Any]
    distiller: str | None = Field(default=None, description="A registered distiller (`rules`, "
                                  "`llm`); default: the server's configured one")


class ConversationRequest(_Request):
    """Chat turns to store as notes (`situated.write.conversation`); an extractor may propose
    the facts and preferences they state."""

    messages: list[dict[str, Any]] = Field(min_length=1, max_length=2000)
    session: str | None = None
    namespace: str | None = None
    extractor: str | None = Field(default=None, description="A registered extractor (`none`, "
                                  "`llm`); default: the server's configured one")


class RevokeRequest(_Request):
    consent: str
    reason: str


class EraseRequest(_Request):
    reason: str


class KeyCreate(_Request):
    tenant: str
    roles: list[str] = Field(default_factory=list, max_length=MAX_LIST)
    clearance: str = "internal"
    actor: str | None = None
    label: str = ""


def _state(s: StateIn) -> Any:
    from situated.models import State, validate_input

    return validate_input("state", lambda: State(s.text, facts=dict(s.facts)))


# -- responses -------------------------------------------------------------------------------


class StateDoc(_Doc):
    text: str
    facts: dict[str, Scalar]


class OutcomeDoc(_Doc):
    success: bool | None
    reward: float | None


class SourceDoc(_Doc):
    state: StateDoc | None
    state_unknown: bool
    action: str | None
    outcome: OutcomeDoc
    episode_id: str | None
    step: int | None
    evidence: list[str]


class ScopeDoc(_Doc):
    tenant: str
    namespace: str
    roles: list[str]
    classification: ClassificationName
    consent: str | None


class ValidityDoc(_Doc):
    valid_from: datetime
    valid_until: datetime | None = Field(description="null: open-ended")
    recorded_at: datetime


class CountersDoc(_Doc):
    uses: int
    successes: int
    failures: int
    exposures: int


class MemoryDoc(_Doc):
    """A memory as every door shows it: the record, its validity in ISO 8601, its utility."""

    id: str
    content: str
    kind: KindName
    source: SourceDoc
    conditions: list[str]
    entity: str | None
    attribute: str | None
    value: Scalar
    multi_valued: bool
    scope: ScopeDoc
    authority: AuthorityName
    validity: ValidityDoc
    state: StateName
    counters: CountersDoc
    policy_version: str | None
    supersedes: str | None
    superseded_by: str | None
    fingerprint: str
    proposed_by: str
    utility: float

    @classmethod
    def of(cls, rec: MemoryRecord) -> MemoryDoc:
        data = rec.model_dump(mode="json")
        v = rec.validity
        data["scope"]["roles"] = sorted(data["scope"]["roles"])
        data["validity"] = {"valid_from": v.valid_from, "valid_until": v.valid_until,
                            "recorded_at": v.recorded_at}
        return cls.model_validate(data | {"utility": round(rec.utility, 4)})


class GateDoc(_Doc):
    """One write gate's result for a proposal."""

    gate: str
    version: str = ""
    verdict: str
    reasons: list[str] = Field(default_factory=list)


class GatedDoc(MemoryDoc):
    """A memory with the results of the write gates its proposal passed through (what `add`,
    `add_many` and `learn` return: a held or rejected proposal says which gate and why), and
    `warnings`: what the write did that the writer should know, one line each (held for
    review and by which gate, rejected, redacted, merged into a stored twin, never
    servable)."""

    gates: list[GateDoc]
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def of_gates(cls, rec: MemoryRecord, gates: list[dict[str, Any]],
                 warnings: list[str] | None = None) -> Self:
        return cls.model_validate(MemoryDoc.of(rec).model_dump()
                                  | {"gates": gates, "warnings": warnings or []})


class PendingDoc(GatedDoc):
    """A proposal waiting for review, with the results of the gates it passed through."""


class EventDoc(_Doc):
    """One ledger event; `at` in ISO 8601."""

    seq: int
    at: datetime
    event: str
    tenant: str
    memory_id: str | None
    recall_id: str | None
    actor: str
    reason: str
    data: dict[str, Any]

    @classmethod
    def of(cls, ev: LedgerEvent) -> EventDoc:
        return cls(seq=ev.seq, at=ev.at, event=ev.event.value,
                   tenant=ev.tenant, memory_id=ev.memory_id, recall_id=ev.recall_id,
                   actor=ev.actor, reason=ev.reason, data=ev.data)


class ScoresDoc(_Doc):
    relevance: float
    applicability: float
    trust: float
    freshness: float
    expected_utility: float


class ItemDoc(_Doc):
    memory_id: str
    text: str
    verdict: str
    confidence: float
    scores: ScoresDoc
    kind: str
    authority: str
    source_state: str
    adaptations: list[str]
    tokens: int
    checked: list[str] = Field(default_factory=list, description="What the check against the "
                               "present found (conditions and facts that hold, fail or cannot "
                               "be checked now)")
    unproven: list[str] = Field(default_factory=list, description="Surfaces an agent's "
                                "uncorroborated lesson is on probation for: never act on it "
                                "alone")
    lifecycle: StateName = Field(default="ACTIVE", description="ACTIVE, or LOW_VALUE after "
                                 "failed uses")
    record: str = Field(default="", description="Its record in uses, e.g. 'failed 3 of 3 uses'")


class RejectedDoc(_Doc):
    memory_id: str
    reason: str
    detail: str
    stage: str
    verdict: str | None
    scores: ScoresDoc | None


class TraceDoc(_Doc):
    memory_id: str
    stage: str
    decision: str
    numbers: dict[str, float]
    detail: str


class BriefingDoc(_Doc):
    """A recall's result: the mode to act on, guidance items citing memory ids, typed
    rejections, `warnings` (a configured model that failed over, and why), how many
    proposals the caller may read wait for review (`pending_review`, a count only), and
    `rendered`, the text to put in the model's context: with the recall id, the mode, what
    each item's check found, every candidate not served, the notes, and the feedback call."""

    recall_id: str
    mode: Literal["GUIDED", "NO_APPLICABLE_MEMORY", "INSUFFICIENT_EVIDENCE"]
    items: list[ItemDoc]
    rejected: list[RejectedDoc]
    missing_facts: list[str]
    budget_tokens: int
    tokens_used: int
    trace: list[TraceDoc]
    namespace: str | None
    warnings: list[str] = Field(default_factory=list)
    pending_review: int = 0
    rendered: str
    explain: str | None = None
    read: list[str] = []

    @classmethod
    def of(cls, b: Briefing, explain: bool = False, feedback: str | None = None
           ) -> BriefingDoc:
        """`feedback`: the feedback call as the door spells it (see `Briefing.render`)."""
        return cls.model_validate(
            b.to_dict() | {"rendered": b.render(feedback=feedback),
                           "explain": b.explain() if explain else None},
            from_attributes=False,
        )


class RecallDoc(_Doc):
    """A recall opened to its record, as the reader may see it: the present state and
    intent it was made for, the versions that made it, every candidate with its
    reconstruction and stage decisions, the briefing's items and typed rejections, and the
    text the agent received (`rendered`; null when it quoted a memory the reader may not
    read). `hidden`: candidates cut because the reader may not read them (now)."""

    recall_id: str
    at: datetime
    actor: str
    namespace: str | None
    mode: Literal["GUIDED", "NO_APPLICABLE_MEMORY", "INSUFFICIENT_EVIDENCE"]
    served: list[str]
    state: dict[str, Any]
    intent: str
    principal: dict[str, Any]
    versions: dict[str, str]
    candidates: list[str]
    reconstructions: dict[str, dict[str, Any]]
    trace: list[TraceDoc]
    items: list[ItemDoc]
    rejected: list[RejectedDoc]
    missing_facts: list[str]
    budget_tokens: int
    tokens_used: int
    warnings: list[str] = Field(default_factory=list)
    pending_review: int = 0
    rendered: str | None
    hidden: int

    @classmethod
    def of(cls, v: RecallView) -> RecallDoc:
        p = v.payload
        b = p.get("briefing") or {}
        return cls.model_validate({
            "recall_id": v.id, "at": v.at, "actor": v.actor,
            "namespace": v.namespace, "mode": v.mode, "served": list(v.served),
            "state": p.get("state") or {}, "intent": p.get("intent") or "",
            "principal": p.get("principal") or {},
            "versions": {k: str(p[k]) for k in ("pipeline_version", "embedder",
                                                  "reconstructor", "tokenizer") if k in p},
            "candidates": p.get("candidates", []),
            "reconstructions": p.get("reconstructions", {}),
            "trace": p.get("trace", []), "items": b.get("items", []),
            "rejected": b.get("rejected", []), "missing_facts": b.get("missing_facts", []),
            "budget_tokens": b.get("budget_tokens", 0), "tokens_used": b.get("tokens_used", 0),
            "warnings": b.get("warnings", []), "pending_review": b.get("pending_review", 0),
            "rendered": v.rendered, "hidden": v.hidden,
        })


class RecallSummaryDoc(_Doc):
    """A recall in a list: who made it, when, for what, and how it came out."""

    recall_id: str
    at: datetime
    actor: str
    namespace: str | None
    mode: Literal["GUIDED", "NO_APPLICABLE_MEMORY", "INSUFFICIENT_EVIDENCE"]
    served: int
    rejected: int
    state_text: str
    intent: str

    @classmethod
    def of(cls, v: RecallView) -> RecallSummaryDoc:
        p = v.payload
        b = p.get("briefing") or {}
        return cls(recall_id=v.id, at=v.at, actor=v.actor,
                   namespace=v.namespace, mode=v.mode,  # type: ignore[arg-type]
                   served=len(b.get("items", [])), rejected=len(b.get("rejected", [])),
                   state_text=str((p.get("state") or {}).get("text") or ""),
                   intent=str(p.get("intent") or ""))


class RecallPartDoc(_Doc):
    """What one recall decided about one memory: served as an item (verdict, scores) or
    rejected (typed reason, stage), with that memory's stage trace."""

    recall_id: str
    at: datetime
    actor: str
    mode: Literal["GUIDED", "NO_APPLICABLE_MEMORY", "INSUFFICIENT_EVIDENCE"]
    item: ItemDoc | None
    rejected: RejectedDoc | None
    trace: list[TraceDoc]

    @classmethod
    def of(cls, v: RecallView, memory_id: str) -> RecallPartDoc:
        b = v.payload.get("briefing") or {}
        return cls.model_validate({
            "recall_id": v.id, "at": v.at, "actor": v.actor,
            "mode": v.mode,
            "item": next((i for i in b.get("items", []) if i["memory_id"] == memory_id), None),
            "rejected": next((r for r in b.get("rejected", []) if r["memory_id"] == memory_id),
                             None),
            "trace": [t for t in v.payload.get("trace", []) if t["memory_id"] == memory_id],
        })


class FindQuery(_Request):
    """Memories to browse: text in the content (case-insensitive), and filters."""

    text: str = ""
    namespace: str | None = None
    kinds: list[KindName] | None = Field(default=None, max_length=4)
    states: list[StateName] | None = Field(default=None, max_length=8)
    authorities: list[AuthorityName] | None = Field(default=None, max_length=4)
    limit: int = 50
    offset: int = 0


class FeedbackDoc(_Doc):
    recall_id: str
    credited: list[str]
    blamed: list[str]
    exposed: list[str]
    transitions: list[tuple[str, str]]
    duplicate: bool


class StatsDoc(_Doc):
    tenant: str
    memories_by_state: dict[str, int]
    recalls: int
    feedback: int
    ledger_events: int
    embedder: str | None
    reconstructor: str
    maintenance_failures: dict[str, int]
    calibration: dict[str, Any] | None
    attribute_schema: list[dict[str, Any]] = Field(default_factory=list)


class HealthDoc(_Doc):
    ok: bool
    integrity: str
    orphan_records: int
    ledger_mismatches: int
    failures: dict[str, int]
    migrations: list[str]
    path: str
    resident: dict[str, Any]
    unanalysed: int
    failing: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Components that failed repeatedly of late (a model "
        "endpoint that does not answer): endpoint, failures, last_at, last_error")


class MaintenanceDoc(_Doc):
    demoted: list[str]
    archived: list[str]
    failures: list[str]
    refit: dict[str, Any]
    graphs: int = 0


class RevokedDoc(_Doc):
    consent: str
    revoked: int


class ErasedDoc(_Doc):
    erased: str


class ConversationDoc(_Doc):
    """What `add_conversation` stored: a note per turn, the extracted proposals."""

    session: str
    notes: list[MemoryDoc]
    proposals: list[MemoryDoc]
    extractor: str
    extractor_error: str | None
    warnings: list[str] = Field(default_factory=list)


class KeyDoc(_Doc):
    """An API key as listed: the principal it stands for, never its secret."""

    id: str
    tenant: str
    roles: list[str]
    clearance: ClassificationName
    actor: str
    label: str
    created_at: datetime
    created_by: str
    revoked_at: datetime | None


class NewKeyDoc(KeyDoc):
    secret: str = Field(description="Shown once; only its hash is stored.")


class ErrorDoc(_Doc):
    """A refused request: the project's error name, the argument at fault, the message."""

    error: str
    field: str | None = None
    message: str
