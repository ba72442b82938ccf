"""Stage 5, validation: policy, authority and contradiction checks on reconstructed guidance.

A memory that claims a policy or asks to decode and run something is never guidance
(`never_guidance`), and a payload split across served memories is taken out
(`split_payloads`). Sentence by sentence: a sentence that commands the agent, claims
authority, names a tool outside the allow-list (with no allow-list: any code-like tool name,
deny-by-default) or a prohibited effect is stripped as a rejected claim; when nothing usable
is left, the candidate is rejected. A fact that contradicts present evidence (a caller's
fact, or what the reader reads in the present's text) is rejected.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from situated.models import Kind, MemoryRecord, State, normalise_text
from situated.reader import Reading, read
from situated.reader.present import contradiction
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
    never = never_guidance(record.content, record.source.action)
    if never:
        return _reject(recon, RejectionReason.SUSPECTED_POISONING, never)
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


def never_guidance(content: str, action: str | None) -> str:
    """Why a memory is never served as guidance whoever promoted it, or "": it claims a policy,
    a policy version, an exemption or a permission (policy comes from the run's `Policy`, never
    from memory), or asks the agent to decode something and run it (`screen.advice`)."""
    from situated.screen.advice import read_advice

    advice = read_advice(content if not action else f"{content} {action}")
    if advice.runs_decoded:
        return "asks the agent to decode something and run or follow it"
    if advice.claims:
        return (f"claims {' and '.join(advice.claims)}: policy comes from the run's Policy, "
                "never from memory")
    return ""


def split_payloads(texts: list[str]) -> set[int]:
    """Indices of served texts that read as an injection, a policy claim or a request to
    decode and run only when joined with another served text (a payload split across
    memories): the joined texts are screened in order and in reverse by the patterns and the
    claim reading (`safety.injection_findings`, `advice.read_claims_plain`: cheap, gated by
    literals; each text alone was screened with its decoded views too); when they find what
    no single text has, every pair is screened to name the parts."""
    if len(texts) < 2:
        return set()
    from situated.safety import injection_findings
    from situated.screen.advice import read_claims_plain

    def found(text: str) -> set[str]:
        claims, runs = read_claims_plain(text)
        return {*(f.reason for f in injection_findings(text)), *claims,
                *(("decode and run",) if runs else ())}

    alone = set().union(*(found(t) for t in texts))
    if not any(found(" ".join(order)) - alone for order in (texts, texts[::-1])):
        return set()
    parts: set[int] = set()
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            if i != j and found(f"{a} {b}") - found(a) - found(b):
                parts |= {i, j}
    return parts or set(range(len(texts)))


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
