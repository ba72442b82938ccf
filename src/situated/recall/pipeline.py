"""The recall pipeline, stage by stage, ending in a Briefing and a persisted recall record.

    1 eligible -> 2 retrieve -> 3 dedupe -> 4 reconstruct -> 5 validate -> 6 score
    -> 7 compile -> 8 record
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.errors import ModelError
from situated.models import Principal, State, utcnow
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
    scores_dict,
    trace_dict,
)
from situated.recall.compile import knapsack, render_line, token_counter
from situated.recall.dedupe import collapse
from situated.recall.reconstruct.base import Policy, ReconstructionInput, Reconstructor
from situated.recall.reconstruct.prechecks import PresentFacts, precheck
from situated.recall.reconstruct.rules import RulesReconstructor
from situated.recall.retrieve import Candidate, retrieve
from situated.recall.score import score
from situated.recall.validate import validate
from situated.store.scope import Eligibility
from situated.store.sqlite import Store, StoredRecall

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


def run_recall(
    store: Store,
    embedder: Embedder,
    reconstructor: Reconstructor,
    req: RecallRequest,
) -> Briefing:
    """Run all eight stages and persist the recall record; returns the Briefing."""
    now = utcnow()
    as_of = req.as_of if req.as_of is not None else now
    trace: list[StageTrace] = []
    rejected: list[Rejected] = []

    # 1 eligible
    elig = Eligibility.for_recall(req.principal, req.namespace, as_of, req.known_at)

    # 2 retrieve
    present = req.state.describe()
    query_text = f"{req.intent} {present}".strip()
    qvec, svec = embedder.embed([query_text or " ", present or " "])
    candidates = retrieve(store, qvec, query_text, elig, max(20, OVERFETCH * req.k))
    for c in candidates:
        trace.append(StageTrace(c.record.id, "retrieve", "candidate", _retrieval_numbers(c)))

    # 3 dedupe
    by_rid = {c.rid: c.record for c in candidates}
    vecs = store.vectors_of("content", [c.rid for c in candidates], elig)
    kept, dropped = collapse(candidates, by_rid, vecs, [c.rid for c in candidates])
    for dup, winner in dropped:
        detail = f"near-duplicate of {winner.record.id}"
        rejected.append(Rejected(dup.record.id, RejectionReason.DUPLICATE, detail, "dedupe"))
        trace.append(StageTrace(dup.record.id, "dedupe", "DUPLICATE", detail=detail))

    # then/now similarity against the present state alone (not the intent)
    state_vecs = store.vectors_of(
        "state", [c.rid for c in kept if c.state_similarity is not None], elig
    )
    recons: dict[str, Reconstruction] = {}
    analyses: dict[str, Analysis | None] = {}
    scores: dict[str, Scores] = {}
    ns_counts = (
        store.namespace_counters([c.record.id for c in kept], req.namespace, elig)
        if req.namespace else {}
    )
    budget = reconstructor.max_candidates
    fallback = RulesReconstructor()
    intent, policy = req.intent, req.policy
    state_hash = req.state.fingerprint()
    # the present as the stages see it: the same state, its facts keyed once for all candidates
    state = req.state.model_copy(update={"facts": PresentFacts(req.state.facts)})
    state_sims = _dots(state_vecs, svec)
    model_ref = embedder.model_ref  # the same for every candidate: read once
    floor = embedder.relevance_floor
    for c in kept:
        rec = c.record
        state_sim = state_sims.get(c.rid)  # None without a situation to compare
        analysis = analyses[rec.id] = decode(c.analysis)  # None: judged from the text
        item = ReconstructionInput(
            record=rec, present=state, intent=intent, state_similarity=state_sim,
            content_similarity=c.content_similarity, relevance=c.relevance,
            policy=policy, embedder=model_ref, present_fingerprint=state_hash,
            analysis=analysis, relevance_floor=floor,
        )
        # 4 reconstruct: deterministic pre-checks first, then the reconstructor
        recon = precheck(item, as_of)
        stage = "precheck"
        if recon is None:
            if budget is None or budget > 0:
                recon = _reconstruct(store, reconstructor, item)
                budget = None if budget is None else budget - 1
            else:
                recon = fallback.reconstruct(item)
            stage = "reconstruct"
        numbers = {"confidence": recon.confidence}
        if state_sim is not None:
            numbers["state_similarity"] = state_sim
        trace.append(StageTrace(rec.id, stage, recon.verdict.value, numbers, recon.detail))
        # 5 validate
        checked = validate(recon, rec, state, policy, analysis)
        if checked is not recon:
            trace.append(StageTrace(rec.id, "validate", checked.verdict.value, {}, checked.detail))
            if checked.verdict is not recon.verdict:
                stage = "validate"
        recon = checked
        recons[rec.id] = recon
        if recon.verdict in _NOT_SERVED:
            reason = recon.reason or RejectionReason.SOURCE_STATE_MISMATCH
            rejected.append(Rejected(rec.id, reason, recon.detail, stage, recon.verdict))
            continue
        # 6 score
        s = score(rec, recon, c.relevance, now, ns_counts.get(rec.id))
        scores[rec.id] = s
        trace.append(StageTrace(rec.id, "score", "scored", scores_dict(s)))

    # 7 compile
    servable = [c for c in kept if c.record.id in scores]
    servable.sort(key=lambda c: -scores[c.record.id].expected_utility)
    lines: list[tuple[Candidate, str, int]] = []
    counter = token_counter()
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
        analysis = analyses[c.record.id]
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
    for i, (c, _line, tokens) in enumerate(lines):
        rec, recon, s = c.record, recons[c.record.id], scores[c.record.id]
        if i not in chosen:
            detail = f"{tokens} tokens did not fit the {req.budget_tokens}-token budget"
            rejected.append(Rejected(rec.id, RejectionReason.OVER_BUDGET, detail, "compile",
                                     recon.verdict, s))
            trace.append(StageTrace(rec.id, "compile", "OVER_BUDGET", {"tokens": tokens}, detail))
            continue
        items.append(
            GuidanceItem(
                memory_id=rec.id, text=recon.guidance, verdict=recon.verdict,
                confidence=recon.confidence, scores=s, kind=rec.kind.value,
                authority=rec.authority.label,
                source_state=rec.source.state.describe() if rec.source.state else "unknown",
                adaptations=recon.adaptations, tokens=tokens,
            )
        )
        trace.append(StageTrace(rec.id, "compile", "SERVED", {"tokens": tokens}))

    missing = tuple(
        dict.fromkeys(
            f for r in recons.values() if r.verdict is Verdict.INSUFFICIENT_EVIDENCE
            for f in r.missing_facts
        )
    )
    if items:
        mode = Mode.GUIDED
    elif missing:
        mode = Mode.INSUFFICIENT_EVIDENCE
    else:
        mode = Mode.NO_APPLICABLE_MEMORY

    briefing = Briefing(
        recall_id="rc_" + uuid.uuid4().hex[:16],
        mode=mode,
        items=tuple(items),
        rejected=tuple(rejected),
        missing_facts=missing,
        budget_tokens=req.budget_tokens,
        tokens_used=sum(i.tokens for i in items),
        trace=tuple(trace),
        namespace=req.namespace,
    )

    # 8 record
    payload = {
        "pipeline_version": PIPELINE_VERSION,
        "principal": {
            "tenant": req.principal.tenant, "roles": sorted(req.principal.roles),
            "clearance": req.principal.clearance.label, "name": req.principal.name,
        },
        "state": {"text": req.state.text, "facts": req.state.facts},
        "intent": req.intent, "k": req.k, "budget_tokens": req.budget_tokens,
        "as_of": as_of, "known_at": req.known_at,
        "policy": {
            "allowed_tools": sorted(req.policy.allowed_tools) if req.policy.allowed_tools
            is not None else None,
            "prohibited_effects": sorted(req.policy.prohibited_effects),
            "version": req.policy.version,
        },
        "embedder": embedder.model_ref,
        "reconstructor": f"{reconstructor.name}@{reconstructor.version}",
        "tokenizer": counter.name,
        "candidates": [c.record.id for c in candidates],
        "reconstructions": {k: reconstruction_json(v) for k, v in recons.items()},
        "briefing": briefing_dict(briefing, trace=False),
        "trace": [trace_dict(t) for t in trace],  # every stage's decision: what explain shows
        "rendered": briefing.render(),
    }
    # into the recall file (`store.recall_log`): never behind the memory writers' lock; it
    # survives a crash of the process, and on power loss only the last records can be lost
    store.save_recall(
        StoredRecall(
            briefing.recall_id, req.principal.tenant, now, req.namespace,
            state_hash, mode.value, tuple(i.memory_id for i in items), payload,
        ),
        req.principal,
    )
    return briefing


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
        return replace(
            recon,
            provenance=recon.provenance | {"fallback_from": reconstructor.name, "error": str(exc)},
        )


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
