"""The `attribute_schema` table (migration m012): evidence counts per attribute and scope,
read and written for `situated.learning.schema`. A row's scope is the memories' it was
learned from (tenant, required roles, classification); reads take the caller's principal and
return only the rows of scopes it may read (`store.scope` rule: roles held, clearance).
SQLite's store calls these (`Store.attribute_counts`, `save_attribute_counts`,
`visible_attributes`); PostgreSQL's are in `store.pg.attributes`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from situated.models import Principal, utcnow
from situated.store.scope import held_keys, marks

if TYPE_CHECKING:
    from situated.store.sqlite import Store

Key = tuple[str, str, int, str]
"""(tenant, role key, classification, attribute)."""


def counts(store: Store, key: Key) -> tuple[int, int]:
    """(single-valued evidence, counter-evidence) of one attribute in one scope."""
    row = store._one(
        "SELECT single, multi FROM attribute_schema WHERE tenant = ? AND role_key = ? "
        "AND classification = ? AND attribute = ?", key,
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def save(store: Store, key: Key, single: int, multi: int) -> None:
    """Store the counts (inside the caller's transaction)."""
    store.db.execute(
        "INSERT INTO attribute_schema (tenant, role_key, classification, attribute, single, "
        "multi, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, role_key, "
        "classification, attribute) DO UPDATE SET single = excluded.single, "
        "multi = excluded.multi, updated_at = excluded.updated_at",
        (*key, single, multi, utcnow()),
    )


def visible(store: Store, principal: Principal) -> list[tuple[str, str, int, int, int]]:
    """(attribute, role key, classification, single, multi) of the scopes `principal` may
    read, by attribute."""
    keys = held_keys(principal, [str(r[0]) for r in store._all(
        "SELECT DISTINCT role_key FROM attribute_schema WHERE tenant = ?", (principal.tenant,))])
    rows = store._all(
        "SELECT attribute, role_key, classification, single, multi FROM attribute_schema "
        f"WHERE tenant = ? AND classification <= ? AND role_key IN ({marks(keys)}) "
        "ORDER BY attribute, role_key, classification",
        (principal.tenant, int(principal.clearance), *keys),
    )
    return [(str(a), str(rk), int(c), int(s), int(m)) for a, rk, c, s, m in rows]
