"""Scope defects found by the adversarial scope suite (`test_scope_suite.py`), each pinned by a
minimal test through the public API that failed before its fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from situated import Classification, Memory, Principal, State

SUPPORT = Principal("acme", roles={"support"})
BILLING = Principal("acme", roles={"billing"})


def test_a_recall_by_a_new_role_set_is_visible_to_its_own_principal(tmp_path: Path) -> None:
    """The store cached the role sets of a tenant's recalls and did not drop the cache when it
    saved a recall of a new role set itself (only another connection's commit did): the
    recalling principal then could not give feedback on its own recall (NotFound), and did
    not see it in `stats` or `ledger`."""
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.add("Refunds past 30 days are prorated.", principal=SUPPORT)
    first = mem.recall(State("refund"), principal=SUPPORT)
    mem.feedback(first.recall_id, principal=SUPPORT, success=True)  # fills the cache
    mine = mem.recall(State("refund"), principal=BILLING)  # a role set not seen before
    assert mem.stats(principal=BILLING).recalls == 1
    assert any(e.recall_id == mine.recall_id for e in mem.ledger(principal=BILLING))
    mem.feedback(mine.recall_id, principal=BILLING, success=True)


def test_feedback_events_do_not_name_a_recall_the_reader_may_not_see(tmp_path: Path) -> None:
    """A feedback event about a memory the reader may read (its counters changed) carried the
    id of the recall it came from, made by a principal the reader does not dominate: `history`
    and `ledger` showed that recall's id to a reader for whom `feedback` on it is NotFound."""
    mem = Memory(tmp_path / "m.db", embedder="hash")
    root = Principal("acme", roles={"billing", "support"}, clearance="restricted")
    s = State("annual customer wants a refund", facts={"plan": "annual"})
    shared = mem.add("Prorate annual refunds.", principal=SUPPORT, state=s)
    mem.add("Prorate annual refunds on the merger account.", principal=root, state=s,
            roles=["billing"], classification="restricted")
    theirs = mem.recall(s, principal=root)
    assert shared.id in {i.memory_id for i in theirs.items}
    mem.feedback(theirs.recall_id, principal=root, success=True, used=[shared.id])
    events = mem.history(shared.id, principal=SUPPORT)
    assert [e.event.value for e in events][-1] == "feedback"  # the counters still replay
    shown = repr(events) + repr(mem.ledger(principal=SUPPORT))
    assert theirs.recall_id not in shown
    mine = mem.recall(s, principal=SUPPORT)
    mem.feedback(mine.recall_id, principal=SUPPORT, success=True, used=[shared.id])
    assert mine.recall_id in repr(mem.history(shared.id, principal=SUPPORT))  # its own: shown
    assert theirs.recall_id in repr(mem.history(shared.id, principal=root))



def _train(mem: Memory, who: Principal, s: State, n: int = 32) -> None:
    """Recalls with feedback enough for the learned reconstructor to fit (`MIN_LABELLED`)."""
    for i in range(n):
        b = mem.recall(s, principal=who)
        mem.feedback(b.recall_id, principal=who, success=bool(i % 2),
                     used=[x.memory_id for x in b.items])
    mem.maintain()


def test_stats_show_calibration_only_to_who_may_see_every_labelled_recall(
    tmp_path: Path,
) -> None:
    """`stats().calibration` of the learned reconstructor counts the examples it was fitted
    on, every labelled recall of the tenant: a principal that could see none of them (their
    recaller was restricted) read their number."""
    mem = Memory(tmp_path / "m.db", embedder="hash", reconstructor="learned")
    root = Principal("acme", roles={"billing", "support"}, clearance="restricted")
    s = State("annual customer wants a refund", facts={"plan": "annual"})
    mem.add("Annual plans get a prorated refund.", principal=SUPPORT, state=s)
    mem.add("Refund the merger account in full.", principal=root, state=s, roles=["billing"],
            classification="restricted")
    _train(mem, root, s)
    assert mem.stats(principal=root).calibration is not None
    assert mem.stats(principal=SUPPORT).recalls == 0
    assert mem.stats(principal=SUPPORT).calibration is None



def test_stats_do_not_tell_whether_anyone_else_used_the_store(tmp_path: Path) -> None:
    """`stats().embedder` was None until the first write or recall of any tenant bound the
    store's embedder: a tenant's stats told whether another tenant had used the store."""
    mem = Memory(tmp_path / "m.db", embedder="hash")
    before = mem.stats(principal=SUPPORT)
    mem.add("A lesson of another tenant.", principal=Principal("globex"))
    assert mem.stats(principal=SUPPORT) == before
    assert before.embedder == mem.embedder.model_ref


# -- side channels found and left open here (other changes own them): strict xfails, so each
# -- fails the day it is fixed and its mask in `test_scope_suite.KNOWN_OPEN` can go


def _explain(mem: Memory, who: Principal) -> str:
    return mem.recall(State("refund for an annual plan"), principal=who, intent="refund").explain()


def _scrub_ids(text: str) -> str:
    import re
    return re.sub(r"\b(?:mem|rc)_[0-9a-f]{16}\b", "<id>", text)


@pytest.mark.parametrize("resident_mb", [0, 64])
def test_lexical_scores_ignore_other_tenants(tmp_path: Path, resident_mb: float) -> None:
    """The lexical score in `explain` does not move with another tenant's writes: both search
    paths score BM25 with the searching tenant's own statistics (`store/lexical.py`; FTS5's
    bm25 took its row count, average length and document frequencies from the whole file)."""
    out = []
    for noisy in (False, True):
        mem = Memory(tmp_path / f"m{noisy}{resident_mb}.db", embedder="hash",
                     resident_mb=resident_mb)
        mem.store.resident.load_after = 1
        for text in ("Annual plans get a prorated refund.",
                     "Monthly plans renew on the first day of the month.",
                     "Shipping delays are reported to the carrier desk."):
            mem.add(text, principal=SUPPORT)
        if noisy:
            other = Principal("globex", roles={"support"})
            for i in range(5):
                mem.add(f"Refund rule {i} for plans of another tenant.", principal=other)
        out.append(_scrub_ids(_explain(mem, SUPPORT)))
        mem.close()
    assert re.search(r"lexical=(?!0\.000)\d", out[0]), out[0]  # the words count
    assert out[0] == out[1]


@pytest.mark.xfail(strict=True, reason="lexical statistics are per tenant, not per scope")
@pytest.mark.parametrize("resident_mb", [0, 64])
def test_lexical_scores_ignore_other_scopes_of_the_tenant(
    tmp_path: Path, resident_mb: float
) -> None:
    """On both search paths the lexical score a principal sees counts memories of its tenant
    it may not read (a restricted writer's texts change the document frequencies): the number
    shown in `explain` tells how many restricted memories hold the query's words."""
    out = []
    root = Principal("acme", roles={"support", "billing"}, clearance="restricted")
    for noisy in (False, True):
        mem = Memory(tmp_path / f"m{noisy}.db", embedder="hash", resident_mb=resident_mb)
        mem.store.resident.load_after = 1
        mem.add("Annual plans get a prorated refund.", principal=SUPPORT)
        if noisy:
            for i in range(5):
                mem.add(f"Refund rule {i} of the merger.", principal=root, roles=["billing"],
                        classification="restricted")
        out.append(_scrub_ids(_explain(mem, SUPPORT)))
        mem.close()
    assert out[0] == out[1]


def test_ledger_seq_does_not_count_other_scopes(tmp_path: Path) -> None:
    """`seq` is the event's position among those the principal may see: no gap counts the
    events of other tenants or of scopes it may not read."""
    out = []
    root = Principal("acme", roles={"billing"}, clearance="restricted")
    for noisy in (False, True):
        mem = Memory(tmp_path / f"m{noisy}.db", embedder="hash")
        mem.add("Annual plans get a prorated refund.", principal=SUPPORT)
        if noisy:
            mem.add("The merger closes Friday.", principal=root, classification="restricted")
        mem.add("Monthly plans get no refund.", principal=SUPPORT)
        out.append([e.seq for e in mem.ledger(principal=SUPPORT)])
        mem.close()
    assert out[0] == out[1]


def test_stats_do_not_count_failures_of_recalls_out_of_scope(tmp_path: Path) -> None:
    """A reconstructor failure on a restricted memory (during a restricted principal's recall)
    is counted only in the `stats` of principals who may read that memory: a failure carries
    the scope of the memory it is about (m009)."""
    from situated.errors import ModelError
    from situated.recall.reconstruct.rules import RulesReconstructor

    class Flaky(RulesReconstructor):
        name = "flaky"

        def reconstruct(self, item: Any) -> Any:
            if item.record.scope.classification == Classification.RESTRICTED:
                raise ModelError("the model is down")
            return super().reconstruct(item)

    mem = Memory(tmp_path / "m.db", embedder="hash", reconstructor=Flaky())
    root = Principal("acme", roles={"billing"}, clearance="restricted")
    s = State("annual customer wants a refund")
    mem.add("Annual plans get a prorated refund.", principal=SUPPORT, state=s)
    mem.add("Refund the merger account in full.", principal=root, state=s,
            classification="restricted")
    mem.recall(s, principal=root)
    assert mem.stats(principal=root).maintenance_failures == {"reconstructor:flaky": 1}
    assert mem.stats(principal=SUPPORT).maintenance_failures == {}



@pytest.mark.xfail(strict=True, reason="the learned reconstructor is fitted per tenant")
def test_learned_confidence_ignores_feedback_out_of_scope(tmp_path: Path) -> None:
    """The learned reconstructor is fitted on every labelled recall of the tenant, so the
    confidence a principal sees in `explain` moves with feedback on recalls it may not see
    (made by a restricted principal). Fitting per scope, or on what every reader may see, is
    a design decision left open."""
    out = []
    root = Principal("acme", roles={"billing", "support"}, clearance="restricted")
    s = State("annual customer wants a refund", facts={"plan": "annual"})
    for noisy in (False, True):
        mem = Memory(tmp_path / f"m{noisy}.db", embedder="hash", reconstructor="learned")
        mem.add("Annual plans get a prorated refund.", principal=SUPPORT, state=s)
        if noisy:
            mem.add("Refund the merger account in full.", principal=root, state=s,
                    roles=["billing"], classification="restricted")
            _train(mem, root, s)
        out.append(_scrub_ids(mem.recall(s, principal=SUPPORT).explain()))
        mem.close()
    assert out[0] == out[1]
