"""Inferred outcomes: feedback a client never gave, read from what it did next.

`situated.service.inferred` watches a session: a `remember` that corrects a fact a recall
served (same entity and attribute, another value) is a failure blamed on the corrected memory;
a later recall in the same session and namespace, with no correction in between, is a weak
success that credits no memory. This module writes such an outcome:

- the recall's feedback row is marked inferred (`feedback.inferred`, digest `inferred:...`),
  and explicit feedback for the recall later replaces it;
- its ledger events are `feedback` events with `"inferred": true` in their data;
- a blamed memory's per-namespace utility counts it at `INFERRED_WEIGHT`, and the overall
  counters (which decide demotion) do not count it at all, so an inferred outcome never
  moves a memory's lifecycle on its own.
"""

from __future__ import annotations

from situated.models import Principal
from situated.store.contract import StoreContract as Store
from situated.store.ledger import Credit, EventType
from situated.store.scope import ALL_STATES, Eligibility

INFERRED_DIGEST = "inferred:"


def record_inferred(
    store: Store, recall_id: str, principal: Principal, success: bool, blamed: str | None
) -> bool:
    """Write one inferred outcome for a recall the principal may see (False: it already has
    feedback, explicit or inferred; nothing written)."""
    recall = store.get_recall(recall_id, principal)
    own = Eligibility(principal, states=ALL_STATES)
    if blamed is not None and not (blamed in recall.served
                                   and store.visible_ids([blamed], own)):
        return False
    base = {"inferred": True, "namespace": recall.namespace, "reward": None}
    with store.transaction():
        if store.feedback_digest(recall) is not None:
            return False
        digest = INFERRED_DIGEST + ("success" if success else f"failure:{blamed}")
        store.save_feedback(recall, success, () if blamed is None else (blamed,), None, digest,
                            inferred=True)
        if blamed is not None:
            store.append_event(
                blamed, own, EventType.FEEDBACK, principal.name,
                "blamed by inferred feedback: a later remember corrected this fact",
                base | {"credit": Credit.BLAMED.value}, recall_id=recall_id,
            )
        else:
            visible = store.visible_ids(recall.served, own)
            for mid in (m for m in recall.served if m in visible):
                store.append_event(
                    mid, own, EventType.FEEDBACK, principal.name,
                    "exposed; inferred weak success: a later recall, no correction between",
                    base | {"credit": Credit.EXPOSED.value}, recall_id=recall_id,
                )
    return True
