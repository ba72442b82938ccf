"""Compile at recall on text: look-alike situations told apart, near-equal numbers kept, a
lesson's own clauses checked, the facts checked shown. Every state here is text only."""

from __future__ import annotations

from pathlib import Path

import pytest

from situated import Memory, Principal, State
from situated.recall.briefing import RejectionReason, Verdict

ME = Principal(tenant="ops", roles=set(), clearance="internal")


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "text.db")
    yield m
    m.close()


def _add(mem: Memory, content: str, state: str) -> str:
    return mem.add(content, principal=ME, namespace="runbook", state=State(state),
                   action="as the lesson says", success=True).id


def _recall(mem: Memory, now: str):  # type: ignore[no-untyped-def]
    b = mem.recall(State(now), principal=ME, namespace="runbook", budget_tokens=600)
    return ({i.memory_id: i for i in b.items}, {r.memory_id: r for r in b.rejected}, b)


@pytest.mark.parametrize("right, right_state, wrong, wrong_state, now", [
    ("Kill the analytics query that holds the table lock, then run the migration.",
     "An analytics query holds the table lock.",
     "Wait for the backup to finish before running the migration.",
     "A database backup is running and holds the table lock.",
     "An analytics query holds the table lock on orders."),
    ("Skip the canary and deploy straight away; nothing is user-facing.",
     "Deploying the payments service to staging.",
     "Deploy with the canary flag on; roll forward only after the smoke tests pass.",
     "Deploying the payments service to production.",
     "Deploying the payments service to staging."),
    ("For error E15, turn off the water and dry the base tray.",
     "The dishwasher shows error E15.",
     "For error E24, clean the drain filter and restart the cycle.",
     "The dishwasher shows error E24.",
     "The dishwasher shows error E15."),
    ("The pump is running: open the outlet valve slowly.",
     "The pump is running and the tank is half full.",
     "The pump is stopped: prime it before opening any valve.",
     "The pump is stopped and the tank is half full.",
     "The pump is running; the tank is half full."),
])
def test_look_alikes_are_told_apart(mem: Memory, right: str, right_state: str, wrong: str,
                                    wrong_state: str, now: str) -> None:
    ok, bad = _add(mem, right, right_state), _add(mem, wrong, wrong_state)
    served, rejected, _ = _recall(mem, now)
    assert ok in served
    assert bad not in served
    assert rejected[bad].reason in (RejectionReason.SOURCE_STATE_MISMATCH,
                                    RejectionReason.CONDITION_FAILED)


def test_near_equal_numbers_are_the_same_situation(mem: Memory) -> None:
    a = _add(mem, "Rotate and compress the application logs to free space.",
             "Host web-03 disk is 97% full; logs take 70% of it.")
    b = _add(mem, "Move the oldest log archives to cold storage.",
             "Host web-07 disk is 95% full; logs take 66% of it.")
    served, rejected, _ = _recall(mem, "Host web-03 disk is 96% full; logs take 72% of it.")
    assert a in served and b in served, rejected


def test_numbers_are_compared_by_the_threshold_the_lesson_states(mem: Memory) -> None:
    over_90 = _add(mem, "When the disk is over 90% full, rotate the logs.",
                   "The disk is 97% full.")
    over_96 = _add(mem, "When the disk is over 96.5% full, page the storage on-call first.",
                   "The disk is 97% full.")
    served, rejected, _ = _recall(mem, "The disk is 96% full.")
    assert over_90 in served
    assert rejected[over_96].reason is RejectionReason.CONDITION_FAILED
    assert "96.5" in rejected[over_96].detail and "96" in rejected[over_96].detail


def test_a_dependency_the_present_does_not_state_asks_for_it(mem: Memory) -> None:
    mem.add("If the back door is found unlocked, lock it and check the window latches.",
            principal=ME, namespace="runbook", action="locked it", success=True)
    _, _, b = _recall(mem, "You are about to leave the house; the back porch light is on.")
    assert b.mode.value == "INSUFFICIENT_EVIDENCE"
    assert any("back door" in f for f in b.missing_facts)


def test_an_applicable_text_lesson_is_confident_and_says_what_was_checked(
    mem: Memory,
) -> None:
    rid = _add(mem, "When the replica lags, keep reads on the primary and pause the exports.",
               "The replica of orders-db lags 300 seconds; the primary is at 80% CPU.")
    served, _, b = _recall(mem, "orders-db: the replica lags 280 seconds, primary CPU 85%.")
    item = served[rid]
    assert item.verdict is Verdict.APPLICABLE
    assert item.confidence > 0.6
    assert "replica" in b.render()
    assert "checked" in b.render()


def test_explain_shows_what_was_read_and_where(mem: Memory) -> None:
    _add(mem, "When the replica lags, keep reads on the primary.",
         "The replica of orders-db lags 300 seconds.")
    _, _, b = _recall(mem, "orders-db: the replica lags 280 seconds, primary CPU 85%.")
    explained = b.explain()
    assert "present, as read: replica lag: 280 s (read from 'replica lags 280 seconds')" \
        in explained
    assert b.to_dict()["read"]


@pytest.mark.parametrize("fact, now", [
    ("Coffee beans at CornerMart cost 12 dollars a bag.",
     "The shelf label says the coffee beans cost 15 dollars a bag."),
    ("The milk is kept in the fridge door.",
     "The milk carton is standing on the counter, not in the fridge."),
    ("checkout-api runs 3 replicas in production.",
     "Sale traffic is rising; the dashboard shows checkout-api with 6 replicas."),
])
def test_a_fact_written_as_text_is_contradicted_by_what_the_present_says(
    mem: Memory, fact: str, now: str
) -> None:
    rec = mem.add(fact, principal=ME, namespace="runbook", kind="note")
    _, rejected, _ = _recall(mem, now)
    assert rejected[rec.id].reason is RejectionReason.CONTRADICTED
