"""`Memory`: the public API over the store, the embedder and the recall pipeline."""

from __future__ import annotations

import builtins
import enum
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from situated import arguments as args
from situated.conditions import parse_condition
from situated.defaults import (
    DEFAULT_DB,
    DEFAULT_EMBEDDER,
    DEFAULT_RECONSTRUCTOR,
    ENDPOINT_EMBEDDERS,
    ENDPOINT_RECONSTRUCTORS,
)
from situated.embed import Embedder, get_embedder
from situated.errors import (
    FeedbackConflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    UsageError,
)
from situated.learning.inferred import INFERRED_DIGEST, record_inferred
from situated.learning.learned import LearnedReconstructor
from situated.learning.lifecycle import LifecycleRules
from situated.learning.maintenance import MaintenanceReport, run_maintenance
from situated.learning.schema import AttributeSchema, SchemaEntry
from situated.learning.training import FORMATS
from situated.learning.training import examples as training_examples
from situated.models import (
    MAX_CONTENT_CHARS,
    OPEN_END,
    Authority,
    Classification,
    FactValue,
    Kind,
    LifecycleState,
    MemoryRecord,
    Outcome,
    Principal,
    Scope,
    Source,
    State,
    Validity,
    _as_invalid,
    as_state,
    content_fingerprint,
    from_epoch,
    parse_authority,
    parse_kind,
    to_epoch,
    utcnow,
    validate_input,
)
from situated.notices import reported
from situated.reader.subjects import key_of
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import stored_form
from situated.recall.briefing import Briefing
from situated.recall.pipeline import RecallRequest, run_recall
from situated.recall.reconstruct import Policy, Reconstructor, get_reconstructor
from situated.store import recall_reads
from situated.store.ann import DEFAULT_ROWS as DEFAULT_ANN_ROWS
from situated.store.contract import StoreContract, open_store
from situated.store.ledger import Credit, EventType, LedgerEvent, replay
from situated.store.recall_reads import RecallView
from situated.store.resident import DEFAULT_BUDGET_MB as DEFAULT_RESIDENT_MB
from situated.store.scope import (
    ALL_STATES,
    SYSTEM,
    VISIBLE_STATES,
    Eligibility,
    check_write,
    default_classification,
)
from situated.store.values import RebuildReport
from situated.write.distill import Distiller, Trajectory
from situated.write.gates import (
    DEFAULT_GATES,
    Gate,
    WritePolicy,
)
from situated.write.importer import ImportReport, import_lines
from situated.write.ingest import ConversationResult, ingest_conversation
from situated.write.items import proposal, source_level
from situated.write.promotion import AutoPromote, PromotionPolicy
from situated.write.writer import Proposal, Writer, forget_texts
from situated.write.writers import Writers, run_distiller

if TYPE_CHECKING:
    from situated.config import Settings

TimeLike = datetime | float | int | str | None
T = TypeVar("T")


class _FromSettings(enum.Enum):
    """The default of `Memory`'s path, embedder and reconstructor: taken from the settings."""

    TOKEN = "from settings"


FROM_SETTINGS = _FromSettings.TOKEN
MAX_K = 100
MAX_BUDGET_TOKENS = 32_000


log = logging.getLogger("situated")

@dataclass(frozen=True)
class FeedbackResult:
    """What one feedback call changed."""

    recall_id: str
    credited: tuple[str, ...]
    blamed: tuple[str, ...]
    exposed: tuple[str, ...]
    transitions: tuple[tuple[str, str], ...] = ()
    duplicate: bool = False


@dataclass(frozen=True)
class Stats:
    """Counts visible to one principal."""

    tenant: str
    memories_by_state: dict[str, int]
    recalls: int
    feedback: int
    ledger_events: int
    embedder: str | None
    reconstructor: str
    maintenance_failures: dict[str, int] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None
    """For the `learned` reconstructor: examples and Brier scores (train, held out)."""
    attribute_schema: builtins.list[dict[str, Any]] = field(default_factory=builtins.list)
    """What the store learned about attributes in the scopes this principal may read
    (`situated.learning.schema`)."""


@dataclass(frozen=True)
class Health:
    """Whether the store is sound: integrity, vectors, ledger replay, failures."""

    ok: bool
    integrity: str
    orphan_records: int
    ledger_mismatches: int
    failures: dict[str, int]
    migrations: tuple[str, ...]
    path: str
    resident: dict[str, Any] = field(default_factory=dict)
    """The in-memory search index of this process: tenants, rows, MB, loads, mismatches."""
    unanalysed: int = 0
    """Memories (not erased) not yet analysed by this version, judged from their text until
    the next open fills it in (`situated.recall.analysis`; not a fault)."""
    failing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Components that failed repeatedly of late (at least `REPEATED_FAILURES` in the last
    `FAILURE_WINDOW` seconds, any process): each with its `endpoint` (a model's URL, when it
    has one), its `failures` in the window, the `last_at` (ISO 8601) and `last_error`.
    Any of them makes `ok` false."""


class Memory:
    """Experience memory compiled at recall.

    One `Memory` is used by one thread at a time: open one per thread or process; any number
    of them may use the same file at once (WAL, busy timeout, retries).

    Arguments left out come from the settings (`situated.config`: `SITUATED_*` environment
    variables, `situated.toml`, `[tool.situated]` in pyproject.toml), read when `Memory` is
    built; arguments given always win.

    Args:
        path: the SQLite file, a `str` or `os.PathLike` (created if absent). One file holds
            everything. A `postgresql://` connection string opens a PostgreSQL store instead
            (the `postgres` extra; README, "PostgreSQL + pgvector"). Every argument is
            checked before the file is opened. Default: the `db` setting, else
            `situated.db`.
        embedder: an `Embedder` or a registered name (default: the `embedder` setting, else
            the shipped static model; `openai` takes its endpoint from `embedder_options` or
            the `embedder_*` settings).
        embedder_options: keyword arguments for an embedder given by name, over the settings'.
        reconstructor: a `Reconstructor` or a registered name (default: the `reconstructor`
            setting, else `rules`; `learned`; `llm`, which needs a model:
            `reconstructor_options={"base_url": ..., "model": ...}` or the
            `reconstructor_*` settings).
        reconstructor_options: keyword arguments for a reconstructor given by name, over the
            settings'.
        promotion: decides whether a proposal is promoted at once or held for review.
        lifecycle: thresholds for demotion and revival.
        write_policies: per-namespace write policy (allowed tools, consent, review), `"*"`
            for the rest.
        gates: the write gates every proposal passes, in order.
        resident_mb: memory this process may use to keep tenants' search data (vectors,
            eligibility columns, a BM25 index) resident, kept current from the ledger; 0 turns
            it off and every search runs in SQLite (sqlite-vec and `store.lexical`). See
            `situated.store.resident`.
        ann_rows: a tenant with at least this many memories is searched through an
            approximate (HNSW) index per vector field, eligibility applied inside the search,
            persisted next to the database as `<file>-ann/`; 0 keeps every search exact. Needs
            the `ann` extra (faiss); without it searches stay exact. See `situated.store.ann`.
        settings: the settings to use instead of reading them (`situated.config.load_settings`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | _FromSettings = FROM_SETTINGS,
        *,
        embedder: str | Embedder | _FromSettings = FROM_SETTINGS,
        embedder_options: Mapping[str, Any] | None = None,
        reconstructor: str | Reconstructor | _FromSettings = FROM_SETTINGS,
        reconstructor_options: Mapping[str, Any] | None = None,
        promotion: PromotionPolicy | None = None,
        lifecycle: LifecycleRules | None = None,
        write_policies: Mapping[str, WritePolicy] | None = None,
        gates: Sequence[Gate] = DEFAULT_GATES,
        resident_mb: float = DEFAULT_RESIDENT_MB,
        ann_rows: int = DEFAULT_ANN_ROWS,
        settings: Settings | None = None,
    ) -> None:
        # every argument is checked before the file is opened (or created)
        if settings is not None:
            from situated.config import Settings

            args.instance(settings, "settings", Settings, "situated.config.Settings")
        elif (
            FROM_SETTINGS in (path, embedder, reconstructor)
            or (isinstance(embedder, str) and embedder in ENDPOINT_EMBEDDERS)
            or (isinstance(reconstructor, str) and reconstructor in ENDPOINT_RECONSTRUCTORS)
        ):  # otherwise nothing is left to the settings: they are not read
            from situated.config import load_settings

            settings = load_settings()
        if path is FROM_SETTINGS:
            assert settings is not None
            path = settings.db or DEFAULT_DB
        file = args.path(path)
        args.number(resident_mb, "resident_mb", 0, MAX_RESIDENT_MB)  # 0 turns the index off
        args.integer(ann_rows, "ann_rows", 0, MAX_ANN_ROWS)  # 0: exact search only
        given_embedder_options = _options(embedder_options, "embedder_options")
        given_reconstructor_options = _options(reconstructor_options, "reconstructor_options")
        self.promotion: PromotionPolicy = (
            AutoPromote() if promotion is None
            else args.has_methods(promotion, "promotion", "decide")
        )
        self.lifecycle = (
            LifecycleRules() if lifecycle is None
            else args.instance(lifecycle, "lifecycle", LifecycleRules, "LifecycleRules")
        )
        self.write_policies = _write_policies(write_policies)
        self.gates = tuple(
            args.has_methods(g, f"gates[{n}]", "check")
            for n, g in enumerate(args.items(gates, "gates"))
        )
        self.embedder = _component(
            embedder, "embedder", DEFAULT_EMBEDDER, get_embedder, given_embedder_options,
            settings, Embedder, "an Embedder or a name",
        )
        self.reconstructor = _component(
            reconstructor, "reconstructor", DEFAULT_RECONSTRUCTOR, get_reconstructor,
            given_reconstructor_options, settings, Reconstructor, "a Reconstructor or a name",
        )
        self.writers = Writers(settings)  # distillers and extractors, built on first use
        self.store: StoreContract = open_store(file, resident_mb=resident_mb, ann_rows=ann_rows)
        self.schema = AttributeSchema(self.store)  # which attributes hold one value
        self._writer = Writer(self)
        try:
            self.reconstructor.bind(self.store)
            ref = self.store.embedder_ref()
            if ref is not None and ref != self.embedder.model_ref:
                self.store.bind_embedder(self.embedder.model_ref, self.embedder.dim)  # raises
            self._analyse_rows()
            self._erasures = self.store.erasures()
        except BaseException:
            self.store.close()
            raise

    def _analyse_rows(self, batch: int = 1000) -> int:
        """Store the analysis of rows written before it existed, or by an older `analyze`
        (derived data, like the FTS row: recall works without it, only slower)."""
        done = 0
        while rows := self.store.unanalysed(ANALYSIS_VERSION, batch, SYSTEM):
            analysed = [(rid, stored_form(rec)) for rid, rec in rows]  # outside the lock
            with self.store.transaction():
                for rid, text in analysed:
                    self.store.set_analysis(rid, ANALYSIS_VERSION, text)
            done += len(rows)
        if done:
            log.info("stored the analysis of %d memories written without a current one", done)
        return done

    def close(self) -> None:
        self.writers.close()
        self.store.close()

    def write_policy(self, namespace: str) -> WritePolicy:
        """The namespace's write policy (`"*"` is the fallback; default: `WritePolicy()`)."""
        if namespace != "*":
            _check_namespace(args.text(namespace, "namespace", args.MAX_LABEL_CHARS))
        return self.write_policies.get(namespace) or self.write_policies.get("*") or WritePolicy()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------

    @reported
    def add(
        self,
        content: str,
        *,
        principal: Principal,
        kind: Kind | str = Kind.LESSON,
        namespace: str = "default",
        state: State | str | Mapping[str, Any] | None = None,
        action: str | None = None,
        success: bool | None = None,
        reward: float | None = None,
        episode_id: str | None = None,
        step: int | None = None,
        evidence: Sequence[str] = (),
        conditions: Sequence[str] = (),
        entity: str | None = None,
        attribute: str | None = None,
        value: FactValue = None,
        multi_valued: bool = False,
        roles: Iterable[str] = (),
        classification: Classification | str | None = None,
        consent: str | None = None,
        authority: Authority | str = Authority.INFERRED,
        valid_from: TimeLike = None,
        valid_until: TimeLike = None,
        policy_version: str | None = None,
        source_classification: Classification | str | None = None,
    ) -> MemoryRecord:
        """Propose a memory; the promotion policy decides whether it becomes recallable.

        Everything is validated before anything is written: bad input raises `InvalidInput`
        naming the field and leaves the store untouched. A principal writes only within its
        own scope: `roles` must be roles it holds and `classification` (default: internal, or
        the principal's clearance if lower) at most its clearance, else `PermissionDenied`.
        An exact duplicate of a stored memory with the same scope is not added again: the
        existing one is reinforced (a ledger event) and returned.

        Returns:
            The stored record (state ACTIVE if promoted, PROPOSED if held for review).
        """
        rec = self._build(
            content, principal, kind, namespace, state, action, success, reward, episode_id,
            step, evidence, conditions, entity, attribute, value, multi_valued, roles,
            classification, consent, authority, valid_from, valid_until, policy_version,
        )
        source_level(source_classification)
        return self._propose(rec, principal, source_classification, "proposed via add")

    def _propose(
        self,
        rec: MemoryRecord,
        principal: Principal,
        source_classification: Classification | str | None,
        reason: str,
        trace: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Gates, dedupe, insert, then promotion: the one write path for durable memory."""
        self.store.bind_embedder(self.embedder.model_ref, self.embedder.dim)
        prepared = self._writer.prepare(
            [Proposal(rec, source_classification, trace)], principal, reason
        )
        with self.store.transaction():
            return self._writer.commit(prepared)[0]

    @reported
    def add_many(
        self,
        items: Iterable[Mapping[str, Any]],
        *,
        principal: Principal,
        batch_size: int = 500,
    ) -> builtins.list[MemoryRecord]:
        """Propose many memories: each item holds the keyword arguments of `add`.

        Every item is validated before anything is written (an error names the item's index
        and field); texts are embedded in batches; each batch of `batch_size` is one
        transaction. The gates, dedupe and promotion are those of `add`. Near-duplicates
        within one batch are not merged (exact duplicates are). A name refused as a look-alike
        of a taken one (`situated.store.names`) is found at insert: it rolls back its batch.

        Returns:
            The stored records, in input order.
        """
        args.principal(principal)
        args.integer(batch_size, "batch_size", 1, 10_000)
        proposals = [
            proposal(self, item, principal, f"items[{n}]")
            for n, item in enumerate(args.items(items, "items", MAX_BATCH_ITEMS))
        ]  # every item validated before anything is written
        self.store.bind_embedder(self.embedder.model_ref, self.embedder.dim)
        out: builtins.list[MemoryRecord] = []
        for start in range(0, len(proposals), batch_size):
            chunk = self._writer.prepare(
                proposals[start : start + batch_size], principal, "proposed via add_many"
            )
            with self.store.transaction():
                out.extend(self._writer.commit(chunk))
        return out

    @reported
    def import_records(
        self,
        lines: Iterable[str],
        *,
        principal: Principal,
        batch_size: int = 1000,
        start_line: int = 1,
        progress: Callable[[ImportReport], None] | None = None,
    ) -> ImportReport:
        """Import memories from JSON lines (an open file, or any iterable of lines): one
        object of `add` fields per line, plus `recorded_at` for an admin (others:
        `PermissionDenied` naming it). Every gate runs; each `batch_size` lines are one
        durable transaction; `progress` is called after each. See `situated.write.importer`.

        Raises:
            ImportStopped: a bad line (its number and field named); the batches before it
                stay committed, nothing of its own batch is written; `next_line` resumes.
        """
        args.principal(principal)
        args.integer(batch_size, "batch_size", 1, 10_000)
        args.integer(start_line, "start_line", 1, 1 << 62)
        if isinstance(lines, str | bytes) or not isinstance(lines, Iterable):
            raise InvalidInput("lines", "must be an iterable of text lines (an open file, a "
                               f"list of strings), got {type(lines).__name__}")
        if progress is not None:
            args.callable_of(progress, "progress", 1)
        return import_lines(self, lines, principal, batch_size=batch_size,
                            start_line=start_line, progress=progress)

    def _build(
        self, content: str, principal: Principal, kind: Kind | str, namespace: str,
        state: State | str | Mapping[str, Any] | None, action: str | None,
        success: bool | None,
        reward: float | None, episode_id: str | None, step: int | None,
        evidence: Sequence[str], conditions: Sequence[str], entity: str | None,
        attribute: str | None, value: FactValue, multi_valued: bool, roles: Iterable[str],
        classification: Classification | str | None, consent: str | None,
        authority: Authority | str, valid_from: TimeLike, valid_until: TimeLike,
        policy_version: str | None,
    ) -> MemoryRecord:
        args.principal(principal)
        args.text(content, "content", MAX_CONTENT_CHARS, required=True)
        k = parse_kind(kind)
        _check_namespace(namespace)
        state = None if state is None else as_state(state)
        args.optional_text(action, "action")
        args.optional_flag(success, "success")
        args.optional_number(reward, "reward")
        args.optional_label(episode_id, "episode_id")
        args.optional_integer(step, "step", 0, args.MAX_STEP)
        if isinstance(conditions, str):
            raise InvalidInput("conditions", "must be a list of condition strings")
        conditions = tuple(args.items(conditions, "conditions"))
        for c in conditions:
            parse_condition(c)
        if (entity is None) != (attribute is None):
            raise InvalidInput("attribute", "entity and attribute go together")
        if entity is None and k in (Kind.FACT, Kind.PREFERENCE) and not multi_valued:
            # a fact or preference written as text: its subject and value, as the reader
            # reads them, so a newer value about the same subject replaces the older
            read_key = key_of(content, k.value)
            if read_key is not None and value is None:
                entity, attribute, value = read_key.entity, read_key.attribute, read_key.value
                multi_valued = not read_key.exclusive
        if k is Kind.FACT and (not entity or not attribute):
            raise InvalidInput(
                "entity", "a fact needs an entity and an attribute (none could be read from "
                "its text: give entity= and attribute=, or add it as a note)")
        args.optional_label(entity, "entity")
        args.optional_label(attribute, "attribute")
        if isinstance(evidence, str):
            raise InvalidInput("evidence", "must be a list of references")
        evidence = args.labels(evidence, "evidence")
        value = args.scalar(value, "value")
        args.flag(multi_valued, "multi_valued")
        args.optional_label(consent, "consent")
        args.optional_label(policy_version, "policy_version")
        now = utcnow()
        start = to_epoch(valid_from, "valid_from")
        end = to_epoch(valid_until, "valid_until")
        start = now if start is None else start
        end = OPEN_END if end is None else end
        if end <= start:
            raise InvalidInput("valid_until", "must be later than valid_from")
        auth = parse_authority(authority)
        unknown = state is None or state.is_empty
        roles = (roles,) if isinstance(roles, str) else args.items(roles, "roles")
        scope = validate_input(
            "",
            lambda: Scope(
                tenant=principal.tenant, namespace=namespace,
                roles=roles,  # type: ignore[arg-type]  # a list: RoleSet checks each name
                classification=default_classification(principal)  # type: ignore[arg-type]
                if classification is None else classification,  # the validator parses it
                consent=consent,
            ),
        )
        check_write(principal, scope)
        source = validate_input(
            "",
            lambda: Source(
                state=None if unknown else state, state_unknown=unknown, action=action,
                outcome=Outcome(success=success, reward=reward), episode_id=episode_id,
                step=step, evidence=tuple(evidence),
            ),
        )
        rec = validate_input(
            "",
            lambda: MemoryRecord(
                id="mem_" + uuid.uuid4().hex[:16],
                content=content.strip(),
                kind=k,
                source=source,
                conditions=tuple(c.strip() for c in conditions),
                entity=entity,
                attribute=attribute,
                value=value,
                multi_valued=multi_valued,
                scope=scope,
                authority=auth,
                validity=Validity(valid_from=from_epoch(start),
                                  valid_until=None if end >= OPEN_END else from_epoch(end),
                                  recorded_at=from_epoch(now)),
                state=LifecycleState.PROPOSED,
                policy_version=policy_version,
                fingerprint=content_fingerprint(scope.tenant, scope.namespace, k, content),
                proposed_by=principal.name,
            ),
        )
        return rec

    @reported
    def promote(
        self, memory_id: str, *, reviewer: Principal, reason: str = "approved"
    ) -> MemoryRecord:
        """Approve a proposal held for review."""
        return self._review(memory_id, reviewer, EventType.PROMOTED, reason)

    def reject(self, memory_id: str, *, reviewer: Principal, reason: str) -> MemoryRecord:
        """Reject a proposal held for review; it stays in the ledger, never recallable."""
        return self._review(memory_id, reviewer, EventType.REJECTED, reason)

    def _review(
        self, memory_id: str, reviewer: Principal, event: EventType, reason: str
    ) -> MemoryRecord:
        args.identifier(memory_id, "memory_id")
        args.principal(reviewer, "reviewer")
        _reason(reason)
        if "reviewer" not in reviewer.roles:
            raise PermissionDenied("reviewing proposals needs the 'reviewer' role")
        own = Eligibility.for_inspection(reviewer)
        with self.store.transaction():  # read inside: no concurrent review slips past
            rec = self.store.get(memory_id, own)
            if rec.state is not LifecycleState.PROPOSED:
                raise UsageError(f"{memory_id} is {rec.state.value}, not PROPOSED")
            self.store.append_event(memory_id, own, event, reviewer.name, reason)
            if event is EventType.PROMOTED:
                self._writer.supersede_same_key(rec, reviewer)
            return self.store.get(memory_id, own)

    def pending(
        self, *, reviewer: Principal, namespace: str | None = None, limit: int = 100
    ) -> builtins.list[tuple[MemoryRecord, builtins.list[dict[str, Any]]]]:
        """Proposals waiting for review, each with the gate results of its `proposed` event."""
        args.principal(reviewer, "reviewer")
        _check_namespace(namespace)
        args.integer(limit, "limit", 1, args.MAX_LIMIT)
        if "reviewer" not in reviewer.roles:
            raise PermissionDenied("reviewing proposals needs the 'reviewer' role")
        elig = Eligibility(
            reviewer, (namespace,) if namespace else None, (LifecycleState.PROPOSED,)
        )
        return [(rec, _gates_of(self.store.history(rec.id, elig)))
                for rec in self.store.page(elig, limit, 0)]

    def gate_results(
        self, memory_id: str, *, principal: Principal
    ) -> builtins.list[dict[str, Any]]:
        """The write gates' results for a memory's proposal (its `proposed` event), for a
        principal who may read its history; `[]` for a memory proposed before gates were
        recorded."""
        return _gates_of(self.history(memory_id, principal=principal))

    @reported
    def learn(
        self,
        trajectory: Trajectory | Mapping[str, Any] | str,
        *,
        principal: Principal,
        distiller: Distiller | str | None = None,
        distiller_options: Mapping[str, Any] | None = None,
        classification: Classification | str | None = None,
        source_classification: Classification | str | None = None,
        consent: str | None = None,
        authority: Authority | str = Authority.SYSTEM_OBSERVED,
    ) -> builtins.list[MemoryRecord]:
        """Distil a finished episode into lessons; each goes through the gates like `add`.

        Args:
            trajectory: a `Trajectory`, its dict, or its JSON text: one object with
                `episode_id`, `task`, `steps` (each with `observation`, `facts`, `action`,
                `result`) and `outcome` (`success`, `reward`); see `situated.write.distill`.
            principal: who proposes (tenant and actor).
            distiller: a `Distiller` or a registered name (`rules`, `llm`); default: the
                `distiller` setting, else `rules`. A model's failure falls back to `rules`
                (counted in `health`); a model's lessons are never above `inferred`.
            distiller_options: keyword arguments for a distiller given by name, over the
                `distiller_*` settings (e.g. `{"base_url": ..., "model": ...}`).

        Raises:
            InvalidInput: the trajectory is not JSON, not an object, or a field is missing or
                wrong (named, e.g. `trajectory.steps.0.facts`); nothing is written.

        Returns:
            The stored records (promoted, held, or existing ones reinforced).
        """
        args.principal(principal)
        chosen = self.writers.distiller(distiller, distiller_options)
        source_level(source_classification)
        if isinstance(trajectory, str):
            traj = _trajectory_from_json(trajectory)
        elif isinstance(trajectory, Trajectory):
            traj = trajectory
        else:
            traj = validate_input("trajectory", lambda: Trajectory.model_validate(trajectory))
        auth = parse_authority(authority)
        drafts = run_distiller(self.store, chosen, traj)
        records = [
            self._build(
                d.content, principal, Kind.LESSON, traj.namespace, d.state, d.action,
                d.success, traj.outcome.reward, traj.episode_id, d.step, d.evidence,
                d.conditions, None, None, None, False, (), classification, consent,
                min(auth, Authority.INFERRED) if d.model_written else auth, None, None, None,
            )
            for d in drafts
        ]  # all validated before anything is written
        name = getattr(chosen, "name", "custom")
        return [
            self._propose(
                rec, principal, source_classification, f"distilled by {name}",
                {"episode_id": traj.episode_id, "failure_lesson": d.failure_lesson}
                | ({"provenance": dict(d.provenance)} if d.provenance else {}),
            )
            for rec, d in zip(records, drafts, strict=True)
        ]

    @reported
    def add_conversation(
        self,
        messages: Any,
        *,
        principal: Principal,
        session: str | None = None,
        namespace: str | None = None,
        extractor: Any = None,
        extractor_options: Mapping[str, Any] | None = None,
        classification: Classification | str | None = None,
        consent: str | None = None,
    ) -> ConversationResult:
        """Store chat turns as notes (speaker and session as provenance) and propose the
        facts and preferences an extractor finds in them; see `situated.write.conversation`.

        Args:
            messages: a list of turns (`speaker` or `role`, `content`), a conversation object
                (`session`, `namespace`, `messages`), or its JSON text.
            session: the session id (default: the document's, else a new one).
            extractor: an `Extractor` or a registered name (`none`, `llm`); default: the
                `extractor` setting, else `none`. A model's failure stores the notes alone
                (counted in `health`); extracted items are proposals at authority `inferred`.
        """
        return ingest_conversation(
            self, messages, principal, session, namespace,
            self.writers.extractor(extractor, extractor_options), classification, consent,
        )

    def revoke_consent(self, consent: str, *, principal: Principal, reason: str) -> int:
        """Withdraw a consent: every memory under it that the principal may read becomes
        REVOKED at once. Needs 'admin'; run it as an admin cleared `restricted` holding the
        tenant's roles to reach every memory (one rule for every path: nothing outside a
        principal's scope changes).

        Returns:
            How many memories were revoked.
        """
        args.principal(principal)
        args.label(consent, "consent")
        _reason(reason)
        _require_admin(principal)
        with self.store.transaction():  # select inside: no concurrent write slips past
            return self.store.revoke(
                consent, Eligibility.for_inspection(principal), principal.name, reason
            )

    def erase(self, memory_id: str, *, principal: Principal, reason: str) -> None:
        """Right to erasure: remove content, source, vectors, FTS row and recalled text; leave
        a tombstone (id, scope, validity, counters) and an `erased` event. Needs the 'admin'
        role; the memory must be one the principal may read (NotFound otherwise)."""
        args.identifier(memory_id, "memory_id")
        args.principal(principal)
        _reason(reason)
        _require_admin(principal)
        elig = Eligibility.for_inspection(principal)
        rec = self.store.get(memory_id, elig)
        self.store.erase(
            memory_id, elig, principal.name, reason,
            lambda payload: _scrub_recall(payload, memory_id, rec),
        )
        forget_texts()  # parsed, screened and counted texts held by this process
        self._erasures = self.store.erasures()

    # -- recall -----------------------------------------------------------------------------

    @reported
    def recall(
        self,
        state: State | str | Mapping[str, Any],
        *,
        principal: Principal,
        intent: str = "",
        namespace: str | None = None,
        k: int = 5,
        budget_tokens: int = 800,
        as_of: TimeLike = None,
        known_at: TimeLike = None,
        policy: Policy | None = None,
    ) -> Briefing:
        """Compile guidance for the present state.

        Args:
            state: the present situation: a `State`, its text, or `{"text": ...,
                "facts": {...}}`.
            principal: who asks; only memories it may read are considered.
            intent: what the agent is trying to do, used for retrieval.
            namespace: restrict to one namespace (task family); None searches all.
            k: at most this many guidance items.
            budget_tokens: the token budget of the rendered guidance.
            as_of: world time to recall at (default now); superseded facts return for the past.
            known_at: transaction time: only what the store had recorded by then.
            policy: allowed tools, prohibited effects and policy version of this run.

        Returns:
            A Briefing: mode, guidance items with scores and ids, typed rejections.
        """
        state = as_state(state)
        args.principal(principal)
        args.integer(k, "k", 1, MAX_K)
        args.integer(budget_tokens, "budget_tokens", 1, MAX_BUDGET_TOKENS)
        args.text(intent, "intent", args.MAX_REASON_CHARS)
        _check_namespace(namespace)
        if policy is not None:
            args.instance(policy, "policy", Policy, "a Policy")
        req = RecallRequest(
            state=state, principal=principal, intent=intent, namespace=namespace, k=k,
            budget_tokens=budget_tokens, as_of=to_epoch(as_of, "as_of"),
            known_at=to_epoch(known_at, "known_at"), policy=policy or Policy(),
        )
        meta = self.store.meta("embedder", "erasures")  # one read for both
        if "embedder" not in meta:
            self.store.bind_embedder(self.embedder.model_ref, self.embedder.dim)
        self._forget_erased_texts(int(meta.get("erasures", 0)))
        return run_recall(self.store, self.embedder, self.reconstructor, req)

    def _forget_erased_texts(self, seen: int | None = None) -> bool:
        """When any process erased a memory since this `Memory` last looked (`seen`: the
        store's erasure count, read if not given), empty this process's caches of memory text
        (they may hold the erased text). True if it did."""
        if seen is None:
            seen = self.store.erasures()
        if seen == self._erasures:
            return False
        self._erasures = seen
        forget_texts()
        return True

    # -- feedback ---------------------------------------------------------------------------

    @reported
    def feedback(
        self,
        recall_id: str,
        *,
        principal: Principal,
        success: bool,
        used: Iterable[str] = (),
        reward: float | None = None,
        cited: str | None = None,
    ) -> FeedbackResult:
        """Credit memories used in a success, blame those used in a failure, count exposure.

        Args:
            recall_id: the Briefing's `recall_id`.
            principal: must belong to the tenant that made the recall.
            success: how the episode ended.
            used: ids of served memories the agent acted on.
            reward: an optional scalar reward, recorded with the events.
            cited: the agent's output text; served ids cited in it (`[mem_...]`) count as used.

        Idempotent per recall: the same feedback again changes nothing; different feedback
        for the same recall raises `FeedbackConflict`. A failure that used a fact while a newer
        fact with the same (entity, attribute) exists supersedes the used fact.
        """
        args.identifier(recall_id, "recall_id")
        args.principal(principal)
        args.flag(success, "success")
        if isinstance(used, str):
            raise InvalidInput("used", "must be a list of memory ids")
        used_ids = tuple(dict.fromkeys(args.identifiers(used, "used")))
        reward = args.optional_number(reward, "reward")
        if cited is not None and not isinstance(cited, str):
            raise InvalidInput("cited", "must be the agent's output text")
        args.optional_text(cited, "cited", MAX_CITED_CHARS)
        cited_ids = re.findall(r"\[(mem_[0-9a-f]{16})\]", cited or "")
        recall = self.store.get_recall(recall_id, principal)
        served = recall.served
        foreign = [u for u in used_ids if u not in served]
        if foreign:
            raise InvalidInput("used", f"not served by recall {recall_id}: {', '.join(foreign)}")
        # a citation of an id this recall did not serve is ignored, not trusted
        used_ids = tuple(dict.fromkeys([*used_ids, *(c for c in cited_ids if c in served)]))
        digest = hashlib.sha256(
            json.dumps([success, sorted(used_ids), reward]).encode()
        ).hexdigest()
        credited = tuple(u for u in used_ids if success)
        blamed = tuple(u for u in used_ids if not success)
        exposed = tuple(s for s in served if s not in used_ids)
        transitions: list[tuple[str, str]] = []
        own = Eligibility(principal, states=ALL_STATES)
        with self.store.transaction():
            previous = self.store.feedback_digest(recall)
            if previous is not None and previous.startswith(INFERRED_DIGEST):
                self.store.drop_inferred_feedback(recall)  # explicit feedback replaces it
                previous = None
            if previous is not None:
                if previous != digest:
                    raise FeedbackConflict(
                        f"recall {recall_id} already has different feedback"
                    )
                return FeedbackResult(recall_id, credited, blamed, exposed, duplicate=True)
            self.store.save_feedback(recall, success, used_ids, reward, digest)
            for mid, credit in (
                [(m, Credit.CREDITED) for m in credited]
                + [(m, Credit.BLAMED) for m in blamed]
                + [(m, Credit.EXPOSED) for m in exposed]
            ):
                folded = self.store.append_event(
                    mid, own, EventType.FEEDBACK, principal.name, f"{credit.value} by feedback",
                    {"credit": credit.value, "reward": reward, "namespace": recall.namespace},
                    recall_id=recall_id,
                )
                if credit is Credit.EXPOSED:
                    continue
                to, why = self.lifecycle.after_feedback(
                    folded.state, folded.counters, credit is Credit.CREDITED
                )
                if to is not None:
                    self.store.append_event(
                        mid, own, EventType.TRANSITIONED, "situated", why,
                        {"to": to.value, "uses": folded.counters.uses,
                         "successes": folded.counters.successes},
                    )
                    transitions.append((mid, to.value))
            for mid in blamed:
                old = self.store.get(mid, own)
                newer = self._newer_same_key(old)
                if newer is not None and self.schema.supersedes(old):
                    self._writer.supersede(old, newer, principal,
                                    "failed while a newer value exists (outcome-triggered)",
                                    at=utcnow())
                    transitions.append((mid, LifecycleState.INVALIDATED.value))
                elif newer is not None:  # evidence for the attribute schema, may supersede
                    self.schema.failure_after_newer(old, newer, principal)
                    if self.store.get(mid, own).state is LifecycleState.INVALIDATED:
                        transitions.append((mid, LifecycleState.INVALIDATED.value))
            for mid in credited:  # an older value still right after a newer one: counter
                old = self.store.get(mid, own)
                newer = self._newer_same_key(old)
                if newer is not None and not self.schema.supersedes(old):
                    self.schema.credit_after_newer(old, newer, principal)
        return FeedbackResult(recall_id, credited, blamed, exposed, tuple(transitions))

    def infer_feedback(
        self, recall_id: str, *, principal: Principal, success: bool,
        blamed: str | None = None,
    ) -> bool:
        """Record an outcome inferred from a session whose client gave no feedback
        (`situated.learning.inferred`): labelled inferred, weighted less, never moving a
        memory's lifecycle; explicit feedback for the recall later replaces it.

        Returns:
            False when the recall already has feedback (nothing is written).
        """
        args.identifier(recall_id, "recall_id")
        args.principal(principal)
        args.flag(success, "success")
        if blamed is not None:
            args.identifier(blamed, "blamed")
        return record_inferred(self.store, recall_id, principal, success, blamed)

    def _newer_same_key(self, rec: MemoryRecord) -> MemoryRecord | None:
        """A newer active value of `rec`'s (entity, attribute) in exactly `rec`'s scope."""
        if rec.entity is None or rec.attribute is None or rec.multi_valued:
            return None
        if rec.validity.valid_until_ts <= utcnow():
            return None  # already closed
        if rec.state not in (LifecycleState.ACTIVE, LifecycleState.LOW_VALUE,
                             LifecycleState.INVALIDATED):
            return None  # revoked, rejected or erased memories stay as they are
        for other in reversed(self.store.same_key(
            rec.entity, rec.attribute, Eligibility.readers_of(rec.scope, (LifecycleState.ACTIVE,))
        )):
            if (other.id != rec.id and other.scope.roles == rec.scope.roles
                    and other.scope.classification == rec.scope.classification
                    and other.validity.recorded_at_ts > rec.validity.recorded_at_ts):
                return other
        return None

    # -- maintenance ------------------------------------------------------------------------

    def maintain(self, *, actor: str = "maintenance") -> MaintenanceReport:
        """Run lifecycle transitions in bulk, refit a learned reconstructor, and give tenants
        that grew large their own vector graphs where the store keeps them (PostgreSQL).

        Failures are logged, counted and shown by `health`, never swallowed.
        """
        args.label(actor, "actor")
        report = run_maintenance(self.store, self.lifecycle, actor=actor)
        report = replace(report, graphs=len(self.store.build_graphs(SYSTEM)))
        if isinstance(self.reconstructor, LearnedReconstructor):
            cal = self.reconstructor.fit()
            report = replace(report, refit={"examples": cal.examples if cal else 0})
        return report

    # -- eligible reads ---------------------------------------------------------------------

    def inspect(
        self,
        memory_id: str,
        *,
        principal: Principal,
        as_of: TimeLike = None,
        known_at: TimeLike = None,
    ) -> MemoryRecord:
        """One memory the principal may read, in any lifecycle state; NotFound otherwise.

        Args:
            as_of: world time: NotFound unless the memory was valid then.
            known_at: transaction time: the memory as the store knew it then (lifecycle state
                and counters replayed from the ledger up to that time; NotFound if it was not
                recorded yet).
        """
        args.identifier(memory_id, "memory_id")
        args.principal(principal)
        t = to_epoch(as_of, "as_of")
        k = to_epoch(known_at, "known_at")
        rec = self.store.get(memory_id, Eligibility.for_inspection(principal))
        if t is not None and not rec.validity.valid_from_ts <= t < rec.validity.valid_until_ts:
            raise NotFound(f"{memory_id} was not valid at {as_of}")
        if k is not None:
            if rec.validity.recorded_at_ts > k:
                raise NotFound(f"{memory_id} was not recorded yet at {known_at}")
            folded = replay(
                self.store.history(memory_id, Eligibility.for_inspection(principal), known_at=k)
            )
            if folded is not None:
                rec = rec.model_copy(update={"state": folded.state, "counters": folded.counters})
        return rec

    def history(self, memory_id: str, *, principal: Principal) -> builtins.list[LedgerEvent]:
        """The ledger events of one memory the principal may read, oldest first (an erased
        memory's, its tombstone's audit trail, to admins only)."""
        args.identifier(memory_id, "memory_id")
        args.principal(principal)
        states = ALL_STATES if "admin" in principal.roles else VISIBLE_STATES
        return self.store.history(memory_id, Eligibility(principal, states=states))

    def list(
        self,
        *,
        principal: Principal,
        namespace: str | None = None,
        states: Iterable[LifecycleState | str] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[MemoryRecord]:
        """Memories the principal may read, oldest first. Tombstones of erased memories
        (`states=["ERASED"]`) are listed to admins only."""
        args.principal(principal)
        _check_namespace(namespace)
        elig = Eligibility.for_inspection(principal, namespace)
        if states is not None:
            if isinstance(states, str | LifecycleState):
                states = (states,)
            wanted = tuple(
                args.choice(LifecycleState, s, "states") for s in args.items(states, "states")
            )
            if LifecycleState.ERASED in wanted and "admin" not in principal.roles:
                raise PermissionDenied("states: tombstones of erased memories are for admins")
            elig = Eligibility(principal, elig.namespaces, wanted)
        args.integer(limit, "limit", 1, 10_000)
        args.integer(offset, "offset", 0, args.MAX_OFFSET)
        return self.store.page(elig, limit, offset)

    def export(
        self, *, principal: Principal, namespace: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every memory the principal may read, as JSON-ready dicts, in pages (the arguments
        are checked at the call, before the first page is read)."""
        args.principal(principal)
        _check_namespace(namespace)
        return self._pages(Eligibility.for_inspection(principal, namespace))

    def _pages(self, elig: Eligibility) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            page = self.store.page(elig, 500, offset)
            if not page:
                return
            for rec in page:
                yield rec.model_dump(mode="json")
            offset += len(page)

    def ledger(
        self, *, principal: Principal, limit: int = 100, offset: int = 0
    ) -> builtins.list[LedgerEvent]:
        """Recent ledger events the principal may see, newest first: events of memories it
        may read, and of recalls made by principals it dominates (`store.scope`)."""
        args.principal(principal)
        args.integer(limit, "limit", 1, 10_000)
        args.integer(offset, "offset", 0, args.MAX_OFFSET)
        return self.store.ledger(Eligibility.for_inspection(principal), limit, offset)

    def recalls(
        self, *, principal: Principal, limit: int = 50, offset: int = 0
    ) -> builtins.list[RecallView]:
        """Recent recalls the principal may see (its own and those of principals it
        dominates), newest first, each cut to the memories it may read."""
        args.principal(principal)
        args.integer(limit, "limit", 1, args.MAX_LIMIT)
        args.integer(offset, "offset", 0, args.MAX_OFFSET)
        return recall_reads.recent(self.store, principal, limit, offset)

    def recall_record(self, recall_id: str, *, principal: Principal) -> RecallView:
        """One recall's record (inputs, every candidate's reconstruction and stage trace,
        the briefing), if the principal may see it; NotFound otherwise."""
        args.identifier(recall_id, "recall_id")
        args.principal(principal)
        return recall_reads.one(self.store, recall_id, principal)

    def utilities(
        self, *, principal: Principal, limit: int = 10_000
    ) -> builtins.list[float]:
        """The measured utility of each memory the principal may read (as `list` lists
        them, oldest first, up to `limit`): the numbers without the records."""
        args.principal(principal)
        args.integer(limit, "limit", 1, args.MAX_LIMIT)
        return self.store.utilities(Eligibility.for_inspection(principal), limit)

    def recall_outcomes(
        self, *, principal: Principal, limit: int = 500
    ) -> builtins.list[tuple[datetime, builtins.list[str]]]:
        """(time, served verdicts and rejection reasons) of the recalls the principal may
        see, newest first: a recall's briefing without its record (charts)."""
        args.principal(principal)
        args.integer(limit, "limit", 1, args.MAX_LIMIT)
        return recall_reads.outcomes(self.store, principal, limit)

    def recalls_of(
        self, memory_id: str, *, principal: Principal, limit: int = 50
    ) -> builtins.list[RecallView]:
        """Recalls the principal may see in which this memory (one it may read) was a
        candidate, newest first: served, or rejected with its reason."""
        args.identifier(memory_id, "memory_id")
        args.principal(principal)
        args.integer(limit, "limit", 1, args.MAX_LIMIT)
        return recall_reads.touching(
            self.store, memory_id, Eligibility.for_inspection(principal), limit
        )

    def stats(self, *, principal: Principal) -> Stats:
        """Counts of what this principal may see."""
        args.principal(principal)
        elig = Eligibility.for_inspection(principal)
        t = principal.tenant
        recalls, fb = self.store.count_recalls(principal)
        return Stats(
            tenant=t,
            memories_by_state=self.store.count(elig),
            recalls=int(recalls),
            feedback=int(fb),
            ledger_events=self.store.count_events(elig),
            # this store's embedder, bound by its first write or recall (before then, the one
            # that write will bind: whether anyone used the store is not the caller's to know)
            embedder=self.store.embedder_ref() or self.embedder.model_ref,
            reconstructor=f"{self.reconstructor.name}@{self.reconstructor.version}",
            maintenance_failures=self.store.failures(principal),
            calibration=asdict(cal)
            if isinstance(self.reconstructor, LearnedReconstructor)
            and (cal := self.reconstructor.calibration_for(t)) is not None
            # fitted on every labelled recall of the tenant: its counts are shown only to a
            # principal that may see all of them
            and fb >= self.store.count_labelled_recalls(t, SYSTEM)
            else None,
            attribute_schema=[asdict(e) for e in self.schema.entries(principal)],
        )

    def export_training(
        self, *, principal: Principal, format: str = "sft", namespace: str | None = None,
        inferred: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Training examples for the reconstructor from this principal's recalls and their
        feedback, in TRL's JSONL formats (`sft` or `preference`); see
        `situated.learning.training`. Arguments are checked at the call."""
        args.principal(principal)
        fmt = args.text(format, "format", 20)
        if fmt not in FORMATS:
            raise InvalidInput("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
        _check_namespace(namespace)
        args.flag(inferred, "inferred")
        return training_examples(self.store, principal, fmt, namespace, inferred)  # type: ignore[arg-type]

    def attribute_schema(
        self, *, principal: Principal, memory_id: str | None = None
    ) -> builtins.list[SchemaEntry]:
        """What the store learned about attributes (`situated.learning.schema`): every entry
        of the scopes the principal may read, or the entry of one memory's attribute."""
        args.principal(principal)
        if memory_id is None:
            return self.schema.entries(principal)
        entry = self.schema.entry_for(self.inspect(memory_id, principal=principal))
        return [] if entry is None else [entry]

    def health(self) -> Health:
        """Integrity of the file, vectors present for every record, ledger replay, failures."""
        report = self.store.rebuild(repair=False)
        integrity = self.store.integrity()
        orphans = self.store.orphans()
        failures = self.store.failures(SYSTEM)
        with self.store.snapshot():
            resident = self.store.resident.describe() | {
                "mismatches": self.store.resident.verify()
            }
        failing = self._failing()
        return Health(
            ok=integrity == "ok" and orphans == 0 and not report.mismatched
            and resident["mismatches"] == 0 and not failing,
            integrity=integrity,
            orphan_records=orphans,
            ledger_mismatches=len(report.mismatched),
            failures=failures,
            migrations=tuple(self.store.migrations()),
            path=self.store.path,
            resident=resident,
            unanalysed=self.store.count_unanalysed(ANALYSIS_VERSION, SYSTEM),
            failing=failing,
        )

    def _failing(self) -> dict[str, dict[str, Any]]:
        """The components that failed `REPEATED_FAILURES` times or more in the last
        `FAILURE_WINDOW` seconds (recorded by any process), with the endpoint each calls:
        the configured one for a component this `Memory` holds, else the URL its last error
        names."""
        recent = self.store.recent_failures(utcnow() - FAILURE_WINDOW, SYSTEM)
        configured = {f"reconstructor:{self.reconstructor.name}":
                      getattr(self.reconstructor, "url", None)}
        out: dict[str, dict[str, Any]] = {}
        for component, (n, at, error) in sorted(recent.items()):
            if n < REPEATED_FAILURES:
                continue
            url = configured.get(component)
            named = _URL.search(error)
            out[component] = {
                "endpoint": url if isinstance(url, str) else (named[0] if named else None),
                "failures": n, "last_at": from_epoch(at).isoformat(), "last_error": error,
            }
        return out

    def rebuild(self, *, repair: bool = False) -> RebuildReport:
        """Replay the ledger and compare (or repair) stored lifecycle states and counters."""
        return self.store.rebuild(repair=args.flag(repair, "repair"))


def _require_admin(principal: Principal) -> None:
    if "admin" not in principal.roles:
        raise PermissionDenied("this operation needs the 'admin' role")


def _scrub_recall(data: dict[str, Any], memory_id: str, rec: MemoryRecord) -> dict[str, Any]:
    """A recall payload without anything an erased memory contributed: its reconstruction,
    its briefing entries, and its text wherever the rendered output quoted it."""
    recon = data.get("reconstructions", {}).pop(memory_id, None) or {}
    texts = {rec.content, recon.get("guidance") or ""}
    texts |= {c[0] for c in recon.get("transferable", []) + recon.get("rejected", []) if c}
    if rec.source.state is not None:
        texts |= {rec.source.state.text, rec.source.state.describe()}
    briefing = data.get("briefing") or {}
    for key in ("items", "rejected"):
        entries = briefing.get(key) or []
        for entry in entries:
            if entry.get("memory_id") == memory_id:
                texts |= {entry.get("text") or "", entry.get("source_state") or ""}
        briefing[key] = [e for e in entries if e.get("memory_id") != memory_id]
    if "trace" in data:
        data["trace"] = [t for t in data["trace"] if t.get("memory_id") != memory_id]
    scrubbed: dict[str, Any] = _scrub(data, {t for t in texts if t and len(t) > 3})
    return scrubbed


def _scrub(value: Any, secrets: set[str]) -> Any:
    """Replace erased text wherever it appears inside a recall payload."""
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, "[erased]")
        return value
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    return value


def _check_namespace(namespace: Any) -> None:
    if namespace is not None:
        args.text(namespace, "namespace", args.MAX_LABEL_CHARS)  # a str: not bytes pydantic decodes
        validate_input("", lambda: Scope(tenant="t", namespace=namespace))


REPEATED_FAILURES = 3
"""Failures of one component within `FAILURE_WINDOW` that make `health` not ok."""
FAILURE_WINDOW = 15 * 60.0
_URL = re.compile(r"https?://[^\s'\"()]+")
MAX_RESIDENT_MB = 1_000_000
MAX_ANN_ROWS = 2**40
MAX_BATCH_ITEMS = 1_000_000
MAX_CITED_CHARS = 100_000


def _reason(value: Any) -> str:
    """A reason recorded in the ledger: non-blank text."""
    return args.text(value, "reason", args.MAX_REASON_CHARS, required=True)


TRAJECTORY_SHAPE = (
    '{"episode_id": ..., "task": ..., "steps": [{"observation": ..., "facts": {...}, '
    '"action": ..., "result": ...}], "outcome": {"success": true}}'
)


def _trajectory_from_json(text: str) -> Trajectory:
    """`Trajectory.from_json`, each failure an `InvalidInput` naming `trajectory`."""
    try:
        return Trajectory.from_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        kind = err.get("type")
        if kind == "json_invalid":
            detail = str(err.get("msg", "")).removeprefix("Invalid JSON: ")
            raise InvalidInput(
                "trajectory", f"is not JSON ({detail}); expected one object: {TRAJECTORY_SHAPE}"
            ) from None
        if kind == "model_type" and not err.get("loc"):
            raise InvalidInput(
                "trajectory", f"must be a JSON object, like {TRAJECTORY_SHAPE}"
            ) from None
        raise _as_invalid("trajectory", exc) from None


def _options(value: Any, field: str) -> Mapping[str, Any]:
    """`embedder_options`, `reconstructor_options`: None or a mapping of keyword names."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidInput(field, "must be a mapping of option names")
    return value


def _component(
    value: Any, kind: str, default: str, factory: Callable[..., T], given: Mapping[str, Any],
    settings: Any, base: type, what: str,
) -> T:
    """The embedder or reconstructor `value` names or is; `FROM_SETTINGS`: the configured
    one, else `default`."""
    if value is FROM_SETTINGS:
        assert settings is not None
        value = getattr(settings, kind) or default
    if isinstance(value, str):
        name = args.label(value, kind)
        configured = getattr(settings, f"{kind}_options")(name) if settings else {}
        return _plugin(factory, name, kind, given, configured)
    component: T = args.instance(value, kind, base, what)
    return component


def _plugin(
    factory: Callable[..., T], name: str, kind: str, given: Mapping[str, Any],
    configured: Mapping[str, Any],
) -> T:
    """Build plugin `name` with the settings' options under the `given` ones; a missing or
    bad option is an `InvalidInput` naming where it can be set."""
    field = f"{kind}_options"
    try:
        return factory(name, **{**configured, **given})
    except TypeError as exc:  # options the factory does not take
        raise InvalidInput(field, str(exc)) from None
    except InvalidInput as exc:
        if exc.field in configured and exc.field not in given:
            raise InvalidInput(f"settings.{kind}_{exc.field}", exc.message) from None
        if exc.field in given or exc.field not in _ENDPOINT_FIELDS:
            raise InvalidInput(f"{field}.{exc.field}", exc.message) from None
        from situated.config import where

        raise InvalidInput(  # an endpoint option that nobody set
            f"{field}.{exc.field}",
            f"{exc.message}; for {kind} {name!r} set {where(kind, exc.field)} (or "
            f"{field}={{{exc.field!r}: ...}})",
        ) from None


_ENDPOINT_FIELDS = frozenset({"base_url", "model", "api_key", "timeout", "max_retries"})


def _write_policies(value: Any) -> dict[str, WritePolicy]:
    """`write_policies`: None or a mapping of namespace (or `"*"`) to `WritePolicy`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput("write_policies", "must be a mapping of namespace to WritePolicy")
    for ns, policy in value.items():
        if ns != "*":
            _check_namespace(args.text(ns, "write_policies", args.MAX_LABEL_CHARS))
        args.instance(policy, f"write_policies[{ns!r:.40}]", WritePolicy, "a WritePolicy")
    return dict(value)


def _gates_of(events: Sequence[LedgerEvent]) -> builtins.list[dict[str, Any]]:
    gates: builtins.list[dict[str, Any]] = next(
        (e.data.get("gates", []) for e in events if e.event is EventType.PROPOSED), []
    )
    return gates
