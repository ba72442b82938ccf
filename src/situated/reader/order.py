"""Order in time in a text: whether a clause marks a step of a sequence ("First,", "then",
"after that"), where an action sends its object as an event tells it, and the order a
text's actions are to happen in ("after X, Y" puts X first)."""

from __future__ import annotations

from collections.abc import Sequence

from situated.reader import lexicon as lx
from situated.reader.phrases import _PARTICLES
from situated.reader.tokens import Clause, Token
from situated.reader.types import ORDER, Fact, Reading

_TOWARD = frozenset({"to", "into", "onto"})


def destination(action: str, toks: Sequence[Token]) -> str:
    """Where `action` (read from the clause `toks`) sends its object, as an event tells it ("
    to flower pot 6" of "you move the seed to the flower pot 6"), or "" (also when the place
    is the action's own object: "you move to the kitchen"). Moving a seed to one pot then
    the other is not the same two events as the other way round."""
    at = next((i for i, t in enumerate(toks) if i and t.low in _TOWARD), None)
    if at is None:
        return ""
    words: list[str] = []
    for t in toks[at + 1:]:
        if t.kind == "punct" or t.low in lx.PREPOSITIONS or t.low in lx.CONJUNCTIONS:
            break
        if t.low not in lx.DETERMINERS and len(words) < 4:
            words.append(t.low)
    if not words or action.split()[-1] in (words[-1], lx.lemma(words[-1], "NOUN")):
        return ""
    return f" {toks[at].low} {' '.join(words)}"


def event(action: str, toks: Sequence[Token]) -> str:
    """`action` (read from the clause `toks`) as a told event: its verb, the words of its
    object as told ("move black wire", where the action keeps the head: "move wire") and its
    `destination`."""
    verb, *_ = action.split()
    at = next((i for i, t in enumerate(toks) if t.kind == "word" and lx.lemma(
        t.low, "VERB") == verb), None)
    words: list[str] = []
    for t in toks[at + 1:] if at is not None else ():
        if t.kind == "punct" or t.low in lx.PREPOSITIONS or t.low in lx.CONJUNCTIONS or (
                t.low in lx.PRONOUNS):
            break
        if t.low not in lx.DETERMINERS and t.low not in _PARTICLES and len(words) < 4:
            words.append(t.low)
    told = " ".join([verb, *words]) if words and words[-1] == action.split()[-1] else action
    return told + destination(action, toks)

_STEPS = frozenset("first then next finally later afterwards afterward".split())


def marks_a_step(clause: Clause) -> bool:
    """A clause opened by a word of sequence ("then ...", "First,", "After that,")."""
    if clause.marker in _STEPS:
        return True
    words = [t.low for t in clause.tokens[:2]]
    return bool(words) and (words[0] in _STEPS or (
        clause.marker == "after" and words == ["that"]))


def order(actions: list[tuple[str, str]]) -> list[str]:
    """Actions in the order they are to happen: "after X, Y" and "Y after X" put X first;
    "before X, Y" puts Y first."""
    out: list[str] = []
    pending_before: str | None = None
    for action, marker in actions:
        if marker in ("after", "once") and out and not pending_before:
            out.insert(len(out) - 1, action)
        elif marker == "before" and not out:
            pending_before = action
            continue
        else:
            out.append(action)
        if pending_before is not None:
            out.append(pending_before)
            pending_before = None
    if pending_before is not None:
        out.append(pending_before)
    return out


def order_facts(reading: Reading) -> tuple[Fact, ...]:
    """Order in time as facts: each action before the next one."""
    acts = reading.actions
    return tuple(Fact(acts[i], ORDER, (acts[i + 1],)) for i in range(len(acts) - 1))


__all__ = ["destination", "event", "marks_a_step", "order", "order_facts"]
