"""Deterministic pre-checks, run before any reconstructor (cheaper, smaller attack surface).

Each returns a finished `Reconstruction` when it settles the candidate, or None to pass it on.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from situated.conditions import ConditionResult, Truth, evaluate, parse_condition
from situated.errors import ConditionSyntaxError
from situated.models import FactValue, Kind, LifecycleState, from_epoch
from situated.recall.briefing import Reconstruction, RejectionReason, Verdict
from situated.recall.reconstruct.base import ReconstructionInput

PRECHECK = {"reconstructor": "precheck", "reconstructor_version": "1"}


def precheck(item: ReconstructionInput, as_of: float) -> Reconstruction | None:
    """Expired, superseded, policy version, conditions, unknown source state, in that order."""
    rec = item.record
    v = rec.validity
    if not (v.valid_from <= as_of < v.valid_until):
        when = from_epoch(v.valid_until).isoformat() if as_of >= v.valid_until else "later"
        return _reject(item, RejectionReason.EXPIRED, f"valid until {when}")
    if rec.state is LifecycleState.INVALIDATED and rec.superseded_by and as_of >= v.valid_until:
        return _reject(item, RejectionReason.SUPERSEDED, f"superseded by {rec.superseded_by}")
    pv, want = rec.policy_version, item.policy.version
    if pv and want and pv != want:
        return _reject(
            item, RejectionReason.POLICY_VERSION_MISMATCH,
            f"recorded under policy {pv}, present policy is {want}",
        )
    results = evaluate_conditions(rec.conditions, item.present.facts)
    failed = [r for r in results if r.truth is Truth.MISMATCHED]
    if failed:
        return _reject(
            item, RejectionReason.CONDITION_FAILED,
            "; ".join(f"{r.condition.text} is false ({r.detail})" for r in failed),
            results,
        )
    missing = tuple(dict.fromkeys(n for r in results for n in r.missing))
    if missing:
        return Reconstruction(
            memory_id=rec.id,
            verdict=Verdict.INSUFFICIENT_EVIDENCE,
            confidence=0.0,
            guidance="",
            matched=_texts(results, Truth.MATCHED),
            unknown=_texts(results, Truth.UNKNOWN),
            missing_facts=missing,
            reason=RejectionReason.MISSING_EVIDENCE,
            detail="cannot check " + ", ".join(r.condition.text for r in results if r.missing),
            provenance=PRECHECK,
        )
    if rec.kind is Kind.LESSON and rec.source.state_unknown and not rec.conditions:
        return Reconstruction(
            memory_id=rec.id,
            verdict=Verdict.INSUFFICIENT_EVIDENCE,
            confidence=0.0,
            guidance="",
            reason=RejectionReason.MISSING_EVIDENCE,
            detail="source state unknown and no conditions: applicability cannot be checked",
            provenance=PRECHECK,
        )
    return None


def evaluate_conditions(
    conditions: tuple[str, ...], facts: Mapping[str, FactValue]
) -> list[ConditionResult]:
    """Each parseable condition evaluated on `facts` (cached per conditions and facts: the
    pre-checks and the reconstructor ask the same question in one recall)."""
    if not conditions:
        return []
    # the value's type is part of the key: True == 1 and hash alike, but compare differently
    key = tuple((k, type(v).__name__, v) for k, v in sorted(facts.items(), key=lambda kv: kv[0]))
    return list(_evaluate(conditions, key))


@lru_cache(maxsize=4096)
def _evaluate(
    conditions: tuple[str, ...], facts: tuple[tuple[str, str, FactValue], ...]
) -> tuple[ConditionResult, ...]:
    present = {k: v for k, _, v in facts}
    out = []
    for text in conditions:
        try:
            cond = parse_condition(text)
        except ConditionSyntaxError:
            continue  # validated at write; an old unparsable row is skipped, not trusted
        out.append(evaluate(cond, present))
    return tuple(out)


def _texts(results: list[ConditionResult], truth: Truth) -> tuple[str, ...]:
    return tuple(r.condition.text for r in results if r.truth is truth)


def _reject(
    item: ReconstructionInput,
    reason: RejectionReason,
    detail: str,
    results: list[ConditionResult] | None = None,
) -> Reconstruction:
    results = results or []
    return Reconstruction(
        memory_id=item.record.id,
        verdict=Verdict.NOT_APPLICABLE,
        confidence=1.0,
        guidance="",
        matched=_texts(results, Truth.MATCHED),
        mismatched=_texts(results, Truth.MISMATCHED),
        unknown=_texts(results, Truth.UNKNOWN),
        reason=reason,
        detail=detail,
        provenance=PRECHECK,
    )
