"""A large tenant's own HNSW graphs on PostgreSQL (`store.pg.graphs`): partial indexes per
tenant, built concurrently, named by a search of that tenant only, and returning what the
global index returns; a tenant name that needs quoting is quoted."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
import pytest

from pg_server import PgServer
from situated import Memory, Principal, State
from situated.store.pg.base import PgBase
from situated.store.pg.graphs import index_name
from situated.store.scope import SYSTEM, Eligibility

BIG = Principal(tenant="o'big;--", roles={"ops"}, clearance="internal",
                name="b")
SMALL = Principal(tenant="small", roles={"ops"}, clearance="internal", name="s")


def test_a_large_tenant_gets_its_own_graphs_and_its_searches_use_them(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = pg_server.fresh_dsn("graphs")
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    m = Memory(dsn, embedder="hash")
    try:
        m.add_many([{"content": f"Runbook step {i}: restart the queue worker {i % 7}.",
                     "state": State(f"queue backlog of {i}")} for i in range(40)],
                   principal=BIG)
        m.add_many([{"content": f"Small tenant note {i}."} for i in range(5)], principal=SMALL)
        store = m.store
        before = store.dense("content", m.embedder.embed(["restart the queue worker"])[0], 5,
                             Eligibility.for_recall(BIG))
        assert store.build_graphs(SYSTEM, min_rows=20) == [BIG.tenant]  # type: ignore[attr-defined]
        assert store.build_graphs(SYSTEM, min_rows=20) == []  # type: ignore[attr-defined]
        valid = pg_server.psql(name, "SELECT c.relname FROM pg_index i JOIN pg_class c ON "
                                     "c.oid = i.indexrelid WHERE i.indisvalid ORDER BY 1")
        assert (index_name("content", BIG.tenant),) in valid
        assert (index_name("state", BIG.tenant),) in valid
        assert not any(index_name("content", SMALL.tenant) == r[0] for r in valid)

        ran: list[tuple[str, Sequence[object]]] = []
        run = PgBase._all

        def recorded(self: PgBase, sql: str, params: Sequence[object] = (),
                     binary: bool = False) -> list[tuple[object, ...]]:
            ran.append((sql, params))
            return run(self, sql, params, binary)

        monkeypatch.setattr(PgBase, "_all", recorded)
        after = store.dense("content", m.embedder.embed(["restart the queue worker"])[0], 5,
                            Eligibility.for_recall(BIG))
        assert [round(v, 5) for _, v in after] == [round(v, 5) for _, v in before]  # ties
        assert len(after) == 5 and after[0][0] == before[0][0]   # may swap equal rows
        ann = [(s, p) for s, p in ran if s.startswith("/* ann */")]
        assert ann and "m.tenant = 'o''big;--'" in ann[-1][0]
        ran.clear()
        store.dense("content", m.embedder.embed(["note"])[0], 5, Eligibility.for_recall(SMALL))
        assert not any("m.tenant = '" in s for s, _ in ran)
        monkeypatch.undo()

        sql, params = ann[-1]  # the planner takes the tenant's partial index for it
        with psycopg.connect(dsn, autocommit=True) as c:
            from pgvector.psycopg import register_vector

            register_vector(c)
            c.execute("SET enable_sort = off")
            plan = "\n".join(str(r[0]) for r in c.execute("EXPLAIN " + sql, params))
        assert index_name("content", BIG.tenant) in plan, plan
        assert m.recall(State("queue backlog of 12"), principal=BIG).items
        assert pg_server.psql(name, "SELECT COUNT(*) FROM memories") == [(45,)]
    finally:
        m.close()


def test_maintain_gives_a_tenant_that_grew_large_its_graphs(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import situated.store.pg.graphs as pg_graphs

    monkeypatch.setattr(pg_graphs, "MIN_ROWS", 20)
    m = Memory(pg_server.fresh_dsn("maintaingraphs"), embedder="hash")
    try:
        m.add_many([{"content": f"Small tenant note {i}."} for i in range(5)], principal=SMALL)
        assert m.maintain().graphs == 0  # no tenant large enough yet
        m.add_many([{"content": f"Grown tenant note {i}."} for i in range(25)], principal=BIG)
        assert m.maintain().graphs == 1
        assert m.maintain().graphs == 0  # built already
        assert m.store._graphs.has(m.store, BIG.tenant)  # type: ignore[attr-defined]
        assert not m.store._graphs.has(m.store, SMALL.tenant)  # type: ignore[attr-defined]
    finally:
        m.close()
