"""`PostgresStore`: the store contract (`store.contract`) over PostgreSQL + pgvector.

`Memory("postgresql://user@host/db")` opens one (the `postgres` extra: psycopg 3, its pool,
pgvector's adapter). The modules beside this one hold its parts, each building on the last:
`base` (connections, transactions, migrations, scope rendering), `writes`, `reads`, `search`,
`recalls`, `upkeep`, `batch` (the batch writer's calls), `attributes` (the attribute schema);
`schema` the tables, `names` and `keys` the registries.
"""

from __future__ import annotations

from typing import Any

from situated.store.pg.attributes import Attributes
from situated.store.pg.keys import Keys


class NoResident:
    """PostgreSQL searches in the server: no in-process index (what `health` reports)."""

    def describe(self) -> dict[str, Any]:
        return {"enabled": False, "budget_mb": 0.0, "tenants": 0, "rows": 0, "mb": 0.0,
                "loads": 0, "patches": 0, "evictions": 0, "over_budget_tenants": 0}

    def verify(self) -> int:
        return 0

    def forget(self, tenant: str) -> None:
        """Nothing is held in this process."""


class PostgresStore(Attributes):
    """The PostgreSQL store. Not part of the public API; `Memory` is."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._keys = Keys(self)
        self._resident = NoResident()

    @property
    def location(self) -> str:
        """What `store.contract.open_store` reopens this store from: the connection string
        (with its password: never shown; `path` is the shown form)."""
        return self._dsn

    @property
    def keys(self) -> Keys:
        return self._keys

    @property
    def resident(self) -> NoResident:
        return self._resident
