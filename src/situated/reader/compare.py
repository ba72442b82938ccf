"""Then vs now, over readings: which facts a lesson depends on, and how each compares now.

`judge` takes three readings: the lesson's own text (its conditional clauses are requirements,
its statements presuppositions), the source state it was learned in (then) and the present
(now). A fact the lesson depends on is one its clauses state, or one of the source state whose
subject the lesson talks about; the others are context. Each dependency is matched to the
present by its subject (one lemma, or a WordNet synonym) and attribute, and compared:

- states: the same word or a synonym (`lexicon.alike`) is the same state; an antonym or the
  same word negated is the opposite state; any other word is a difference of unknown weight;
- places, codes and holders: one value at a time, so another value now is another situation;
- quantities: by the threshold the lesson states (a number between then and now, or the
  clause's own bound: "over 90% full"); with no threshold, by magnitude: within 1.5x is the
  same situation, 10x apart or more is another one, in between a difference of unknown
  weight;
- two quantities of one unit whose order reversed (price under budget then, over it now).

`judge` never decides a verdict; it returns the checks, and the reconstructor decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from situated.reader import lexicon as lx
from situated.reader.types import (
    ASPECT,
    CODE,
    EXCLUSIVE,
    GOAL,
    HAS,
    HOLDER,
    NAME,
    STATE,
    WHERE,
    Fact,
    Reading,
)

SAME, OPPOSED, OTHER, MISSING = "same", "opposed", "other", "missing"
NEAR_RATIO = 1.5
"""Two values of a quantity within this ratio are the same situation when no threshold is
stated (96% and 97% full)."""
FAR_RATIO = 10.0
"""Two values an order of magnitude apart or more are different situations when no threshold
is stated; between `NEAR_RATIO` and this, a difference of unknown weight."""
POINTS = {"clock": 0.25, "date": 0.0}
"""Dimensions whose values are points (a time of day in hours, a date as month * 100 + day),
not sizes: with no threshold stated, two of them are the same within this distance, else a
difference of unknown weight (2pm and 3pm are not "within 1.5x")."""


class Check:
    """One fact compared then vs now (its words are written only when asked for)."""

    __slots__ = ("_label", "fact", "found", "relation", "role")

    def __init__(self, fact: Fact, found: Fact | None, relation: str, role: str,
                 label: str | None = None) -> None:
        self.fact = fact
        """The fact then (or the lesson's requirement)."""
        self.found = found
        """The fact now; None when the present does not state it."""
        self.relation = relation
        """`SAME`, `OPPOSED` (another situation), `OTHER` (differs, weight unknown),
        `MISSING`."""
        self.role = role
        """`condition` (the lesson's own clause), `lesson` (what the lesson presupposes),
        `depends` (a source fact the lesson depends on) or `context` (any other)."""
        self._label = label

    @property
    def label(self) -> str:
        """What was checked: "washer", "disk full"."""
        return self._label if self._label is not None else self.fact.label()

    @property
    def then(self) -> str:
        return self.fact.value_text()

    @property
    def now(self) -> str | None:
        return None if self.found is None else self.found.value_text()

    def line(self) -> str:
        if self.found is None:
            return f"{self.label}: {self.then} (not stated now)"
        if self.relation == SAME:
            return f"{self.label}: {self.now}"
        return f"{self.label}: {self.then} then, {self.now} now"

    def __repr__(self) -> str:
        return f"Check({self.line()!r}, {self.relation}, {self.role})"


@dataclass(frozen=True, slots=True)
class Judgement:
    """Every check of one lesson against the present."""

    checks: tuple[Check, ...]

    def of(self, *roles: str, relation: str | None = None) -> tuple[Check, ...]:
        return tuple(c for c in self.checks
                     if c.role in roles and (relation is None or c.relation == relation))


# -- matching facts ------------------------------------------------------------------------


def _same_subject(a: Fact, b: Fact) -> bool:
    if lx.same_thing(a.subject, b.subject):
        return True
    # "membership card" / "membership", "the dishwasher" / "dishwasher status"
    return a.subject in b.qualifiers or b.subject in a.qualifiers


def _same_key(a: Fact, b: Fact) -> bool:
    if (a.number is None) != (b.number is None):
        return False
    if a.number is not None:
        return a.dimension == b.dimension and _same_subject(a, b)
    if a.attribute != b.attribute and not ({a.attribute, b.attribute} <= {STATE, HAS}):
        return False
    return _same_subject(a, b)


class _Index:
    """A present reading's facts by subject and by qualifier, its words, things and goals:
    built once per present (a recall judges every candidate against the same present)."""

    __slots__ = ("_about", "by_qualifier", "by_subject", "goals", "lemmas", "things")

    def __init__(self, reading: Reading) -> None:
        self.by_subject: dict[str, list[Fact]] = {}
        self.by_qualifier: dict[str, list[Fact]] = {}
        for f in reading.facts:
            self.by_subject.setdefault(f.subject, []).append(f)
            for q in f.qualifiers:
                self.by_qualifier.setdefault(q, []).append(f)
        self.lemmas = frozenset(reading.lemmas)
        self.things = _things(reading)
        self.goals = _goals(reading)
        self._about: dict[tuple[str, tuple[str, ...]], list[Fact]] = {}

    def about(self, f: Fact) -> list[Fact]:
        """Present facts that may be about `f`'s subject (same thing, synonym, qualifier);
        remembered per subject for the recall (every candidate asks about the same things)."""
        key = (f.subject, f.qualifiers)
        hit = self._about.get(key)
        if hit is None:
            hit = self._about[key] = self._find(f)
        return hit

    def _find(self, f: Fact) -> list[Fact]:
        out: list[Fact] = []
        for subject, facts in self.by_subject.items():
            if subject in f.qualifiers or lx.same_thing(f.subject, subject):
                out.extend(facts)
        out.extend(self.by_qualifier.get(f.subject, ()))
        return out


_INDEXES: dict[int, tuple[Reading, _Index]] = {}


def _index(reading: Reading) -> _Index:
    """The index of one present reading (the same present is judged against every candidate
    of a recall)."""
    hit = _INDEXES.get(id(reading))
    if hit is not None and hit[0] is reading:
        return hit[1]
    if len(_INDEXES) > 64:
        _INDEXES.clear()
    index = _Index(reading)
    _INDEXES[id(reading)] = (reading, index)
    return index


def _best(f: Fact, candidates: Iterable[Fact]) -> Fact | None:
    """The present fact with `f`'s key, preferring one whose qualifiers overlap (the primary
    database, not the replica)."""
    found = [c for c in candidates if _same_key(f, c)]
    if not found:
        return None
    if len(found) > 1:
        found.sort(key=lambda c: (-len(set(c.qualifiers) & set(f.qualifiers)),
                                  c.attribute != f.attribute, c.weak))
        if f.qualifiers and not set(found[0].qualifiers) & set(f.qualifiers) and len(
            {c.qualifiers for c in found}
        ) > 1:
            return None  # several doors now, none the one to the hallway
    return found[0]


# -- comparing values ----------------------------------------------------------------------


def relate(a: Fact, b: Fact) -> str:
    """How two facts with the same key compare: `SAME`, `OPPOSED` or `OTHER`."""
    if a.number is not None and b.number is not None:
        return _quantity(a, b, ())
    if HAS in (a.attribute, b.attribute):
        if a.attribute == b.attribute or a.negated or b.negated:
            return SAME if a.negated == b.negated else OPPOSED
        return OTHER
    if a.attribute in EXCLUSIVE or a.attribute.endswith(" by") or a.attribute.startswith(
        ASPECT
    ):
        whole = a.attribute in (NAME, GOAL)  # every word of a name or a goal counts
        same = bool(a.words) and bool(b.words) and (
            a.words == b.words or (not whole and lx.same_thing(a.words[0], b.words[0])) or (
                whole and len(a.words) == len(b.words)
                and all(x == y or lx.same_thing(x, y)
                        for x, y in zip(a.words, b.words, strict=True))))
        if a.negated != b.negated:
            return OPPOSED if same else OTHER
        return SAME if same else OPPOSED
    if a.attribute != STATE:
        same = bool(a.words) and bool(b.words) and lx.same_thing(a.words[0], b.words[0])
        if a.negated != b.negated:
            return OPPOSED if same else OTHER
        return SAME if same else OTHER
    pairs = [(x, y) for x in a.words for y in b.words if lx.alike(x, y)]
    shared = bool(pairs)
    # what is left once the words both say are set aside ("in stock" / "out of stock")
    rest_a = [x for x in a.words if not any(x == p for p, _ in pairs)] or list(a.words)
    rest_b = [y for y in b.words if not any(y == q for _, q in pairs)] or list(b.words)
    opposed = any(lx.opposite(x, y) for x in rest_a for y in rest_b)
    if shared and opposed and a.negated == b.negated:
        return OPPOSED
    if a.negated == b.negated:
        if opposed and not shared:
            return OPPOSED
        return SAME if shared and not opposed else OTHER
    if shared and not opposed:
        return OPPOSED  # "running" / "not running"
    return SAME if opposed and not shared else OTHER  # "not broken" / "working"


def _ratio(a: float, b: float) -> float:
    if a * b < 0:
        return float("inf")
    lo, hi = sorted((abs(a), abs(b)))
    return hi / lo if lo > 0 else (float("inf") if hi > 0 else 1.0)


def _quantity(then: Fact, now: Fact, thresholds: Sequence[float]) -> str:
    """Two values of one quantity: by a threshold between them, else by magnitude."""
    a, b = then.number, now.number
    assert a is not None and b is not None
    if then.op != "==":
        return SAME if _holds(b, then.op, a) else OPPOSED
    if thresholds:
        lo, hi = sorted((a, b))
        return OPPOSED if any(lo < t <= hi for t in thresholds) else SAME
    if then.dimension in POINTS:  # a time of day or a date: how far, not how many times
        return SAME if abs(a - b) <= POINTS[then.dimension] else OTHER
    r = _ratio(a, b)
    if r <= NEAR_RATIO:
        return SAME
    return OPPOSED if r >= FAR_RATIO else OTHER


def _holds(value: float, op: str, bound: float) -> bool:
    return {">": value > bound, ">=": value >= bound, "<": value < bound,
            "<=": value <= bound}.get(op, value == bound)


# -- the judgement -------------------------------------------------------------------------


class _Lesson:
    """What every check of one judgement asks of the lesson: its words, and the numbers it
    states by unit (worked out once per judgement, not once per fact)."""

    __slots__ = ("bounds", "reading", "words")

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.words = frozenset(reading.lemmas)
        self.bounds: dict[str, tuple[float, ...]] = {}
        for c in (*reading.conditions, *reading.facts):
            if c.number is not None:
                self.bounds[c.dimension] = (*self.bounds.get(c.dimension, ()), c.number)


def _mentions(lesson: _Lesson, f: Fact) -> bool:
    """Does the lesson depend on `f`? It talks about the fact's subject; for a place, a code
    or a holder, about the value itself (a lesson about the kit does not depend on which room
    the kit is in, one about error E24 does depend on the code)."""
    words = lesson.words
    if f.attribute == GOAL:
        return any(part in words for w in f.words[1:] for part in w.lower().split())
    if f.attribute in EXCLUSIVE or f.attribute.endswith(" by"):
        return any(part in words for w in f.words[:2] for part in w.lower().split())
    if f.subject in words or any(q in words for q in f.qualifiers):
        return True
    if " " in f.subject and all(part in words for part in f.subject.split()):
        return True  # "the inclined plane": a compound noun, named word by word
    return f.attribute not in (STATE, HAS) and f.attribute in words


def checkable(f: Fact) -> bool:
    """Whether a requirement can be looked for in a present state: a state, presence, place,
    code or quantity of a named thing (not a verb's relation such as "price fits budget")."""
    if f.subject in lx.PRONOUNS or not f.subject[:1].isalnum():
        return False
    if f.number is not None:
        return True
    if f.attribute in (HAS, WHERE, CODE, HOLDER):
        return True
    return f.attribute == STATE and bool(f.words) and f.subject not in f.words




def judge(lesson: Reading, then: Reading | None, now: Reading) -> Judgement:
    """Check a lesson (its own reading and the reading of the state it was learned in)
    against the present's reading."""
    checks: list[Check] = []
    index = _index(now)
    for cond in lesson.conditions:
        if checkable(cond):
            checks.append(_check_requirement(cond, index, "condition"))
    for stated in lesson.facts:
        if stated.weak or not checkable(stated) or stated.attribute in (HAS, WHERE):
            continue  # "put the mug in the microwave" is an instruction, not a situation
        found = _best(stated, index.about(stated))
        if found is not None:
            checks.append(_compare(stated, found, (), "lesson"))
    if then is not None:
        told = _Lesson(lesson)
        compared = _compare_states(told, then, now.facts, index)
        checks.extend(compared or _substitution(told, then, now))
        checks.extend(_order_of_events(told, then, now))
        checks.extend(_named_gone(told, then, index))
        checks.extend(_other_goals(then, index))
    return Judgement(tuple(checks))


GOAL_OVERLAP = 1 / 3
"""Share of the things a source situation asks to act on that the present must ask for too,
when both ask for several."""


def _goals(reading: Reading) -> set[str]:
    return {w for a in reading.actions for w in a.split()[1:]
            if w not in _VAGUE and w not in _DIRECTIONS}


def _other_goals(then: Reading, index: _Index) -> list[Check]:
    """Two situations that each ask for several things done (a quest, a task description),
    hardly the same things: the lesson was learned for another task."""
    b = index.goals
    if len(b) < 3:
        return []
    a = _goals(then)
    if len(a) < 3:
        return []
    shared = {x for x in a if x in b or any(lx.same_thing(x, y) for y in b)}
    if len(shared) >= GOAL_OVERLAP * len(a):
        return []
    return [Check(_words("task", *sorted(a)[:4]), _words("task", *sorted(b)[:4]), OPPOSED,
                  "depends", "what the situation asks for")]


_VAGUE = frozenset("thing things rest step steps here there anything everything way".split())
_DIRECTIONS = frozenset(
    "north south east west northeast northwest southeast southwest up down left right".split())
"""Where to go, not things: every world has them."""


def _things(reading: Reading) -> set[str]:
    """The things a text names: what its facts are about (and their qualifiers) and the
    objects of the actions it tells."""
    out = {w for f in reading.facts for w in (f.subject, *f.qualifiers)}
    out.update(w for a in reading.actions for w in a.split()[1:])
    return out - _DIRECTIONS


def _named_gone(lesson: _Lesson, then: Reading, index: _Index) -> list[Check]:
    """Things the lesson names that the source situation had and the present does not name.

    When none of the lesson's things from its source situation is here, or one was swapped
    for another in an otherwise same situation, it is another situation (a plan for the
    keycard and the chest of another world); a thing missing among others present is
    unverified."""
    named = lesson.words
    things_then, things_now = _things(then), index.things
    doing = {a.split()[0] for a in lesson.reading.actions}  # "order online": what it does
    mine = sorted(w for w in named & things_then
                  if w not in _VAGUE and w not in doing and len(w) > 1)
    a, b = set(then.lemmas), index.lemmas
    gone = [w for w in mine if w not in things_now and w not in b
            and not any(lx.same_thing(w, x) for x in things_now)]
    # a thing the lesson names with its modifiers ("the blue wire"): gone when no thing now
    # has them all, though others of its kind are here (a black wire)
    for f in then.facts:
        if f.qualifiers and f.subject in named and all(q in named for q in f.qualifiers):
            whole = " ".join((*f.qualifiers, f.subject))
            if whole not in mine and not any(
                    set(f.qualifiers) <= set(p.qualifiers) for p in index.about(f)):
                mine.append(whole)
                gone.append(whole)
    if not gone:
        return []
    swapped = len(a & b) >= SUBSTITUTION_OVERLAP * max(len(a), len(b)) and bool(
        things_now - things_then)
    # most of what the lesson works with is not here (a plan for the kettle, the toolbox and
    # the bookshelf of another world, where only a nest is here too)
    elsewhere = len(gone) == len(mine) or (len(gone) >= 2 and len(gone) >= 0.5 * len(mine))
    relation = OPPOSED if swapped or elsewhere else MISSING
    return [Check(_words("there", w), _words("there", "not mentioned"), relation, "depends", w)
            for w in gone[:3]]


def _event_words(event: str) -> set[str]:
    return {f for w in event.split() for f in lx.forms(w)}


def _things_of_event(event: str) -> set[str]:
    """The forms of the words naming an event's things: an action's object ("move kitchen":
    kitchen), a reported state's subject ("door=open": door)."""
    if "=" in event:
        return _event_words(event.split("=", 1)[0])
    return _event_words(event) - {*lx.forms(event.split()[0])}


def _shown(event: str) -> str:
    return event.replace("=", " ")


def _order_of_events(lesson: _Lesson, then: Reading, now: Reading) -> list[Check]:
    """Two events both situations tell, in the other order now ("moved to the kitchen, then
    picked up the pot" / the reverse; "First, the door is open. Then, you move to the
    kitchen." / the reverse). The lesson depends on the order when it names both events'
    things."""
    a_seq = then.events if then.events and now.events else then.actions
    b_seq = now.events if then.events and now.events else now.actions
    if len(a_seq) < 2 or len(b_seq) < 2:
        return []
    where = {e: i for i, e in reversed(list(enumerate(b_seq)))}
    named = lesson.words
    out = []
    seq = [e for e in a_seq if e in where]
    for i, a in enumerate(seq):
        for b in seq[i + 1:]:
            if a != b and where[a] > where[b]:
                depends = all(_things_of_event(e) & named for e in (a, b))
                out.append(Check(_words("order", f"{_shown(a)} before {_shown(b)}"),
                                 _words("order", f"{_shown(b)} before {_shown(a)}"), OPPOSED,
                                 "depends" if depends else "context", "order of events"))
    return out


FOCUSED_FACTS = 4
"""A source situation told in at most this many facts is focused: each of them is part of
the situation the lesson was learned in."""

SUBSTITUTION_OVERLAP = 0.6
"""Share of content words two situations must have in common for the words that differ to be
read as one value put in place of another ("deploying to production" / "... to staging")."""


def _substitution(lesson: _Lesson, then: Reading, now: Reading) -> list[Check]:
    """Two situations the reader found no facts to compare in, that say the same thing but
    for a word or two: a lesson that names the word that changed depends on it."""
    a, b = set(then.lemmas), set(now.lemmas)
    if not a or not b:
        return []
    gone, new = a - b, b - a
    if not gone or not new or len(a & b) < SUBSTITUTION_OVERLAP * max(len(a), len(b)):
        return []
    if any(lx.alike(x, y) or lx.same_thing(x, y) for x in gone for y in new):
        return []  # a synonym, not another value
    named = sorted(w for w in gone if w in lesson.words)
    then_word, now_word = max(sorted(gone), key=len), max(sorted(new), key=len)
    # one word for another in an otherwise identical situation (a minimal pair) is what
    # tells the two situations apart, whether or not the lesson names it
    minimal = len({lx.lemma(w) for w in gone}) == 1 and len({lx.lemma(w) for w in new}) == 1
    if not named and not minimal:
        return [Check(_words("wording", *sorted(gone)), _words("wording", *sorted(new)),
                      OTHER, "context")]
    return [Check(_words("situation", then_word), _words("situation", now_word), OPPOSED,
                  "depends")]


def _check_requirement(cond: Fact, index: _Index, role: str) -> Check:
    related = index.about(cond)
    found = _best(cond, related)
    if found is None:
        return _about_subject(cond, related, role)
    if cond.number is not None and found.number is not None and cond.op != "==":
        ok = _holds(found.number, cond.op, cond.number)
        return Check(cond, found, SAME if ok else OPPOSED, role)
    return Check(cond, found, relate(cond, found), role)


def _about_subject(cond: Fact, related: Sequence[Fact], role: str) -> Check:
    """A requirement with no fact of its key now: the present may still state its subject in
    another form ("the replica lags" against "the replica lags 280 seconds": the verb with an
    amount asserts it, a zero amount denies it); otherwise the requirement is missing."""
    if not related:
        return Check(cond, None, MISSING, role)
    if cond.attribute == STATE and cond.number is None:
        for p in related:
            if p.number is not None and any(lx.alike(w, p.attribute) for w in cond.words):
                asserted = (p.number != 0) != cond.negated
                return Check(cond, p, SAME if asserted else OPPOSED, role,
                             f"{cond.label()} {' '.join(cond.words)}")
    return Check(cond, related[0], OTHER, role)


def _compare(then: Fact, now: Fact, thresholds: Sequence[float], role: str) -> Check:
    if then.number is not None and now.number is not None:
        rel = _quantity(then, now, thresholds)
    else:
        rel = relate(then, now)
    return Check(then, now, rel, role)


def _compare_states(lesson: _Lesson, then: Reading, present: Sequence[Fact],
                    index: _Index) -> list[Check]:
    checks: list[Check] = []
    pairs: list[tuple[Fact, Fact]] = []
    unmatched: list[Fact] = []
    taken: set[int] = set()
    told = 0
    for f in then.facts:
        if f.weak:
            continue
        told += 1
        related = index.about(f)
        if not related:
            unmatched.append(f)
            continue
        found = _best(f, (p for p in related if id(p) not in taken) if taken else related)
        if found is None:
            unmatched.append(f)
            continue
        taken.add(id(found))
        pairs.append((f, found))
    # quantities described differently ("the budget is 40 dollars" / "a 40 dollar limit"):
    # paired in order when both texts state as many of one unit
    dims = sorted({f.dimension for f in unmatched if f.number is not None}) if unmatched else []
    left = [p for p in present if p.number is not None and id(p) not in taken] if dims else []
    for dim in dims:
        mine = [f for f in unmatched if f.number is not None and f.dimension == dim]
        theirs = [p for p in left if p.dimension == dim]
        if mine and len(mine) == len(theirs):
            pairs.extend(zip(mine, theirs, strict=True))
            unmatched = [f for f in unmatched if f not in mine]
    # where a situation states two or more quantities of one unit (a price and a budget),
    # what matters is how they compare, not their size: sizes are context there
    focused = told <= FOCUSED_FACTS
    counts: dict[str, int] = {}
    for f, _ in pairs:
        if f.number is not None:
            counts[f.dimension] = counts.get(f.dimension, 0) + 1
    for f, found in pairs:
        bounds = lesson.bounds.get(f.dimension, ()) if f.number is not None else ()
        check = _compare(f, found, bounds, "context")
        if f.number is not None:
            # a quantity matters when the lesson talks about it (unless it is one of several
            # of one unit, which are compared by their order), or when a number the lesson
            # states lies between then and now
            mattering = bool(bounds) or (
                _mentions(lesson, f) and counts.get(f.dimension, 0) <= 1)
        else:
            # a state that turned into its opposite ("works" / "will not start") in a
            # situation told in a few facts is another situation whether or not the lesson
            # names the thing; in a scene of many things, only what the lesson names counts
            # (an unrelated door opening does not change a lesson about the freezer); a
            # different place, code or holder matters when the lesson names the value
            mattering = _mentions(lesson, f) or (
                check.relation == OPPOSED and f.attribute in (STATE, HAS) and focused)
        check.role = "depends" if mattering else "context"
        checks.append(check)
    checks.extend(_order_flips(pairs))
    for f in unmatched:
        if _mentions(lesson, f):
            checks.append(Check(f, None, MISSING, "depends"))
    return checks


def _order_flips(pairs: Sequence[tuple[Fact, Fact]]) -> list[Check]:
    """Two quantities of one unit whose order reversed between then and now."""
    out = []
    quantities = [(a, b) for a, b in pairs if a.number is not None and b.number is not None]
    for i, (a1, b1) in enumerate(quantities):
        for a2, b2 in quantities[i + 1:]:
            if a1.dimension != a2.dimension or a1.op != "==" or a2.op != "==":
                continue
            before = _sign(a1.number - a2.number)  # type: ignore[operator]
            after = _sign(b1.number - b2.number)  # type: ignore[operator]
            if before and after and before != after:
                rel = "<" if before < 0 else ">"
                out.append(Check(_words("order", "then"), _words("order", "not now"), OPPOSED,
                                 "depends", f"{a1.label()} {rel} {a2.label()}"))
    return out


def _words(subject: str, *words: str) -> Fact:
    """A fact that is only words (what a substitution or an order flip shows)."""
    return Fact(subject, "state", tuple(words))


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


__all__ = ["MISSING", "OPPOSED", "OTHER", "SAME", "Check", "Judgement", "checkable", "judge",
           "relate"]
