"""The `rules` reconstructor: deterministic, no model; the default and what the tests run.

How it decides, for a candidate that passed the pre-checks (conditions already hold):

1. Source facts against present facts. A fact present in both with a different value is
   *adaptable* when the lesson names the old value in its text (the lesson is about that
   object: "the mug is in drawer 2" becomes "cabinet 1"); *material* when the lesson depends
   on it (a flipped boolean; a number crossing a threshold the lesson states; two numeric facts
   whose order reversed, such as price and budget; a value of something the lesson talks
   about); and *incidental* otherwise (context the lesson never mentions, numbers with no
   stated threshold). Without explicit conditions a material difference rejects
   (SOURCE_STATE_MISMATCH) and an incidental one lowers confidence (PARTIAL, shown as a
   difference); with explicit conditions (the writer said what matters) differences only lower
   confidence.
2. Text-only source states (no facts on one side): then/now comparison. An explicit contrast
   (on/off, open/closed, empty/full, present/absent, numbers that differ before the same word)
   rejects. Otherwise the embedding similarity of the two states decides, against a threshold
   calibrated per embedder (`TEXT_THRESHOLDS`). Similarity alone never yields APPLICABLE:
   measured here, an inapplicable twin can score 0.70-0.81 against the present state while an
   applicable memory scores 0.54, so text-only verdicts are PARTIAL with a confidence of at most
   `TEXT_ONLY_MAX_CONFIDENCE`. For text-only states use the `llm` reconstructor, or give facts.
3. Facts, preferences and notes are not situation-bound: their source state is provenance,
   not a precondition, so they apply as far as their conditions hold (contradiction with
   present evidence is checked by validation).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from situated.models import Authority, FactValue, Kind
from situated.reader import read
from situated.reader.compare import (
    MISSING,
    OPPOSED,
    OTHER,
    SAME,
    Check,
    Judgement,
    checkable,
    judge,
)
from situated.recall.briefing import Claim, Reconstruction, RejectionReason, Verdict
from situated.recall.reading import (
    claims,
    mentions,
    names_value,
    numbers_in,
)
from situated.recall.reconstruct.base import (
    ReconstructionInput,
    Reconstructor,
    register_reconstructor,
)
from situated.recall.reconstruct.prechecks import evaluated

if TYPE_CHECKING:
    from situated.recall.analysis import Analysis

TEXT_THRESHOLDS: dict[str, float] = {"minilm-static": 0.55, "hash": 0.35}
"""Then/now state similarity below which a text-only memory is rejected, per embedder name."""
DEFAULT_TEXT_THRESHOLD = 0.5
TEXT_ONLY_MAX_CONFIDENCE = 0.45

_LESSON = Kind.LESSON
_NOTHING: frozenset[str] = frozenset()
_NUMBER_TYPES = (int, float)
_STATELESS_CONFIDENCE = {
    Authority.INFERRED: 0.6,
    Authority.USER_DECLARED: 0.75,
    Authority.SYSTEM_OBSERVED: 0.85,
    Authority.EXTERNALLY_VERIFIED: 0.9,
}


def _same(a: FactValue, b: FactValue) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _material(
    key: str, old: FactValue, new: FactValue, content: str, a: Analysis | None = None
) -> bool:
    """Is a changed fact (no explicit condition on it) one the lesson depends on?

    - a boolean that flipped: yes (a state toggle: on/off, visible/hidden);
    - a number: yes when a number the lesson names lies between then and now (a threshold it
      states: "past 30 days" with 60 then and 12 now), otherwise unknown, so no;
    - text the lesson does not name (a named value is adapted instead): yes when the lesson
      talks about the fact's subject (a word of its key), no for incidental context.
    Facts judged "no" still lower confidence and are shown as differences. `a`: the lesson's
    analysis, which holds its numbers and subjects.
    """
    if isinstance(old, bool) or isinstance(new, bool):
        return True
    if isinstance(old, int | float) and isinstance(new, int | float):
        lo, hi = sorted((float(old), float(new)))
        numbers = a.numbers if a is not None else numbers_in(content)
        return any(lo < t <= hi for t in numbers)
    return key in a.mentions if a is not None else mentions(content, key)


def _order_flips(
    then: dict[str, FactValue], now: dict[str, FactValue], skip: AbstractSet[str]
) -> list[str]:
    """Pairs of numeric facts whose order reversed (price < budget then, price > budget now)."""
    nums = [
        k for k, v in then.items()
        if k not in skip and isinstance(v, _NUMBER_TYPES) and not isinstance(v, bool)
        and isinstance(now.get(k), _NUMBER_TYPES) and not isinstance(now.get(k), bool)
    ]
    if len(nums) < 2:
        return []
    flips = []
    for i, a in enumerate(nums):
        for b in nums[i + 1:]:
            before = _sign(float(then[a]) - float(then[b]))  # type: ignore[arg-type]
            after = _sign(float(now[a]) - float(now[b]))  # type: ignore[arg-type]
            if before != 0 and after != 0 and before != after:
                rel = "<" if before < 0 else ">"
                flips.append(f"{a} {rel} {b} then, not now")
    return flips


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _adapt(content: str, old: str, new: str) -> str:
    return re.sub(rf"(?<!\w){re.escape(old.strip())}(?!\w)", new, content, flags=re.I)


def _claims_of(guidance: str, item: ReconstructionInput) -> tuple[Claim, ...]:
    """`claims(guidance)`, from the stored sentences when the guidance is the lesson as
    written."""
    a = item.analysis
    if a is not None and guidance == item.record.content:
        return a.claims()
    return claims(guidance)


class RulesReconstructor(Reconstructor):
    """Conditions over facts, then/now fact and text comparison, value adaptation."""

    name = "rules"
    version = "1"

    def __init__(self, text_threshold: float | None = None) -> None:
        self.text_threshold = text_threshold

    def threshold_for(self, embedder: str) -> float:
        if self.text_threshold is not None:
            return self.text_threshold
        return TEXT_THRESHOLDS.get(embedder.split("@")[0], DEFAULT_TEXT_THRESHOLD)

    def reconstruct(self, item: ReconstructionInput) -> Reconstruction:
        rec, now, a = item.record, item.present, item.analysis
        now_facts = now.facts
        if rec.conditions:
            ev = evaluated(rec.conditions, now_facts, a.conditions if a else None)
            matched, judged = list(ev.matched), ev.judged
        else:
            matched, judged = [], _NOTHING
        then = rec.source.state
        if rec.kind is _LESSON and (then is None or then.is_empty) and not rec.conditions:
            lesson_r = a.lesson_reading if a is not None and a.lesson_reading else read(
                rec.content)
            if any(checkable(c) for c in lesson_r.conditions):
                # no situation to compare, but the lesson says where it applies
                now_r = (item.present_reading if item.present_reading is not None
                         else read(now.text))
                return self._by_reading(item, rec.content, judge(lesson_r, None, now_r),
                                        matched, [], [], self.provenance(item))
        if then is None or then.is_empty or rec.kind is not _LESSON:
            # facts, preferences and notes are not situation-bound: their source state is
            # provenance (who said it, where), not a precondition; conditions still apply
            return self._stateless(item, matched)
        guidance = rec.content
        adaptations: list[str] = []
        material: list[str] = []
        unknown: list[str] = []
        fact_matches: list[str] = []
        soft: list[str] = []
        for key, old in then.facts.items():
            if key in judged:
                continue  # the writer's explicit condition on this fact already decided it
            if key not in now_facts:
                unknown.append(f"{key} == {old!r}")
                continue
            new = now_facts[key]
            if _same(old, new):
                fact_matches.append(f"{key} == {old!r}")
            elif isinstance(old, str) and isinstance(new, str) and (
                key in a.named if a is not None and not adaptations
                else names_value(guidance, old)  # what the lesson says once adapted
            ):
                guidance = _adapt(guidance, old, new)
                adaptations.append(f"{old!r} -> {new!r} ({key})")
            elif _material(key, old, new, rec.content, a):
                material.append(f"{key}: {old!r} then, {new!r} now")
            else:
                soft.append(f"{key}: {old!r} then, {new!r} now")
        material.extend(_order_flips(then.facts, now_facts, judged))
        provenance = self.provenance(item, adaptations=len(adaptations))
        if then.facts and now_facts:
            return self._by_facts(
                item, guidance, matched + fact_matches, material, soft, unknown, adaptations,
                provenance,
            )
        # a state told in text (on one side or both): the reader's readings decide
        if a is not None:
            lesson_r, then_r = a.readings(rec)
        else:
            lesson_r, then_r = read(rec.content), read(then.text)
        now_r = item.present_reading if item.present_reading is not None else read(now.text)
        judged_text = judge(lesson_r, then_r, now_r)
        return self._by_reading(item, guidance, judged_text, matched, unknown, adaptations,
                                provenance)

    def _by_reading(
        self,
        item: ReconstructionInput,
        guidance: str,
        j: Judgement,
        matched: list[str],
        unknown: list[str],
        adaptations: list[str],
        provenance: dict[str, object],
    ) -> Reconstruction:
        """The verdict from the reader's checks (`reader.compare.judge`)."""
        rec = item.record
        failed = j.of("condition", relation=OPPOSED)
        if failed:
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.NOT_APPLICABLE, confidence=0.8, guidance="",
                matched=_lines(j.of("condition", relation=SAME)), mismatched=_lines(failed),
                reason=RejectionReason.CONDITION_FAILED,
                detail="the lesson's condition fails now: " + "; ".join(_lines(failed)),
                provenance=provenance,
            )
        material = j.of("lesson", "depends", relation=OPPOSED)
        if material:
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.NOT_APPLICABLE, confidence=0.75,
                guidance="", matched=_lines(j.of("lesson", "depends", relation=SAME)),
                mismatched=_lines(material), reason=RejectionReason.SOURCE_STATE_MISMATCH,
                detail="situation differs: " + "; ".join(_lines(material)),
                provenance=provenance,
            )
        missing = j.of("condition", relation=MISSING)
        floor = item.relevance_floor
        if missing and floor is not None and item.content_similarity < floor:
            # a lesson about something else never makes the briefing ask for its facts
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.NOT_APPLICABLE, confidence=0.6, guidance="",
                reason=RejectionReason.LOW_EXPECTED_UTILITY,
                detail=f"not relevant: content similarity {item.content_similarity:.2f} below "
                f"the floor {floor:.2f}, and it applies only if "
                + "; ".join(f"{c.label} {c.then}" for c in missing),
                provenance=provenance,
            )
        if missing:
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.INSUFFICIENT_EVIDENCE, confidence=0.0,
                guidance="", matched=_lines(j.of("condition", relation=SAME)),
                unknown=_lines(missing), missing_facts=tuple(c.label for c in missing),
                reason=RejectionReason.MISSING_EVIDENCE,
                detail="the lesson applies only if: " + "; ".join(
                    f"{c.label} {c.then}" for c in missing) + " (not stated now)",
                provenance=provenance,
            )
        deps = j.of("condition", "lesson", "depends")
        same = [c for c in deps if c.relation == SAME]
        soft = [c for c in deps if c.relation == OTHER]
        unstated = [c for c in deps if c.relation == MISSING]
        context = j.of("context")
        context_diff = [c for c in context if c.relation != SAME]
        if not same and not soft:
            return self._by_similarity(item, guidance, matched, [*unknown, *_lines(unstated)],
                                       adaptations, provenance, context_diff)
        coverage = len(same) / len(deps)
        conf = (0.5 + 0.45 * coverage - 0.1 * len(soft) - 0.05 * len(unstated)
                - 0.03 * len(context_diff))
        full = len(same) == len(deps)
        verdict = Verdict.APPLICABLE if full else Verdict.PARTIAL
        notes = ([f"differs: {c.line()}" for c in soft + context_diff]
                 + [f"unverified: {c.line()}" for c in unstated])
        return Reconstruction(
            memory_id=rec.id, verdict=verdict, confidence=round(max(0.2, min(conf, 0.95)), 3),
            guidance=guidance, transferable=_claims_of(guidance, item),
            matched=tuple(matched) + _lines(same), mismatched=_lines(soft + context_diff),
            unknown=tuple(unknown) + _lines(unstated), adaptations=tuple(adaptations),
            detail="; ".join(notes) or "checked: " + "; ".join(_lines(same)),
            provenance=provenance,
        )

    def _by_similarity(
        self,
        item: ReconstructionInput,
        guidance: str,
        matched: list[str],
        unknown: list[str],
        adaptations: list[str],
        provenance: dict[str, object],
        differences: Sequence[Check] = (),
    ) -> Reconstruction:
        """Nothing the lesson depends on could be read on both sides: the embedding
        similarity of the two situations decides, and never yields APPLICABLE."""
        rec = item.record
        sim = item.state_similarity if item.state_similarity is not None else 0.0
        threshold = self.threshold_for(item.embedder)
        if sim < threshold:
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.NOT_APPLICABLE,
                confidence=round(min(0.6, 0.3 + (threshold - sim)), 3), guidance="",
                reason=RejectionReason.SOURCE_STATE_MISMATCH,
                detail=f"then/now similarity {sim:.2f} below {threshold:.2f}",
                provenance=provenance,
            )
        span = max(1e-6, 1.0 - threshold)
        conf = TEXT_ONLY_MAX_CONFIDENCE * min(1.0, 0.5 + 0.5 * (sim - threshold) / span)
        conf -= 0.03 * len(differences)
        return Reconstruction(
            memory_id=rec.id, verdict=Verdict.PARTIAL, confidence=round(max(0.1, conf), 3),
            guidance=guidance, transferable=_claims_of(guidance, item),
            matched=tuple(matched), mismatched=_lines(differences), unknown=tuple(unknown),
            adaptations=tuple(adaptations),
            detail=f"nothing the lesson depends on was read on both sides; then/now "
            f"similarity {sim:.2f} (threshold {threshold:.2f})",
            provenance=provenance,
        )

    def _by_facts(
        self,
        item: ReconstructionInput,
        guidance: str,
        matched: list[str],
        material: list[str],
        soft: list[str],
        unknown: list[str],
        adaptations: list[str],
        provenance: dict[str, object],
    ) -> Reconstruction:
        rec = item.record
        explicit = bool(rec.conditions)
        if explicit:
            soft, material = soft + material, []  # the writer said what matters
        if material and not explicit:
            return Reconstruction(
                memory_id=rec.id, verdict=Verdict.NOT_APPLICABLE, confidence=0.8, guidance="",
                matched=tuple(matched), mismatched=tuple(material), unknown=tuple(unknown),
                reason=RejectionReason.SOURCE_STATE_MISMATCH,
                detail="source facts differ: " + "; ".join(material), provenance=provenance,
            )
        checked = len(matched) + len(soft) + len(unknown)
        coverage = len(matched) / checked if checked else 0.0
        if explicit:
            conf = 0.9 - 0.1 * len(soft) - 0.05 * len(unknown)
        else:
            conf = 0.5 + 0.4 * coverage - 0.05 * len(soft)
        full = not soft and not unknown and (explicit or coverage == 1.0)
        verdict = Verdict.APPLICABLE if full else Verdict.PARTIAL
        notes = [f"differs: {m}" for m in soft] + [f"unverified: {u}" for u in unknown]
        return Reconstruction(
            memory_id=rec.id, verdict=verdict, confidence=round(max(0.2, min(conf, 0.95)), 3),
            guidance=guidance, transferable=_claims_of(guidance, item),
            matched=tuple(matched), mismatched=tuple(soft), unknown=tuple(unknown),
            adaptations=tuple(adaptations), detail="; ".join(notes), provenance=provenance,
        )

    def _stateless(self, item: ReconstructionInput, matched: list[str]) -> Reconstruction:
        rec = item.record
        base = _STATELESS_CONFIDENCE[rec.authority]
        stateless_ok = matched or rec.kind is not _LESSON
        verdict = Verdict.APPLICABLE if stateless_ok else Verdict.PARTIAL
        return Reconstruction(
            memory_id=rec.id, verdict=verdict, confidence=base, guidance=rec.content,
            transferable=_claims_of(rec.content, item),
            matched=tuple(matched), detail="no source state: judged by conditions and kind",
            provenance=self.provenance(item),
        )


def _lines(checks: Sequence[Check]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.line() for c in checks))


register_reconstructor("rules", RulesReconstructor)
