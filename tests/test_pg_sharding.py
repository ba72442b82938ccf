"""The sharding recipe of the README on two PostgreSQL servers on this machine: a coordinator
whose `memories` table is partitioned by tenant, one tenant's partition local, the other a
`postgres_fdw` foreign table on a second server holding that tenant's store.

What it shows, with the recall's own dense and lexical statements (`Eligibility.where_pg`):
- a tenant's recall is routed to its shard only (partition pruning: the other partition is not
  in the plan), with the eligibility gates evaluated by the shard (in the Remote SQL);
- the results equal those of one server holding both tenants;
- the shard runs the ordered scan (ORDER BY the vector distance, so its HNSW index) with the
  gates; PostgreSQL 18 keeps the LIMIT (and the distance in the select list) on the
  coordinator, which stops reading after k rows (the shard sends `fetch_size` rows at a time).
  Citus, routing on the distribution column, pushes the whole statement down; not run here.
The foreign server needs `extensions 'vector'` (pgvector's operators may be shipped) and
`use_remote_estimate 'true'` with a `fdw_tuple_cost` that makes shipping rows dear (else, for
small tenants, the coordinator prefers to fetch them all and sort them itself).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from pg_server import PgServer, start_server
from situated import Memory, Principal, State
from situated.embed import get_embedder
from situated.store.scope import Eligibility

ACME = Principal(tenant="acme", roles={"support"}, clearance="internal", name="a")
GLOBEX = Principal(tenant="globex", roles={"support"}, clearance="internal", name="g")
TEXTS = [f"{w} lesson {i} about {w} and {v}" for i, (w, v) in enumerate(
    (w, v) for w in ("refund", "invoice", "shipping", "payroll") for v in ("eu", "us", "apac"))]


@pytest.fixture(scope="module")
def second_server() -> Iterator[PgServer]:
    root = Path(tempfile.mkdtemp(prefix="situated-shard-"))
    os.chmod(root, 0o755)
    yield start_server(root / "data")


def _write(dsn: str, who: list[Principal]) -> None:
    m = Memory(dsn, embedder="hash")
    try:
        for p in who:
            for n, text in enumerate(TEXTS):
                m.add(text, principal=p, kind="note", namespace="ops" if n % 3 else "default",
                      roles=["support"] if n % 2 else [],
                      classification="public" if n % 5 == 0 else "internal")
    finally:
        m.close()


def _rows(dsn: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as c:
        from pgvector.psycopg import register_vector

        register_vector(c)
        return [tuple(r) for r in c.execute(sql, params).fetchall()]


def _dense_sql(p: Principal, table: str) -> tuple[str, list[Any]]:
    where, params = Eligibility.for_recall(p).where_pg("m")
    q = get_embedder("hash").embed(["refund for the eu"])[0].astype(np.float32)
    return (f"SELECT m.content, m.content_vec <=> %s FROM {table} m WHERE {where} "
            "AND m.content_vec IS NOT NULL ORDER BY m.content_vec <=> %s LIMIT %s",
            [q, *params, q, 5])


def _lexical_sql(p: Principal, table: str) -> tuple[str, list[Any]]:
    where, params = Eligibility.for_recall(p).where_pg("m")
    return (f"SELECT m.content FROM {table} m WHERE m.lex @@ %s::tsquery AND {where} "
             "ORDER BY m.content",
            ["'refund'", *params])


@pytest.fixture(scope="module")
def layout(pg_server: PgServer, second_server: PgServer) -> dict[str, str]:
    one = pg_server.fresh_dsn("one")
    _write(one, [ACME, GLOBEX])  # the reference: one server, both tenants
    shard = second_server.fresh_dsn("shard")
    _write(shard, [GLOBEX])  # globex's store lives on the second server
    coord = pg_server.fresh_dsn("coord")
    host = second_server.uri.split("host=")[1]
    shard_db = shard.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(coord, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
        c.execute(f"CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host "
                  f"'{host}', dbname '{shard_db}', extensions 'vector', "
                  "use_remote_estimate 'true', fetch_size '50', fdw_tuple_cost '10')")
        c.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER shard1 OPTIONS (user 'postgres')")
        c.execute("CREATE SCHEMA shard1")
        c.execute("IMPORT FOREIGN SCHEMA public LIMIT TO (memories) FROM SERVER shard1 "
                  "INTO shard1")
        c.execute("CREATE TABLE logical (LIKE shard1.memories) PARTITION BY LIST (tenant)")
        c.execute("CREATE TABLE logical_acme PARTITION OF logical FOR VALUES IN ('acme')")
        c.execute("ALTER TABLE logical ATTACH PARTITION shard1.memories "
                  "FOR VALUES IN ('globex')")
        c.execute("ANALYZE shard1.memories")
        cols = [r[0] for r in c.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'logical_acme' ORDER BY ordinal_position")]
    acme_rows = [tuple(Jsonb(v) if isinstance(v, dict) else v for v in r) for r in _rows(
        one, f"SELECT {', '.join(cols)} FROM memories WHERE tenant = 'acme'")]
    with psycopg.connect(coord) as c:
        from pgvector.psycopg import register_vector

        register_vector(c)
        with c.cursor() as cur:
            cur.executemany(
                f"INSERT INTO logical_acme ({', '.join(cols)}) VALUES "
                f"({', '.join(['%s'] * len(cols))})", acme_rows)
        c.execute("CREATE INDEX ON logical_acme USING hnsw (content_vec vector_cosine_ops)")
    return {"one": one, "shard": shard, "coord": coord}


def _plan(dsn: str, sql: str, params: list[Any]) -> str:
    rows = _rows(dsn, "EXPLAIN (VERBOSE, COSTS OFF) " + sql, tuple(params))
    return "\n".join(str(r[0]) for r in rows)


def test_a_tenants_recall_is_routed_to_its_shard(layout: dict[str, str]) -> None:
    sql, params = _dense_sql(GLOBEX, "logical")
    plan = _plan(layout["coord"], sql, params)
    assert "Foreign Scan on shard1.memories" in plan and "logical_acme" not in plan
    remote = plan.split("Remote SQL:", 1)[1]
    for gate in ("tenant = ", "classification <= ", "role_set <@ ", "state = ANY",
                 "valid_from <= ", "valid_until > "):
        assert gate in remote, (gate, plan)  # the shard applies every gate
    assert "ORDER BY (content_vec OPERATOR(public.<=>)" in remote, plan  # the shard's index
    local = _plan(layout["coord"], *_dense_sql(ACME, "logical"))
    assert "Foreign Scan" not in local and "logical_acme" in local


def test_sharded_results_equal_one_server(layout: dict[str, str]) -> None:
    for p in (ACME, GLOBEX):
        for build in (_dense_sql, _lexical_sql):
            sql, params = build(p, "logical")
            got = _rows(layout["coord"], sql, tuple(params))
            sql, params = build(p, "memories")
            want = _rows(layout["one"], sql, tuple(params))
            assert [r[0] for r in got] == [r[0] for r in want] and got, (p.tenant, build)
            if build is _dense_sql:
                assert np.allclose([r[1] for r in got], [r[1] for r in want])
    ids = {r[0] for r in _rows(layout["shard"], "SELECT id FROM memories")}
    m = Memory(layout["shard"], embedder="hash")  # the shard is a whole store of its own
    try:
        served = m.recall(State("refund for the eu"), principal=GLOBEX, k=3)
        assert {i.memory_id for i in served.items} <= ids
    finally:
        m.close()
