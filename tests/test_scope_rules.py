"""The access rules of `store.scope`, one test per path that once leaked (issue: access rules in
one place). Each would fail if its lookup were made without the caller's scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situated import Memory, PermissionDenied, Principal, State

LOW = Principal("acme", roles={"support"}, clearance="internal", name="low")
HIGH = Principal("acme", roles={"support", "billing"}, clearance="restricted", name="high")
ADMIN = Principal("acme", roles={"support", "billing", "admin"}, clearance="restricted")
S = State("refund asked", {"plan": "annual"})


def _seen(value: object) -> str:
    return json.dumps(value, default=lambda o: getattr(o, "__dict__", str(o)))


def test_ledger_hides_recalls_of_principals_the_reader_does_not_dominate(mem: Memory) -> None:
    secret = mem.add("Billing-only: prorate annual refunds.", principal=HIGH, state=S,
                     roles={"billing"}, classification="confidential")
    b = mem.recall(S, principal=HIGH)
    assert secret.id in [i.memory_id for i in b.items]
    low_view = _seen(mem.ledger(principal=LOW, limit=1000))
    assert secret.id not in low_view and b.recall_id not in low_view
    assert mem.stats(principal=LOW).recalls == 0
    assert b.recall_id in _seen(mem.ledger(principal=HIGH, limit=1000))
    assert mem.stats(principal=HIGH).recalls == 1
    with pytest.raises(Exception, match="no recall"):
        mem.feedback(b.recall_id, principal=LOW, success=False)


def test_an_exact_duplicate_held_higher_is_neither_returned_nor_touched(mem: Memory) -> None:
    text = "Escalate chargebacks above 500 to the billing lead."
    verified = {"authority": "externally_verified"}  # held for review by the gates
    high = mem.add(text, principal=HIGH, roles={"billing"}, classification="confidential",
                   **verified)
    assert high.state.value == "PROPOSED"
    before = [e.seq for e in mem.history(high.id, principal=HIGH)]
    low = mem.add(text, principal=LOW, **verified)
    assert low.id != high.id and low.scope.roles == frozenset()
    assert [e.seq for e in mem.history(high.id, principal=HIGH)] == before  # no `reinforced`
    assert high.id not in _seen(mem.history(low.id, principal=LOW))


def test_the_near_duplicate_gate_names_only_what_every_reader_may_read(mem: Memory) -> None:
    retired = mem.add("Offer a free month to churning annual customers.", principal=HIGH,
                      roles={"billing"}, state=S)
    for _ in range(4):
        b = mem.recall(S, principal=HIGH)
        mem.feedback(b.recall_id, principal=HIGH, success=False, used=[retired.id])
    assert mem.inspect(retired.id, principal=HIGH).state.value == "LOW_VALUE"
    again = mem.add("Offer a free month to churning annual customers!", principal=LOW, state=S)
    assert retired.id not in _seen(mem.history(again.id, principal=LOW))
    assert again.state.value == "ACTIVE"  # not held on the strength of a memory LOW cannot see


def test_failure_feedback_supersedes_only_within_the_same_scope(mem: Memory) -> None:
    old = mem.add("The VIP line is 555-0100.", principal=LOW, kind="fact", entity="vip",
                  attribute="line")
    newer = mem.add("The VIP line is 555-0199.", principal=HIGH, kind="fact", entity="vip",
                    attribute="line", classification="confidential")
    b = mem.recall("what is the VIP line", principal=LOW)
    assert [i.memory_id for i in b.items] == [old.id]
    mem.feedback(b.recall_id, principal=LOW, success=False, used=[old.id])
    rec = mem.inspect(old.id, principal=LOW)
    assert rec.state.value == "ACTIVE" and rec.superseded_by is None
    assert mem.inspect(newer.id, principal=HIGH).supersedes is None


def test_a_principal_cannot_write_up(mem: Memory) -> None:
    fact = mem.add("Refund window is 30 days.", principal=HIGH, kind="fact", entity="refund",
                   attribute="window", roles={"billing"})
    before = mem.history(fact.id, principal=HIGH)
    for kw in ({"roles": {"billing"}}, {"classification": "confidential"}):
        with pytest.raises(PermissionDenied):
            mem.add("Refund window is 90 days.", principal=LOW, kind="fact", entity="refund",
                    attribute="window", **kw)
    assert mem.history(fact.id, principal=HIGH) == before
    assert mem.inspect(fact.id, principal=HIGH).state.value == "ACTIVE"


def test_defaults_stay_within_a_low_clearance(mem: Memory) -> None:
    public = Principal("acme", clearance="public")
    rec = mem.add("Greet the customer by name.", principal=public)
    assert rec.scope.classification.label == "public"


def test_erase_and_revoke_reach_only_the_admins_scope(mem: Memory) -> None:
    hidden = mem.add("Restricted note.", principal=HIGH, classification="restricted",
                     consent="c-1", kind="note")
    weak_admin = Principal("acme", roles={"admin"}, clearance="internal")
    with pytest.raises(Exception, match="no memory"):
        mem.erase(hidden.id, principal=weak_admin, reason="probe")
    assert mem.revoke_consent("c-1", principal=weak_admin, reason="probe") == 0
    assert mem.inspect(hidden.id, principal=HIGH).state.value == "ACTIVE"
    assert mem.revoke_consent("c-1", principal=ADMIN, reason="withdrawn") == 1


def test_a_new_role_set_sees_its_own_recall_made_in_another_process(tmp_path: Path) -> None:
    """The cached role sets of recalls are refreshed when the recall file changes, whoever
    wrote it (this process's writes do not move the main file's data_version)."""
    a = Memory(tmp_path / "r.db", embedder="hash")
    b = Memory(tmp_path / "r.db", embedder="hash")
    a.add("Heat the pan first.", principal=LOW, state=S)
    assert b.stats(principal=LOW).recalls == 0  # b caches the recall role sets it knows
    odd = Principal("acme", roles={"support", "night-shift"}, clearance="internal")
    made = a.recall(S, principal=odd)
    assert b.stats(principal=odd).recalls == 1
    b.feedback(made.recall_id, principal=odd, success=True)
    same = a.recall(S, principal=Principal("acme", roles={"billing"}))
    a.feedback(same.recall_id, principal=Principal("acme", roles={"billing"}), success=True)
    a.close()
    b.close()
