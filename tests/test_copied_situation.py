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


def test_a_word_in_common_by_chance_does_not_rescue_a_copied_situation(tmp_path) -> None:
    """Content just under the copied-state floor that shares one noun with the present
    ("subscriber") is still about something else: beside a copied source state a chance word
    rescues nothing (a good share of what the lesson names would)."""
    with Memory(tmp_path / "m.db", embedder="minilm-static") as mem:
        chance = mem.add(
            "This subscriber likes a dark theme and brief answers in the app.",
            principal=WHO, state=PRESENT, namespace="support",
        )
        briefing = mem.recall(PRESENT, principal=WHO, intent=INTENT, namespace="support")
        assert chance.id not in {i.memory_id for i in briefing.items}
        reasons = {r.memory_id: r.reason for r in briefing.rejected}
        assert reasons.get(chance.id) is RejectionReason.LOW_EXPECTED_UTILITY


def test_content_the_embedding_cannot_place_needs_a_thing_the_present_names(tmp_path) -> None:
    """A source state close to the present (not its copy) and content above the ordinary floor
    but under the level unrelated pairs rarely reach: when the lesson names nothing the
    present or the intent names, it is about something else and is not served; a lesson on
    the same things with the same state is."""
    near_state = State("A yearly subscriber asked for a refund two months after buying the plan")
    with Memory(tmp_path / "m.db", embedder="minilm-static") as mem:
        other = mem.add(
            "Loyalty points expire after twelve months without a purchase.",
            principal=WHO, state=near_state, namespace="support",
        )
        related = mem.add(
            "Annual plans past 30 days get a prorated refund, not a full one.",
            principal=WHO, state=near_state, namespace="support",
        )
        briefing = mem.recall(PRESENT, principal=WHO, intent=INTENT, namespace="support")
        served = {i.memory_id for i in briefing.items}
        assert other.id not in served
        assert related.id in served
        rejected = {r.memory_id: r for r in briefing.rejected}
        assert rejected[other.id].reason is RejectionReason.LOW_EXPECTED_UTILITY
        assert "nothing the lesson names" in rejected[other.id].detail
