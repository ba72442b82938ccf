"""Stage 5, validation: policy, authority and contradiction checks on reconstructed guidance.

Sentence by sentence: a sentence that commands the agent, claims authority, names a tool outside
the allow-list (with no allow-list: any code-like tool name, deny-by-default) or a prohibited
effect is stripped as a rejected claim; when nothing usable is
left, the candidate is rejected. A fact that contradicts present evidence (a caller's fact, or
what the reader reads in the present's text) is rejected.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from situated.models import Kind, MemoryRecord, State, normalise_text
from situated.reader import Reading, read
from situated.reader.compare import contradiction
from situated.recall.briefing import Claim, Reconstruction, RejectionReason, Verdict
from situated.recall.reading import screen
from situated.recall.reconstruct.base import Policy

if TYPE_CHECKING:
    from situated.recall.analysis import Analysis


def validate(
    recon: Reconstruction,
    record: MemoryRecord,
    present: State,
    policy: Policy,
    analysis: Analysis | None = None,
    present_reading: Reading | None = None,
) -> Reconstruction:
    """Return the reconstruction with unsafe claims stripped, or rejected with a reason.

    `analysis` (the record's, `situated.recall.analysis`) spares re-screening guidance that is
    the lesson as written; adapted or model-written guidance is always screened itself.
    `present_reading`: the reader's reading of the present (a fact or note written as text is
    checked against it)."""
    if recon.verdict not in (Verdict.APPLICABLE, Verdict.PARTIAL):
        return recon
    contradicted = contradicts(record, present)
    if not contradicted and present_reading is not None and record.kind in _ASSERTS:
        lesson = (analysis.lesson_reading if analysis is not None
                  and analysis.lesson_reading is not None else read(record.content))
        contradicted = contradiction(lesson, present_reading)
    if contradicted:
        return _reject(recon, RejectionReason.CONTRADICTED, contradicted)
    allowed = None if policy.allowed_tools is None else frozenset(policy.allowed_tools)
    prohibited = frozenset(policy.prohibited_effects)
    if analysis is not None and recon.guidance == record.content:
        kept, screened = analysis.screen(allowed, prohibited)
    else:
        kept, screened = screen(recon.guidance, allowed, prohibited)
    if not screened:
        return recon  # every sentence kept (there is always at least one)
    rejected: list[Claim] = [*recon.rejected, *screened]
    if not kept:
        first = rejected[-1] if rejected else None
        reason = first.reason if first and first.reason else RejectionReason.SUSPECTED_POISONING
        return _reject(recon, reason, first.detail if first else "no usable guidance", rejected)
    poisoned = any(c.reason is RejectionReason.SUSPECTED_POISONING for c in rejected)
    if poisoned:
        # a memory that carries an injection is not trusted for its remaining sentences either
        return _reject(recon, RejectionReason.SUSPECTED_POISONING, rejected[-1].detail, rejected)
    return replace(
        recon,
        verdict=Verdict.PARTIAL,
        guidance=" ".join(kept),
        transferable=tuple(Claim(s) for s in kept),
        rejected=tuple(rejected),
        confidence=round(recon.confidence * len(kept) / (len(kept) + len(rejected)), 3),
    )


_ASSERTS = (Kind.FACT, Kind.NOTE)
"""Kinds that assert facts of the world (a lesson or a preference does not)."""


def contradicts(record: MemoryRecord, present: State) -> str:
    """A present fact that disagrees with the value this memory asserts, as a message."""
    if record.attribute is None or record.value is None:
        return ""
    keys = [record.attribute]
    if record.entity:
        keys.insert(0, f"{record.entity}.{record.attribute}")
    for key in keys:
        if key in present.facts:
            now = present.facts[key]
            if normalise_text(str(now)) != normalise_text(str(record.value)):
                return f"memory says {key} = {record.value!r}, present evidence says {now!r}"
    return ""


def _reject(
    recon: Reconstruction,
    reason: RejectionReason,
    detail: str,
    rejected: list[Claim] | None = None,
) -> Reconstruction:
    return replace(
        recon,
        verdict=Verdict.NOT_APPLICABLE,
        guidance="",
        transferable=(),
        rejected=tuple(rejected or recon.rejected),
        reason=reason,
        detail=detail,
    )
