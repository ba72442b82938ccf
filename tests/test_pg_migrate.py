"""`situated migrate --from agent.db --to postgresql://...`: a SQLite store copied into an
empty PostgreSQL database reads back the same through every read path; a non-empty target,
a missing source or a target that is not PostgreSQL is refused with nothing written."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from pg_server import PgServer
from scope_harness import dump
from situated import Memory, Principal, State
from situated.cli import app
from situated.store.scope import SYSTEM

ACME = Principal(tenant="acme", roles={"support", "admin"}, clearance="restricted", name="a")
SUPPORT = Principal(tenant="acme", roles={"support"}, clearance="internal", name="s")
GLOBEX = Principal(tenant="globex", roles={"admin"}, clearance="restricted", name="g")
RUNNER = CliRunner()


def _fill(path: Path) -> list[str]:
    m = Memory(path, embedder="hash")
    try:
        ids = []
        for n, (text, st) in enumerate([("Refunds over 100 need a manager.", "refund request"),
                                        ("Ship EU orders from Dublin.", "eu shipping"),
                                        ("Invoices are due in 30 days.", "invoice question")]):
            ids.append(m.add(text, principal=ACME if n % 2 else SUPPORT, state=State(st),
                             roles=["support"], consent="c1" if n == 2 else None).id)
        ids.append(m.add("Globex prefers email.", principal=GLOBEX, kind="preference").id)
        m.add("Account 7 is gold.", principal=ACME, kind="fact", entity="acct-7",
              attribute="tier", value="gold")
        m.add("Account 7 is platinum.", principal=ACME, kind="fact", entity="acct-7",
              attribute="tier", value="platinum")
        b = m.recall(State("refund request of 150"), principal=ACME)
        m.feedback(b.recall_id, principal=ACME, success=True,
                   used=[i.memory_id for i in b.items][:1])
        seats = [m.add(f"Dana prefers the {s} seat.", principal=ACME, kind="preference",
                       entity="dana", attribute="seat", value=s) for s in ("aisle", "window")]
        b = m.recall(seats[0].content, principal=ACME, k=10)  # schema evidence: an old value
        m.feedback(b.recall_id, principal=ACME, success=False, used=[seats[0].id])
        assert m.attribute_schema(principal=ACME)
        m.revoke_consent("c1", principal=ACME, reason="withdrawn")
        m.erase(ids[1], principal=ACME, reason="request")
        m.store.keys.create(SUPPORT, actor="ops", label="bot", scope=SYSTEM)
        return ids
    finally:
        m.close()


def _views(location: str, ids: list[str]) -> list[str]:
    m = Memory(location, embedder="hash")
    try:
        out = []
        for p in (ACME, SUPPORT, GLOBEX):
            out += [dump(m.list(principal=p, limit=100)), dump(m.ledger(principal=p, limit=100)),
                    dump(m.stats(principal=p)), dump(m.attribute_schema(principal=p)),
                    dump(m.recalls(principal=p)), dump(m.utilities(principal=p))]
            out += [dump(m.history(i, principal=p)) for i in ids
                    if i in {r.id for r in m.list(principal=p, limit=100)}]
            b = m.recall(State("refund request of 150"), principal=p)
            out.append(dump(list(b.items)))
        out.append(dump([(k.id, k.tenant, k.label) for k in m.store.keys.list(SYSTEM)]))
        health = m.health()
        assert health.ok, health
        return out
    finally:
        m.close()


def test_migrate_copies_and_verifies(tmp_path: Path, pg_server: PgServer) -> None:
    src = tmp_path / "agent.db"
    ids = _fill(src)
    dsn = pg_server.fresh_dsn("migrate")
    res = RUNNER.invoke(app, ["migrate", "--from", str(src), "--to", dsn, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["mismatched"] == [] and report["memories"] == 8
    assert report["recalls"] == 2 and report["api_keys"] == 1 and report["feedback"] == 2
    assert report["attribute_schema"] == 1
    assert _views(dsn, ids) == _views(str(src), ids)


def test_migrate_refuses_a_non_empty_target_and_bad_locations(
    tmp_path: Path, pg_server: PgServer
) -> None:
    src = tmp_path / "agent.db"
    _fill(src)
    dsn = pg_server.fresh_dsn("nonempty")
    m = Memory(dsn, embedder="hash")
    m.add("Already here.", principal=ACME, kind="note")
    m.close()
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    before = pg_server.psql(name, "SELECT id, content FROM memories")
    res = RUNNER.invoke(app, ["migrate", "--from", str(src), "--to", dsn])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: to: is not an empty store"), res.stderr
    assert pg_server.psql(name, "SELECT id, content FROM memories") == before
    missing = tmp_path / "missing.db"
    res = RUNNER.invoke(app, ["migrate", "--from", str(missing), "--to", dsn])
    assert res.exit_code == 1 and res.stderr.startswith("error: from: no such file")
    assert not missing.exists()
    res = RUNNER.invoke(app, ["migrate", "--from", str(src), "--to", str(tmp_path / "x.db")])
    assert res.exit_code == 1 and res.stderr.startswith("error: to: must be a postgresql://")
    res = RUNNER.invoke(app, ["migrate", "--from", str(src), "--to",
                              "postgresql://nobody@/none?host=/nonexistent-dir"])
    assert res.exit_code == 1 and res.stderr.startswith("error: to: cannot open")


def _vector_indexes(pg: PgServer, name: str) -> list[tuple[object, ...]]:
    return pg.psql(name, "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c "
                         "ON c.oid = i.indexrelid WHERE c.relname LIKE '%hnsw' ORDER BY 1")


def test_migrate_builds_the_vector_indexes_once_after_the_copy(
    tmp_path: Path, pg_server: PgServer
) -> None:
    """The copy defers the HNSW indexes and builds them over every row before the commit: the
    target has both, valid, and its searches use them; its tables are analyzed and vacuumed
    after the commit."""
    src = tmp_path / "agent.db"
    _fill(src)
    dsn = pg_server.fresh_dsn("deferred")
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    res = RUNNER.invoke(app, ["migrate", "--from", str(src), "--to", dsn])
    assert res.exit_code == 0, res.output
    assert _vector_indexes(pg_server, name) == [("memories_content_hnsw", True),
                                                ("memories_state_hnsw", True)]
    with psycopg.connect(pg_server.dsn(name), autocommit=True) as c:
        c.execute("SET enable_seqscan = off")
        plan = c.execute("EXPLAIN SELECT rid FROM memories ORDER BY content_vec <=> "
                         "(SELECT content_vec FROM memories LIMIT 1) LIMIT 3").fetchall()
    assert any("memories_content_hnsw" in str(row[0]) for row in plan), plan
    settled = pg_server.psql(name, "SELECT relname, last_vacuum IS NOT NULL, last_analyze IS "
                                   "NOT NULL FROM pg_stat_user_tables WHERE relname IN "
                                   "('memories', 'lexicon_postings', 'ledger') ORDER BY 1")
    assert settled == [("ledger", True, True), ("lexicon_postings", True, True),
                       ("memories", True, True)]  # analyzed and vacuumed after the load


def test_a_failed_load_leaves_the_indexes_and_the_rows_as_they_were(pg_server: PgServer) -> None:
    dsn = pg_server.fresh_dsn("deferfail")
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    m = Memory(dsn, embedder="hash")
    try:
        m.add("Already here.", principal=ACME, kind="note")
        before = pg_server.psql(name, "SELECT id FROM memories")
        store = m.store
        # its own transaction, then inside a caller's transaction that goes on and commits
        for outer in (contextlib.nullcontext, store.transaction):
            with outer():
                try:
                    with store.indexes_deferred():  # type: ignore[attr-defined]
                        m.add("Half a load.", principal=ACME, kind="note")
                        raise KeyboardInterrupt
                except KeyboardInterrupt:
                    pass
            assert pg_server.psql(name, "SELECT id FROM memories") == before
            assert _vector_indexes(pg_server, name) == [("memories_content_hnsw", True),
                                                        ("memories_state_hnsw", True)]
        with store.indexes_deferred():  # type: ignore[attr-defined]
            m.add("A whole load.", principal=ACME, kind="note")
        assert len(pg_server.psql(name, "SELECT id FROM memories")) == 2
        assert _vector_indexes(pg_server, name) == [("memories_content_hnsw", True),
                                                    ("memories_state_hnsw", True)]
        assert m.recall(State("a whole load"), principal=ACME, k=5).items
    finally:
        m.close()


def test_an_index_build_the_server_cannot_hold_falls_back_and_keeps_the_load(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build asking for more shared memory than the server has (a container's small
    /dev/shm; here 1 TB) fails; the load is not lost: the indexes are built again with the
    server's own settings in one process."""
    import situated.store.pg.graphs as pg_graphs
    from situated.store.pg.base import PgBase

    dsn = pg_server.fresh_dsn("buildmem")
    name = dsn.split("?")[0].rsplit("/", 1)[1]
    pg_server.psql("postgres", f'ALTER DATABASE "{name}" SET min_parallel_table_scan_size = 0')
    monkeypatch.setattr(pg_graphs, "BUILD_MEMORY_MAX_KB", 1024**3)  # 1 TB: a parallel build's
    monkeypatch.setattr(pg_graphs, "GRAPH_BYTES_PER_ROW", 2**40)     # shared segment
    ran: list[str] = []
    run = PgBase._run

    def recorded(self: PgBase, sql: str, params: Sequence[object] = ()) -> int:
        ran.append(sql)
        return run(self, sql, params)

    monkeypatch.setattr(PgBase, "_run", recorded)
    m = Memory(dsn, embedder="hash")
    try:
        m.add("Already here.", principal=ACME, kind="note")
        with m.store.indexes_deferred():  # type: ignore[attr-defined]
            m.add("Loaded with the indexes deferred.", principal=ACME, kind="note")
        assert "SET LOCAL maintenance_work_mem = '1073741824kB'" in ran
        assert "SET LOCAL max_parallel_maintenance_workers = 0" in ran  # the fallback ran
        assert len(pg_server.psql(name, "SELECT id FROM memories")) == 2
        assert _vector_indexes(pg_server, name) == [("memories_content_hnsw", True),
                                                    ("memories_state_hnsw", True)]
    finally:
        m.close()
