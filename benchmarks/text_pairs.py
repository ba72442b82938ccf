"""Minimally edited pairs of environment observations, labelled by construction.

Pure functions over observation strings: no JVM, no store (`benchmarks/text_applicability.py`
runs the pairs through `Memory`; `tests/test_text_pairs.py` checks this builder on a few
observation strings). The observations are ScienceWorld's own text; the edits use only what
the environment itself prints:

- `boolean`: a state word turned into the opposite the environment uses (turned on / turned
  off, activated / deactivated, open / closed, on / off);
- `categorical`: one value of a slot for another value the environment prints in that slot
  (the room a `look around` is in, a plant's life stage, an inclined plane's surface);
- `threshold`: an amount the environment prints (a thermometer's reading, how far down the
  plane a block is, a stopwatch's ticks) replaced by another amount it printed in that slot;
  the lesson states a threshold in a conditional clause, and the present crosses it or not;
- `near_equal`: the same amount moved by one or two units, with no threshold stated;
- `negation`: "is closed" -> "is not closed";
- `entity_swap`: an object in a list (a room's contents, a container's, the inventory)
  replaced by another object the environment prints elsewhere;
- `order`: three events the environment printed one after another, two of them swapped;
- `identical`: the present is the source state.

Every edit makes two pairs with the same base and the same present, told apart by the
lesson: one whose lesson names the thing the edit touches (`named`: not applicable, since
the situation it depends on changed; for `threshold`, one whose stated threshold lies
between then and now) and one whose lesson names something the edit leaves alone
(`incidental`: still applicable; for `threshold`, a threshold both values satisfy). The
`near_equal` and `identical` pairs are applicable by construction. Lessons are built from
templates that name an object; which object, which template and which replacement value are
drawn with a fixed seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

KINDS = ("boolean", "categorical", "threshold", "near_equal", "negation", "entity_swap",
         "order", "identical")

STATE_OPPOSITES = {"turned on": "turned off", "turned off": "turned on",
                   "activated": "deactivated", "deactivated": "activated",
                   "open": "closed", "closed": "open", "on": "off", "off": "on"}
"""State words ScienceWorld prints, each with the one it prints for the opposite state."""

_STATE = re.compile(
    r"\b(is|are) (turned on|turned off|deactivated|activated|open|closed|on|off)(?=[.,)\s]|$)")

LESSONS = (
    "Look at the {obj} before you do anything else here.",
    "Start with the {obj}: examine it, then use it.",
    "Deal with the {obj} first; the rest can wait.",
)
"""Lessons that name one object (and depend on it)."""
IN_PLACE = ("In the {place}, start with the {obj}.", "Start with the {obj}.")
"""A lesson that names a room and one that does not (categorical: the room)."""
ACTS = ("stop and check it again", "write the reading down and go on",
        "wait one step before the next action")
"""What a threshold lesson says to do."""


@dataclass(frozen=True)
class Observation:
    """One text the environment printed."""

    text: str
    kind: str
    """`look`, `describe`, `step` or `inventory`."""
    origin: str
    """Where it came from: task, variation, step."""
    action: str = ""


@dataclass(frozen=True)
class Pair:
    """A lesson learned in `base`, recalled in `present`, applicable or not by construction."""

    kind: str
    variant: str
    """`named` (the lesson names what the edit touches) or `incidental` (it does not)."""
    applicable: bool
    lesson: str
    base: str
    present: str
    edit: str
    """What changed, for a person: "turned off -> turned on (stove)"."""
    origin: str


@dataclass(frozen=True)
class NumericSlot:
    """A place the environment prints an amount: its pattern (prefix, number, suffix groups),
    the thing a lesson names for it, and how a threshold clause is written."""

    name: str
    pattern: re.Pattern[str]
    noun: str
    clause: str
    """A conditional clause with {cmp} ("more than" / "less than") and {n}."""


NUMERIC = (
    NumericSlot("temperature", re.compile(r"(temperature of )(-?\d+)( degrees celsius)"),
                "temperature", "When the temperature is {cmp} {n} degrees celsius"),
    NumericSlot("plane", re.compile(r"(?<=a )([a-z]+(?: [a-z]+)?) approximately (\d+)(% down the "
                                    r"plane)"),
                "block", "When the {obj} is {cmp} {n}% down the plane"),
    NumericSlot("ticks", re.compile(r"(The time reads )(\d+)( ticks)"),
                "stopwatch", "When the stopwatch reads {cmp} {n} ticks"),
)


@dataclass(frozen=True)
class CategoricalSlot:
    """A place the environment prints one of several values; `owner` is the group holding
    the name of the thing the value belongs to (None: the value itself is named)."""

    name: str
    pattern: re.Pattern[str]
    value_group: int
    owner_group: int | None


CATEGORICAL = (
    CategoricalSlot("room", re.compile(r"This room is called the ([a-z ]+?)\."), 1, None),
    CategoricalSlot("stage", re.compile(r"\ba ([a-z ]+?) in the ([a-z]+) stage\b"), 2, 1),
    CategoricalSlot("surface",
                    re.compile(r"\b(inclined plane) with an? ([A-Za-z ]+?) surface\b"), 2, 1),
)


# -- objects in an observation ----------------------------------------------------------------


@dataclass(frozen=True)
class Thing:
    """An object line of an observation: "\\ta sink, which is turned off. In the sink is: ..."."""

    name: str
    start: int
    end: int
    bare: bool
    """The line is the object's name and nothing else ("\\ta lighter")."""


_ARTICLE = re.compile(r"^(\t*)(a|an|the|A|An|The) ([^,.(\n]+?)(?=[,.(\n]|$| with:)", re.M)
_IGNORED = frozenset({"agent", "substance called air"})
"""The agent itself and the air every room has."""


def display(name: str) -> str:
    """How a lesson names an object: "substance called water" -> "water"."""
    return re.sub(r"^(substance|a substance) called ", "", name).strip()


def things(text: str) -> list[Thing]:
    """The objects an observation lists, one per line that starts with an article."""
    out = []
    for m in _ARTICLE.finditer(text):
        name = m.group(3).strip()
        if not name or name in _IGNORED or name.startswith(("room is", "time reads")):
            continue
        line_end = text.find("\n", m.start())
        line_end = len(text) if line_end < 0 else line_end
        rest = text[m.end(3):line_end].strip()
        out.append(Thing(name, m.start(), line_end, bare=rest == ""))
    return out


def _words(s: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", s.lower()) if len(w) > 2} - {
        "the", "and", "you", "now", "move", "moves", "called", "substance", "your",
        "inventory", "containing", "which", "that", "with"}


def _other(rng: random.Random, text: str, avoid: str) -> str | None:
    """An object of `text` that shares no word with `avoid` (a lesson about it does not
    mention what the edit touched)."""
    banned = _words(avoid)
    choices = sorted({display(t.name) for t in things(text)
                      if not (_words(t.name) & banned) and _words(display(t.name))})
    return rng.choice(choices) if choices else None


def _lesson(rng: random.Random, obj: str) -> str:
    return rng.choice(LESSONS).format(obj=obj)


# -- the vocabulary the environment prints, per slot -----------------------------------------


@dataclass
class Vocabulary:
    """Values the environment printed in each slot, over all observations."""

    categorical: dict[str, set[str]] = field(default_factory=dict)
    numeric: dict[str, set[int]] = field(default_factory=dict)
    items: set[str] = field(default_factory=set)
    """List items ("a banana", "a substance called water") of containers and rooms."""
    bare: set[str] = field(default_factory=set)
    """Names of objects printed alone on a line of a room or the inventory."""


_LIST = re.compile(r"(?:\(containing |\bis: )([^()\n]+?)(?:\)|\.(?:\s|$)|$)", re.M)


def _items(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, item) of each simple list item: "a banana" in "(containing a banana, ...)"."""
    for m in _LIST.finditer(text):
        pos = m.start(1)
        for part in m.group(1).split(", "):
            item = part.strip()
            if re.fullmatch(r"(a|an) (substance called )?[a-z]+( [a-z]+)?", item):
                yield pos, pos + len(part), item
            pos += len(part) + 2


def vocabulary(observations: Iterable[Observation]) -> Vocabulary:
    v = Vocabulary()
    for o in observations:
        for slot in CATEGORICAL:
            for m in slot.pattern.finditer(o.text):
                v.categorical.setdefault(slot.name, set()).add(m.group(slot.value_group))
        for num in NUMERIC:
            for m in num.pattern.finditer(o.text):
                v.numeric.setdefault(num.name, set()).add(int(m.group(2)))
        v.items.update(item for _, _, item in _items(o.text))
        if o.kind in ("look", "inventory"):
            v.bare.update(t.name for t in things(o.text) if t.bare)
    return v


# -- edits -------------------------------------------------------------------------------------


def _owner(text: str, pos: int) -> Thing | None:
    for t in things(text):
        if t.start <= pos < t.end:
            return t
    return None


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _twins(kind: str, lesson: str, other: str | None, base: str, present: str, edit: str,
           origin: str) -> list[Pair]:
    out = [Pair(kind, "named", False, lesson, base, present, edit, origin)]
    if other is not None:
        out.append(Pair(kind, "incidental", True, other, base, present, edit, origin))
    return out


_HOLDER = re.compile(r"\b(?:a|an|A|An) ([a-z][a-z0-9 ]*?)(?=,|\.| \()")


def _stated(text: str) -> list[tuple[re.Match[str], Thing, str]]:
    """State words of object lines, each with its line and the object it describes (the last
    object named before it on the line: "a green light bulb, which is off")."""
    out = []
    for m in _STATE.finditer(text):
        thing = _owner(text, m.start())
        if thing is None:
            continue
        named = _HOLDER.findall(text, thing.start, m.start())
        out.append((m, thing, display(named[-1]) if named else display(thing.name)))
    return out


def boolean(o: Observation, rng: random.Random) -> list[Pair]:
    hits = _stated(o.text)
    if not hits:
        return []
    m, thing, obj = rng.choice(hits)
    old = m.group(2)
    new = STATE_OPPOSITES[old]
    present = _splice(o.text, m.start(2), m.end(2), new)
    other = _other(rng, o.text, o.text[thing.start:thing.end])
    return _twins("boolean", _lesson(rng, obj), other and _lesson(rng, other), o.text, present,
                  f"{old} -> {new} ({obj})", o.origin)


def negation(o: Observation, rng: random.Random) -> list[Pair]:
    hits = _stated(o.text)
    if not hits:
        return []
    m, thing, obj = rng.choice(hits)
    present = _splice(o.text, m.start(2), m.start(2), "not ")
    other = _other(rng, o.text, o.text[thing.start:thing.end])
    return _twins("negation", _lesson(rng, obj), other and _lesson(rng, other), o.text, present,
                  f"is {m.group(2)} -> is not {m.group(2)} ({obj})", o.origin)


def categorical(o: Observation, rng: random.Random, vocab: Vocabulary) -> list[Pair]:
    hits = [(slot, m) for slot in CATEGORICAL for m in slot.pattern.finditer(o.text)]
    rng.shuffle(hits)
    for slot, m in hits:
        old = m.group(slot.value_group)
        values = sorted(vocab.categorical.get(slot.name, set()) - {old})
        values = [v for v in values if not re.search(rf"\b{re.escape(v)}\b", o.text)]
        if not values:
            continue
        new = rng.choice(values)
        present = _splice(o.text, m.start(slot.value_group), m.end(slot.value_group), new)
        if slot.owner_group is None:  # the value names a place: the lesson names it
            obj = _other(rng, o.text, old)
            if obj is None:
                continue
            named = IN_PLACE[0].format(place=old, obj=obj)
            other: str | None = IN_PLACE[1].format(obj=obj)
            what = old
        else:
            what = m.group(slot.owner_group)
            named = _lesson(rng, what)
            alt = _other(rng, o.text, what)
            other = alt and _lesson(rng, alt)
        return _twins("categorical", named, other, o.text, present,
                      f"{slot.name}: {old} -> {new} ({what})", o.origin)
    return []


def _round_between(lo: int, hi: int) -> int | None:
    """A number strictly between lo and hi, as round as the gap allows."""
    if hi - lo < 2:
        return None
    mid = (lo + hi) / 2
    for step in (50, 25, 10, 5, 2, 1):
        t = round(mid / step) * step
        if lo < t < hi:
            return int(t)
    return None


def threshold(o: Observation, rng: random.Random, vocab: Vocabulary) -> list[Pair]:
    hits = [(slot, m) for slot in NUMERIC for m in slot.pattern.finditer(o.text)]
    if not hits:
        return []
    slot, m = rng.choice(hits)
    v = int(m.group(2))
    others = sorted(w for w in vocab.numeric.get(slot.name, set()) if abs(w - v) >= 2)
    if not others:
        return []
    w = rng.choice(others)
    present = _splice(o.text, m.start(2), m.end(2), str(w))
    act = rng.choice(ACTS)
    out = []
    cut = _round_between(min(v, w), max(v, w))
    if cut is not None:  # the present crosses the lesson's threshold
        cmp = "more than" if v > cut else "less than"
        out.append(Pair("threshold", "named", False,
                        f"{slot.clause.format(cmp=cmp, n=cut, obj=m.group(1))}, {act}.",
                        o.text, present,
                        f"{slot.name}: {v} -> {w}, threshold {cmp} {cut}", o.origin))
    gap = max(1, round(abs(v - w) * 0.25))
    if rng.random() < 0.5:
        cmp, n = "more than", min(v, w) - gap
    else:
        cmp, n = "less than", max(v, w) + gap
    if slot.name != "temperature":
        n = max(n, 1) if cmp == "more than" else n
        if cmp == "more than" and n >= min(v, w):
            cmp, n = "less than", max(v, w) + gap
    out.append(Pair("threshold", "incidental", True,
                    f"{slot.clause.format(cmp=cmp, n=n, obj=m.group(1))}, {act}.", o.text,
                    present,
                    f"{slot.name}: {v} -> {w}, threshold {cmp} {n}", o.origin))
    return out


def near_equal(o: Observation, rng: random.Random) -> list[Pair]:
    hits = [(slot, m) for slot in NUMERIC for m in slot.pattern.finditer(o.text)]
    if not hits:
        return []
    slot, m = rng.choice(hits)
    v = int(m.group(2))
    step = 1 if abs(v) < 50 else 2
    w = v + rng.choice((-step, step))
    if slot.name != "temperature" and w < 1:
        w = v + step
    present = _splice(o.text, m.start(2), m.end(2), str(w))
    noun = m.group(1) if slot.name == "plane" else slot.noun  # the object the text names
    return [Pair("near_equal", "incidental", True, _lesson(rng, noun), o.text, present,
                 f"{slot.name}: {v} -> {w}", o.origin)]


def entity_swap(o: Observation, rng: random.Random, vocab: Vocabulary) -> list[Pair]:
    """Replace one object in a list (a container's contents, a room's or the inventory's
    bare lines) with another the environment prints elsewhere and this text does not."""
    spots: list[tuple[int, int, str, list[str]]] = []
    for start, end, item in _items(o.text):
        if item.endswith(" nothing"):
            continue
        pool = [x for x in sorted(vocab.items) if x != item
                and display(x.split(" ", 1)[1]) not in o.text]
        spots.append((start, end, item, pool))
    for t in things(o.text):
        if t.bare and o.kind in ("look", "inventory"):
            line = o.text[t.start:t.end]
            old = line.strip()
            pool = [("an " if n[0] in "aeiou" else "a ") + n for n in sorted(vocab.bare)
                    if n != t.name and n not in o.text]
            at = t.start + line.index(old)
            spots.append((at, at + len(old), old, pool))
    spots = [s for s in spots if s[3]]
    if not spots:
        return []
    start, end, old, pool = rng.choice(spots)
    new = rng.choice(pool)
    present = _splice(o.text, start, end, new)
    obj = display(old.split(" ", 1)[1])
    other = _other(rng, present, f"{old} {new}")
    return _twins("entity_swap", _lesson(rng, obj), other and _lesson(rng, other), o.text,
                  present, f"{old} -> {new}", o.origin)


def _event(step: Observation) -> str | None:
    """A step's answer as one event of a history, or None when it is not one short event."""
    text = step.text.strip()
    if "\n" in text or len(text) > 90 or not text.endswith(".") or text.count(".") > 1:
        return None
    if text.startswith(("No known action", "You decide to wait", "Ambiguous", "You focus")):
        return None
    return text[0].lower() + text[1:] if text.startswith(("You ", "The ")) else None


def _history(events: Sequence[str]) -> str:
    first, *rest = events
    joins = ("Then,", "After that,", "Then,")
    return " ".join([f"First, {first}", *(f"{j} {e}" for j, e in zip(joins, rest,
                                                                    strict=False))])


def runs(steps: Sequence[Observation]) -> list[tuple[Observation, Observation, Observation]]:
    """Three events of one episode in the order the environment printed them (the steps
    between that are not one short event, such as `look around`, left out), all different,
    the third sharing no word with the first two (so a lesson about those does not name it)."""
    out = []
    steps = [s for s in steps if _event(s)]
    for a, b, c in zip(steps, steps[1:], steps[2:], strict=False):
        ea, eb, ec = _event(a), _event(b), _event(c)
        if not (ea and eb and ec) or len({ea, eb, ec}) < 3:
            continue
        if _words(ec) & (_words(ea) | _words(eb) | _words(a.action) | _words(b.action)):
            continue
        out.append((a, b, c))
    return out


def order(run: tuple[Observation, Observation, Observation]) -> list[Pair]:
    """The lesson orders the first two actions of a run; swapping those two events is another
    situation, swapping the last two is not one the lesson names (the first still comes
    before the second)."""
    a, b, c = run
    ea, eb, ec = (_event(x) or "" for x in run)
    base = _history((ea, eb, ec))
    lesson = f"{a.action[0].upper()}{a.action[1:]}, then {b.action}."
    return [
        Pair("order", "named", False, lesson, base, _history((eb, ea, ec)),
             f"swapped: {a.action} / {b.action}", a.origin),
        Pair("order", "incidental", True, lesson, base, _history((ea, ec, eb)),
             f"swapped: {b.action} / {c.action} (not named)", a.origin),
    ]


def identical(o: Observation, rng: random.Random) -> list[Pair]:
    objs = sorted({display(t.name) for t in things(o.text) if _words(display(t.name))})
    if not objs:
        return []
    obj = rng.choice(objs)
    return [Pair("identical", "incidental", True, _lesson(rng, obj), o.text, o.text,
                 "none", o.origin)]


# -- the set -----------------------------------------------------------------------------------


def build(observations: Sequence[Observation], per_kind: int, seed: int) -> list[Pair]:
    """Up to `per_kind` edits of each kind (each edit gives its named and incidental pairs),
    drawn from `observations` with `seed`; the same inputs give the same pairs."""
    vocab = vocabulary(observations)
    singles = [o for o in observations if o.kind != "step"]
    by_episode: dict[str, list[Observation]] = {}
    for o in observations:
        if o.kind == "step":
            by_episode.setdefault(o.origin.rsplit("#", 1)[0], []).append(o)
    pairs: list[Pair] = []
    for kind in KINDS:
        rng = random.Random(f"{seed}:{kind}")
        made: list[Pair] = []
        seen: set[tuple[str, str]] = set()
        if kind == "order":
            found = [r for ep in sorted(by_episode) for r in runs(by_episode[ep])]
            rng.shuffle(found)
            for run in found:
                if len(made) >= 2 * per_kind:
                    break
                got = order(run)
                if (got[0].base, got[0].present) not in seen:
                    seen.add((got[0].base, got[0].present))
                    made.extend(got)
        else:
            pool = list(singles)
            rng.shuffle(pool)
            edits = 0
            for o in pool:
                if edits >= per_kind:
                    break
                got = _edit(kind, o, rng, vocab)
                if not got or (got[0].base, got[0].present) in seen:
                    continue
                seen.add((got[0].base, got[0].present))
                made.extend(got)
                edits += 1
        pairs.extend(made)
    return pairs


def _edit(kind: str, o: Observation, rng: random.Random, vocab: Vocabulary) -> list[Pair]:
    if kind == "boolean":
        return boolean(o, rng)
    if kind == "negation":
        return negation(o, rng)
    if kind == "categorical":
        return categorical(o, rng, vocab)
    if kind == "threshold":
        return threshold(o, rng, vocab)
    if kind == "near_equal":
        return near_equal(o, rng)
    if kind == "entity_swap":
        return entity_swap(o, rng, vocab)
    if kind == "identical":
        return identical(o, rng)
    raise ValueError(kind)


__all__ = [
    "CATEGORICAL",
    "KINDS",
    "NUMERIC",
    "Observation",
    "Pair",
    "Vocabulary",
    "build",
    "display",
    "runs",
    "things",
    "vocabulary",
]
