"""What the present's reading says of a memory as a whole, not of one dependency: whether it
names a good share of the things a lesson names (relevance read from text, beside the
embedding's), and whether it contradicts what a fact or a note asserts.

Both use `compare`'s matching of facts (same subject, same key) and its relations.
"""

from __future__ import annotations

from situated.reader import lexicon as lx
from situated.reader.compare import _VAGUE, OPPOSED, POINTS, _best, _index, checkable, relate
from situated.reader.types import STATE, WHERE, Reading

SHARED_THINGS = 0.3
"""Share of the nouns a lesson names that the present must name for the lesson to be about
it."""


def named_share(lesson: Reading, now: Reading) -> float:
    """The share of the nouns a lesson names that the present names too: a lesson about the
    freezer is about a situation that has a freezer, however long the situation's text,
    while one about warehouse robots is not about a refund ticket whatever source state it
    was given."""
    present = set(now.lemmas)
    nouns = {lx.lemma(w, "NOUN") for w in lesson.lemmas
             if len(w) > 2 and w not in _VAGUE and _nounish_word(w)}
    # less the words the reading found doing something else ("deal with the brick first":
    # deal is the verb, first a step; the brick is what it names)
    nouns -= _not_things(lesson)
    shared = {lx.lemma(w, "NOUN") for w in lesson.lemmas if w in present} & nouns
    return len(shared) / len(nouns) if nouns else 0.0


def names_present_things(lesson: Reading, now: Reading) -> bool:
    """Whether a good share (`SHARED_THINGS`) of what the lesson names the present names too
    (a word in common by chance is not enough)."""
    return named_share(lesson, now) >= SHARED_THINGS


def _not_things(reading: Reading) -> set[str]:
    """Words that could be nouns but that the reading read as an action's verb or a word of
    sequence."""
    return {lx.lemma(w, "NOUN") for w in {a.split()[0] for a in reading.actions} | lx.TEMPORAL}


def _nounish_word(w: str) -> bool:
    tags = lx.tags(w)
    return "NOUN" in tags or not tags


def contradiction(memory: Reading, now: Reading, *, same_speaker: bool = False,
                  other: str = "the present") -> str:
    """What the present states against a memory that asserts facts (a fact or a note), as a
    message; "" when nothing disagrees. An asserted value is exact: another amount (beyond
    rounding), place, code, name or holder, or an opposite state, contradicts it.
    `same_speaker`: both texts are one author's, so what "I" or "we" is in one is compared
    with what "I" or "we" is in the other ("I'm vegetarian" / "I'm no longer vegetarian").
    `other`: what the message calls `now`."""
    index = _index(now)
    for f in memory.facts:
        if f.weak or not (checkable(f) or (
                same_speaker and f.subject in lx.SPEAKERS and f.attribute in (STATE, WHERE))):
            continue
        found = _best(f, index.about(f))
        if found is None:
            continue
        if f.number is not None and found.number is not None:
            # rounding aside (a point in time or a date: exactly)
            near = POINTS.get(f.dimension, 0.01 * max(abs(f.number), abs(found.number)))
            if f.op == "==" and found.op == "==" and abs(f.number - found.number) > near:
                return (f"memory says {f.label()} {f.value_text()}, {other} says "
                        f"{found.value_text()}")
            continue
        if relate(f, found) == OPPOSED:
            return (f"memory says {f.label()}: {f.value_text()}, {other} says "
                    f"{found.value_text()}")
    return ""


__all__ = ["SHARED_THINGS", "contradiction", "named_share", "names_present_things"]
