"""The registry of tenant, namespace and role names: a look-alike of a taken name is refused.

A name passes `situated.names.canonical_name` on its own; whether it looks like another name
needs the names already taken. The `names` table (migration `m007_names`) keeps each one with
its confusable `skeleton`: kind `tenant` (scope `''`), or `namespace` / `role` (scope: the
tenant). A name is claimed when the first memory that uses it is inserted, inside that write
transaction, so two writers cannot both claim look-alikes. A store's names that already looked
alike when the registry was created, or when a new `skeleton` release made them alike, are all
kept: refusing them would lock their owners out; only new look-alikes are refused.

A namespace is refused only for a look-alike the writer may see (`Sees`: a memory of that
namespace the writer may read): a look-alike used only beyond the writer's roles or clearance
is not the writer's to learn of, so the new name is kept beside it, as look-alikes that
predate the registry are, and the answer is the same as for an unused name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import apsw

from situated.errors import InvalidInput
from situated.names import SKELETON_VERSION, skeleton

_FIELDS = {"tenant": "principal.tenant", "namespace": "namespace", "role": "roles"}
"""The argument of `Memory.add` each kind of name comes from."""

Sees = Callable[[Sequence[str]], bool]
"""Whether the writer may read a memory of any of these namespaces (of its tenant)."""


def claim_scope(db: apsw.Connection, tenant: str, namespace: str, roles: Iterable[str],
                sees: Sees | None = None) -> None:
    """Claim a memory's tenant, namespace and required roles (call in a write transaction);
    `sees`: which namespaces the writer may see (None: all)."""
    _refresh(db)
    claim(db, "tenant", "", tenant)
    claim(db, "namespace", tenant, namespace, sees)
    for role in sorted(roles):
        claim(db, "role", tenant, role)


def claim(db: apsw.Connection, kind: str, scope: str, name: str, sees: Sees | None = None
          ) -> None:
    """Record `name`, or accept it if it is taken already, exactly; call in a write transaction.

    Raises:
        InvalidInput: naming the argument the name came from, when a different name with the
            same skeleton is taken in the same kind and scope (a namespace: one `sees` says
            the writer may see). For a tenant the message does not say which name: another
            tenant's name is not the caller's to see.
    """
    key = skeleton(name)
    taken = {
        row[0]
        for row in db.execute(
            "SELECT name FROM names WHERE kind = ? AND scope = ? AND (skeleton = ? OR name = ?)",
            (kind, scope, key, name),
        )
    }
    if name in taken:
        return
    if taken and (sees is None or sees(sorted(taken))):
        raise InvalidInput(_FIELDS[kind], _refusal(kind, name))
    db.execute(
        "INSERT INTO names (kind, scope, skeleton, name) VALUES (?, ?, ?, ?)",
        (kind, scope, key, name),
    )


def record(db: apsw.Connection, names: Iterable[tuple[str, str, str]]) -> None:
    """Record (kind, scope, name) triples as taken, look-alikes included (for migrations)."""
    db.executemany(
        "INSERT OR IGNORE INTO names (kind, scope, skeleton, name) VALUES (?, ?, ?, ?)",
        [(kind, scope, skeleton(name), name) for kind, scope, name in names],
    )
    _set_version(db)


def _refresh(db: apsw.Connection) -> None:
    """Recompute the stored skeletons if they were computed by another `skeleton` release."""
    row = db.execute("SELECT value FROM meta WHERE key = 'name_skeletons'").fetchone()
    if row is not None and row[0] == SKELETON_VERSION:
        return
    rows = db.execute("SELECT kind, scope, name FROM names").fetchall()
    db.executemany(
        "UPDATE names SET skeleton = ? WHERE kind = ? AND scope = ? AND name = ?",
        [(skeleton(str(name)), kind, scope, name) for kind, scope, name in rows],
    )
    _set_version(db)


def _set_version(db: apsw.Connection) -> None:
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('name_skeletons', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (SKELETON_VERSION,),
    )


def _refusal(kind: str, name: str) -> str:
    if kind == "tenant":
        return (
            "looks like the name of an existing tenant (the same confusable skeleton): "
            "choose a visibly different name"
        )
    return (
        f"{kind} {name!r} looks like an existing {kind} of this tenant (the same confusable "
        "skeleton): use that one's exact spelling, or a visibly different name"
    )
