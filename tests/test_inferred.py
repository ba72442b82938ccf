"""Inferred outcomes (`Memory.infer_feedback`): labelled, weighted less, never moving the
lifecycle on their own, replaced by explicit feedback, and replayed by `rebuild`."""

from __future__ import annotations

import pytest

from situated import Memory, Principal, State
from situated.errors import InvalidInput, NotFound
from situated.models import LifecycleState
from situated.store.ledger import EventType
from situated.store.scope import Eligibility

NOW = State("What plan is customer 42 on?", facts={"customer": 42})


def _fact(mem: Memory, who: Principal) -> str:
    return mem.add("Customer 42's plan is annual.", principal=who, kind="fact",
                   namespace="accounts", entity="customer42", attribute="plan",
                   value="annual", state=State("account review", facts={"customer": 42})).id


def test_inferred_failures_never_demote_and_weigh_half(mem: Memory, acme: Principal) -> None:
    mid = _fact(mem, acme)
    for _ in range(12):  # far past the demotion threshold, had they been explicit
        b = mem.recall(NOW, principal=acme, namespace="accounts")
        assert [i.memory_id for i in b.items] == [mid]
        assert mem.infer_feedback(b.recall_id, principal=acme, success=False, blamed=mid)
    rec = mem.inspect(mid, principal=acme)
    assert rec.state is LifecycleState.ACTIVE
    assert (rec.counters.uses, rec.counters.failures) == (0, 0)
    ns = mem.store.namespace_counters([mid], "accounts", Eligibility.for_inspection(acme))
    assert ns[mid] == (6.0, 0.0)  # 12 inferred failures count as 6 uses, no success
    events = [e for e in mem.history(mid, principal=acme) if e.event is EventType.FEEDBACK]
    assert len(events) == 12 and all(e.data["inferred"] is True for e in events)
    assert mem.rebuild().mismatched == ()


def test_explicit_feedback_replaces_an_inferred_outcome(mem: Memory, acme: Principal) -> None:
    mid = _fact(mem, acme)
    b = mem.recall(NOW, principal=acme, namespace="accounts")
    assert mem.infer_feedback(b.recall_id, principal=acme, success=True)
    assert not mem.infer_feedback(b.recall_id, principal=acme, success=False, blamed=mid)
    result = mem.feedback(b.recall_id, principal=acme, success=True, used=[mid])
    assert result.credited == (mid,) and not result.duplicate
    assert mem.inspect(mid, principal=acme).counters.successes == 1
    assert not mem.infer_feedback(b.recall_id, principal=acme, success=True)  # explicit wins
    assert mem.stats(principal=acme).feedback == 1


def test_inferred_feedback_is_scoped_like_explicit(mem: Memory, acme: Principal,
                                                   globex: Principal) -> None:
    mid = _fact(mem, acme)
    b = mem.recall(NOW, principal=acme, namespace="accounts")
    with pytest.raises(NotFound):
        mem.infer_feedback(b.recall_id, principal=globex, success=True)
    with pytest.raises(InvalidInput, match="blamed"):
        mem.infer_feedback(b.recall_id, principal=acme, success=False, blamed="not an id")
    other = mem.add("Unrelated note.", principal=acme, kind="note").id
    assert not mem.infer_feedback(b.recall_id, principal=acme, success=False, blamed=other)
    assert [e for e in mem.history(mid, principal=acme) if e.event is EventType.FEEDBACK] == []
