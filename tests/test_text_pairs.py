"""The text applicability set's pair builder (`benchmarks/text_pairs.py`), on a few strings
ScienceWorld prints: each edit is minimal, uses the environment's own words, and is labelled
by whether the lesson names what the edit touched. Hermetic: no JVM, no store."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import text_pairs as tp

KITCHEN = (
    "This room is called the kitchen. In it, you see: \n\tthe agent\n\ta substance called air\n"
    "\ta chair. On the chair is: nothing.\n\ta counter. On the counter is: a bowl (containing a "
    "red apple, a banana, an orange, a potato), a drawer.\n\ta cupboard. The cupboard door is "
    "closed. \n\ta freezer. The freezer door is closed. \n\ta lighter\n\ta oven, which is turned "
    "off. The oven door is closed. \n\ta painting\n\ta sink, which is turned off. In the sink "
    "is: nothing.\n\ta stopwatch, which is deactivated. \n\ta table. On the table is: a glass "
    "cup (containing nothing).\n\ta thermometer, currently reading a temperature of 10 degrees "
    "celsius\nYou also see:\n\tA door to the bathroom (that is closed)\n\tA door to the hallway "
    "(that is open)")
WORKSHOP = (
    "This room is called the workshop. In it, you see: \n\tthe agent\n\ta substance called air"
    "\n\tan inclined plane with a cloth surface\n\ta stopwatch, which is deactivated. \n\ta "
    "table. On the table is: a battery, a black wire, a green light bulb, which is off, a "
    "switch, which is off.\nYou also see:\n\tA door to the hallway (that is open)")
GREENHOUSE = (
    "This room is called the greenhouse. In it, you see: \n\tthe agent\n\ta bee hive. The bee "
    "hive door is closed. \n\ta flower pot 1 (containing a apple tree in the seedling stage, "
    "soil)\n\ta jug (containing nothing)\n\ta shovel\nYou also see:\n\tA door to the hallway "
    "(that is open)")
READING = "the thermometer measures a temperature of 38 degrees celsius"
PLANE = "an inclined plane B, with: a wood block approximately 47% down the plane"
STEPS = ("The door is now open.", "You move to the kitchen.",
         "You move the thermometer to the inventory.")
ACTIONS = ("open door to kitchen", "go to kitchen", "pick up thermometer")


def _obs(text: str, kind: str = "look", origin: str = "t/v0#0") -> tp.Observation:
    return tp.Observation(text, kind, origin)


OBS = [_obs(KITCHEN), _obs(WORKSHOP), _obs(GREENHOUSE),
       _obs("a flower pot 2 (containing a pea plant in the adult stage, soil)", "describe"),
       _obs("This room is called the hallway. In it, you see: \n\tthe agent\n\ta picture"),
       _obs(READING, "step"), _obs("the thermometer measures a temperature of 68 degrees celsius",
                                   "step"),
       _obs(PLANE, "describe"),
       _obs("an inclined plane B, with: a wood block approximately 9% down the plane",
            "describe")]


def _one_edit(old: str, new: str) -> bool:
    """`new` is `old` with one contiguous span replaced."""
    i = 0
    while i < min(len(old), len(new)) and old[i] == new[i]:
        i += 1
    j = 0
    while j < min(len(old), len(new)) - i and old[-1 - j] == new[-1 - j]:
        j += 1
    return old[:i] + old[len(old) - j:] == new[:i] + new[len(new) - j:]


def test_objects_are_read_from_the_lines_the_environment_prints() -> None:
    names = [t.name for t in tp.things(KITCHEN)]
    assert "sink" in names and "oven" in names and "door to the bathroom" in names
    assert "agent" not in names
    assert tp.display("substance called air") == "air"
    bare = {t.name for t in tp.things(KITCHEN) if t.bare}
    assert bare == {"lighter", "painting"}  # the air every room has is left out


def test_boolean_flips_one_state_word_and_names_the_object_it_describes() -> None:
    for seed in range(10):
        named, incidental = tp.boolean(_obs(WORKSHOP), random.Random(seed))
        assert not named.applicable and incidental.applicable
        assert named.base == WORKSHOP and named.present == incidental.present
        assert _one_edit(named.base, named.present)
        old, new = named.edit.split(" (")[0].split(" -> ")
        assert tp.STATE_OPPOSITES[old] == new
        obj = named.edit.split(" (")[1].rstrip(")")
        assert obj in named.lesson and obj not in incidental.lesson
        if "off" in old or old == "on":
            # the state of a light bulb or switch on the table: the lesson names the bulb or
            # the switch, not the table that holds it
            assert obj in ("green light bulb", "switch")


def test_negation_inserts_not_before_the_state() -> None:
    named, incidental = tp.negation(_obs(KITCHEN), random.Random(3))
    assert " not " in named.present and " not " not in named.base
    assert named.present.replace("not ", "", 1) == named.base
    assert not named.applicable and incidental.applicable


def test_categorical_uses_a_value_the_environment_prints_elsewhere() -> None:
    vocab = tp.vocabulary(OBS)
    assert vocab.categorical["room"] >= {"kitchen", "workshop", "greenhouse", "hallway"}
    assert vocab.categorical["stage"] == {"seedling", "adult"}
    pairs = tp.categorical(_obs(GREENHOUSE), random.Random(1), vocab)
    named = pairs[0]
    assert _one_edit(named.base, named.present) and not named.applicable
    slot, change = named.edit.split(": ", 1)
    old, new = change.split(" (")[0].split(" -> ")
    assert new in vocab.categorical[slot] and new != old
    if slot == "stage":
        assert "apple tree" in named.lesson
    else:
        assert f"In the {old}" in named.lesson
        assert pairs[1].applicable and old not in pairs[1].lesson


def test_threshold_pairs_cross_the_stated_threshold_or_not() -> None:
    vocab = tp.vocabulary(OBS)
    assert vocab.numeric["temperature"] == {10, 38, 68}
    for seed in range(8):
        pairs = tp.threshold(_obs(READING, "step"), random.Random(seed), vocab)
        crossing = [p for p in pairs if not p.applicable]
        kept = [p for p in pairs if p.applicable]
        assert len(crossing) == 1 and len(kept) == 1
        assert crossing[0].present == kept[0].present
        w = int(crossing[0].present.split("of ")[1].split()[0])
        assert w in (10, 68)  # another reading the environment printed
        assert crossing[0].present == READING.replace("38", str(w))
        # learned at 38, recalled at w: the lesson's threshold held then and fails now
        cmp, rest = crossing[0].lesson.split("is ", 1)[1].split(" than ")
        cut = int(rest.split()[0])
        assert min(38, w) < cut < max(38, w)
        assert (cmp == "less") == (w > 38)
        # the control: a threshold both readings satisfy
        cmp, rest = kept[0].lesson.split("is ", 1)[1].split(" than ")
        n = int(rest.split()[0])
        assert (n < 38 and w > n) if cmp == "more" else (n > 38 and w < n)


def test_near_equal_moves_an_amount_by_one_and_stays_applicable() -> None:
    (pair,) = tp.near_equal(_obs(PLANE, "describe"), random.Random(0))
    assert pair.applicable and pair.present in (PLANE.replace("47", "46"),
                                                 PLANE.replace("47", "48"))
    assert "wood block" in pair.lesson


def test_entity_swap_puts_another_object_of_the_environment_in_the_slot() -> None:
    vocab = tp.vocabulary(OBS)
    for seed in range(6):
        named, incidental = tp.entity_swap(_obs(KITCHEN), random.Random(seed), vocab)
        assert _one_edit(named.base, named.present)
        old, new = named.edit.split(" -> ")
        assert new in vocab.items or new.split(" ", 1)[1] in vocab.bare
        assert tp.display(new.split(" ", 1)[1]) not in KITCHEN
        assert tp.display(old.split(" ", 1)[1]) in named.lesson
        assert incidental.applicable and not named.applicable


def test_order_swaps_the_two_events_the_lesson_orders_or_two_it_does_not() -> None:
    steps = [tp.Observation(t, "step", f"t/v0#{i}", a)
             for i, (t, a) in enumerate(zip(STEPS, ACTIONS, strict=True))]
    (run,) = tp.runs(steps)
    named, incidental = tp.order(run)
    assert named.lesson == "Open door to kitchen, then go to kitchen."
    assert named.base == ("First, the door is now open. Then, you move to the kitchen. "
                          "After that, you move the thermometer to the inventory.")
    assert named.present.index("move to the kitchen") < named.present.index("door is now")
    assert not named.applicable
    assert incidental.present.index("door is now") < incidental.present.index("move to the")
    assert incidental.present.index("thermometer") < incidental.present.index("move to the")
    assert incidental.applicable


def test_build_is_deterministic_and_covers_every_kind() -> None:
    steps = [tp.Observation(t, "step", f"t/v0#{i}", a)
             for i, (t, a) in enumerate(zip(STEPS, ACTIONS, strict=True))]
    a = tp.build([*OBS, *steps], 2, seed=5)
    b = tp.build([*OBS, *steps], 2, seed=5)
    assert a == b
    assert {p.kind for p in a} == set(tp.KINDS)
    assert all(p.base != p.present for p in a if p.kind != "identical")
    assert tp.build([*OBS, *steps], 2, seed=6) != a


@pytest.mark.parametrize("kind", [k for k in tp.KINDS if k not in ("order", "identical")])
def test_every_edit_is_one_span(kind: str) -> None:
    for p in tp.build(OBS, 4, seed=11):
        if p.kind == kind:
            assert _one_edit(p.base, p.present), p.edit
