"""Preferences and facts written as text: a newer value about the same subject replaces the
older (which `as_of` still returns for the past); a preference is the user's preference,
never evidence on a question of fact."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from situated import Memory, MemoryRecord, Principal, State
from situated.errors import InvalidInput
from situated.models import LifecycleState
from situated.reader.subjects import key_of

ME = Principal(tenant="home", roles=set(), clearance="internal")


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "prefs.db")
    yield m
    m.close()


def older_then_newer(mem: Memory, older: str, newer: str, kind: str
                     ) -> tuple[MemoryRecord, float, MemoryRecord]:
    """Two statements of one user, and a time between them (`as_of` before the newer)."""
    old = mem.add(older, principal=ME, kind=kind, authority="user_declared")
    time.sleep(0.02)
    between = time.time()
    time.sleep(0.02)
    return old, between, mem.add(newer, principal=ME, kind=kind, authority="user_declared")


def test_what_a_preference_is_about() -> None:
    a = key_of("I prefer window seats.", "preference")
    b = key_of("I now prefer aisle seats on long flights.", "preference")
    assert a is not None and b is not None
    assert (a.entity, a.attribute) == (b.entity, b.attribute) == ("user", "prefers:seat")
    assert a.exclusive and a.value != b.value
    liked = key_of("I like coffee.", "preference")
    assert liked is not None and not liked.exclusive  # liking one thing excludes nothing
    assert key_of("The spare keys are kept in the blue drawer.", "fact")[:2] == (
        "spare key", "where")


def test_a_newer_preference_replaces_the_older_and_the_past_keeps_it(mem: Memory) -> None:
    old, between, new = older_then_newer(mem, "I prefer window seats.",
                                         "I now prefer aisle seats.", "preference")
    assert mem.inspect(old.id, principal=ME).state is LifecycleState.INVALIDATED
    now = mem.recall(State("Which seats does the user prefer on flights?"), principal=ME)
    assert [i.memory_id for i in now.items] == [new.id]
    then = mem.recall(State("Which seats does the user prefer on flights?"), principal=ME,
                      as_of=between)
    assert [i.memory_id for i in then.items] == [old.id]
    assert "the user's preference" in now.render()


def test_preferences_that_can_coexist_do(mem: Memory) -> None:
    coffee = mem.add("I like coffee in the morning.", principal=ME, kind="preference")
    tea = mem.add("I like green tea in the afternoon.", principal=ME, kind="preference")
    for rec in (coffee, tea):
        assert mem.inspect(rec.id, principal=ME).state is LifecycleState.ACTIVE


def test_a_fact_written_as_text_supersedes_by_its_read_subject(mem: Memory) -> None:
    old = mem.add("The spare keys are kept in the blue drawer in the hallway.", principal=ME,
                  kind="fact", authority="user_declared")
    new = mem.add("The spare keys are now in the key box by the back door.", principal=ME,
                  kind="fact", authority="user_declared")
    assert mem.inspect(old.id, principal=ME).state is LifecycleState.INVALIDATED
    assert mem.inspect(new.id, principal=ME).superseded_by is None


def test_a_fact_with_no_readable_subject_still_needs_a_key(mem: Memory) -> None:
    with pytest.raises(InvalidInput) as err:
        mem.add("Check it twice before you leave.", principal=ME, kind="fact")
    assert err.value.field == "entity"


def test_a_preference_is_not_evidence_on_a_question_of_fact(mem: Memory) -> None:
    mem.add("I prefer to hear that the Great Wall is visible from space.", principal=ME,
            kind="preference", authority="user_declared")
    b = mem.recall(State("Is the Great Wall of China visible from space?"), principal=ME)
    assert not b.items
    assert any("question of fact" in r.detail for r in b.rejected)


def test_a_newer_statement_that_contradicts_an_older_one_replaces_it_at_recall(
    mem: Memory,
) -> None:
    # the two read as different keys ((meeting, clock) and (team meeting, clock)), so nothing
    # is superseded at write; at recall the newer one's reading contradicts the older's
    old, between, new = older_then_newer(
        mem, "My meeting with the design team is at 2pm on Friday.",
        "Correction: the design team meeting moved to 3pm on Friday.", "fact")
    assert mem.inspect(old.id, principal=ME).state is LifecycleState.ACTIVE  # nothing deleted
    question = State("What time is my meeting with the design team on Friday?")
    now = mem.recall(question, principal=ME)
    assert [i.memory_id for i in now.items] == [new.id]
    why = {r.memory_id: r for r in now.rejected}
    assert why[old.id].reason.value == "SUPERSEDED"
    assert new.id in why[old.id].detail and "14:00" in why[old.id].detail
    then = mem.recall(question, principal=ME, as_of=between)
    assert [i.memory_id for i in then.items] == [old.id]


def test_statements_of_different_authors_or_that_agree_are_both_kept(mem: Memory) -> None:
    other = Principal(tenant="home", roles=set(), clearance="internal", name="planner")
    mine = mem.add("My meeting with the design team is at 2pm on Friday.", principal=ME,
                   kind="fact", authority="user_declared")
    time.sleep(0.02)
    theirs = mem.add("The design team meeting moved to 3pm on Friday.", principal=other,
                     kind="fact", authority="user_declared")
    time.sleep(0.02)
    agree = mem.add("The design team meeting has a projector.", principal=ME, kind="note",
                    authority="user_declared")
    b = mem.recall(State("What time is the design team meeting on Friday?"), principal=ME)
    served = {i.memory_id for i in b.items}
    assert {mine.id, theirs.id} <= served, b.explain()
    assert all(r.reason.value != "SUPERSEDED" for r in b.rejected)
    assert agree.id not in {r.memory_id for r in b.rejected if r.reason.value == "SUPERSEDED"}


def test_what_the_speaker_no_longer_is_replaces_what_they_were(mem: Memory) -> None:
    old = mem.add("I'm vegetarian. Have been for about 5 years.", principal=ME, kind="note",
                  authority="user_declared")
    time.sleep(0.02)
    new = mem.add("I started eating fish and chicken again. I'm no longer vegetarian.",
                  principal=ME, kind="note", authority="user_declared")
    b = mem.recall(State("Is the user vegetarian?"), principal=ME)
    assert old.id not in {i.memory_id for i in b.items}
    assert {r.memory_id: r.reason.value for r in b.rejected}[old.id] == "SUPERSEDED"
    assert new.id in {i.memory_id for i in b.items}
