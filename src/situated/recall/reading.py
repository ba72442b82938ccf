"""What a text says, read the same way by every stage: sentences and claims, the sentence
screen under a policy, the values and subjects a lesson names. (What a situation states as
facts, and a lesson's conditions, is the reader's: `situated.reader`.)

The stages (reconstruct, validate, dedupe) and `recall.analysis` (which reads a memory's own
text once, at write) import these; none of them imports another's private helpers. Every
reader is cached per text; `analysis.clear_text_caches` empties the caches on erasure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from situated.models import FactValue
from situated.recall.briefing import Claim, RejectionReason
from situated.safety import (
    allow_list,
    denied_tools,
    injection_findings,
    may_hold_injection,
    prohibited_effects,
    tool_mentions,
)

_DIGIT = re.compile(r"\d")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


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
