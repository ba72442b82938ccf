"""The sharding recipe of the README on two PostgreSQL servers on this machine: a coordinator
whose `memories` table is partitioned by tenant, one tenant's partition local, the other a
`postgres_fdw` foreign table on a second server holding that tenant's store.

What it shows, with the recall's own dense and lexical statements (`Eligibility.where_pg`),
and then with `Memory` itself on the coordinator (`test_memory_runs_on_the_coordinator_...`):
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


def _import_shard(c: psycopg.Connection[Any], shard: str, shard_server: PgServer) -> None:
    """The shard's `memories` as the foreign table `shard1.memories` on the coordinator `c`
    (the recipe's foreign server options)."""
    host = shard_server.uri.split("host=")[1]
    shard_db = shard.split("?")[0].rsplit("/", 1)[1]
    c.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    c.execute(f"CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host "
              f"'{host}', dbname '{shard_db}', extensions 'vector', "
              "use_remote_estimate 'true', fetch_size '50', fdw_tuple_cost '10')")
    c.execute("CREATE USER MAPPING FOR CURRENT_USER SERVER shard1 OPTIONS (user 'postgres')")
    c.execute("CREATE SCHEMA shard1")
    c.execute("IMPORT FOREIGN SCHEMA public LIMIT TO (memories) FROM SERVER shard1 INTO shard1")


@pytest.fixture(scope="module")
def layout(pg_server: PgServer, second_server: PgServer) -> dict[str, str]:
    one = pg_server.fresh_dsn("one")
    _write(one, [ACME, GLOBEX])  # the reference: one server, both tenants
    shard = second_server.fresh_dsn("shard")
    _write(shard, [GLOBEX])  # globex's store lives on the second server
    coord = pg_server.fresh_dsn("coord")
    with psycopg.connect(coord, autocommit=True) as c:
        _import_shard(c, shard, second_server)
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


# -- `Memory` itself on a coordinator -----------------------------------------------------------


def _coordinator(coord: str, shard: str, shard_server: PgServer) -> None:
    """Turn the coordinator's `memories` into `PARTITION BY LIST (tenant)`: acme's partition
    local (the table the migrations made, with its keys and indexes), globex's the `memories`
    table of the shard's own store (migrated, same embedder), through postgres_fdw.

    A partitioned table with a foreign partition can carry no primary key or unique
    constraint (PostgreSQL refuses them): each partition keeps its own, enforced where its
    rows are (`(tenant, rid)`, `(tenant, id)`), and the store upserts no `memories` row.
    Row ids come from one sequence, the coordinator's (a default on the parent instead of the
    identity column; the shard's identity accepts given values), so they stay unique in the
    store whichever server holds the row; every other table stays on the coordinator."""
    with psycopg.connect(shard, autocommit=True) as c:
        c.execute("ALTER TABLE memories ALTER COLUMN rid SET GENERATED BY DEFAULT")
    with psycopg.connect(coord, autocommit=True) as c, c.transaction():
        _import_shard(c, shard, shard_server)
        c.execute("ALTER TABLE memories RENAME TO memories_local")
        c.execute("ALTER TABLE memories_local ALTER COLUMN rid DROP IDENTITY")
        c.execute("CREATE SEQUENCE memories_rid_seq")
        c.execute("CREATE TABLE memories (LIKE memories_local INCLUDING DEFAULTS) "
                  "PARTITION BY LIST (tenant)")
        c.execute("ALTER TABLE memories ALTER COLUMN rid SET DEFAULT "
                  "nextval('memories_rid_seq')")
        c.execute("ALTER SEQUENCE memories_rid_seq OWNED BY memories.rid")
        c.execute("ALTER TABLE memories ATTACH PARTITION memories_local FOR VALUES IN ('acme')")
        c.execute("ALTER TABLE memories ATTACH PARTITION shard1.memories "
                  "FOR VALUES IN ('globex')")


def _script(dsn: str) -> list[Any]:
    """Writes (one by one and a batch), recalls, feedback, supersession and erasure for both
    tenants; everything each call returned, with ids and times left out."""
    out: list[Any] = []
    m = Memory(dsn, embedder="hash")
    try:
        for p in (ACME, GLOBEX):
            added = [m.add(t, principal=p, state=State(t, facts={"n": n}), roles=["support"])
                     for n, t in enumerate(TEXTS[:6])]
            batch = m.add_many([{"content": t, "kind": "note"} for t in TEXTS[6:]], principal=p)
            old = m.add("Account 7 is gold.", principal=p, kind="fact", entity="acct-7",
                        attribute="tier", value="gold")
            m.add("Account 7 is platinum.", principal=p, kind="fact", entity="acct-7",
                  attribute="tier", value="platinum")
            b = m.recall(State("refund for the eu"), principal=p, k=3)
            m.feedback(b.recall_id, principal=p, success=True,
                       used=[i.memory_id for i in b.items][:1])
            admin = Principal(tenant=p.tenant, roles={"support", "admin"},
                              clearance="internal", name="adm")
            m.erase(added[1].id, principal=admin, reason="request")
            out.append([(i.text, round(i.scores.relevance, 4)) for i in b.items])
            out.append([(r.content, r.state.value, r.counters.uses)
                        for r in m.list(principal=p, limit=100)])
            out.append([e.event.value for e in m.ledger(principal=p, limit=200)])
            st = m.stats(principal=p)
            out.append((len(batch), m.inspect(old.id, principal=p).state.value,
                        st.memories_by_state, st.recalls, st.feedback, st.ledger_events))
        out.append(m.rebuild().mismatched)
    finally:
        m.close()
    return out


def test_memory_runs_on_the_coordinator_as_on_one_server(
    pg_server: PgServer, second_server: PgServer
) -> None:
    one = pg_server.fresh_dsn("mone")
    coord, shard = pg_server.fresh_dsn("mcoord"), second_server.fresh_dsn("mshard")
    for dsn in (coord, shard):  # migrated, the embedder bound
        m = Memory(dsn, embedder="hash")
        m.store.bind_embedder(m.embedder.model_ref, m.embedder.dim)
        m.close()
    _coordinator(coord, shard, second_server)
    got = _script(coord)
    assert got == _script(one)
    assert got[0] and got[1] and got[2] and got[-1] == ()  # served, listed, logged, replayed
    on_shard = {r[0] for r in _rows(shard, "SELECT DISTINCT tenant FROM memories")}
    local = {r[0] for r in _rows(coord, "SELECT DISTINCT tenant FROM memories_local")}
    assert on_shard == {"globex"} and local == {"acme"}  # each tenant's rows on its server
