"""The PostgreSQL store's connections, transactions, migrations and scope rendering.

One `ConnectionPool` per store (psycopg 3). A transaction or a snapshot holds one pooled
connection for the calling thread; a read outside both borrows one for its statement
(autocommit). psycopg prepares a statement on the server once it has run it a few times on a
connection (`PREPARE_THRESHOLD`), and every statement here keeps one shape whatever its lists'
lengths (`= ANY(%s)`), so the recall path runs on prepared statements.

Where SQLite takes the file's write lock up front (`BEGIN IMMEDIATE`), a write transaction here
takes its tenant's advisory lock (`pg_advisory_xact_lock`) before its first scoped read or
write: the reads a write depends on (duplicates, same-key facts, feedback given) and the write
itself are serialized per tenant, so writers of different tenants never wait for each other.
Under READ COMMITTED each statement after the lock sees every write committed before it. A
memory's row is also locked (`FOR UPDATE`) while an event folds into its counters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pgerr
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from situated.errors import EmbedderMismatch, InvalidInput, StoreBusy, StoreFailure
from situated.models import Principal, utcnow
from situated.store.pg.graphs import GraphTenants
from situated.store.pg.schema import MIGRATION_LOCK, MIGRATIONS, vector_columns
from situated.store.scope import Eligibility, System, recall_where_pg
from situated.store.secrets import check_name, checked, new_value

POOL_SIZE = 8
PREPARE_THRESHOLD = 2
"""Executions of a statement on a connection before psycopg prepares it on the server."""
EF_SEARCH = 100
"""HNSW candidates per scan step; iterative scans (`strict_order`) extend it until k
eligible rows are found, so the filter is applied inside the scan."""
MAX_SCAN_TUPLES = 50_000
"""pgvector's bound on the tuples an iterative scan visits before it stops."""
CONNECT_TIMEOUT_S = 10


def redacted(dsn: str) -> str:
    """The connection string without its password (what `health` and errors show)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "postgresql://(unparsable)"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


@contextmanager
def translated(label: str) -> Iterator[None]:
    """psycopg's errors as situated's: lock waits and conflicts as `StoreBusy`, everything
    else the server or the connection reports as `StoreFailure` (the transaction rolled back)."""
    try:
        yield
    except (pgerr.DeadlockDetected, pgerr.SerializationFailure, pgerr.LockNotAvailable,
            pgerr.QueryCanceled) as exc:
        raise StoreBusy(f"{label}: {exc}") from exc
    except psycopg.Error as exc:
        code = getattr(exc, "sqlstate", None) or type(exc).__name__
        raise StoreFailure(f"{label}: {exc}", str(code)) from exc


class _Local(threading.local):
    conn: psycopg.Connection[Any] | None = None
    writing: bool = False
    locked: set[str]
    plan: tuple[str, str] | None = None
    """The planner settings set in this transaction (`Search._plan`), None: the defaults."""

    def __init__(self) -> None:
        self.locked = set()


class PgBase:
    """Connections, transactions, migrations, meta and the scope rendering."""

    def __init__(self, dsn: str) -> None:
        self.path = redacted(dsn)
        self._dsn = dsn
        self._local = _Local()
        self.dim: int | None = None
        self._graphs = GraphTenants()
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as boot:
                self._migrate(boot)
        except psycopg.OperationalError as exc:
            raise InvalidInput("path", f"cannot open {self.path!r:.120}: {exc}") from None
        except psycopg.ProgrammingError as exc:  # an unparsable connection string
            raise InvalidInput("path", f"not a PostgreSQL connection string: {exc}") from None
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            dsn, min_size=1, max_size=POOL_SIZE, open=True, configure=_configure,
            kwargs={"autocommit": True, "prepare_threshold": PREPARE_THRESHOLD,
                    "connect_timeout": CONNECT_TIMEOUT_S},
        )
        self._read_dim()

    def close(self) -> None:
        self.pool.close()

    # -- statements -------------------------------------------------------------------------

    def _all(
        self, sql: str, params: Sequence[object] = (), binary: bool = False
    ) -> list[tuple[Any, ...]]:
        """Every row of a query; `binary` results for wide ones (vectors: no text parsing)."""
        conn = self._local.conn
        with translated(self.path):
            if conn is not None:
                return conn.execute(sql, params, binary=binary).fetchall()
            with self.pool.connection() as c:
                return c.execute(sql, params, binary=binary).fetchall()

    def _one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    def _run(self, sql: str, params: Sequence[object] = ()) -> int:
        """A statement that changes rows, in the current write transaction; rows changed."""
        conn = self._local.conn
        if conn is None or not self._local.writing:
            raise RuntimeError("a PostgreSQL store write runs inside transaction()")
        with translated(self.path):
            return conn.execute(sql, params or None).rowcount

    def _many(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        conn = self._local.conn
        if conn is None or not self._local.writing:
            raise RuntimeError("a PostgreSQL store write runs inside transaction()")
        with translated(self.path), conn.cursor() as cur:
            cur.executemany(sql, rows)

    def _copy(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        """`COPY ... FROM STDIN` of `rows` (text format), in the current write transaction."""
        conn = self._local.conn
        if conn is None or not self._local.writing:
            raise RuntimeError("a PostgreSQL store write runs inside transaction()")
        with translated(self.path), conn.cursor() as cur, cur.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction (READ COMMITTED) on one pooled connection; a call inside one
        joins it. Tenants are locked as the transaction first touches them (`_lock`)."""
        local = self._local
        if local.conn is not None:
            if not local.writing:
                raise RuntimeError("a write transaction cannot start inside a snapshot")
            yield
            return
        with translated(self.path), self.pool.connection() as conn, conn.transaction():
            local.conn, local.writing, local.locked, local.plan = conn, True, set(), None
            try:
                yield
            finally:
                local.conn, local.writing = None, False

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction (REPEATABLE READ, read only): every read inside sees the same
        committed state (nests into an enclosing transaction)."""
        local = self._local
        if local.conn is not None:
            yield
            return
        with translated(self.path), self.pool.connection() as conn:
            # BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY: one round trip
            conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
            try:
                with conn.transaction():
                    local.conn, local.plan = conn, None
                    try:
                        yield
                    finally:
                        local.conn = None
            finally:
                conn.isolation_level, conn.read_only = None, None

    def _lock(self, tenant: str) -> None:
        """Take the tenant's write lock for the rest of the write transaction (no-op in reads)."""
        local = self._local
        if local.writing and tenant not in local.locked:
            self._all("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (tenant,))
            local.locked.add(tenant)

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, "
                "applied_at DOUBLE PRECISION NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT name FROM _migrations")}
            for name, sql in MIGRATIONS:
                if name not in done:
                    conn.execute(sql.encode())  # several statements: simple query protocol
                    conn.execute(
                        "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
                        (name, utcnow()),
                    )

    def migrations(self) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT name FROM _migrations ORDER BY name")]

    # -- scope ----------------------------------------------------------------------------------

    def _where(self, scope: Eligibility | System, alias: str = "m") -> tuple[str, list[object]]:
        """The scope layer's SQL for memory rows (`Eligibility.where_pg`); in a write
        transaction the reader's tenant is locked first."""
        if isinstance(scope, System):
            return "TRUE", []
        self._lock(scope.principal.tenant)
        return scope.where_pg(alias)

    def _recall_where(self, reader: Principal, alias: str = "") -> tuple[str, list[object]]:
        """The scope layer's SQL for recall-scoped rows (`scope.recall_where_pg`)."""
        return recall_where_pg(reader, alias)

    # -- meta and the embedder ------------------------------------------------------------------

    def meta(self, *keys: str) -> dict[str, str]:
        rows = self._all("SELECT key, value FROM meta WHERE key = ANY(%s::text[])", (list(keys),))
        return {str(k): str(v) for k, v in rows}

    def erasures(self) -> int:
        return int(self.meta("erasures").get("erasures", 0))

    def bump_generation(self) -> None:
        with self.transaction():
            self._count("generation")

    def _count(self, key: str) -> None:
        self._run(
            "INSERT INTO meta (key, value) VALUES (%s, '1') ON CONFLICT (key) "
            "DO UPDATE SET value = (meta.value::bigint + 1)::text",
            (key,),
        )

    def _read_dim(self) -> None:
        if self.dim is None:
            dim = self.meta("vector_dim").get("vector_dim")
            self.dim = None if dim is None else int(dim)

    def bind_embedder(self, model_ref: str, dim: int) -> None:
        """Record the store's embedding model on first use (adding the vector columns and their
        HNSW indexes for its dimension); refuse any other afterwards."""
        ref = self.meta("embedder").get("embedder")
        if ref is None:
            try:
                with self.transaction():
                    self._all("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    ref = self.meta("embedder").get("embedder")
                    if ref is None:
                        self._run("INSERT INTO meta (key, value) VALUES ('embedder', %s)",
                                  (model_ref,))
                        self._run("INSERT INTO meta (key, value) VALUES ('vector_dim', %s)",
                                  (str(int(dim)),))
                        self._run(vector_columns(dim))
                        self.dim = int(dim)
                        return
            except BaseException:
                self.dim = None  # the columns were rolled back with the binding
                raise
        self._read_dim()
        if ref != model_ref:
            raise EmbedderMismatch(
                f"this store holds vectors of {ref}; refusing to mix in {model_ref}"
            )

    def embedder_ref(self) -> str | None:
        return self.meta("embedder").get("embedder")

    def secret(self, name: str) -> bytes:
        """A store-wide secret of the doors (`store.secrets`), made on first use: the insert
        keeps a row another process made first, and the read in the same transaction returns
        the one stored."""
        check_name(name)
        row = self._one("SELECT value FROM secrets WHERE name = %s", (name,))
        if row is None:
            with self.transaction():
                self._run("INSERT INTO secrets (name, value) VALUES (%s, %s) "
                          "ON CONFLICT (name) DO NOTHING", (name, new_value()))
                row = self._one("SELECT value FROM secrets WHERE name = %s", (name,))
        return checked(name, None if row is None else row[0])


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each pooled connection: pgvector's types (numpy arrays in and out, binary) and the
    iterative HNSW scan that keeps the eligibility filter inside the index scan."""
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.execute("SET hnsw.iterative_scan = strict_order")
    conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")
    conn.execute(f"SET hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
