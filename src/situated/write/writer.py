"""The write path after validation: gates -> promotion -> store, for one memory or a batch.

`Writer.prepare` runs outside any transaction: texts are embedded in one batch, the injection
classifier screens every text of the batch in one pass (the gates then read its results), and
the near-duplicate search is one matrix product per scope over the tenant's resident slice.
The gates themselves run for every proposal, in order, exactly as for a single `add`.

`Writer.commit` runs inside the caller's transaction (one per `add`, one per batch). A
proposal that needs nothing but to be stored (promoted, held or rejected, with no exact or near
twin in its scope to reinforce and no stored fact to supersede) is written set-based
(`Store.insert_many`) with the same rows and events; any other goes through `commit_one`, the
reference path. The set-based rows
are written together at the end of the batch, or before a proposal that restates one of them
(its exact-duplicate lookup must find it); nothing else a `commit_one` reads can depend on
them (they supersede nothing and no fact supersedes a multi-valued one). So within a batch,
rowids and ledger order follow input order except that these rows may come after the others.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from situated.embed.base import Vector
from situated.errors import (
    DuplicateWarning,
    HeldForReviewWarning,
    ProbationWarning,
    ProposalRejectedWarning,
    RedactionWarning,
    SituatedWarning,
    SupersessionWarning,
    UnservableWarning,
)
from situated.models import (
    Classification,
    LifecycleState,
    MemoryRecord,
    Principal,
    Scope,
    content_fingerprint,
    validate_input,
)
from situated.notices import notify
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import clear_text_caches, stored_form
from situated.recall.dedupe import near_duplicate
from situated.recall.reconstruct.prechecks import never_served
from situated.store.bulk import NewRow
from situated.store.ledger import EventType
from situated.store.scope import ALL_STATES, Eligibility
from situated.write.gates import (
    GateContext,
    GateReport,
    GateVerdict,
    PoisoningGate,
    _find_sensitive,
    run_gates,
)

if TYPE_CHECKING:
    from situated.memory import Memory

NEAR_K = 5
"""Nearest neighbours looked at for a near-duplicate."""
_LIVE = (LifecycleState.ACTIVE, LifecycleState.PROPOSED)
_NEAR_STATES = (LifecycleState.ACTIVE, LifecycleState.LOW_VALUE, LifecycleState.ARCHIVED)
_SAME_KEY = (LifecycleState.ACTIVE, LifecycleState.LOW_VALUE)
_ADDITIONAL = re.compile(r"\b(also|another|additional(ly)?|as well|in addition|too)\b", re.I)


@dataclass(frozen=True)
class Proposal:
    """A validated record on its way in, with where it came from."""

    record: MemoryRecord
    source_classification: Classification | str | None = None
    trace: dict[str, Any] | None = None


@dataclass(frozen=True)
class Prepared:
    """A proposal after the gates, ready to be committed."""

    record: MemoryRecord
    report: GateReport
    vectors: dict[str, Vector]
    near: list[tuple[MemoryRecord, float]]
    writer: Principal
    reason: str
    data: dict[str, Any]
    analysis: bytes | None
    """`situated.recall.analysis` of `record`, stored with the row (None: none survives
    storage; the stages read the memory itself)."""
    notes: tuple[SituatedWarning, ...] = ()
    """What the writer is told about the proposal before it is stored (redaction, never
    servable); `commit` hands them on with what storing it did (`notify`)."""


class Writer:
    """Gates, dedupe, insert and promotion for a `Memory` (its store, embedder, gates,
    promotion policy and write policies, read at each call)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._held_by_policy: dict[str, str] = {}
        """Why the promotion policy held a proposal, by its id, until `commit` tells it."""

    # -- before the transaction -------------------------------------------------------------

    def prepare(
        self, proposals: Sequence[Proposal], principal: Principal, reason: str,
        vectors: dict[str, Vector] | None = None,
    ) -> list[Prepared]:
        """Everything before the transaction, for each proposal in order. `vectors` caches
        embeddings by text (filled here in one batch for the texts it lacks)."""
        mem = self.memory
        vectors = {} if vectors is None else vectors
        texts = [t for p in proposals for t in _texts(p.record)]
        self._embed(texts, vectors)
        if any(isinstance(g, PoisoningGate) for g in mem.gates):
            from situated.screen import load_model

            # one pass over every text the poisoning gate will screen; it reads the results
            load_model().screen_many(
                list(dict.fromkeys(t for p in proposals for t in _poison_texts(p.record)))
            )
        hits = self._nearest([p.record for p in proposals], vectors)
        out = []
        for p in proposals:
            out.append(self._prepare_one(p, principal, reason, vectors, hits))
        return out

    def _embed(self, texts: Sequence[str], vectors: dict[str, Vector]) -> None:
        missing = list(dict.fromkeys(t for t in texts if t and t not in vectors))
        if missing:
            vectors.update(zip(missing, self.memory.embedder.embed(missing), strict=True))

    def _nearest(
        self, records: Sequence[MemoryRecord], vectors: dict[str, Vector]
    ) -> dict[tuple[Scope, str], list[tuple[MemoryRecord, float]]]:
        """The nearest eligible rows to each record's content, with their records: one
        search per scope (`Store.dense_many`), one read of the rows per scope."""
        by_scope: dict[Scope, list[str]] = {}
        for rec in records:
            by_scope.setdefault(rec.scope, [])
            if rec.content not in by_scope[rec.scope]:
                by_scope[rec.scope].append(rec.content)
        out: dict[tuple[Scope, str], list[tuple[MemoryRecord, float]]] = {}
        store = self.memory.store
        for scope, contents in by_scope.items():
            elig = Eligibility.readers_of(scope, _NEAR_STATES)
            queries = np.stack([vectors[c] for c in contents])
            found = store.dense_many("content", queries, NEAR_K, elig)
            rows = store.by_rids(list({rid for hits in found for rid, _ in hits}), elig)
            for content, hits in zip(contents, found, strict=True):
                out[(scope, content)] = [(rows[r], sim) for r, sim in hits if r in rows]
        return out

    def _prepare_one(
        self, p: Proposal, principal: Principal, reason: str, vectors: dict[str, Vector],
        hits: dict[tuple[Scope, str], list[tuple[MemoryRecord, float]]],
    ) -> Prepared:
        mem = self.memory
        rec = p.record
        src_cls = None
        if p.source_classification is not None:
            src_cls = validate_input(
                "", lambda: Scope(tenant="t", classification=p.source_classification)  # type: ignore[arg-type]
            ).classification
        found: dict[str, list[tuple[MemoryRecord, float]]] = {}

        def near(r: MemoryRecord) -> list[tuple[MemoryRecord, float]]:
            if r.content not in found:  # searched once, by the gate and the merge alike
                key = (r.scope, r.content)
                if key not in hits:  # a text a gate rewrote (a redaction)
                    self._embed([r.content], vectors)
                    hits.update(self._nearest([r], vectors))
                found[r.content] = [(o, sim) for o, sim in hits[key]
                                    if near_duplicate(r, o, sim)]
            return found[r.content]

        ctx = GateContext(mem.write_policy(rec.scope.namespace), src_cls, near)
        report = run_gates(rec, ctx, mem.gates)
        # shown to the writer: the stored text keeps a marker per span, never the value
        notes: list[SituatedWarning] = [
            RedactionWarning("; ".join(result.reasons)) for result in report.results
            if result.verdict is GateVerdict.REDACTED
        ]
        why = never_served(report.record)
        if why and not report.rejected:
            notes.append(UnservableWarning(
                f"{why}; it is stored, but recall will never serve it as it stands"))
        rec = report.record.model_copy(
            update={"fingerprint": content_fingerprint(
                rec.scope.tenant, rec.scope.namespace, rec.kind, report.record.content)}
        )
        src_text = rec.source.state.describe() if rec.source.state else ""
        self._embed([rec.content, src_text], vectors)
        content_vec = vectors[rec.content]
        state_vec = vectors[src_text] if src_text else content_vec
        near_twins = near(rec) if not report.held and not report.rejected else []
        return Prepared(
            rec, report, {"content": content_vec, "state": state_vec}, near_twins,
            principal, reason, {"gates": report.to_data()} | (p.trace or {}),
            stored_form(rec), tuple(notes),
        )

    # -- inside the transaction --------------------------------------------------------------

    def commit(self, prepared: Sequence[Prepared]) -> list[MemoryRecord]:
        """Commit each proposal in order (call inside `Store.transaction()`); returns the
        stored records (the twin reinforced instead, where there is one)."""
        store = self.memory.store
        self._held_by_policy.clear()
        known: set[str] = set()  # exact-duplicate keys a lookup would find, this batch included
        facts: set[tuple[str, str]] = set()  # fact keys a same-key lookup would find
        for scope, group in _group(prepared).items():
            known |= store.fingerprints_among(
                [p.record.fingerprint for p in group], Eligibility.readers_of(scope, _LIVE))
            facts |= store.fact_keys_among(
                [k for p in group if (k := _fact_key(p.record)) is not None],
                Eligibility.readers_of(scope, _SAME_KEY),
            )
        out: list[MemoryRecord | None] = [None] * len(prepared)
        pending: list[tuple[int, NewRow]] = []
        pending_keys: set[str | tuple[str, str]] = set()

        def flush() -> None:
            if not pending:
                return
            rids = store.insert_many([row for _, row in pending])
            by_writer: dict[int, list[tuple[int, int]]] = {}
            writers: dict[int, Principal] = {}
            for (at, row), rid in zip(pending, rids, strict=True):
                by_writer.setdefault(id(row.writer), []).append((at, rid))
                writers[id(row.writer)] = row.writer
            for key, pairs in by_writer.items():
                got = store.by_rids([rid for _, rid in pairs],
                                    Eligibility(writers[key], states=ALL_STATES))
                for at, rid in pairs:
                    out[at] = got[rid]
            pending.clear()
            pending_keys.clear()

        for at, p in enumerate(prepared):
            key = _fact_key(p.record)
            row = self._simple(p, known, facts)
            if row is not None:
                pending.append((at, row))
            else:
                if p.record.fingerprint in pending_keys or key in pending_keys:
                    flush()  # its lookups must find the pending twin or fact
                out[at] = self.commit_one(p)
            known.add(p.record.fingerprint)
            if key is not None:
                facts.add(key)
            if row is not None:
                pending_keys.add(p.record.fingerprint)
                if key is not None:
                    pending_keys.add(key)
        flush()
        done = [r for r in out if r is not None]
        if len(done) != len(prepared):  # every proposal is stored or reinforces a twin
            raise RuntimeError(f"{len(prepared) - len(done)} proposals left uncommitted")
        for p, stored in zip(prepared, done, strict=True):
            self._tell(p, stored)
        return done

    def _tell(self, p: Prepared, stored: MemoryRecord) -> None:
        """What the writer is told about one committed proposal (`notify`): the notes of
        `prepare`, then what storing it did: merged into a twin, held for review (by which
        gate or policy, and who may approve it), or rejected."""
        for note in p.notes:
            notify(type(note)(note.message, stored.id))
        if stored.id != p.record.id:
            notify(DuplicateWarning(
                f"{stored.id} ({stored.state.value}) already says this in the same scope: it "
                "was reinforced, nothing new was stored", stored.id))
            return
        if stored.state is LifecycleState.REJECTED:
            notify(ProposalRejectedWarning(
                f"{stored.id} was rejected by {_by(p.report, GateVerdict.REJECT)}: it is kept "
                "in the ledger, never recalled", stored.id))
        elif stored.state is LifecycleState.PROPOSED:
            why = _by(p.report, GateVerdict.HOLD) if p.report.held else (
                f"the promotion policy ({self._held_by_policy.pop(stored.id, 'review')})")
            notify(HeldForReviewWarning(
                f"{stored.id} is held for review by {why}; recall does not serve it until a "
                "reviewer (a principal of its tenant with the 'reviewer' role who may read it) "
                "promotes it", stored.id))
        elif any(r.verdict is GateVerdict.PROBATION for r in p.report.results):
            notify(ProbationWarning(
                f"{stored.id} was promoted on probation by "
                f"{_by(p.report, GateVerdict.PROBATION)}: recall serves it marked unproven, "
                "never as the only guidance on its surface, until successful uses corroborate "
                "it or a reviewer endorses it", stored.id))

    def _simple(
        self, p: Prepared, known: set[str], facts: set[tuple[str, str]]
    ) -> NewRow | None:
        """The rows and events of a proposal that needs nothing but to be stored, or None
        (a twin to reinforce, a fact that may supersede one: `commit_one`). `known` and
        `facts` hold the exact-duplicate and fact keys the reference lookups would find."""
        rec, report, writer = p.record, p.report, p.writer
        proposed = (EventType.PROPOSED, writer.name, p.reason,
                    {"kind": rec.kind.value, "namespace": rec.scope.namespace} | p.data)
        events: list[tuple[EventType, str, str, dict[str, Any]]] = [proposed]
        if report.rejected:  # stored as rejected, never a twin of anything
            events.append((EventType.REJECTED, "gates", "; ".join(report.reasons()), {}))
        elif rec.fingerprint in known:
            return None  # a restatement (held or not) may reinforce its twin
        elif report.held:
            pass  # stays PROPOSED for review; its event carries the reasons
        elif any(t.scope == rec.scope and t.state in _LIVE for t, _ in p.near):
            return None
        elif _fact_key(rec) in facts:
            return None  # a single-valued fact with a stored value may supersede it
        else:
            decision = self.memory.promotion.decide(rec)
            if decision.promote:
                events.append((EventType.PROMOTED, writer.name, decision.reason, {}))
            else:
                self._held_by_policy[rec.id] = decision.reason
        return NewRow(rec, writer, p.vectors, tuple(events), (ANALYSIS_VERSION, p.analysis))

    def commit_one(self, p: Prepared) -> MemoryRecord:
        """Inside a transaction: reinforce a twin, or insert and promote/hold/reject.

        Lookups see only what every reader of the new memory may read
        (`Eligibility.readers_of`): a twin held in a narrower scope is neither revealed nor
        touched; the proposal is stored as a memory of its own."""
        store = self.memory.store
        rec, report, writer = p.record, p.report, p.writer
        own = Eligibility(writer, states=ALL_STATES)
        twin = None
        if not report.held and not report.rejected:
            # a restatement strengthens the existing memory instead of adding a copy; a held
            # proposal (e.g. the return of a retired lesson) is kept for review; only within
            # the same scope: folding a consent-bound or role-restricted proposal into a
            # broader twin would escape a later revocation
            live = Eligibility.readers_of(rec.scope, _LIVE)
            twin = next(
                (t for t in (store.by_fingerprint(rec.fingerprint, live), *(t for t, _ in p.near))
                 if t is not None and t.scope == rec.scope and t.state in _LIVE),
                None,
            )
        elif report.held:
            same = store.by_fingerprint(
                rec.fingerprint, Eligibility.readers_of(rec.scope, (LifecycleState.PROPOSED,))
            )
            if same is not None and same.scope == rec.scope:
                twin = same  # the same text already waits for review
        if twin is not None:
            store.append_event(
                twin.id, own, EventType.REINFORCED, writer.name, "duplicate proposed again",
                {"evidence": list(rec.source.evidence), "episode_id": rec.source.episode_id},
            )
            return store.get(twin.id, own)
        store.insert(rec, writer, p.vectors, p.reason, p.data, (ANALYSIS_VERSION, p.analysis))
        if report.rejected:
            store.append_event(
                rec.id, own, EventType.REJECTED, "gates", "; ".join(report.reasons())
            )
        elif not report.held:  # a held proposal stays PROPOSED; its event carries the reasons
            decision = self.memory.promotion.decide(rec)
            if decision.promote:
                store.append_event(rec.id, own, EventType.PROMOTED, writer.name, decision.reason)
                self.supersede_same_key(rec, writer)
            else:
                self._held_by_policy[rec.id] = decision.reason
        return store.get(rec.id, own)

    def supersede_same_key(self, rec: MemoryRecord, writer: Principal) -> None:
        """A single-valued fact closes the validity of older facts with its (entity, attribute).

        Only facts and attributes learned single-valued supersede (`situated.learning.schema`;
        preferences and notes keep every value); multi-valued memories never do. A new fact
        that reads like an additional value ("also", "another", "as well") still supersedes,
        with a warning.
        """
        schema = self.memory.schema
        schema.promoted(rec, writer)  # replacement wording is schema evidence
        if rec.entity is None or rec.attribute is None or not schema.supersedes(rec):
            return
        for old in self.memory.store.same_key(
            rec.entity, rec.attribute, Eligibility.readers_of(rec.scope, _SAME_KEY),
        ):
            if old.id == rec.id or old.multi_valued:
                continue
            if (old.scope.roles, old.scope.classification) != (
                rec.scope.roles, rec.scope.classification
            ):
                continue  # supersession only within the same scope: never for other readers
            if old.validity.valid_from > rec.validity.valid_from:
                # the incoming value is older in world time: it held until the stored one began
                self.supersede(rec, old, writer, "a newer value was already recorded")
                return
            if _ADDITIONAL.search(rec.content):
                notify(SupersessionWarning(
                    f"{rec.id} reads like an additional value of ({rec.entity}, "
                    f"{rec.attribute}) but supersedes {old.id}; pass multi_valued=True to keep "
                    "both", rec.id))
            self.supersede(old, rec, writer, f"newer value for ({rec.entity}, {rec.attribute})")

    def supersede(
        self, old: MemoryRecord, new: MemoryRecord, actor: Principal, reason: str,
        at: float | None = None,
    ) -> None:
        """Close `old`'s validity when `new` begins (or at `at`), link both, log the event;
        both within `actor`'s scope."""
        end = max(new.validity.valid_from_ts if at is None else at,
                  old.validity.valid_from_ts + 1e-6)
        end = min(end, old.validity.valid_until_ts)
        self.memory.store.supersede(
            old.id, new.id, end, Eligibility(actor, states=ALL_STATES), actor.name, reason
        )


def _by(report: GateReport, verdict: GateVerdict) -> str:
    """`the <gate> gate (<reasons>)` for each gate of `report` that gave `verdict`."""
    return ", ".join(
        f"the {r.gate} gate" + (f" ({'; '.join(r.reasons)})" if r.reasons else "")
        for r in report.results if r.verdict is verdict
    ) or "the write gates"


def forget_texts() -> None:
    """Empty every in-process cache that holds memory text, as erasure requires: recall's
    (`analysis.clear_text_caches`) and the write gates' (secrets found per text, the
    classifier's screenings, the advice and trust readings, NFKC forms)."""
    from situated.screen import classifier
    from situated.screen.trust import trust_cache
    from situated.textforms import nfkc_map

    clear_text_caches()
    _find_sensitive.cache_clear()
    nfkc_map.cache_clear()
    for cached in trust_cache():
        cached.cache_clear()
    if classifier._MODEL is not None:
        classifier._MODEL.forget()


def _texts(rec: MemoryRecord) -> tuple[str, str]:
    """The two texts a memory is embedded by: its lesson and its source state."""
    return rec.content, rec.source.state.describe() if rec.source.state else ""


def _poison_texts(rec: MemoryRecord) -> list[str]:
    """The texts the poisoning gate screens with the classifier."""
    st = rec.source.state
    return [t for t in (rec.content, rec.source.action or "", st.text if st else "")
            if t.strip()]


def _group(prepared: Sequence[Prepared]) -> dict[Scope, list[Prepared]]:
    out: dict[Scope, list[Prepared]] = {}
    for p in prepared:
        out.setdefault(p.record.scope, []).append(p)
    return out


def _fact_key(rec: MemoryRecord) -> tuple[str, str] | None:
    """(entity, attribute) of a single-valued fact (one that may supersede), else None."""
    if rec.entity is None or rec.attribute is None or rec.multi_valued:
        return None
    return rec.entity, rec.attribute
