"""What a text says, read the same way by every stage: sentences and claims, the explicit
contrasts and numbers of a situation text, the values and subjects a lesson names.

The stages (reconstruct, validate, dedupe) and `recall.analysis` (which reads a memory's own
text once, at write) import these; none of them imports another's private helpers. Every
reader is cached per text; `analysis.clear_text_caches` empties the caches on erasure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from situated.models import FactValue
from situated.recall.briefing import Claim, RejectionReason
from situated.safety import (
    Gated,
    allow_list,
    ascii_lower,
    denied_tools,
    injection_findings,
    may_hold_injection,
    prohibited_effects,
    tool_mentions,
)

_CONTRASTS: list[tuple[str, str]] = [
    (r"\b(?:is|are|was|were|turned|switched|left|still|stays?)\s+on\b",
     r"\b(?:is|are|was|were|turned|switched|left|still|stays?)\s+off\b"),
    (r"\bopen(?:ed)?\b", r"\bclosed\b|\bshut\b"),
    (r"\bempty\b", r"\bfull\b|\bfilled\b"),
    (r"\bpresent\b|\bvisible\b|\bin sight\b", r"\babsent\b|\bmissing\b|\bnot visible\b|\bhidden\b"),
    (r"\blocked\b", r"\bunlocked\b"),
    (r"\bhot\b|\bboiling\b|\bwarm\b", r"\bcold\b|\bfrozen\b|\bcool\b"),
    (r"\bavailable\b|\bin stock\b", r"\bunavailable\b|\bout of stock\b|\bsold out\b"),
    (r"\benabled\b", r"\bdisabled\b"),
    (r"\brunning\b|\bup\b", r"\bstopped\b|\bdown\b|\bcrashed\b"),
    (r"\bsucceeded\b|\bpassing\b|\bpassed\b", r"\bfailed\b|\bfailing\b"),
    (r"\bwet\b", r"\bdry\b"),
    (r"\bclean\b", r"\bdirty\b"),
    (r"\blit\b", r"\bunlit\b"),
]
_COMPILED = [(Gated(a), Gated(b)) for a, b in _CONTRASTS]
_NUMBER_BEFORE_WORD = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)\s*([A-Za-z%$]\w*)")
_DIGIT = re.compile(r"\d")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def text_contrasts(then: str, now: str) -> list[str]:
    """Explicit opposites between two situation texts: ['on vs off', '3 apples vs 5 apples']."""
    lowered = ascii_lower(then)

    def then_side(i: int) -> tuple[str | None, str | None]:
        a, b = _COMPILED[i]
        ta, tb = a.search(then, lowered), b.search(then, lowered)
        return None if ta is None else ta.group(0), None if tb is None else tb.group(0)

    return contrasts_from(then_side, lambda: marks_numbers(then)[1], now)


def contrasts_from(
    then_side: Callable[[int], tuple[str | None, str | None]],
    then_numbers: Callable[[], Mapping[str, tuple[str, float]]],
    now: str,
) -> list[str]:
    """`text_contrasts` given the source text's marks: `then_side(i)` is the first match of
    each side of contrast `i`, `then_numbers()` its numbers by the word after them (asked
    for only when `now` needs them)."""
    found = []
    n = marks(now)  # the present text: once per recall, whatever the candidates
    for i, (na, nb) in enumerate(n.sides):
        if (na is None) == (nb is None):
            continue  # a contrast needs exactly one side now: then is searched only for those
        ta, tb = then_side(i)
        if ta is not None and tb is None and nb is not None:
            found.append(f"{ta!r} then, {nb!r} now")
        elif tb is not None and ta is None and na is not None:
            found.append(f"{tb!r} then, {na!r} now")
    if n.numbers:
        then_nums = then_numbers()
        for num, w, key, value in n.numbers:
            old = then_nums.get(key)
            if old is not None and old[1] != value:
                found.append(f"{old[0]} {w} then, {num} {w} now")
    return found


@dataclass(frozen=True, slots=True)
class Marks:
    """What `text_contrasts` looks for in the present text, found once per text."""

    sides: tuple[tuple[str | None, str | None], ...]
    """Per contrast: the first match of each side, or None."""
    numbers: tuple[tuple[str, str, str, float], ...]
    """(number, word, word lower-cased, value) for each number before a word, in order."""


@lru_cache(maxsize=1024)
def marks(text: str) -> Marks:
    sides = []
    lowered = ascii_lower(text)
    for a, b in _COMPILED:
        ma, mb = a.search(text, lowered), b.search(text, lowered)
        sides.append((None if ma is None else ma.group(0), None if mb is None else mb.group(0)))
    return Marks(tuple(sides), marks_numbers(text)[0])


@lru_cache(maxsize=8192)
def marks_numbers(
    text: str,
) -> tuple[tuple[tuple[str, str, str, float], ...], dict[str, tuple[str, float]]]:
    """Numbers before words in `text`: each (number, word, word lower-cased, value) in order,
    and lower-cased word -> (number, value) of its last occurrence (never mutated)."""
    found = _NUMBER_BEFORE_WORD.findall(text) if _DIGIT.search(text) else []
    numbers = tuple((n, w, w.lower(), float(n)) for n, w in found)
    return numbers, {key: (n, v) for n, _, key, v in numbers}


def names_value(content: str, value: FactValue) -> bool:
    if not isinstance(value, str) or len(value.strip()) < 2:
        return False
    return names_text(content, value)


@lru_cache(maxsize=8192)
def names_text(content: str, value: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value.strip())}(?!\w)", content, re.I) is not None


_TOKEN = re.compile(r"[a-z]{3,}")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def mentions(content: str, key: str) -> bool:
    """Whether the lesson talks about the thing a fact names (a word of the key, by stem)."""
    words = stems(content)
    return any(t in words for t in key_stems(key))


@lru_cache(maxsize=8192)
def stems(content: str) -> frozenset[str]:
    return frozenset(w[:5] for w in _TOKEN.findall(content.lower()))


@lru_cache(maxsize=4096)
def key_stems(key: str) -> tuple[str, ...]:
    return tuple(t[:5] for t in _TOKEN.findall(key.lower().replace("_", " ")))


@lru_cache(maxsize=8192)
def numbers_in(content: str) -> tuple[float, ...]:
    return tuple(float(t) for t in _NUMBER.findall(content))


@lru_cache(maxsize=8192)
def sentences(text: str) -> tuple[str, ...]:
    """The sentences of `text` (cached per text; a tuple, so the cached value is immutable)."""
    parts = tuple(p.strip() for p in _SENTENCE_END.split(text) if p.strip())
    return parts or (text.strip(),)


@lru_cache(maxsize=8192)
def claims(text: str) -> tuple[Claim, ...]:
    """Each sentence of `text` as a transferable claim (claims are immutable, so shared)."""
    return tuple(Claim(s) for s in sentences(text))


# -- the sentence screen under a policy (stage 5 and the stored analysis) -------------------


@lru_cache(maxsize=8192)
def screen(
    guidance: str, allowed_tools: frozenset[str] | None, prohibited: frozenset[str]
) -> tuple[tuple[str, ...], tuple[Claim, ...]]:
    """(kept sentences, rejected claims) of `guidance` under a policy, sentence by sentence
    (cached: the same memory texts are screened under the same policy recall after recall)."""
    suspect = may_hold_injection(guidance)  # most texts: none of their sentences can be

    def finding(_: int, sentence: str) -> str | None:
        found = injection_findings(sentence) if suspect else ()
        return found[0].reason if found else None

    return screen_sentences(
        sentences(guidance), finding, lambda _, sentence: tool_mentions(sentence),
        allowed_tools, prohibited,
    )


def screen_sentences(
    sentences: Sequence[str],
    finding: Callable[[int, str], str | None],
    tools: Callable[[int, str], Iterable[str]],
    allowed_tools: frozenset[str] | None,
    prohibited: frozenset[str],
) -> tuple[tuple[str, ...], tuple[Claim, ...]]:
    """(kept sentences, rejected claims) under a policy, given each sentence's (by index)
    first injection finding and the tools it mentions."""
    ok = None if allowed_tools is None else allow_list(allowed_tools)
    kept: list[str] = []
    rejected: list[Claim] = []
    for i, sentence in enumerate(sentences):
        reason = finding(i, sentence)
        if reason is not None:
            rejected.append(Claim(sentence, RejectionReason.SUSPECTED_POISONING, reason))
            continue
        bad = denied_tools(tools(i, sentence), ok)
        if bad:
            where = "outside the allow-list" if ok is not None else "with no allow-list (deny)"
            rejected.append(
                Claim(sentence, RejectionReason.SCOPE_MISMATCH,
                      f"names tools {where}: {', '.join(sorted(bad))}")
            )
            continue
        effects = prohibited_effects(sentence, prohibited) if prohibited else set()
        if effects:
            rejected.append(
                Claim(sentence, RejectionReason.SCOPE_MISMATCH,
                      f"asks for prohibited effects: {', '.join(sorted(effects))}")
            )
            continue
        kept.append(sentence)
    return tuple(kept), tuple(rejected)


_ANY_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


@lru_cache(maxsize=8192)
def number_strings(text: str) -> tuple[str, ...]:
    """Every number written in `text`, as written, sorted (two near-duplicates that differ in a
    number are different memories)."""
    return tuple(sorted(_ANY_NUMBER.findall(text)))
