"""The `attribute_schema` table on PostgreSQL (migration m002): evidence counts per attribute
and scope for `situated.learning.schema`, as `store.attributes` keeps them for SQLite. A row's
scope is the memories' it was learned from; reads take the caller's principal and return only
the rows of scopes it may read (its tenant, role sets it holds, classification at most its
clearance: the `where_pg` rule)."""

from __future__ import annotations

from situated.models import Principal, utcnow
from situated.store.attributes import Key
from situated.store.pg.batch import Batch


def role_set(role_key: str) -> list[str]:
    """The roles of a role key (`models.Scope.role_key`: sorted, unit-separated)."""
    return sorted(role_key.split("\x1f")) if role_key else []


class Attributes(Batch):
    """The attribute schema's evidence."""

    def attribute_counts(self, key: Key) -> tuple[int, int]:
        """(single-valued evidence, counter-evidence) of one attribute in one scope."""
        row = self._one(
            "SELECT single, multi FROM attribute_schema WHERE tenant = %s AND role_key = %s "
            "AND classification = %s AND attribute = %s", key,
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def save_attribute_counts(self, key: Key, single: int, multi: int) -> None:
        """Store the counts (inside the caller's transaction, under the tenant's lock)."""
        tenant, role_key, classification, attribute = key
        with self.transaction():
            self._lock(tenant)
            self._run(
                "INSERT INTO attribute_schema (tenant, role_key, role_set, classification, "
                "attribute, single, multi, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, role_key, classification, attribute) DO UPDATE SET "
                "single = excluded.single, multi = excluded.multi, "
                "updated_at = excluded.updated_at",
                (tenant, role_key, role_set(role_key), classification, attribute, single, multi,
                 utcnow()),
            )

    def visible_attributes(self, principal: Principal) -> list[tuple[str, str, int, int, int]]:
        """(attribute, role key, classification, single, multi) of the scopes `principal`
        may read, by attribute."""
        rows = self._all(
            "SELECT attribute, role_key, classification, single, multi FROM attribute_schema "
            "WHERE tenant = %s AND classification <= %s AND role_set <@ %s::text[] "
            "ORDER BY attribute, role_key, classification",
            (principal.tenant, int(principal.clearance), sorted(principal.roles)),
        )
        return [(str(a), str(rk), int(c), int(s), int(m)) for a, rk, c, s, m in rows]
