"""Maintenance: lifecycle transitions in bulk. Failures are loud: logged, counted, in `health`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import apsw

from situated.errors import SituatedError
from situated.learning.lifecycle import LifecycleRules
from situated.models import LifecycleState, utcnow
from situated.store.contract import StoreContract as Store
from situated.store.ledger import EventType
from situated.store.scope import SYSTEM

log = logging.getLogger("situated.maintenance")


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance run did."""

    demoted: tuple[str, ...] = ()
    archived: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    refit: dict[str, object] = field(default_factory=dict)
    graphs: int = 0
    """Tenants given their own vector graphs in the database (PostgreSQL; `build_graphs`)."""


def run_maintenance(
    store: Store, rules: LifecycleRules, now: float | None = None, actor: str = "maintenance"
) -> MaintenanceReport:
    """Demote ACTIVE memories that fell under the floor after enough uses; archive LOW_VALUE
    memories that stayed there for `rules.archive_after_days` and never earned credit."""
    now = utcnow() if now is None else now
    demoted: list[str] = []
    archived: list[str] = []
    failures: list[str] = []
    for mid, _tenant, state, c in store.lifecycle_candidates(SYSTEM):
        try:
            with store.transaction():
                if state == LifecycleState.ACTIVE.value:
                    to, why = rules.after_feedback(LifecycleState.ACTIVE, c, credited=False)
                    if to is LifecycleState.LOW_VALUE:
                        store.append_event(
                            mid, SYSTEM, EventType.TRANSITIONED, actor, why,
                            {"to": to.value, "uses": c.uses, "successes": c.successes},
                        )
                        demoted.append(mid)
                elif c.successes == 0:
                    at = store.low_value_since(mid, SYSTEM)
                    if at is not None and now - at >= rules.archive_after_days * 86400:
                        why = (f"LOW_VALUE for {(now - at) / 86400:.0f} days with no credited "
                               f"use ({c.uses} uses)")
                        store.append_event(
                            mid, SYSTEM, EventType.TRANSITIONED, actor, why,
                            {"to": LifecycleState.ARCHIVED.value, "uses": c.uses},
                        )
                        archived.append(mid)
        except (apsw.Error, SituatedError) as exc:
            msg = f"{mid}: {type(exc).__name__}: {exc}"
            log.error("maintenance failed for %s", msg)
            failures.append(msg)
            with store.transaction():
                store.record_failure("maintenance", msg, mid)
    return MaintenanceReport(tuple(demoted), tuple(archived), tuple(failures))
