"""What a task statement says, read as any situation: a goal with a number in it, a thing
placed "around" somewhere, and where an order's destination is. A lesson learned for another
goal, or for a thing somewhere else, is another situation (cases from several fields; none of
their words is in the reader's lexicon as vocabulary)."""

from __future__ import annotations

from situated.reader import read
from situated.reader.types import GOAL, WHERE
from test_reader import differs


def _about(text: str, attribute: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(f.subject, f.words, f.qualifiers) for f in read(text).facts
            if f.attribute == attribute]


def test_a_number_in_a_purpose_is_part_of_the_goal() -> None:
    got = _about("Your job is to photograph the 3 nesting sites of the heron.", GOAL)
    assert got == [("job", ("photograph", "nest", "site", "heron"), ())]


def test_a_plan_for_the_goal_of_another_thing_is_another_situation() -> None:
    lesson = read("To photograph the 3 nesting sites of the heron: walk to the lake; "
                  "photograph the heron nest; photograph the heron chick.")
    then = read("Your job is to photograph the 3 nesting sites of the heron. You are at "
                "the visitor centre.")
    other = read("Your job is to photograph the 3 nesting sites of the egret. You are at "
                 "the visitor centre.")
    differences = differs(lesson, then, other)
    assert [(c.then, c.now) for c in differences] == [
        ("photograph nest site heron", "photograph nest site egret")]
    assert not differs(lesson, then, then)


def test_around_places_a_thing() -> None:
    assert ("key", ("garage",), ("spare",)) in _about(
        "The spare key is located around the garage.", WHERE)


def test_where_an_orders_destination_is() -> None:
    got = _about("Deliver the parcel to the blue locker in the lobby.", WHERE)
    assert got == [("locker", ("lobby",), ("blue",))]
    assert _about("Take the mug from the shelf in the hall.", WHERE) == [
        ("shelf", ("hall",), ())]
    # the object's own place is where it is to go, not where it is
    assert _about("Put the mug in the microwave.", WHERE) == []


def test_a_plan_for_a_destination_elsewhere_is_another_situation() -> None:
    lesson = read("To deliver the parcel: take the lift to the lobby; open the blue locker; "
                  "put the parcel in the blue locker.")
    then = read("Your job is to deliver a parcel. Then, put it in the blue locker in the "
                "lobby. You are at the loading dock.")
    elsewhere = read("Your job is to deliver a parcel. Then, put it in the green locker in "
                     "the basement. You are at the loading dock.")
    assert differs(lesson, then, elsewhere)
    assert not differs(lesson, then, then)
