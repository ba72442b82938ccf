"""The reader: situation and lesson text -> typed facts, and then/now checks over them.

Cases are written in plain English of several fields (household, runbooks, shopping, games);
none of them is vocabulary the reader was given: it knows English (LemmInflect, WordNet).
"""

from __future__ import annotations

import pytest

from situated.reader import Fact, Reading, read
from situated.reader.compare import MISSING, OPPOSED, OTHER, SAME, Check, judge, relate
from situated.reader.types import CODE, HAS, STATE, WHERE


def facts(text: str) -> list[Fact]:
    return list(read(text).facts)


def differs(lesson: Reading, then: Reading, now: Reading) -> list[Check]:
    """What the lesson depends on that is otherwise now (an empty list: the same situation)."""
    return judge(lesson, then, now).of("depends", relation=OPPOSED)


def one(text: str, subject: str) -> Fact:
    found = [f for f in facts(text) if f.subject == subject]
    assert found, f"no fact about {subject!r} in {facts(text)}"
    return found[0]


def test_states_with_the_thing_they_describe() -> None:
    f = one("The washing machine is running a long cycle.", "washing machine")
    assert (f.attribute, f.words, f.negated) == (STATE, ("running",), False)
    f = one("The lights are off because the power is out.", "light")
    assert f.words == ("off",)
    assert one("The lights are off because the power is out.", "power").words == ("out",)
    f = one("Muddy kit waiting; washer status: stopped, load done.", "washer")
    assert f.words == ("stopped",)  # "status" names an aspect; the washer is the subject


def test_spans_point_at_what_was_read() -> None:
    text = "Host web-03: the disk is 97% full."
    f = next(f for f in facts(text) if f.subject == "disk")
    assert "97" in text[f.start:f.end]


@pytest.mark.parametrize("text, subject, words", [
    ("No backup was running.", "backup", ("running",)),
    ("The microwave shows an error and will not start.", "microwave", ("start",)),
    ("The pump is not working.", "pump", ("working",)),
])
def test_negation(text: str, subject: str, words: tuple[str, ...]) -> None:
    f = [f for f in facts(text) if f.subject == subject and f.words == words]
    assert f and f[0].negated


def test_presence_and_absence() -> None:
    assert one("Dishwasher (Miele): no room left.", "room").negated
    assert not one("Dishwasher (Miele): plenty of room.", "room").negated
    has = one("The shopper has no membership.", "membership")
    assert (has.attribute, has.negated) == (HAS, True)
    assert relate(has, one("Checkout, basket 60 dollars; membership: yes.", "membership")) \
        == OPPOSED


def test_quantities_carry_units_and_thresholds() -> None:
    f = one("The replica lags 45 seconds.", "replica")
    assert (f.number, f.dimension, f.op) == (45.0, "time", "==")
    assert one("The last deploy was 2 hours ago.", "deploy").number == 7200.0
    c = read("When the disk is over 90% full, rotate the logs.").conditions[0]
    assert (c.subject, c.number, c.dimension, c.op) == ("disk", 90.0, "%", ">")
    c = read("Unless the replica lags more than 60 seconds, route reads to it.").conditions[0]
    assert (c.op, c.number) == ("<=", 60.0)  # unless: the polarity is folded in
    c = read("When the last deploy is hours old, fail over.").conditions[0]
    assert (c.subject, c.op, c.number) == ("deploy", ">=", 3600.0)
    limit = one("Name brand at 32 dollars against a 40 dollar limit.", "limit")
    assert (limit.number, limit.dimension) == (40.0, "money:usd")


def test_codes_places_and_holders() -> None:
    assert one("The dishwasher shows error E24.", "error").words == ("E24",)
    assert one("The dishwasher shows error E24.", "error").attribute == CODE
    key = one("The key is in the box.", "key")
    assert (key.attribute, key.words[0]) == (WHERE, "box")
    lock = [f for f in facts("An analytics query holds the table lock.")
            if f.subject == "lock" and f.attribute == "hold by"]
    assert lock and lock[0].words[0] == "query" and "table" in lock[0].qualifiers


def test_conditional_clauses_become_conditions_and_procedures_do_not() -> None:
    r = read("If the washer is busy, soak the kit in cold water until the cycle ends.")
    assert [(c.subject, c.words, c.negated) for c in r.conditions] == [
        ("washer", ("busy",), False)]  # "until the cycle ends" orders steps: no condition
    r = read("Unless the door is locked, check the window latches.")
    assert r.conditions[0].negated


def test_order_of_actions() -> None:
    assert read("Patch B, then patch A.").actions == ("patch b", "patch a")
    assert read("Patch A, then patch B.").actions == ("patch a", "patch b")
    assert read("After you drain the tank, open the valve.").actions[0].startswith("drain")


@pytest.mark.parametrize("a, b, relation", [
    ("The soil is dry.", "The soil is waterlogged.", OPPOSED),  # WordNet: dry / wet cluster
    ("The soil is soggy.", "The soil is waterlogged.", SAME),  # one adjective cluster
    ("The door is open.", "The door is closed.", OPPOSED),
    ("The stove is on.", "The stove is off.", OPPOSED),
    ("The paper is in stock.", "The paper is out of stock.", OPPOSED),
    ("The pump is running.", "The pump is not running.", OPPOSED),
    ("The pump is not broken.", "The pump is working.", SAME),
    ("The microwave works normally.", "Microwave: working.", SAME),
    ("The light is red.", "The light is blue.", OTHER),
])
def test_how_states_compare(a: str, b: str, relation: str) -> None:
    fa, fb = facts(a)[0], facts(b)[0]
    assert relate(fa, fb) == relation


def test_near_equal_numbers_are_one_situation_and_stated_thresholds_decide() -> None:
    then, now = read("The disk is 97% full."), read("The disk is 96% full.")
    over_90 = read("When the disk is over 90% full, rotate the logs.")
    over_96_5 = read("When the disk is over 96.5% full, page the on-call.")
    assert [c.relation for c in judge(over_90, then, now).of("condition")] == [SAME]
    assert [c.relation for c in judge(over_96_5, then, now).of("condition")] == [OPPOSED]
    plain = read("Rotate the disk's logs.")
    assert {c.relation for c in judge(plain, then, now).checks} == {SAME}
    far = judge(plain, read("The disk is 9% full."), now)
    assert OPPOSED in {c.relation for c in far.checks}


def test_two_amounts_compare_by_their_order() -> None:
    lesson = read("Buy the name brand; the store brand had complaints.")
    then = read("The name-brand option costs 45 dollars; the budget is 50 dollars.")
    within = read("Name brand at 30 dollars against a 40 dollar limit.")
    over = read("Name brand at 48 dollars against a 40 dollar limit.")
    assert not differs(lesson, then, within)
    assert differs(lesson, then, over)


def test_a_missing_condition_is_named() -> None:
    lesson = read("If the back door is found unlocked, lock it and check the windows.")
    j = judge(lesson, None, read("You are about to leave the house."))
    assert [(c.label, c.relation) for c in j.checks] == [("back door", MISSING)]


def test_reading_is_fast() -> None:
    import time

    read("Warm the lexicon up: the pump is running.")
    texts = [f"Host web-{i:02d} disk is {90 + i % 9}% full; logs take {i}% of it; the replica "
             f"of orders-db lags {i} seconds and the backup is running." for i in range(300)]
    started = time.perf_counter()
    for t in texts:
        read(t)
    per_text = (time.perf_counter() - started) / len(texts)
    assert per_text < 0.01, per_text  # a bound on the shape, not a benchmark: ~0.2 ms here


@pytest.mark.parametrize("a, b", [
    ("Patch B, then patch A.", "Patch A, then patch B."),
    ("Restart the worker after the deploy.", "Do not restart the worker after the deploy."),
    ("Route reads to the replica during the backup.", "Route reads to the primary during the "
     "backup."),
    ("The pump is running; open the valve.", "The pump is stopped; open the valve."),
])
def test_identity_keeps_apart_what_reads_differently(a: str, b: str) -> None:
    from situated.reader.identity import differs

    assert differs(a, b) is not None


@pytest.mark.parametrize("a, b", [
    ("Water the basil slowly until water drains from the pot.",
     "Water the basil slowly until the water drains from the pot."),
    ("The flashlight lives on the hallway closet shelf.",
     "The flashlight is kept on the hallway closet shelf."),
])
def test_identity_lets_restatements_merge(a: str, b: str) -> None:
    from situated.reader.identity import differs

    assert differs(a, b) is None


def test_a_write_never_merges_reordered_or_negated_instructions(tmp_path: object) -> None:
    from pathlib import Path

    from situated import Memory, Principal, State

    mem = Memory(Path(str(tmp_path)) / "id.db")
    me = Principal(tenant="t", roles=set(), clearance="internal")
    state = State("The release needs both patches.")
    first = mem.add("Apply patch B, then apply patch A.", principal=me, state=state)
    second = mem.add("Apply patch A, then apply patch B.", principal=me, state=state)
    third = mem.add("Do not apply patch B, then apply patch A.", principal=me, state=state)
    assert len({first.id, second.id, third.id}) == 3
    again = mem.add("Apply patch B, then apply patch A.", principal=me, state=state)
    assert again.id == first.id  # the same text is still one memory
    mem.close()


def test_scene_descriptions_are_read_item_by_item() -> None:
    scene = ("This room is called the kitchen. In it, you see: \n\ta substance called soap\n"
             "\ta stopwatch, which is deactivated.\n\tan inclined plane with a cloth surface\n"
             "\ta pea plant in the seedling stage\nYou also see:\n\tA door to the hallway "
             "(that is open)\n\tA door to the bathroom (that is closed)")
    got = {(f.subject, f.attribute, f.words, f.qualifiers) for f in read(scene).facts
           if not f.weak}
    assert ("room", "name", ("kitchen",), ()) in got
    assert ("substance", "name", ("soap",), ()) in got
    assert ("stopwatch", "state", ("deactivated",), ()) in got
    assert ("inclined plane", "of:surface", ("cloth",), ()) in got
    assert ("door", "state", ("open",), ("hallway",)) in got
    assert ("door", "state", ("closed",), ("bathroom",)) in got


def test_a_thing_swapped_in_an_otherwise_same_scene_rejects_the_lesson_about_it() -> None:
    lesson = read("Look at the battery before you do anything else here.")
    then = read("On the table is: a battery, a black wire, a switch, which is off.")
    swapped = read("On the table is: a banana, a black wire, a switch, which is off.")
    kept = read("On the table is: a battery, a red wire, a switch, which is off.")
    assert differs(lesson, then, swapped)
    assert not differs(lesson, then, kept)


def test_a_plan_for_another_world_is_another_situation() -> None:
    lesson = read("Take the rusty key from the crate; unlock the chest with the rusty key; "
                  "open the chest.")
    then = read("Objective: take the rusty key from the crate, then unlock the chest with it "
                "and open the chest. You are in a cellar. There is a crate here.")
    other = read("Objective: pick up the banana from the floor, then eat the banana. You are "
                 "in a kitchen. There is a banana on the floor.")
    assert differs(lesson, then, other)
    assert not differs(lesson, then, then)


def test_names_present_things_reads_what_an_embedding_of_a_long_scene_misses() -> None:
    from situated.reader.present import names_present_things

    scene = read("In it, you see: a fridge, a table, an ultra low temperature freezer, a "
                 "counter, a sink, a cupboard, a stove, an oven.")
    assert names_present_things(read("Look at the freezer first."), scene)
    assert not names_present_things(
        read("Robots may pass people in narrow warehouse aisles at full speed."), scene)
    # "deal", "first" and "wait" may be nouns, but the reading has them as a verb, a step
    # and a state: the lesson names the stove, which the scene names
    bench = read("On the bench is: a brick, a wood block, a ruler, a stopwatch.")
    assert names_present_things(read("Deal with the brick first; the rest can wait."), bench)


def _facts(text: str) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(f.subject, f.attribute, f.words) for f in facts(text)}


def test_it_opening_a_sentence_is_the_thing_last_named() -> None:
    assert _facts("You see a chest. It is closed.") >= {("chest", STATE, ("closed",))}
    assert _facts("The fridge is open. It is empty.") >= {("fridge", STATE, ("open",)),
                                                          ("fridge", STATE, ("empty",))}
    assert _facts("It is raining. It is cold.") == set()  # weather: no thing was named


def test_what_the_speaker_is_is_a_fact_and_what_they_do_an_action() -> None:
    veg = read("I'm vegetarian.")
    assert [(f.subject, f.words, f.negated) for f in veg.facts] == [("i", ("vegetarian",), False)]
    gone = read("I'm no longer vegetarian.").facts
    assert gone and gone[0].subject == "i" and gone[0].negated
    reading = read("I am reading Dune.")
    assert reading.facts == () and reading.actions == ("read dune",)
    assert read("You are carrying a key.").facts == ()  # the agent's doing, not the speaker


def test_a_sequence_of_actions_and_reported_states_is_ordered() -> None:
    door, kitchen, oven = ("the door is now open", "you move to the kitchen",
                           "the oven is on")
    then = f"First, {door}. Then, {kitchen}. After that, {oven}."
    swapped = f"First, {kitchen}. Then, {door}. After that, {oven}."
    later = f"First, {door}. Then, {oven}. After that, {kitchen}."
    assert read(then).events == ("door=open", "move kitchen", "oven=on")
    assert read("The door is open. The oven is on.").events == ()  # a scene, not a sequence
    lesson = read("Open the door to the kitchen, then go to the kitchen.")
    named = [c for c in judge(lesson, read(then), read(swapped)).checks
             if c.label == "order of events"]
    assert [(c.relation, c.role) for c in named] == [(OPPOSED, "depends")]
    assert "door open before move kitchen" in named[0].line()
    # the oven's place in the sequence is not something the lesson names
    other = [c for c in judge(lesson, read(then), read(later)).checks
             if c.label == "order of events"]
    assert [(c.relation, c.role) for c in other] == [(OPPOSED, "context")]


def test_events_that_send_one_thing_to_two_places_keep_their_order() -> None:
    then = ("First, you move the cutting to the clay pot 2. Then, you move the cutting to the "
            "clay pot 5. After that, the lamp is on.")
    swapped = ("First, you move the cutting to the clay pot 5. Then, you move the cutting to "
               "the clay pot 2. After that, the lamp is on.")
    assert read(then).events[:2] == ("move cutting to clay pot 2", "move cutting to clay pot 5")
    # the object as told: the action keeps its head ("pick wire"), the event its words
    wires = read("First, you pick up the black wire. Then, you pick up the orange wire.")
    assert wires.actions == ("pick wire", "pick wire")
    assert wires.events == ("pick black wire", "pick orange wire")
    lesson = read("Move the cutting to clay pot 2, then move the cutting to clay pot 5.")
    named = [c for c in judge(lesson, read(then), read(swapped)).checks
             if c.label == "order of events"]
    assert [(c.relation, c.role) for c in named] == [(OPPOSED, "depends")]


def test_a_lesson_naming_a_compound_noun_depends_on_what_that_thing_is() -> None:
    then = read("In the workshop, you see:\n\tan inclined plane with a cloth surface\n\ta table")
    now = read("In the workshop, you see:\n\tan inclined plane with a paper surface\n\ta table")
    lesson = read("Look at the inclined plane before you do anything else here.")
    surface = [c for c in judge(lesson, then, now).checks if c.fact.attribute.startswith("of:")]
    assert [(c.relation, c.role) for c in surface] == [(OPPOSED, "depends")]
    other = read("Look at the table before you do anything else here.")
    assert [c.role for c in judge(other, then, now).checks
            if c.fact.attribute.startswith("of:")] == ["context"]


def test_a_thing_named_with_its_modifiers_is_gone_though_others_of_its_kind_remain() -> None:
    scene = "On the table is: a battery, a black wire, a {} wire, a switch."
    then, now = read(scene.format("blue")), read(scene.format("red"))
    lesson = read("Deal with the blue wire first; the rest can wait.")
    gone = [c for c in judge(lesson, then, now).checks if c.role == "depends"
            and c.relation == OPPOSED]
    assert any("blue wire" in c.line() for c in gone), judge(lesson, then, now).checks
    same = read("Deal with the black wire first; the rest can wait.")
    assert not [c for c in judge(same, then, now).checks
                if c.role == "depends" and c.relation == OPPOSED]
