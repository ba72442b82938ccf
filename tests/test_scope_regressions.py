"""Scope defects found by the adversarial scope suite (`test_scope_suite.py`), each pinned by a
minimal test through the public API that failed before its fix."""

from __future__ import annotations

from pathlib import Path

from situated import Memory, Principal, State

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
