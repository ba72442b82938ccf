"""Stage 1, eligibility: the hard gates, as bound SQL parameters applied inside the store.

An `Eligibility` is built from a typed `Principal`; nothing here accepts a filter string. The
same gates filter the record table and the vector index, so a search can never see, rank or
count a row the principal may not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from situated.models import (
    RECALLABLE_STATES,
    LifecycleState,
    Principal,
    role_key,
    utcnow,
)


@dataclass(frozen=True)
class Eligibility:
    """Which memories a read may touch.

    Args:
        principal: tenant, roles and clearance of the reader (always applied).
        namespaces: restrict to these namespaces; None means every namespace of the tenant.
        states: lifecycle states visible to this read path.
        as_of: world time; when set, only memories whose validity window holds it.
        known_at: transaction time; when set, only memories recorded by then.
    """

    principal: Principal
    namespaces: tuple[str, ...] | None = None
    states: tuple[LifecycleState, ...] = RECALLABLE_STATES
    as_of: float | None = None
    known_at: float | None = None
    all_roles: bool = False
    """Internal writers only (dedupe at write): ignore required roles within the tenant."""

    @classmethod
    def for_recall(
        cls,
        principal: Principal,
        namespace: str | None = None,
        as_of: float | None = None,
        known_at: float | None = None,
    ) -> Eligibility:
        """The gates of a recall: recallable states, validity window holding `as_of` (now)."""
        return cls(
            principal=principal,
            namespaces=(namespace,) if namespace else None,
            states=RECALLABLE_STATES,
            as_of=utcnow() if as_of is None else as_of,
            known_at=known_at,
        )

    @classmethod
    def for_inspection(
        cls, principal: Principal, namespace: str | None = None
    ) -> Eligibility:
        """The gates of inspect/list/history/export: every lifecycle state but erased."""
        states = tuple(s for s in LifecycleState if s is not LifecycleState.ERASED)
        return cls(principal, (namespace,) if namespace else None, states)

    def allowed_role_keys(self, stored_keys: Iterable[str]) -> list[str]:
        """Of the role sets stored for this tenant, those the principal holds entirely."""
        held = self.principal.roles
        return [
            k for k in stored_keys
            if self.all_roles or k == "" or set(k.split("\x1f")) <= held
        ]

    def where(self, role_keys: list[str], alias: str = "") -> tuple[str, list[object]]:
        """A WHERE clause and its bound parameters over memory columns (`alias.` prefix)."""
        p = f"{alias}." if alias else ""
        clauses = [f"{p}tenant = ?", f"{p}classification <= ?"]
        params: list[object] = [self.principal.tenant, int(self.principal.clearance)]
        clauses.append(f"{p}role_key IN ({_marks(role_keys)})")
        params.extend(role_keys)
        clauses.append(f"{p}state IN ({_marks(self.states)})")
        params.extend(s.value for s in self.states)
        if self.namespaces is not None:
            clauses.append(f"{p}namespace IN ({_marks(self.namespaces)})")
            params.extend(self.namespaces)
        if self.as_of is not None:
            clauses.append(f"{p}valid_from <= ? AND {p}valid_until > ?")
            params.extend([self.as_of, self.as_of])
        if self.known_at is not None:
            clauses.append(f"{p}recorded_at <= ?")
            params.append(self.known_at)
        return " AND ".join(clauses), params


def _marks(items: Iterable[object]) -> str:
    n = len(list(items))
    return ",".join("?" * n) if n else "NULL"


def principal_role_key(principal: Principal) -> str:
    return role_key(principal.roles)
