"""The Quickstart's store, shared by the framework adapters' tests."""

from __future__ import annotations

from pathlib import Path

from situated import Memory, Principal, State

ME = Principal(tenant="acme", roles={"support"}, clearance="internal")
OTHER = Principal(tenant="globex", roles={"support"}, clearance="internal")
NOW = "Annual customer wants a refund 12 days after buying and asks to be e-mailed"
NOW_FACTS = {"plan": "annual", "days_since_purchase": 12}


def quickstart(path: Path) -> tuple[Memory, dict[str, str]]:
    """A hash-embedder store with the Quickstart's lesson, fact and preference for `ME`, and
    a look-alike preference of another tenant."""
    mem = Memory(path, embedder="hash")
    lesson = mem.add(
        "Annual plans past 30 days get a prorated refund, not a full one.",
        principal=ME, namespace="refunds", action="offered the prorated amount", success=True,
        state=State("Annual subscriber asks for a refund after 60 days",
                    facts={"plan": "annual", "days_since_purchase": 60}),
        conditions=["plan == 'annual'", "days_since_purchase > 30"])
    fact = mem.add("Refunds above 250 USD need a supervisor's approval.", principal=ME,
                   namespace="refunds", kind="fact", entity="refund_policy",
                   attribute="approval_threshold_usd", value=250, authority="system_observed")
    pref = mem.add("The customer prefers answers by e-mail, not phone.", principal=ME,
                   namespace="refunds", kind="preference", authority="user_declared")
    foreign = mem.add("The customer prefers answers by e-mail about a refund, not phone.",
                      principal=OTHER, namespace="refunds", kind="preference",
                      authority="user_declared")
    return mem, {"lesson": lesson.id, "fact": fact.id, "pref": pref.id, "foreign": foreign.id}
