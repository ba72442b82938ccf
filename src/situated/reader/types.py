"""What the reader reads out of a text: typed facts, each with the span it came from.

The types are msgspec structs so that a memory's reading is stored with its analysis (as
MessagePack, positional) and decoded straight back.
"""

from __future__ import annotations

import msgspec

STATE = "state"
"""A thing's state: "the washer is running" -> washer / state / (run,)."""
HAS = "has"
"""Presence or possession: "no backup was running", "the shopper has no membership"."""
WHERE = "where"
"""Location: "the key is in the box" -> key / where / (box,)."""
CODE = "code"
"""An identifier or code: "error E24", "version 2.3.1", "host web-03"."""
AMOUNT = "amount"
"""A quantity with no verb or adjective of its own: "a 40 dollar limit"."""
GOAL = "goal"
"""What a situation is for: "Your task is to boil water" -> task / goal / (boil, water)."""
IS = "is"
"""What a thing is (a noun after a copula and an article): "Priya is the lead"."""
HOLDER = "held by"
"""Who holds a role one holder has at a time: "Priya is the lead" -> lead / held by / (priya,)."""
NAME = "name"
"""What a thing is called: "a substance called soap", "this room is called the kitchen"."""
ASPECT = "of:"
"""Prefix of an aspect a modifier gives one value of ("a plane with a cloth surface":
plane / of:surface / (cloth,); "a tree in the seedling stage": tree / of:stage)."""
ORDER = "order"
"""Order in time: subject is the earlier event, words the later one."""
EXCLUSIVE = frozenset({WHERE, CODE, NAME, GOAL, HOLDER})
"""Attributes a thing has one value of at a time: another value now is a different situation."""


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_TIME_UNITS = ((31557600.0, "y"), (86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"),
               (0.001, "ms"))
_DATA_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))


def show_amount(number: float, dimension: str) -> str:
    """An amount as a person writes it: 720 s of time is "12 min", 45 money:usd "45 USD"."""
    if dimension == "%":
        return f"{number:g}%"
    for dim, units in (("time", _TIME_UNITS), ("data", _DATA_UNITS)):
        if dimension == dim:
            fits = [(size, name) for size, name in units if abs(number) >= size] or [units[-1]]
            whole = [(size, name) for size, name in fits
                     if abs(number / size - round(number / size)) < 1e-9]
            size, name = (whole or fits)[0]  # the largest unit that gives a whole number
            return f"{number / size:.4g} {name}"
    if dimension == "date" and 100 < number < 1300:  # month * 100 + day
        return f"{_MONTHS[int(number) // 100 - 1]} {int(number) % 100}"
    if dimension == "clock":
        return f"{int(number):02d}:{round(number % 1 * 60):02d}"
    if dimension.startswith("money:"):
        return f"{number:g} {dimension[6:].upper()}"
    if dimension.startswith(("count:", "temperature:")):
        return f"{number:g} {dimension.split(':', 1)[1]}"
    return f"{number:g}"


class Fact(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    """One thing a text states (or, in a lesson's conditional clause, requires)."""

    subject: str
    """The thing the fact is about: the head noun's lemma ("lock" for "the table lock")."""
    attribute: str
    """`STATE`, `HAS`, `WHERE`, `CODE`, `AMOUNT`, `ORDER`, a verb's lemma ("lag", "cost",
    "hold") or a measure ("full"): what about the subject the fact says."""
    words: tuple[str, ...] = ()
    """The value as words (lemmas): the state ("run"), the related thing ("box"), the code."""
    number: float | None = None
    """A quantity's value in its dimension's base unit (seconds, bytes, percent, ...)."""
    dimension: str = ""
    """The quantity's dimension: "%", "time", "data", "money:usd", "count:item", "number"."""
    op: str = "=="
    """How the value is stated: "==" as a value; ">", ">=", "<", "<=" as a threshold."""
    negated: bool = False
    """The text denies the fact ("no backup was running", "will not start")."""
    qualifiers: tuple[str, ...] = ()
    """Modifiers of the subject ("table" in "table lock"), lemmas."""
    start: int = 0
    end: int = 0
    """Where the fact was read: `text[start:end]`."""
    weak: bool = False
    """Presupposed rather than stated: an attributive adjective ("the dirty plate")."""

    @property
    def quantity(self) -> bool:
        return self.number is not None

    def label(self) -> str:
        """The fact's name as a person reads it: "washer state", "disk full", "lock hold"."""
        who = " ".join((*self.qualifiers[-1:], self.subject))
        if self.attribute in (STATE, AMOUNT):
            return who
        return f"{who} {self.attribute.removeprefix(ASPECT)}"

    def value_text(self) -> str:
        """The value as written in a verdict: "running", "not running", "97 %", "> 90 %"."""
        if self.number is not None:
            shown = show_amount(self.number, self.dimension)
            core = shown if self.op == "==" else f"{self.op} {shown}"
        else:
            core = " ".join(self.words) or "present"
        return f"not {core}" if self.negated else core


class Reading(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    """A text read once: what it states, what its conditional clauses require, which things
    it talks about and the actions it orders."""

    facts: tuple[Fact, ...] = ()
    """What the text states (its main clauses)."""
    conditions: tuple[Fact, ...] = ()
    """What its conditional clauses (if, when, while, unless, only when, before, after ...)
    require, polarity folded into `negated` ("unless the disk is full" -> disk full, negated)."""
    lemmas: tuple[str, ...] = ()
    """The content words' lemmas, sorted (what "the lesson talks about X" is checked on)."""
    actions: tuple[str, ...] = ()
    """The actions it states, in the order it states them to happen ("patch b", "patch a")."""
    question: str = ""
    """"fact" for a question of fact ("When does the store close?"), "choice" for a question
    of what to do or pick ("Which seat should I book?"), "" for a statement."""
    events: tuple[str, ...] = ()
    """What happened, in the order told, in a text that tells a sequence ("First, the door is
    open. Then, you move to the kitchen."): its actions ("move kitchen") and the states it
    reports between them, as "subject=state" ("door=open"); () for other texts."""

    @property
    def empty(self) -> bool:
        return not self.facts and not self.conditions


__all__ = ["AMOUNT", "ASPECT", "CODE", "EXCLUSIVE", "GOAL", "HAS", "HOLDER", "IS", "NAME",
           "ORDER", "STATE", "WHERE", "Fact", "Reading"]
