"""Whether two texts say the same thing: write-time identity by meaning, not by vector alone.

A static embedder puts "patch B, then patch A" next to "patch A, then patch B" (cosine
0.99996) and "restart it" next to "do not restart it". Two texts whose readings differ in
any of these ways are different memories, however close their vectors:

- the order of the same actions;
- negation (the negators each text uses, and any fact one denies and the other states);
- a value: the same fact (subject and attribute) with another value, amount or code;
- a one-for-one swap of a word in otherwise the same words ("route reads to the replica" /
  "... to the primary").
"""

from __future__ import annotations

from collections import Counter

from situated.reader import lexicon as lx
from situated.reader.compare import SAME, relate
from situated.reader.parse import read
from situated.reader.tokens import tokenize
from situated.reader.types import Fact

SWAP_OVERLAP = 0.6
"""Share of content words two texts must share for a one-for-one swap to count as a change."""


def _negators(text: str) -> Counter[str]:
    return Counter(t.low for t in tokenize(text) if t.low in lx.NEGATORS)


def _key(f: Fact) -> tuple[str, str, str]:
    return (f.subject, f.attribute, f.dimension)


def differs(a: str, b: str) -> str | None:
    """Why texts `a` and `b` say different things (for a reviewer), or None when nothing in
    their readings tells them apart."""
    if a == b:
        return None
    ra, rb = read(a), read(b)
    acts_a, acts_b = ra.actions, rb.actions
    if len(acts_a) > 1 and sorted(acts_a) == sorted(acts_b) and acts_a != acts_b:
        return f"the same steps in another order ({', '.join(acts_a)} / {', '.join(acts_b)})"
    if _negators(a) != _negators(b):
        return "one says not where the other does not"
    facts_b: dict[tuple[str, str, str], list[Fact]] = {}
    for f in (*rb.facts, *rb.conditions):
        facts_b.setdefault(_key(f), []).append(f)
    for f in (*ra.facts, *ra.conditions):
        others = facts_b.get(_key(f))
        if others and all(relate(f, g) != SAME for g in others):
            return f"{f.label()}: {f.value_text()} / {others[0].value_text()}"
    wa, wb = set(ra.lemmas), set(rb.lemmas)
    gone, new = wa - wb, wb - wa
    if gone and new and len(wa & wb) >= SWAP_OVERLAP * max(len(wa), len(wb)):
        one_for_one = len({lx.lemma(w) for w in gone}) == 1 == len({lx.lemma(w) for w in new})
        if one_for_one and not any(lx.alike(x, y) or lx.same_thing(x, y)
                                   for x in gone for y in new):
            return f"{max(sorted(gone), key=len)} / {max(sorted(new), key=len)}"
    return None


__all__ = ["differs"]
