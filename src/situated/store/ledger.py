"""Ledger events and the fold that turns a memory's events into its lifecycle state and counters.

The store applies every change through `fold`, and `replay` runs the same fold over the whole
history, so the stored state and a replay of the ledger cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from situated.models import Counters, LifecycleState


class EventType(StrEnum):
    """Every kind of change the ledger records."""

    PROPOSED = "proposed"
    PROMOTED = "promoted"
    REJECTED = "rejected"
    RECALLED = "recalled"
    FEEDBACK = "feedback"
    TRANSITIONED = "transitioned"
    SUPERSEDED = "superseded"
    REINFORCED = "reinforced"
    REVOKED = "revoked"
    ERASED = "erased"
    REBUILT = "rebuilt"
    KEY_CREATED = "key_created"
    KEY_REVOKED = "key_revoked"
    SCHEMA = "schema"
    """Evidence about an attribute's schema (`situated.learning.schema`); no lifecycle effect."""


class Credit(StrEnum):
    """What one feedback event did to one memory."""

    CREDITED = "credited"
    BLAMED = "blamed"
    EXPOSED = "exposed"


@dataclass(frozen=True)
class LedgerEvent:
    """One append-only ledger row."""

    seq: int
    """Order: the file-wide sequence for maintenance; for a caller, the event's position among
    the events it may see (`Store.ledger`), or within the memory's own events (`history`)."""
    at: datetime
    """When it was written (aware, UTC)."""
    event: EventType
    tenant: str
    memory_id: str | None
    recall_id: str | None
    actor: str
    reason: str
    data: dict[str, Any] = field(default_factory=dict)


INFERRED_WEIGHT = 0.5
"""What an inferred outcome (`situated.service.inferred`) counts for, against 1 for explicit
feedback, in a memory's per-namespace utility. Inferred outcomes never change the overall
counters, so they never move a memory's lifecycle."""


FINAL_STATES = frozenset({LifecycleState.REJECTED, LifecycleState.REVOKED, LifecycleState.ERASED})
"""States no later event can leave (only erasure may still follow, to remove content)."""


@dataclass(frozen=True)
class Folded:
    """A memory's lifecycle state and counters as implied by its events."""

    state: LifecycleState
    counters: Counters


def fold(current: Folded | None, event: EventType, data: dict[str, Any]) -> Folded:
    """Apply one event to a memory's state and counters."""
    if current is None:
        current = Folded(LifecycleState.PROPOSED, Counters())
    state, c = current.state, current.counters
    if state in FINAL_STATES and event not in (EventType.FEEDBACK, EventType.ERASED):
        return current  # rejected, revoked and erased memories never come back
    if event is EventType.PROPOSED:
        return Folded(LifecycleState.PROPOSED, Counters())
    if event is EventType.PROMOTED:
        state = LifecycleState.ACTIVE
    elif event is EventType.REJECTED:
        state = LifecycleState.REJECTED
    elif event is EventType.TRANSITIONED:
        state = LifecycleState(data["to"])
    elif event is EventType.SUPERSEDED:
        state = LifecycleState.INVALIDATED
    elif event is EventType.REVOKED:
        state = LifecycleState.REVOKED
    elif event is EventType.ERASED:
        state = LifecycleState.ERASED
    elif event is EventType.FEEDBACK and not data.get("inferred"):
        credit = Credit(data["credit"])
        if credit is Credit.CREDITED:
            c = Counters(c.uses + 1, c.successes + 1, c.failures, c.exposures)
        elif credit is Credit.BLAMED:
            c = Counters(c.uses + 1, c.successes, c.failures + 1, c.exposures)
        else:
            c = Counters(c.uses, c.successes, c.failures, c.exposures + 1)
    return Folded(state, c)


def replay(events: Iterable[LedgerEvent]) -> Folded | None:
    """Recompute a memory's state and counters from its events, oldest first."""
    result: Folded | None = None
    for ev in events:
        result = fold(result, ev.event, ev.data)
    return result
