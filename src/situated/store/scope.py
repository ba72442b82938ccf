"""The one scope layer: what a principal may read and write, compiled into bound SQL.

Like row-level security, every store query that touches memories, ledger events, recall records
or feedback goes through a value defined here, and every read method of the store requires one.
There is no "unscoped" read: maintenance that must see every tenant passes `SYSTEM` explicitly
(and never hands what it reads to a caller).

The rules (the README's security section states them for users):

- **Memories.** A principal reads a memory of its own tenant when it holds every role the
  memory requires and its clearance is at least the memory's classification; the lifecycle
  state, namespace and validity gates of the read path apply on top.
- **Writes.** A principal writes only within its own scope: the roles a memory requires must be
  roles the writer holds, its classification at most the writer's clearance (`check_write`).
- **Lookups on a write's behalf** (exact and near duplicates, same-key facts to supersede) see
  only memories that every reader of the new memory may read (`Eligibility.readers_of`), so
  nothing a lookup finds can reveal to those readers what they could not read themselves.
- **Recalls** (the recall record, its `recalled` event, its feedback) carry the scope of the
  principal that made them. A principal sees a recall of its tenant when it holds every role the
  recalling principal held and at least its clearance: it could then read everything the recall
  could have served.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from situated.errors import PermissionDenied
from situated.models import (
    RECALLABLE_STATES,
    Classification,
    LifecycleState,
    Principal,
    Scope,
    role_key,
    utcnow,
)

VISIBLE_STATES: tuple[LifecycleState, ...] = tuple(
    s for s in LifecycleState if s is not LifecycleState.ERASED
)
"""The states inspection paths show (tombstones of erased memories are listed to admins only)."""
ALL_STATES: tuple[LifecycleState, ...] = tuple(LifecycleState)
"""Every state: the scope of writes into a memory (feedback may still reach an erased one)."""


@dataclass(frozen=True)
class Eligibility:
    """Which memories a read made on a principal's behalf may touch.

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
        cls,
        principal: Principal,
        namespace: str | None = None,
        states: tuple[LifecycleState, ...] = VISIBLE_STATES,
    ) -> Eligibility:
        """The gates of inspect/list/history/export/ledger: every lifecycle state but erased."""
        return cls(principal, (namespace,) if namespace else None, states)

    @classmethod
    def readers_of(
        cls, scope: Scope, states: tuple[LifecycleState, ...], same_namespace: bool = True
    ) -> Eligibility:
        """What every reader of a memory with `scope` may read: the scope of a lookup made on
        behalf of writing that memory (duplicates, supersession). Since a writer writes only
        within its own roles and clearance, this is never wider than the writer's own scope."""
        reader = Principal(
            tenant=scope.tenant, roles=scope.roles, clearance=scope.classification,
            name="situated",
        )
        return cls(reader, (scope.namespace,) if same_namespace else None, states)

    def held_keys(self, stored_keys: Iterable[str]) -> list[str]:
        """Of the role sets stored for this tenant, those the principal holds entirely."""
        return held_keys(self.principal, stored_keys)

    def where(self, role_keys: Sequence[str], alias: str = "") -> tuple[str, list[object]]:
        """A WHERE clause and its bound parameters over memory columns (`alias.` prefix);
        `role_keys` are the tenant's stored role sets the principal holds (`held_keys`)."""
        p = f"{alias}." if alias else ""
        clauses = [f"{p}tenant = ?", f"{p}classification <= ?"]
        params: list[object] = [self.principal.tenant, int(self.principal.clearance)]
        clauses.append(f"{p}role_key IN ({marks(role_keys)})")
        params.extend(role_keys)
        clauses.append(f"{p}state IN ({marks(self.states)})")
        params.extend(s.value for s in self.states)
        if self.namespaces is not None:
            clauses.append(f"{p}namespace IN ({marks(self.namespaces)})")
            params.extend(self.namespaces)
        if self.as_of is not None:
            clauses.append(f"{p}valid_from <= ? AND {p}valid_until > ?")
            params.extend([self.as_of, self.as_of])
        if self.known_at is not None:
            clauses.append(f"{p}recorded_at <= ?")
            params.append(self.known_at)
        return " AND ".join(clauses), params

    def where_pg(self, alias: str = "") -> tuple[str, list[object]]:
        """`where` rendered for PostgreSQL (`%s` parameters, arrays): the same gates. The role
        gate compares the memory's required roles (`role_set`, a `text[]`) with the principal's
        in the query, `role_set <@ held`, which is what `held_keys` computes in Python; every
        statement keeps one shape, whatever the number of roles, namespaces or states, so the
        server prepares it once."""
        p = f"{alias}." if alias else ""
        clauses = [f"{p}tenant = %s", f"{p}classification <= %s", f"{p}role_set <@ %s::text[]",
                   f"{p}state = ANY(%s::text[])"]
        params: list[object] = [
            self.principal.tenant, int(self.principal.clearance), sorted(self.principal.roles),
            [s.value for s in self.states],
        ]
        if self.namespaces is not None:
            clauses.append(f"{p}namespace = ANY(%s::text[])")
            params.append(list(self.namespaces))
        if self.as_of is not None:
            clauses.append(f"{p}valid_from <= %s AND {p}valid_until > %s")
            params.extend([self.as_of, self.as_of])
        if self.known_at is not None:
            clauses.append(f"{p}recorded_at <= %s")
            params.append(self.known_at)
        return " AND ".join(clauses), params


@dataclass(frozen=True)
class System:
    """The scope of maintenance that must see every tenant (analysis backfill, ledger replay,
    lifecycle sweeps, health). Passed explicitly, so such a read is never written by accident;
    what it reads never reaches a caller."""

    purpose: str


SYSTEM = System("maintenance")


def held_keys(principal: Principal, stored_keys: Iterable[str]) -> list[str]:
    """Of stored role keys (`models.role_key`), those naming only roles the principal holds."""
    held = principal.roles
    return [k for k in stored_keys if k == "" or set(k.split("\x1f")) <= held]


def recall_where(
    principal: Principal, role_keys: Sequence[str], alias: str = ""
) -> tuple[str, list[object]]:
    """A WHERE clause over recall-scope columns (`tenant`, `role_key`, `clearance`): the recalls
    (and their events and feedback) this principal may see; `role_keys` as in `where`."""
    p = f"{alias}." if alias else ""
    clause = (
        f"{p}tenant = ? AND {p}clearance <= ? AND {p}role_key IN ({marks(role_keys)})"
    )
    return clause, [principal.tenant, int(principal.clearance), *role_keys]


def recall_where_pg(principal: Principal, alias: str = "") -> tuple[str, list[object]]:
    """`recall_where` rendered for PostgreSQL: the recalling principal's roles (`role_set`)
    all held by the reader, its clearance at most the reader's."""
    p = f"{alias}." if alias else ""
    clause = f"{p}tenant = %s AND {p}clearance <= %s AND {p}role_set <@ %s::text[]"
    return clause, [principal.tenant, int(principal.clearance), sorted(principal.roles)]


def check_write(principal: Principal, scope: Scope) -> None:
    """Refuse a write outside the writer's own scope (roles it holds, classification at most
    its clearance, its own tenant)."""
    if scope.tenant != principal.tenant:
        raise PermissionDenied("a principal writes only in its own tenant")
    missing = sorted(scope.roles - principal.roles)
    if missing:
        raise PermissionDenied(
            f"roles: a memory may require only roles its writer holds (missing: "
            f"{', '.join(missing)})"
        )
    if scope.classification > principal.clearance:
        raise PermissionDenied(
            f"classification: {scope.classification.label} is above the writer's clearance "
            f"({principal.clearance.label})"
        )


def default_classification(principal: Principal) -> Classification:
    """A memory's classification when the writer names none: internal, or the writer's
    clearance when that is lower."""
    return min(Classification.INTERNAL, principal.clearance)


def principal_key(principal: Principal) -> str:
    """The principal's roles as a stored role key (the scope of a recall it makes)."""
    return role_key(principal.roles)


def marks(items: Iterable[object]) -> str:
    """`?,?,?` for a list of bound parameters (`NULL` for none: `IN (NULL)` matches nothing)."""
    n = len(list(items))
    return ",".join("?" * n) if n else "NULL"
