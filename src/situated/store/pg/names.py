"""The registry of tenant, namespace and role names for the PostgreSQL store: a look-alike of
a taken name is refused, as `store.names` does for SQLite (same skeletons, same messages).

A name is claimed inside the write transaction of the first memory that uses it, under that
tenant's write lock; tenant names are store-wide, so their claim also takes the registry's own
lock (two new tenants with look-alike names cannot both be claimed)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from situated.errors import InvalidInput
from situated.names import SKELETON_VERSION, skeleton
from situated.store.names import _FIELDS, Sees, _refusal

NAMES_LOCK = 0x5175_7473_0002


class _Statements(Protocol):
    def _all(self, sql: str, params: tuple[object, ...] = ...) -> list[tuple[object, ...]]: ...
    def _run(self, sql: str, params: tuple[object, ...] = ...) -> int: ...


def claim_scope(db: _Statements, tenant: str, namespace: str, roles: Iterable[str],
                sees: Sees | None = None) -> None:
    """Claim a memory's tenant, namespace and required roles (call in a write transaction);
    `sees`: which namespaces the writer may see (None: all; `store.names`)."""
    _refresh(db)
    claim(db, "tenant", "", tenant)
    claim(db, "namespace", tenant, namespace, sees)
    for role in sorted(roles):
        claim(db, "role", tenant, role)


def claim(db: _Statements, kind: str, scope: str, name: str, sees: Sees | None = None
          ) -> None:
    """Record `name`, or accept it if taken already, exactly (InvalidInput naming the argument
    when a different name with the same skeleton is taken in the same kind and scope and, for
    a namespace, `sees` says the writer may see it)."""
    key = skeleton(name)
    find = ("SELECT name FROM names WHERE kind = %s AND scope = %s "
            "AND (skeleton = %s OR name = %s)")
    taken = {str(r[0]) for r in db._all(find, (kind, scope, key, name))}
    if name in taken:
        return
    if kind == "tenant":  # store-wide: serialize new tenants, then look again
        db._all("SELECT pg_advisory_xact_lock(%s)", (NAMES_LOCK,))
        taken = {str(r[0]) for r in db._all(find, (kind, scope, key, name))}
        if name in taken:
            return
    if taken and (sees is None or sees(sorted(taken))):
        raise InvalidInput(_FIELDS[kind], _refusal(kind, name))
    db._run(
        "INSERT INTO names (kind, scope, skeleton, name) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        (kind, scope, key, name),
    )


def _refresh(db: _Statements) -> None:
    """Recompute the stored skeletons if another `skeleton` release computed them."""
    row = db._all("SELECT value FROM meta WHERE key = 'name_skeletons'", ())
    if row and row[0][0] == SKELETON_VERSION:
        return
    db._all("SELECT pg_advisory_xact_lock(%s)", (NAMES_LOCK,))
    for kind, scope, name in db._all("SELECT kind, scope, name FROM names", ()):
        db._run(
            "UPDATE names SET skeleton = %s WHERE kind = %s AND scope = %s AND name = %s",
            (skeleton(str(name)), kind, scope, name),
        )
    db._run(
        "INSERT INTO meta (key, value) VALUES ('name_skeletons', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (SKELETON_VERSION,),
    )
