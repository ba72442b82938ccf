"""The reader on how people write that a value changed: "no longer", "moved to 3pm", a date,
"I moved to Porto", "It's 555-0202 now" after "I got a new number", "X is now the lead".

Each case failed before the reader learned it (the fact was missing, or read under another
attribute, so a newer statement did not contradict the older one). The texts are not the
preference benchmark's (`benchmarks/preference_update.py`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from situated import Memory, State
from situated.reader import Fact, read
from situated.reader.present import contradiction
from situated.reader.subjects import key_of
from situated.reader.types import AMOUNT, CODE, HOLDER, STATE, WHERE
from test_text_supersession import ME, older_then_newer


def facts(text: str) -> list[tuple[str, str, str, bool]]:
    return [(f.subject, f.attribute, f.value_text(), f.negated) for f in read(text).facts
            if not f.weak]


def about(text: str, subject: str) -> list[Fact]:
    return [f for f in read(text).facts if f.subject == subject and not f.weak]


def replaces(older: str, newer: str) -> str:
    return contradiction(read(older), read(newer), same_speaker=True, other="the newer")


def test_no_longer_negates_the_state_it_names() -> None:
    assert ("i", STATE, "not vegan", True) in facts("I'm no longer vegan.")
    assert ("i", STATE, "not vegan", True) in facts("I am not vegan anymore.")
    assert ("gate", STATE, "not locked", True) in facts("The gate is no longer locked.")
    assert "vegan" in replaces("I'm vegan.", "I'm no longer vegan.")


def test_a_verb_to_an_amount_gives_the_subjects_new_amount() -> None:
    rose = about("Queue depth rose to 400.", "depth")
    assert [(f.attribute, f.number) for f in rose] == [(AMOUNT, 400.0)]
    by = about("Queue depth rose by 40.", "depth")  # a change, not the new value
    assert [(f.attribute, f.number) for f in by] == [("rise", 40.0)]
    assert "09:00" in replaces("The standup is at 9am.", "The standup moved to 10am.")
    # a verb's object to a date: the object's new date, not the subject's
    (pushed,) = about("Leadership agreed to push the launch to April 1.", "launch")
    assert (pushed.attribute, pushed.value_text()) == (AMOUNT, "April 1")
    assert not about("The team sent the report to 5 customers.", "report")  # a count
    assert "October 3" in replaces("The launch is on October 3rd.",
                                   "The launch was pushed back to October 10th.")


@pytest.mark.parametrize("text", [
    "The release ships on October 3rd.", "The release ships on 3 October.",
    "The release ships on the 3rd of October.", "The release ships Oct 3.",
])
def test_a_day_of_a_month_is_a_date(text: str) -> None:
    (f,) = about(text, "release")
    assert (f.dimension, f.value_text()) == ("date", "October 3")


def test_dates_of_other_months_are_other_dates() -> None:
    assert "September 30" in replaces("The release is planned for September 30th.",
                                      "The release slipped to October 30th.")
    assert replaces("The release is planned for October 3rd.",
                    "The release is still planned for October 3rd.") == ""


def test_where_the_speaker_moved_or_lives() -> None:
    assert ("we", WHERE, "porto", False) in facts("We moved to Porto in March.")
    assert ("we", WHERE, "lisbon", False) in facts("We live in Lisbon.")
    assert ("i", WHERE, "denver", False) in facts("I relocated to Denver last month.")
    # WordNet's class of the verb decides: talking to someone places nobody
    assert not [f for f in facts("I talked to Sam yesterday.") if f[1] == WHERE]
    assert "lisbon" in replaces("We live in Lisbon.", "We moved to Porto in March.")


def test_it_after_a_sentence_that_got_a_thing_is_that_thing() -> None:
    text = "Actually I got a new badge number. It's B-2291 now."
    assert next(f for f in facts(text) if f[1:] == (CODE, "B-2291", False))[0].endswith("number")
    assert "B-1180" in replaces("My badge number is B-1180.", text)


def test_the_role_one_person_holds() -> None:
    assert ("engineer", HOLDER, "dana", False) in facts("Dana is the on-call engineer this week.")
    assert not [f for f in facts("Dana is an engineer.") if f[1] == HOLDER]  # one of several
    assert "dana" in replaces("Dana is the on-call engineer.",
                              "Since Monday, Lee is the on-call engineer.")
    assert replaces("Dana is an engineer.", "Lee is an engineer.") == ""


def test_a_word_of_sequence_after_a_noun_says_when() -> None:
    assert read("Deal with the water first; the rest can wait.").actions == ("deal water",)
    assert read("Open the first door.").actions == ("open door",)


def test_an_opening_adverb_is_not_a_thing() -> None:
    assert facts("Sadly, the old printer died.") == [("printer", STATE, "died", False)]
    assert not about("Honestly, it works.", "honestly")


def test_a_fact_is_keyed_by_what_it_states_most_definitely() -> None:
    key = key_of("The rota changed last week. Lee is now the on-call engineer.", "fact")
    assert key is not None and (key.entity, key.attribute, key.value) == (
        "on-call engineer", "who", "lee")
    moved = key_of("We moved to Porto in March.", "fact")
    assert moved is not None and moved[:3] == ("user", WHERE, "porto")
    assert key_of("I'm tired today.", "fact") is None  # a state of the user keys nothing


def test_a_move_written_as_text_replaces_the_old_address_at_recall(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db")
    try:
        old, between, new = older_then_newer(mem, "We live in Lisbon, near the river.",
                                             "Big news: we moved to Porto in March.", "note")
        question = State("Which city do we live in now, Lisbon or Porto?")
        now = mem.recall(question, principal=ME)
        assert new.id in [i.memory_id for i in now.items]
        assert old.id not in [i.memory_id for i in now.items]
        why = {r.memory_id: r for r in now.rejected}
        assert why[old.id].reason.value == "SUPERSEDED" and "porto" in why[old.id].detail
        then = mem.recall(question, principal=ME, as_of=between)
        assert [i.memory_id for i in then.items] == [old.id]
    finally:
        mem.close()


def test_times_and_dates_are_points_not_sizes() -> None:
    from situated.reader.compare import OTHER, SAME, judge

    lesson = read("Book room B for the design review.")

    def relation(then: str, now: str) -> list[str]:
        return [c.relation for c in judge(lesson, read(then), read(now)).checks]

    assert relation("The design review is at 2pm.", "The design review is at 2pm.") == [SAME]
    # within 1.5x of each other, yet another hour and another day
    assert relation("The design review is at 2pm.", "The design review is at 3pm.") == [OTHER]
    assert relation("The review is on August 15th.", "The review is on September 1st.") == [
        OTHER]
