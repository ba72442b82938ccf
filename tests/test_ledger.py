"""The ledger is append-only and replays to the stored state."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situated import LifecycleState, Memory, Principal, State
from situated.store.ledger import EventType
from situated.write.promotion import AutoPromote

OPS = st.lists(
    st.tuples(st.sampled_from(["add", "add_review", "recall_ok", "recall_fail", "promote",
                               "reject", "fact"]), st.integers(0, 5)),
    min_size=1, max_size=25,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_replay_equals_stored_state(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:  # type: ignore[type-arg]
    path = tmp_path_factory.mktemp("ledger") / "m.db"
    mem = Memory(path, embedder="hash", promotion=AutoPromote(review_namespaces={"held"}))
    who = Principal(tenant="acme", roles={"reviewer"})
    held: list[str] = []
    for op, n in ops:
        s = State("case", facts={"n": n % 3})
        if op == "add":
            mem.add(f"lesson {n}", principal=who, state=s)
        elif op == "add_review":
            rec = mem.add(f"held lesson {n}", principal=who, state=s, namespace="held")
            if rec.state is LifecycleState.PROPOSED and rec.id not in held:
                held.append(rec.id)  # a repeated text reinforces the same proposal
        elif op == "fact":
            mem.add(f"customer plan is {n}", principal=who, kind="fact", entity="cust",
                    attribute="plan", value=str(n))
        elif op in ("recall_ok", "recall_fail"):
            b = mem.recall(s, principal=who, k=3)
            used = [i.memory_id for i in b.items][: 1 + n % 2]
            mem.feedback(b.recall_id, principal=who, success=op == "recall_ok", used=used)
        elif op in ("promote", "reject") and held:
            mid = held.pop()
            if op == "promote":
                mem.promote(mid, reviewer=who)
            else:
                mem.reject(mid, reviewer=who, reason="not useful")
    report = mem.rebuild()
    assert report.mismatched == ()
    assert mem.health().ok
    mem.close()


def test_tampering_is_detected_and_repaired(mem: Memory, acme: Principal) -> None:
    rec = mem.add("tip", principal=acme, state=State("s", facts={"x": 1}))
    b = mem.recall(State("s", facts={"x": 1}), principal=acme)
    mem.feedback(b.recall_id, principal=acme, success=True, used=[rec.id])
    mem.store.db.execute("UPDATE memories SET successes = 7, state = 'ARCHIVED'")
    assert mem.rebuild().mismatched == (rec.id,)
    assert not mem.health().ok
    mem.rebuild(repair=True)
    fixed = mem.inspect(rec.id, principal=acme)
    assert fixed.counters.successes == 1 and fixed.state is LifecycleState.ACTIVE
    assert mem.health().ok


def test_ledger_rows_cannot_be_changed_or_deleted(mem: Memory, acme: Principal) -> None:
    mem.add("tip", principal=acme)
    with pytest.raises(apsw.ConstraintError):
        mem.store.db.execute("UPDATE ledger SET reason = 'rewritten'")
    with pytest.raises(apsw.ConstraintError):
        mem.store.db.execute("DELETE FROM ledger")


def test_every_change_is_an_event_with_actor(mem: Memory, acme: Principal) -> None:
    rec = mem.add("tip", principal=acme, state=State("s", facts={"x": 1}))
    b = mem.recall(State("s", facts={"x": 1}), principal=acme)
    mem.feedback(b.recall_id, principal=acme, success=False, used=[rec.id])
    events = [e.event for e in mem.history(rec.id, principal=acme)]
    assert events == [EventType.PROPOSED, EventType.PROMOTED, EventType.FEEDBACK]
    assert all(e.actor for e in mem.history(rec.id, principal=acme))


def test_supersession_keeps_the_old_fact_for_as_of(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    old = mem.add("Customer 7 lives in Lyon.", principal=who, kind="fact", entity="cust:7",
                  attribute="city", value="Lyon", valid_from="2025-01-01T00:00:00Z")
    new = mem.add("Customer 7 lives in Paris.", principal=who, kind="fact", entity="cust:7",
                  attribute="city", value="Paris", valid_from="2026-06-01T00:00:00Z")
    now = mem.recall(State("where does customer 7 live"), principal=who)
    assert {i.memory_id for i in now.items} == {new.id}
    past = mem.recall(State("where does customer 7 live"), principal=who,
                      as_of="2025-06-01T00:00:00Z")
    assert {i.memory_id for i in past.items} == {old.id}
    stale = mem.inspect(old.id, principal=who)
    assert stale.state is LifecycleState.INVALIDATED and stale.superseded_by == new.id
    assert mem.inspect(new.id, principal=who).supersedes == old.id
