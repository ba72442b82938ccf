"""The recall pipeline, stage by stage, ending in a Briefing and a persisted recall record.

    1 eligible -> 2 retrieve -> 3 dedupe -> 4 reconstruct -> 5 validate -> 6 score
    -> 7 compile -> 8 record
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.errors import ModelError, ModelFallbackWarning
from situated.models import Authority, Counters, LifecycleState, Principal, State, utcnow
from situated.notices import notify
from situated.reader import Reading, read
from situated.recall.analysis import Analysis, decode
from situated.recall.briefing import (
    Briefing,
    GuidanceItem,
    Mode,
    Reconstruction,
    Rejected,
    RejectionReason,
    Scores,
    StageTrace,
    Verdict,
    briefing_dict,
    known_unsafe,
    scores_dict,
    trace_dict,
)
from situated.recall.compile import knapsack, render_line, token_counter
from situated.recall.dedupe import collapse, replaced
from situated.recall.reconstruct.base import Policy, ReconstructionInput, Reconstructor
from situated.recall.reconstruct.prechecks import JUDGES_CONTENT, PresentFacts, precheck
from situated.recall.reconstruct.rules import RulesReconstructor
from situated.recall.retrieve import Candidate, retrieve
from situated.recall.score import score
from situated.recall.validate import split_payloads, validate
from situated.screen.classifier import load_model
from situated.screen.trust import probation_surfaces
from situated.store.contract import StoreContract as Store
from situated.store.scope import Eligibility
from situated.store.values import StoredRecall

PIPELINE_VERSION = "1"
OVERFETCH = 4
"""Retrieval fetches `OVERFETCH * k` candidates (at least 20) for the later stages to judge."""
MIN_EXPECTED_UTILITY = 0.05
_NOT_SERVED = (Verdict.NOT_APPLICABLE, Verdict.INSUFFICIENT_EVIDENCE)


@dataclass(frozen=True)
class RecallRequest:
    """The inputs of one recall."""

    state: State
    principal: Principal
    intent: str
    namespace: str | None
    k: int
    budget_tokens: int
    as_of: float | None
    known_at: float | None
    policy: Policy


@dataclass
class Recall:
    """One recall as it flows through the stages: each stage reads what the earlier ones left
    and adds its own part (nothing flows back)."""

    store: Store
    embedder: Embedder
    reconstructor: Reconstructor
    req: RecallRequest
    now: float
    as_of: float
    fetch: int
    """Candidates stage 2 retrieves."""
    trace: list[StageTrace] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    elig: Eligibility | None = None
    svec: Vector | None = None
    """The present state's vector (then/now similarity)."""
    candidates: list[Candidate] = field(default_factory=list)
    kept: list[Candidate] = field(default_factory=list)
    recons: dict[str, Reconstruction] = field(default_factory=dict)
    analyses: dict[str, Analysis | None] = field(default_factory=dict)
    scores: dict[str, Scores] = field(default_factory=dict)
    counter: Any = None
    """The token counter compile used (its name goes into the record)."""
    briefing: Briefing | None = None
    present_reading: Reading | None = None
    """The reader's reading of the present state (stage 4 reads it once)."""

    @cached_property
    def state_hash(self) -> str:
        return self.req.state.fingerprint()

    @property
    def gates(self) -> Eligibility:
        assert self.elig is not None, "stage 1 runs first"
        return self.elig


def eligible(r: Recall) -> None:
    """1: the hard gates as bound parameters (`store/scope`)."""
    req = r.req
    r.elig = Eligibility.for_recall(req.principal, req.namespace, r.as_of, req.known_at)


def retrieve_stage(r: Recall) -> None:
    """2: embed intent + present state, then dense (both fields) + lexical, fused."""
    present = r.req.state.describe()
    query_text = f"{r.req.intent} {present}".strip()
    qvec, r.svec = r.embedder.embed([query_text or " ", present or " "])
    r.candidates = retrieve(r.store, qvec, query_text, r.gates, r.fetch)
    for c in r.candidates:
        r.trace.append(StageTrace(c.record.id, "retrieve", "candidate", _retrieval_numbers(c)))


def dedupe_stage(r: Recall) -> None:
    """3: near-duplicates collapse onto the best evidenced."""
    cands = r.candidates
    by_rid = {c.rid: c.record for c in cands}
    vecs = {c.rid: c.content_vector for c in cands if c.content_vector is not None}
    r.kept, dropped = collapse(cands, by_rid, vecs, [c.rid for c in cands])
    for dup, winner in dropped:
        detail = f"near-duplicate of {winner.record.id}"
        r.rejected.append(Rejected(dup.record.id, RejectionReason.DUPLICATE, detail, "dedupe"))
        r.trace.append(StageTrace(dup.record.id, "dedupe", "DUPLICATE", detail=detail))
    # what the kept memories say, as read at write (every later stage uses this reading)
    for c in r.kept:
        r.analyses[c.record.id] = decode(c.analysis)  # None: judged from the text
    readings = {rid: a.lesson_reading if a is not None else None
                for rid, a in r.analyses.items()}
    gone: set[str] = set()
    for old, new, said in replaced([c.record for c in r.kept], readings):
        detail = f"replaced by the newer {new.id}: {said}"
        gone.add(old.id)
        r.rejected.append(Rejected(old.id, RejectionReason.SUPERSEDED, detail, "dedupe"))
        r.trace.append(StageTrace(old.id, "dedupe", "SUPERSEDED", detail=detail))
    if gone:
        r.kept = [c for c in r.kept if c.record.id not in gone]


def judge_stage(r: Recall) -> None:
    """4 reconstruct, 5 validate, 6 score, candidate by candidate (each candidate's trace
    stays together)."""
    req, store = r.req, r.store
    # then/now similarity against the present state alone (not the intent)
    state_vecs = {c.rid: c.state_vector for c in r.kept
                  if c.state_similarity is not None and c.state_vector is not None}
    ns_counts = (
        store.namespace_counters([c.record.id for c in r.kept], req.namespace, r.gates)
        if req.namespace else {}
    )
    budget = r.reconstructor.max_candidates
    fallback = RulesReconstructor()
    intent, policy = req.intent, req.policy
    state_hash = r.state_hash
    # the present as the stages see it: the same state, its facts keyed once for all candidates
    state = req.state.model_copy(update={"facts": PresentFacts(req.state.facts)})
    assert r.svec is not None
    state_sims = _dots(state_vecs, r.svec)
    model_ref = r.embedder.model_ref  # the same for every candidate: read once
    present_reading = r.present_reading = read(req.state.text)  # the present, read once
    floor = r.embedder.relevance_floor
    judged = (
        {**JUDGES_CONTENT, "copied_state_floor": r.embedder.copied_state_floor}
        if r.embedder.reads_meaning else {}
    )
    for c in r.kept:
        rec = c.record
        state_sim = state_sims.get(c.rid)  # None without a situation to compare
        analysis = r.analyses[rec.id]
        item = ReconstructionInput(
            record=rec, present=state, intent=intent, state_similarity=state_sim,
            content_similarity=c.content_similarity, relevance=c.relevance,
            policy=policy, embedder=model_ref, present_fingerprint=state_hash,
            analysis=analysis, relevance_floor=floor, present_reading=present_reading,
            extra=judged,
        )
        # 4 reconstruct: deterministic pre-checks first, then the reconstructor
        recon = precheck(item, r.as_of)
        stage = "precheck"
        if recon is None:
            if budget is None or budget > 0:
                recon = _reconstruct(store, r.reconstructor, item)
                budget = None if budget is None else budget - 1
            else:
                recon = fallback.reconstruct(item)
            stage = "reconstruct"
        numbers = {"confidence": recon.confidence}
        if state_sim is not None:
            numbers["state_similarity"] = state_sim
        r.trace.append(StageTrace(rec.id, stage, recon.verdict.value, numbers, recon.detail))
        # 5 validate
        checked = validate(recon, rec, state, policy, analysis, present_reading)
        if checked is not recon:
            r.trace.append(
                StageTrace(rec.id, "validate", checked.verdict.value, {}, checked.detail))
            if checked.verdict is not recon.verdict:
                stage = "validate"
        recon = checked
        r.recons[rec.id] = recon
        if recon.verdict in _NOT_SERVED:
            reason = recon.reason or RejectionReason.SOURCE_STATE_MISMATCH
            r.rejected.append(Rejected(rec.id, reason, recon.detail, stage, recon.verdict))
            continue
        # 6 score
        s = score(rec, recon, c.relevance, r.now, ns_counts.get(rec.id))
        r.scores[rec.id] = s
        r.trace.append(StageTrace(rec.id, "score", "scored", scores_dict(s)))


def compile_stage(r: Recall) -> None:
    """7: the k best by expected utility, a knapsack under the token budget; the Briefing."""
    req, scores, recons, rejected, trace = r.req, r.scores, r.recons, r.rejected, r.trace
    servable = [c for c in r.kept if c.record.id in scores]
    servable.sort(key=lambda c: -scores[c.record.id].expected_utility)
    lines: list[tuple[Candidate, str, int]] = []
    counter = r.counter = token_counter()
    for c in servable:
        s = scores[c.record.id]
        if s.expected_utility < MIN_EXPECTED_UTILITY:
            detail = f"expected utility {s.expected_utility:.3f} < {MIN_EXPECTED_UTILITY}"
            rejected.append(
                Rejected(c.record.id, RejectionReason.LOW_EXPECTED_UTILITY, detail, "compile",
                         recons[c.record.id].verdict, s)
            )
            trace.append(StageTrace(c.record.id, "compile", "LOW_EXPECTED_UTILITY", detail=detail))
            continue
        if len(lines) >= req.k:
            detail = f"beyond the {req.k} best items"
            rejected.append(Rejected(c.record.id, RejectionReason.OVER_BUDGET, detail, "compile",
                                     recons[c.record.id].verdict, s))
            trace.append(StageTrace(c.record.id, "compile", "OVER_BUDGET", detail=detail))
            continue
        recon = recons[c.record.id]
        line = render_line(recon.guidance, c.record.id)
        analysis = r.analyses[c.record.id]
        counted = analysis.line_tokens if analysis is not None else None
        as_written = recon.guidance == c.record.content
        if as_written and counted is not None and counted[0] == counter.ref:
            tokens = counted[1]  # counted when written, with this tokenizer
        else:
            tokens = counter.count(line)
        lines.append((c, line, tokens))
    chosen = set(
        knapsack([t for _, _, t in lines],
                 [scores[c.record.id].expected_utility for c, _, _ in lines],
                 req.budget_tokens)
    )
    items: list[GuidanceItem] = []
    screen_ref = load_model().version if lines else ""
    for i, (c, _line, tokens) in enumerate(lines):
        rec, recon, s = c.record, recons[c.record.id], scores[c.record.id]
        if i not in chosen:
            detail = f"{tokens} tokens did not fit the {req.budget_tokens}-token budget"
            rejected.append(Rejected(rec.id, RejectionReason.OVER_BUDGET, detail, "compile",
                                     recon.verdict, s))
            trace.append(StageTrace(rec.id, "compile", "OVER_BUDGET", {"tokens": tokens}, detail))
            continue
        analysis = r.analyses[rec.id]
        if (recon.guidance == rec.content and analysis is not None
                and analysis.unsafe is not None and analysis.unsafe[0] == screen_ref):
            known_unsafe(rec.content, analysis.unsafe[1])  # render need not classify it again
        items.append(
            GuidanceItem(
                memory_id=rec.id, text=recon.guidance, verdict=recon.verdict,
                confidence=recon.confidence, scores=s, kind=rec.kind.value,
                authority=rec.authority.label,
                source_state=rec.source.state.describe() if rec.source.state else "unknown",
                adaptations=recon.adaptations, tokens=tokens, checked=_checked(recon),
                lifecycle=rec.state.value, record=track_record(rec.counters),
            )
        )
        trace.append(StageTrace(rec.id, "compile", "SERVED", {"tokens": tokens}))

    items = _trusted(items, r)
    missing = tuple(
        dict.fromkeys(
            f for x in recons.values() if x.verdict is Verdict.INSUFFICIENT_EVIDENCE
            for f in x.missing_facts
        )
    )
    if any(not i.unproven for i in items):
        mode = Mode.GUIDED
    elif items:
        mode = Mode.NO_APPLICABLE_MEMORY  # unproven items only: never guidance on their own
    elif missing:
        mode = Mode.INSUFFICIENT_EVIDENCE
    else:
        mode = Mode.NO_APPLICABLE_MEMORY
    said = fallbacks(r.reconstructor, recons.values())
    for line in said:
        notify(ModelFallbackWarning(line))
    # how many proposals the caller may read wait for a reviewer: a count, through the
    # scope layer like every read (never their content)
    waiting = r.store.count_pending(Eligibility(
        req.principal, (req.namespace,) if req.namespace else None, (LifecycleState.PROPOSED,)
    ))
    r.briefing = Briefing(
        recall_id="rc_" + uuid.uuid4().hex[:16],
        mode=mode,
        items=tuple(items),
        rejected=tuple(rejected),
        missing_facts=missing,
        budget_tokens=req.budget_tokens,
        tokens_used=sum(i.tokens for i in items),
        trace=tuple(trace),
        namespace=req.namespace,
        read=_read_lines(r),
        warnings=tuple(said),
        pending_review=waiting,
    )


def _read_lines(r: Recall) -> tuple[str, ...]:
    """The present's read facts with the words each was read from (for `explain`)."""
    reading, text = r.present_reading, r.req.state.text
    if reading is None:
        return ()
    lines = []
    for f in (*reading.facts, *reading.conditions):
        if f.weak:
            continue
        lines.append(f"{f.label()}: {f.value_text()} (read from {text[f.start:f.end]!r})")
    return tuple(dict.fromkeys(lines))


def _trusted(items: list[GuidanceItem], r: Recall) -> list[GuidanceItem]:
    """The served items with a payload split across them taken out (SUSPECTED_POISONING)
    and the unproven ones marked (`screen.trust`: an agent's uncorroborated lesson on a
    sensitive surface, on probation)."""
    split = split_payloads([i.text for i in items])
    kept: list[GuidanceItem] = []
    records = {c.record.id: c.record for c in r.kept}
    for n, item in enumerate(items):
        rec = records[item.memory_id]
        if n in split:
            detail = "reads as an injection or a claim only joined with another served memory"
            r.rejected.append(Rejected(rec.id, RejectionReason.SUSPECTED_POISONING, detail,
                                       "validate", item.verdict, item.scores))
            r.trace.append(StageTrace(rec.id, "validate", "SUSPECTED_POISONING", detail=detail))
            continue
        surfaces = probation_surfaces(rec.content, rec.source.action,
                                      rec.authority is Authority.INFERRED,
                                      rec.counters.successes)
        if surfaces:
            item = replace(item, unproven=surfaces)
            r.trace.append(StageTrace(rec.id, "compile", "UNPROVEN",
                                      detail="on probation: " + "/".join(surfaces)))
        kept.append(item)
    return kept


def record_stage(r: Recall) -> None:
    """8: the recall record (inputs, versions, reconstructions, output) into the recall file,
    scoped to the recalling principal."""
    req, briefing = r.req, r.briefing
    assert briefing is not None
    payload = {
        "pipeline_version": PIPELINE_VERSION,
        "principal": {
            "tenant": req.principal.tenant, "roles": sorted(req.principal.roles),
            "clearance": req.principal.clearance.label, "name": req.principal.name,
        },
        "state": {"text": req.state.text, "facts": req.state.facts},
        "intent": req.intent, "k": req.k, "budget_tokens": req.budget_tokens,
        "as_of": r.as_of, "known_at": req.known_at,
        "policy": {
            "allowed_tools": sorted(req.policy.allowed_tools) if req.policy.allowed_tools
            is not None else None,
            "prohibited_effects": sorted(req.policy.prohibited_effects),
            "version": req.policy.version,
        },
        "embedder": r.embedder.model_ref,
        "reconstructor": f"{r.reconstructor.name}@{r.reconstructor.version}",
        "tokenizer": r.counter.name,
        "candidates": [c.record.id for c in r.candidates],
        "reconstructions": {k: reconstruction_json(v) for k, v in r.recons.items()},
        "briefing": briefing_dict(briefing, trace=False),
        "trace": [trace_dict(t) for t in briefing.trace],  # what explain shows, stage by stage
        "rendered": briefing.render(),
    }
    # into the recall file (`store.recall_log`): never behind the memory writers' lock; it
    # survives a crash of the process, and on power loss only the last records can be lost
    r.store.save_recall(
        StoredRecall(
            briefing.recall_id, req.principal.tenant, r.now, req.namespace,
            r.state_hash, briefing.mode.value,
            tuple(i.memory_id for i in briefing.items), payload,
        ),
        req.principal,
    )


STAGES: tuple[tuple[str, Callable[[Recall], None]], ...] = (
    ("1 eligible", eligible),
    ("2 retrieve", retrieve_stage),
    ("3 dedupe", dedupe_stage),
    ("4-6 reconstruct, validate, score", judge_stage),
    ("7 compile", compile_stage),
    ("8 record", record_stage),
)
"""The stages in order; `run_recall` runs them over one `Recall`."""


def run_recall(
    store: Store,
    embedder: Embedder,
    reconstructor: Reconstructor,
    req: RecallRequest,
    *,
    candidates: int | None = None,
    clock: dict[str, int] | None = None,
) -> Briefing:
    """Run all eight stages and persist the recall record; returns the Briefing.

    `candidates` (diagnostics) retrieves exactly that many instead of `max(20, OVERFETCH k)`;
    `clock`, when given, receives each stage's nanoseconds under its `STAGES` name.
    """
    now = utcnow()
    r = Recall(
        store, embedder, reconstructor, req, now,
        req.as_of if req.as_of is not None else now,
        candidates if candidates is not None else max(20, OVERFETCH * req.k),
    )
    with _pinned():
        for name, stage in STAGES:
            if clock is None:
                stage(r)
                continue
            t0 = time.perf_counter_ns()
            stage(r)
            clock[name] = clock.get(name, 0) + time.perf_counter_ns() - t0
    assert r.briefing is not None
    return r.briefing


class _Pin:
    """One BLAS limit for all the recalls running at a time: set by the first to start,
    restored by the last to finish (concurrent recalls never restore each other's)."""

    lock = threading.Lock()
    active = 0
    controller: Any = None
    limiter: Any = None


@contextmanager
def _pinned() -> Iterator[None]:
    """BLAS at one thread for a recall's numeric work (one query's matrix-vector product:
    unpinned OpenBLAS threads on a loaded machine turned a 1 ms search into 27 ms)."""
    with _Pin.lock:
        if _Pin.active == 0:
            if _Pin.controller is None:
                from threadpoolctl import ThreadpoolController

                _Pin.controller = ThreadpoolController()
            _Pin.limiter = _Pin.controller.limit(limits=1, user_api="blas")
        _Pin.active += 1
    try:
        yield
    finally:
        with _Pin.lock:
            _Pin.active -= 1
            if _Pin.active == 0:
                _Pin.limiter.restore_original_limits()
                _Pin.limiter = None


def _reconstruct(
    store: Store, reconstructor: Reconstructor, item: ReconstructionInput
) -> Reconstruction:
    """Run the reconstructor; a model failure falls back to `rules`, loudly (counted in health)."""
    try:
        return reconstructor.reconstruct(item)
    except ModelError as exc:
        with store.transaction():
            store.record_failure(
                f"reconstructor:{reconstructor.name}", str(exc), item.record.id
            )
        recon = RulesReconstructor().reconstruct(item)
        endpoint = getattr(reconstructor, "url", None)
        return replace(
            recon,
            provenance=recon.provenance | {"fallback_from": reconstructor.name, "error": str(exc)}
            | ({"endpoint": endpoint} if isinstance(endpoint, str) else {}),
        )


def fallbacks(reconstructor: Reconstructor, recons: Iterable[Reconstruction]) -> list[str]:
    """One line per reconstructor that failed over to `rules` in a recall: which one (and its
    endpoint), how many candidates `rules` judged instead, and the first error."""
    failed: dict[str, list[dict[str, Any]]] = {}
    for recon in recons:
        prov = recon.provenance
        if "fallback_from" in prov:
            failed.setdefault(str(prov["fallback_from"]), []).append(prov)
    out = []
    for name, provs in failed.items():
        at = provs[0].get("endpoint")
        where = f" at {at}" if at else ""
        n = len(provs)
        out.append(
            f"the {name} reconstructor{where} failed ({provs[0].get('error', 'error')}); "
            f"{n} candidate{'s were' if n > 1 else ' was'} judged by the rules reconstructor "
            "instead"
        )
    return out


def track_record(c: Counters) -> str:
    """A memory's record in uses as an agent reads it: `failed 3 of 3 uses`, `succeeded 2 of
    3 uses`; empty when never used."""
    if not c.uses:
        return ""
    failed = c.uses - c.successes
    if failed > c.successes:
        return f"failed {failed} of {c.uses} use{'s' if c.uses > 1 else ''}"
    return f"succeeded {c.successes} of {c.uses} use{'s' if c.uses > 1 else ''}"


def _checked(recon: Reconstruction) -> tuple[str, ...]:
    """What checking a served memory against the present found: each condition that holds,
    fails (a partial transfer) or cannot be checked now; without any, the reconstructor's
    own account (how the source state compared)."""
    out = tuple(
        [f"{p} holds" for p in recon.matched]
        + [f"{p} fails" for p in recon.mismatched]
        + [f"{p} cannot be checked now" for p in recon.unknown]
    )
    if out:
        return out
    if recon.detail:
        return (recon.detail,)
    sim = recon.provenance.get("state_similarity")
    if isinstance(sim, int | float):
        return (f"source state compared: similarity {sim:.2f}",)
    return ()


def _dots(vectors: dict[int, Vector], query: Vector) -> dict[int, float]:
    """rid -> cosine of its vector to `query`, in one product."""
    if not vectors:
        return {}
    rids = list(vectors)
    sims = np.stack([vectors[r] for r in rids]) @ query
    return dict(zip(rids, sims.tolist(), strict=True))


def reconstruction_json(r: Reconstruction) -> dict[str, Any]:
    """The artifact as stored in the recall record (a shallow, explicit conversion)."""
    return {
        "memory_id": r.memory_id, "verdict": r.verdict.value, "confidence": r.confidence,
        "guidance": r.guidance,
        "transferable": [[c.text, c.reason, c.detail] for c in r.transferable],
        "rejected": [[c.text, c.reason, c.detail] for c in r.rejected],
        "matched": list(r.matched), "mismatched": list(r.mismatched), "unknown": list(r.unknown),
        "missing_facts": list(r.missing_facts), "adaptations": list(r.adaptations),
        "reason": r.reason.value if r.reason else None, "detail": r.detail,
        "provenance": r.provenance,
    }


def _retrieval_numbers(c: Candidate) -> dict[str, float]:
    nums = {"relevance": c.relevance, "content_sim": c.content_similarity, "lexical": c.lexical}
    if c.state_similarity is not None:
        nums["state_sim"] = c.state_similarity
    return nums
