"""Tokens and clauses of a text, with their spans.

Every pattern here runs in linear time: each alternative starts on a class the others do not,
and no quantified group can match what its neighbour matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from situated.reader import lexicon as lx

MAX_CHARS = 8000
"""Text beyond this is not read (a situation or lesson longer than this is cut)."""

_TOKEN = re.compile(
    r"\n"  # a line break ends a clause (a list printed one item a line)
    r"|\d+(?:[-.,:]\d+)*"  # numbers, versions, times, phones: 45, 2.5, 1,000, 2.3.1, 555-0101
    r"|[^\W\d_]\w*(?:['’\-./]\w+)*"  # words and codes: can't, eu-west-1, E24, v2.3
    r"|[$€£¥%°]"  # unit symbols
    r"|[^\w\s]"  # any other mark, one at a time
)
_CODE_SHAPE = re.compile(r"\d")


class Token(NamedTuple):
    """One token: its text, lower-cased form, kind and span (a tuple: a text makes many)."""

    text: str
    low: str
    kind: str
    """`word`, `number`, `code` (letters with digits, or a dotted version), `sym` or `punct`."""
    start: int
    end: int
    value: float | None = None
    """A number's value."""


def _number(text: str) -> float | None:
    if ":" in text or "-" in text:
        return None  # a time of day, a version, a phone number: a code
    if "," in text:
        head, *groups = text.split(",")
        if all(len(g) == 3 for g in groups) and "." not in text:
            return float(head + "".join(groups))
        return None
    if text.count(".") > 1:
        return None
    try:
        return float(text)
    except ValueError:  # digits of another script float() does not read
        return None


@lru_cache(maxsize=4096)
def tokenize(text: str) -> tuple[Token, ...]:
    """The tokens of `text` (at most `MAX_CHARS` of it); "can't" is two tokens (ca, n't)."""
    out: list[Token] = []
    for m in _TOKEN.finditer(text[:MAX_CHARS]):
        t = m.group(0)
        s, e = m.span()
        first = t[0]
        if first == "\n":
            out.append(Token("\n", "\n", "punct", s, e))
            continue
        if first.isdecimal():
            value = _number(t)
            kind = "number" if value is not None else "code"
            out.append(Token(t, t.lower(), kind, s, e, value))
        elif first.isalpha() or first.isdigit():
            low = t.lower().replace("’", "'")
            if low.endswith("n't") and len(low) > 3:
                base = low[:-3]
                out.append(Token(t[:-3], base, "word", s, e - 3))
                out.append(Token(t[-3:], "n't", "word", e - 3, e))
                continue
            if "'" in low and low.split("'", 1)[1] in ("s", "re", "ll", "d", "ve", "m"):
                base, tail = low.split("'", 1)
                cut = s + len(base)
                out.append(Token(t[: len(base)], base, "word", s, cut))
                out.append(Token(t[len(base):], "'" + tail, "word", cut, e))
                continue
            kind = "code" if _CODE_SHAPE.search(t) else "word"
            if t == "A" and out and out[-1].kind == "word":
                kind = "code"  # "patch A", "unit A": a label, not the article
            out.append(Token(t, low, kind, s, e))
        elif t in "$€£¥%°":
            out.append(Token(t, t, "sym", s, e))
        else:
            out.append(Token(t, t, "punct", s, e))
    return tuple(out)


_SENTENCE = frozenset(".;!?\n")
_BREAK = frozenset(",()[]{}\"“”—–")


@dataclass(frozen=True, slots=True)
class Clause:
    """A run of tokens that states one thing, with what opened it."""

    tokens: tuple[Token, ...]
    marker: str
    """The subordinator or conjunction that opened it ("if", "when", "and", "because"), or ""."""
    sentence: int
    """Which sentence of the text it belongs to."""
    label: tuple[Token, ...] = ()
    """The tokens before a colon that opened it ("washer status" in "washer status: running")."""
    aside: bool = False
    """Inside brackets: read on its own, its subject not carried on."""


def clauses(tokens: tuple[Token, ...]) -> list[Clause]:
    """Split tokens into clauses: at sentence ends, commas and brackets, colons (the left side
    becomes the clause's label), coordinating conjunctions and subordinators."""
    out: list[Clause] = []
    sentence = 0
    current: list[Token] = []
    marker = ""
    label: tuple[Token, ...] = ()

    asides: list[Clause] = []

    def close() -> None:
        nonlocal current, marker, label
        if current:
            if saved:  # an aside is read right after the clause it sits in
                asides.append(Clause(tuple(current), marker, sentence, label, True))
            else:
                out.append(Clause(tuple(current), marker, sentence, label, False))
                out.extend(asides)
                asides.clear()
            current, marker, label = [], "", ()

    saved: list[tuple[list[Token], str, tuple[Token, ...]]] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        low = t.low
        if low in "([" and t.kind == "punct" and len(saved) < 8:
            saved.append((current, marker, label))  # an aside: read on its own
            current, marker, label = [], "", ()
            i += 1
            continue
        if low in ")]" and t.kind == "punct" and saved:
            close()
            current, marker, label = saved.pop()
            i += 1
            continue
        if t.kind == "punct":
            if low in _SENTENCE and not (low == "." and i + 1 < n and tokens[i + 1].start == t.end):
                close()
                sentence += 1
            elif low == ":":
                if current and len(current) <= 6 and not any(
                    c.low in lx.COPULAS or c.low in lx.AUXILIARIES for c in current[:-1]
                ):  # "washer status:", "On the counter is:"
                    label, current = tuple(current), []
                    # the clause after the colon keeps the label, so close() is deferred
                else:
                    close()
            elif low in _BREAK or low == "-":
                close()
            i += 1
            continue
        if low in lx.SUBORDINATORS or low in lx.CONJUNCTIONS:
            two = f"{low} {tokens[i + 1].low}" if i + 1 < n else low
            close()
            marker = "only" if two in ("only if", "only when") else low
            if two in ("only if", "only when", "as long"):
                i += 1
            i += 1
            continue
        if low == "only" and i + 1 < n and tokens[i + 1].low in ("if", "when", "while"):
            close()
            marker = "only"
            i += 2
            continue
        current.append(t)
        i += 1
    close()
    while saved:
        current, marker, label = saved.pop()
        close()
    out.extend(asides)
    return out


__all__ = ["MAX_CHARS", "Clause", "Token", "clauses", "tokenize"]
