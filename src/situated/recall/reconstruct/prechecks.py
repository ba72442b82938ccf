"""Deterministic pre-checks, run before any reconstructor (cheaper, smaller attack surface).

Each returns a finished `Reconstruction` when it settles the candidate, or None to pass it on.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from situated.conditions import Condition, ConditionResult, Truth, evaluate, parse_condition
from situated.errors import ConditionSyntaxError
from situated.frozen import quick_init
from situated.models import FactValue, Kind, LifecycleState, MemoryRecord
from situated.reader import Reading, read
from situated.reader.compare import checkable
from situated.reader.present import named_share, names_present_things
from situated.recall.briefing import Reconstruction, RejectionReason, Verdict
from situated.recall.reconstruct.base import ReconstructionInput

PRECHECK = {"reconstructor": "precheck", "reconstructor_version": "1"}


_INVALIDATED = LifecycleState.INVALIDATED
_LESSON = Kind.LESSON
_PREFERENCE = Kind.PREFERENCE
_MATCHED, _MISMATCHED, _UNKNOWN = Truth.MATCHED, Truth.MISMATCHED, Truth.UNKNOWN


def precheck(item: ReconstructionInput, as_of: float) -> Reconstruction | None:
    """Expired, superseded, policy version, conditions, relevance of the content (under the
    embedder's floor: not relevant, whatever its source state; in the band where unrelated
    pairs still reach, or beside a copied source state, also when it names nothing the
    present names), unknown source state, in order."""
    rec = item.record
    v = rec.validity
    until = v.valid_until_ts
    if not (v.valid_from_ts <= as_of < until):
        when = v.valid_until.isoformat() if v.valid_until and as_of >= until else "later"
        return _reject(item, RejectionReason.EXPIRED, f"valid until {when}")
    if rec.state is _INVALIDATED and rec.superseded_by and as_of >= until:
        return _reject(item, RejectionReason.SUPERSEDED, f"superseded by {rec.superseded_by}")
    pv, want = rec.policy_version, item.policy.version
    if pv and want and pv != want:
        return _reject(
            item, RejectionReason.POLICY_VERSION_MISMATCH,
            f"recorded under policy {pv}, present policy is {want}",
        )
    ev = None
    if rec.conditions:
        a = item.analysis
        ev = evaluated(rec.conditions, item.present.facts, a.conditions if a else None)
        if ev.mismatched:
            return _reject(
                item, RejectionReason.CONDITION_FAILED, ev.failed_detail,
                matched=ev.matched, mismatched=ev.mismatched, unknown=ev.unknown,
            )
    src = rec.source.state
    floor = item.relevance_floor
    irrelevant = floor is not None and item.content_similarity < floor
    # the content is judged for relevance whatever situates it: a source state says when a
    # lesson applies, not what it is about (one copied from the present would let any content
    # through), and a memory that is not relevant never asks for facts. A present of a few
    # words ("billing ticket"), or an embedder that relates shared words and not topics,
    # says too little to judge a lesson's content by: there the source state and conditions
    # decide, as they do for a lesson of their own
    situationless = rec.kind is not _LESSON or src is None or src.is_empty
    judged = "judges_content" in item.extra and _says_enough(item.present.text, item.intent)
    strict: float | None = item.extra.get("copied_state_floor") if judged else None
    # the source state is the present's copy: it vouches for nothing
    copied = strict is not None and (item.state_similarity or 0.0) >= COPIED_STATE
    if copied and strict is not None and item.content_similarity < strict:
        irrelevant, floor = True, strict
    if irrelevant and judged and not situationless and floor is not None and (
        # a word in common by chance rescues nothing beside a copied situation
        _names_present_things(item, not copied
                              and item.content_similarity >= floor - NEAR_FLOOR)
    ):
        irrelevant = False  # the embedding misses it, the reading does not
    if irrelevant and (situationless or (ev is not None and ev.missing) or judged):
        return _reject(
            item, RejectionReason.LOW_EXPECTED_UTILITY,
            f"not relevant: content similarity {item.content_similarity:.2f} below the "
            f"floor {floor:.2f} of {item.embedder.split(':')[0]}",
        )
    if judged and not situationless and strict is not None and (
        copied or item.content_similarity < strict
    ) and _names_only_absent_things(item):
        # the embedding cannot tell (unrelated pairs reach this far), the reading can: a
        # lesson none of whose things the present names is about something else
        return _reject(
            item, RejectionReason.LOW_EXPECTED_UTILITY,
            f"not relevant: content similarity {item.content_similarity:.2f}"
            + (" beside a copied source state" if copied else f" under {strict:.2f}")
            + ", and nothing the lesson names is named now",
        )
    if rec.kind is _PREFERENCE and item.present_reading is not None and (
        item.present_reading.question == "fact"
    ):
        return _reject(item, RejectionReason.LOW_EXPECTED_UTILITY,
                       "a preference is not evidence on a question of fact")
    if ev is not None and ev.missing:
        return _insufficient(
            item, ev.cannot_check, matched=ev.matched, unknown=ev.unknown,
            missing_facts=ev.missing,
        )
    if not rec.conditions and rec.kind is _LESSON and rec.source.state_unknown and not (
        states_conditions(item)
    ):
        return _insufficient(
            item, "source state unknown and no conditions: applicability cannot be checked"
        )
    return None


NEAR_FLOOR = 0.1
"""Content this close under its floor is relevant when the lesson names anything the present
names; further under, a good share of what it names (`reader.present.SHARED_THINGS`)."""


def _names_present_things(item: ReconstructionInput, near: bool) -> bool:
    """Whether the lesson names what the present names (`reader.compare`), by the lesson's
    stored reading and the recall's reading of the present: a good share of it, or, when its
    content is `near` the floor, anything."""
    if item.present_reading is None:
        return False
    a = item.analysis
    lesson = a.lesson_reading if a is not None and a.lesson_reading is not None else read(
        item.record.content)
    if near:
        return named_share(lesson, item.present_reading) > 0
    return names_present_things(lesson, item.present_reading)


def _names_only_absent_things(item: ReconstructionInput) -> bool:
    """Whether the lesson names things and neither the present nor the recall's intent names
    any of them."""
    if item.present_reading is None:
        return False
    lesson = _lesson_reading(item)
    if named_share(lesson, item.present_reading) > 0:  # the common case: settled by one share
        return False
    if item.intent.strip() and named_share(lesson, read(item.intent)) > 0:
        return False
    # a lesson's nouns are all named by the lesson itself: a share of 1 when it names any
    return named_share(lesson, lesson) > 0


def _lesson_reading(item: ReconstructionInput) -> Reading:
    a = item.analysis
    return a.lesson_reading if a is not None and a.lesson_reading is not None else read(
        item.record.content)


def states_conditions(item: ReconstructionInput) -> bool:
    """Whether the lesson's own text states conditions the present can be checked against
    ("if the washer is busy, ..."): such a lesson is checkable without a source state."""
    a = item.analysis
    lesson = a.lesson_reading if a is not None and a.lesson_reading is not None else read(
        item.record.content)
    return any(checkable(c) for c in lesson.conditions)


JUDGES_CONTENT: dict[str, Any] = {"judges_content": True}
"""`ReconstructionInput.extra` of a recall whose embedder reads meaning
(`Embedder.reads_meaning`): a situated lesson's content is judged for relevance too."""
COPIED_STATE = 0.98
"""Then/now similarity at which a source state is the present itself: its content must then
reach the embedder's `copied_state_floor`."""
MIN_JUDGED_WORDS = 5
"""Words (of two letters or more) the present's text and intent need for the content of a
situated lesson to be judged for relevance (issue 32: a copied source state)."""
_WORD = re.compile(r"[^\W\d_]{2,}")


def _says_enough(text: str, intent: str) -> bool:
    return len(_WORD.findall(text)) + len(_WORD.findall(intent)) >= MIN_JUDGED_WORDS


def evaluate_conditions(
    conditions: tuple[str, ...], facts: Mapping[str, FactValue]
) -> list[ConditionResult]:
    """Each parseable condition evaluated on `facts` (cached per conditions and facts: the
    pre-checks and the reconstructor ask the same question in one recall)."""
    if not conditions:
        return []
    return list(evaluated(conditions, facts).results)


@quick_init
@dataclass(frozen=True, slots=True)
class Evaluated:
    """Conditions evaluated on facts, with what the pre-checks and `rules` read from them."""

    results: tuple[ConditionResult, ...]
    matched: tuple[str, ...]
    """Texts of the conditions that hold (likewise `mismatched`, `unknown`)."""
    mismatched: tuple[str, ...]
    unknown: tuple[str, ...]
    missing: tuple[str, ...]
    """Absent facts the conditions need, each once, in order."""
    judged: frozenset[str]
    """Names of the facts the conditions read."""
    failed_detail: str
    """Why the conditions fail; "" when none is false."""
    cannot_check: str
    """Which conditions lack facts, as the pre-check's detail."""


def facts_key(facts: Mapping[str, FactValue]) -> tuple[tuple[str, str, FactValue], ...]:
    """Facts as a cache key. The value's type is part of it: True == 1 and hash alike, but
    compare differently (facts have distinct names, so sorting the triples sorts by name)."""
    return tuple(sorted([(k, type(v).__name__, v) for k, v in facts.items()]))


class PresentFacts(dict[str, FactValue]):
    """A recall's own copy of the present facts, read-only, keyed once for all its candidates:
    `cache_number` stands for `facts_key` in the condition cache, so the facts are not hashed
    for each candidate. A copy or an unpickled one is numbered again in its own process."""

    __slots__ = ("cache_number",)

    def __init__(self, facts: Mapping[str, FactValue]) -> None:
        super().__init__(facts)
        key = facts_key(self)
        number = _NUMBERS.get(key)
        if number is None:
            if len(_NUMBERS) >= _CACHE_SIZE:
                _NUMBERS.clear()  # numbers are never reused: old cache entries just age out
            number = _NUMBERS[key] = next(_COUNTER)
        self.cache_number = number

    def __reduce__(self) -> tuple[Any, ...]:
        return (PresentFacts, (dict(self),))

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the present facts of a recall are read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _read_only
    __ior__ = _read_only


_NUMBERS: dict[tuple[tuple[str, str, FactValue], ...], int] = {}
_COUNTER = itertools.count()


_CACHE: OrderedDict[
    tuple[tuple[str, ...], int | tuple[tuple[str, str, FactValue], ...]], Evaluated
] = OrderedDict()
_CACHE_SIZE = 4096


def clear_caches() -> None:
    """Forget evaluated conditions and present-fact keys (erasure: no erased text stays)."""
    _CACHE.clear()
    _NUMBERS.clear()  # present facts (numbers are never reused, so this is safe)


def evaluated(
    conditions: tuple[str, ...],
    facts: Mapping[str, FactValue],
    parsed: tuple[Condition, ...] | None = None,
) -> Evaluated:
    """`conditions` evaluated on `facts`, cached per both (the pre-checks and `rules` ask the
    same question of a candidate). `parsed`: the conditions already parsed (a memory's
    analysis), the parseable ones in order."""
    present: int | tuple[tuple[str, str, FactValue], ...] = (
        facts.cache_number if isinstance(facts, PresentFacts) else facts_key(facts)
    )
    key = (conditions, present)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _evaluate(conditions, facts, parsed)
        if len(_CACHE) >= _CACHE_SIZE:
            # the oldest entry (O(1) in an OrderedDict; a dict's first key after many
            # deletions is a scan); another thread may be evicting it too
            with contextlib.suppress(KeyError):
                _CACHE.popitem(last=False)
        _CACHE[key] = hit
    return hit


def _evaluate(
    conditions: tuple[str, ...],
    present: Mapping[str, FactValue],
    parsed: tuple[Condition, ...] | None,
) -> Evaluated:
    if parsed is None:
        found = []
        for text in conditions:
            try:
                found.append(parse_condition(text))
            except ConditionSyntaxError:
                continue  # validated at write; an old unparsable row is skipped, not trusted
        parsed = tuple(found)
    out = [evaluate(cond, present) for cond in parsed]
    matched: list[str] = []
    mismatched: list[str] = []
    unknown: list[str] = []
    failed: list[str] = []
    lacking: list[str] = []
    missing: dict[str, None] = {}  # an ordered set
    judged: set[str] = set()
    for r in out:
        text = r.condition.text
        if r.truth is _MATCHED:
            matched.append(text)
        elif r.truth is _MISMATCHED:
            mismatched.append(text)
            failed.append(f"{text} is false ({r.detail})")
        elif r.truth is _UNKNOWN:
            unknown.append(text)
        if r.missing:
            lacking.append(text)
            missing.update(dict.fromkeys(r.missing))
        judged.update(r.condition.facts)
    return Evaluated(
        results=tuple(out), matched=tuple(matched), mismatched=tuple(mismatched),
        unknown=tuple(unknown), missing=tuple(missing), judged=frozenset(judged),
        failed_detail="; ".join(failed), cannot_check="cannot check " + ", ".join(lacking),
    )


def _reject(
    item: ReconstructionInput,
    reason: RejectionReason,
    detail: str,
    matched: tuple[str, ...] = (),
    mismatched: tuple[str, ...] = (),
    unknown: tuple[str, ...] = (),
) -> Reconstruction:
    """NOT_APPLICABLE, certainly: a hard gate failed."""
    return Reconstruction(
        memory_id=item.record.id, verdict=Verdict.NOT_APPLICABLE, confidence=1.0, guidance="",
        matched=matched, mismatched=mismatched, unknown=unknown, reason=reason, detail=detail,
        provenance=PRECHECK,
    )


def _insufficient(
    item: ReconstructionInput,
    detail: str,
    matched: tuple[str, ...] = (),
    unknown: tuple[str, ...] = (),
    missing_facts: tuple[str, ...] = (),
) -> Reconstruction:
    """INSUFFICIENT_EVIDENCE: applicability cannot be checked without more facts."""
    return Reconstruction(
        memory_id=item.record.id, verdict=Verdict.INSUFFICIENT_EVIDENCE, confidence=0.0,
        guidance="", matched=matched, unknown=unknown, missing_facts=missing_facts,
        reason=RejectionReason.MISSING_EVIDENCE, detail=detail, provenance=PRECHECK,
    )


def never_served(rec: MemoryRecord) -> str | None:
    """Why recall can never serve `rec` as written (told to its writer), or None.

    A lesson with neither a source state nor conditions is always INSUFFICIENT_EVIDENCE (its
    applicability cannot be checked, `precheck`). (A memory whose validity has ended is still
    served to a recall `as_of` a time it held.)"""
    src = rec.source.state
    if rec.kind is _LESSON and not rec.conditions and (src is None or src.is_empty) and not any(
        checkable(c) for c in read(rec.content).conditions
    ):
        return ("a lesson with neither a source state (state=) nor conditions cannot be checked "
                "against the present; give one of them, or add it as kind='note' or "
                "'preference' (judged by relevance)")
    return None
