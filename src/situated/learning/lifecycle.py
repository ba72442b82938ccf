"""Lifecycle rules driven by outcomes. Transitions are ledger events; nothing is deleted."""

from __future__ import annotations

from dataclasses import dataclass

from situated.models import Counters, LifecycleState


@dataclass(frozen=True)
class LifecycleRules:
    """Thresholds for demotion and revival.

    Args:
        min_uses: uses needed before a memory can be demoted (a new memory is not judged).
        floor: utility rate under which a used memory becomes LOW_VALUE.
        archive_after_days: how long a LOW_VALUE memory without any credited use waits before
            maintenance archives it (memories with accumulated credit are never archived).
    """

    min_uses: int = 3
    floor: float = 0.35
    archive_after_days: float = 30.0

    def after_feedback(self, state: LifecycleState, c: Counters, credited: bool) -> tuple[
        LifecycleState | None, str
    ]:
        """The transition implied by new counters, with its reason, or (None, '')."""
        if state is LifecycleState.ACTIVE and c.uses >= self.min_uses and c.utility < self.floor:
            return LifecycleState.LOW_VALUE, (
                f"utility {c.utility:.2f} < {self.floor} after {c.uses} uses"
            )
        if state is LifecycleState.LOW_VALUE and credited and c.utility >= self.floor:
            return LifecycleState.ACTIVE, f"revived by credited use (utility {c.utility:.2f})"
        return None, ""
