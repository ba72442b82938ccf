"""A large tenant's own HNSW graphs on PostgreSQL: partial indexes `WHERE tenant = '...'` on
both vector fields, as the SQLite path gives a large tenant its own graphs (`store.ann`).

One global graph serves a tenant's search badly once the store is large: the tenant gate
keeps a tenth of the rows (10 tenants), the iterative scan walks ten times as far, and the
graph's own recall falls with its size. Measured at 1M memories here (10 tenants, 256
dimensions): recall@10 0.76 at 14.8 ms through the global index (0.94 at 24.7 ms with
`ef_search` 1000), 0.99 at 3.1 ms through the tenant's partial index (built in 15 s).

`build` makes them (`settle` after a load, `Memory.maintain` on a live store; `CREATE INDEX
CONCURRENTLY`: writes go on) for every tenant with at least
`store.ann.DEFAULT_ROWS` rows. A search names its tenant as a literal beside the scope's
parameter (`predicate`), so the planner can match the partial index's predicate; the literal
repeats the gate's own tenant, so it narrows nothing the scope allows and widens nothing.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import psycopg
from psycopg import sql

from situated.store.ann import DEFAULT_ROWS

FIELDS = {"content": "content_vec", "state": "state_vec"}
MIN_ROWS = DEFAULT_ROWS
"""A tenant with at least this many rows gets its graphs (the SQLite path's threshold)."""
REFRESH_S = 60.0
"""How long a process trusts what it read of which tenants have graphs (another process's
`build` is seen within this)."""
BUILD_MEMORY_MAX_KB = 2 * 1024 * 1024
"""The most `maintenance_work_mem` a graph build asks for (2 GB)."""
GRAPH_BYTES_PER_ROW = 800
"""What an HNSW graph holds per row beside its vector while pgvector builds it (neighbour
lists, element header): the build is fastest while the whole graph fits in
`maintenance_work_mem`."""
BUILD_MEMORY_NOW = ("SELECT setting::bigint FROM pg_settings "  # kB
                    "WHERE name = 'maintenance_work_mem'")


def build_memory_kb(rows: int, dim: int, have_kb: int) -> int | None:
    """The `maintenance_work_mem` (kB) to set for a graph over `rows` rows of `dim`
    dimensions: enough for all of it, at most `BUILD_MEMORY_MAX_KB`; None when the setting
    now (`have_kb`) is enough."""
    want = min(rows * (4 * dim + GRAPH_BYTES_PER_ROW) // 1024, BUILD_MEMORY_MAX_KB)
    return want if want > have_kb else None


def index_name(field: str, tenant: str) -> str:
    """The partial index of one field for one tenant (a digest: any tenant name fits)."""
    digest = hashlib.blake2b(tenant.encode(), digest_size=8).hexdigest()
    return f"memories_{field}_hnsw_t{digest}"


def predicate(tenant: str, alias: str = "m") -> str:
    """`AND <alias>.tenant = '<tenant>'`, the tenant quoted as a SQL literal."""
    return f" AND {alias}.tenant = " + sql.Literal(tenant).as_string(None)


def build(conn: psycopg.Connection[Any], dim: int, min_rows: int | None = None) -> list[str]:
    """Both partial indexes of every tenant with at least `min_rows` rows (`MIN_ROWS`) that
    lacks a valid one, concurrently (an autocommit connection: no transaction may be open).
    An index a failed concurrent build left invalid is dropped and built again. Nothing on a
    sharding coordinator (a partitioned `memories`: each shard builds its own). Returns the
    tenants given graphs."""
    kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = 'memories'::regclass")
    if (kind.fetchone() or ("r",))[0] != "r":
        return []
    done = []
    have = conn.execute(BUILD_MEMORY_NOW).fetchone()
    have_kb = int(have[0]) if have else 0
    for (tenant, rows) in conn.execute(
        "SELECT tenant, COUNT(*) FROM memories GROUP BY tenant HAVING COUNT(*) >= %s "
        "ORDER BY tenant", (MIN_ROWS if min_rows is None else min_rows,),
    ).fetchall():
        built = False
        for field, column in FIELDS.items():
            name = index_name(field, str(tenant))
            valid = conn.execute(
                "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE c.relname = %s", (name,),
            ).fetchone()
            if valid is not None and valid[0]:
                continue
            if valid is not None:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY {}").format(sql.Identifier(name)))
            memory_kb = build_memory_kb(int(rows), dim, have_kb)
            if memory_kb is not None:
                conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(
                    sql.Literal(f"{memory_kb}kB")))
            conn.execute(sql.SQL(
                "CREATE INDEX CONCURRENTLY {} ON memories USING hnsw ({} vector_cosine_ops) "
                "WHERE tenant = {}").format(sql.Identifier(name), sql.Identifier(column),
                                            sql.Literal(str(tenant))))
            built = True
        if built:
            done.append(str(tenant))
    conn.execute("RESET maintenance_work_mem")
    return done


class GraphTenants:
    """Which tenants have valid graphs for both fields, as this process last read it."""

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._read_at = float("-inf")

    def has(self, store: Any, tenant: str) -> bool:
        """Whether `tenant`'s searches may name it for its partial indexes."""
        if time.monotonic() - self._read_at > REFRESH_S:
            self.refresh(store)
        return all(index_name(f, tenant) in self._names for f in FIELDS)

    def refresh(self, store: Any) -> None:
        """Read the valid indexes of `memories` again (after a `build`, or once stale)."""
        self._names = {str(r[0]) for r in store._all(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'memories'::regclass AND i.indisvalid"
        )}
        self._read_at = time.monotonic()
