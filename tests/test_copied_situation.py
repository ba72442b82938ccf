"""A lesson's content is judged for relevance whatever its source state says (issue 32): an
attacker who copies the present situation into the source state does not get unrelated content
served."""

from __future__ import annotations

from situated import Memory, Principal, State
from situated.recall.briefing import RejectionReason

WHO = Principal(tenant="acme", roles=frozenset({"support"}))
PRESENT = State(
    "Annual subscriber asks for a refund 60 days after buying the plan",
    facts={"plan": "annual", "days_since_purchase": 60},
)
INTENT = "decide the refund for this annual subscriber"


def test_a_copied_situation_does_not_make_unrelated_content_relevant(tmp_path) -> None:
    with Memory(tmp_path / "m.db", embedder="minilm-static") as mem:
        copied = mem.add(
            "Warehouse robots slow to walking pace in narrow aisles near pickers and pallets.",
            principal=WHO, state=PRESENT, namespace="support",
        )
        related = mem.add(
            "Annual plans past 30 days get a prorated refund, not a full one.",
            principal=WHO, state=PRESENT, namespace="support",
        )
        briefing = mem.recall(PRESENT, principal=WHO, intent=INTENT, namespace="support")
        served = {i.memory_id for i in briefing.items}
        assert copied.id not in served
        assert related.id in served
        reasons = {r.memory_id: r.reason for r in briefing.rejected}
        assert reasons.get(copied.id) is RejectionReason.LOW_EXPECTED_UTILITY
