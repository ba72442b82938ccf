"""Concurrent writers on the PostgreSQL store: four processes at once, and one killed with
SIGKILL mid-write; every acknowledged write is present, the ledger replays clean, no memory
lacks its vectors (the writers of `test_concurrency.py`, the server of `pg_server.py`)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

from pg_server import PgServer
from situated import Memory
from situated.store.ledger import EventType
from test_concurrency import PER_WRITER, WRITERS, _killable_writer, _writer


def test_four_processes_write_concurrently(pg_server: PgServer) -> None:
    dsn = pg_server.fresh_dsn("writers")
    Memory(dsn, embedder="hash").close()  # create and bind first
    ctx = mp.get_context("spawn")
    q: mp.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(dsn, n, q)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    acked = set()
    while not q.empty():
        acked.add(q.get())
    assert len(acked) == WRITERS * PER_WRITER
    mem = Memory(dsn, embedder="hash")
    try:
        stored = {r[0] for r in mem.store._all("SELECT id FROM memories")}
        assert acked == stored
        assert mem.health().ok
        promoted = mem.store._all(
            "SELECT COUNT(*) FROM ledger WHERE event = %s", (EventType.PROMOTED.value,))[0][0]
        assert promoted == WRITERS * PER_WRITER
        feedback = mem.store._all("SELECT COUNT(*) FROM feedback")[0][0]
        assert feedback == WRITERS * (PER_WRITER // 5)
    finally:
        mem.close()


def test_sigkill_leaves_no_acknowledged_write_lost_and_no_orphan(pg_server: PgServer) -> None:
    dsn = pg_server.fresh_dsn("kill")
    Memory(dsn, embedder="hash").close()
    ctx = mp.get_context("spawn")
    q: mp.Queue[str] = ctx.Queue()
    p = ctx.Process(target=_killable_writer, args=(dsn, q))
    p.start()
    deadline = time.time() + 60
    acked: set[str] = set()
    while len(acked) < 30 and time.time() < deadline:
        acked.add(q.get(timeout=30))
    assert p.pid is not None
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    while not q.empty():
        acked.add(q.get())
    mem = Memory(dsn, embedder="hash")
    try:
        stored = {r[0] for r in mem.store._all("SELECT id FROM memories")}
        assert acked <= stored
        health = mem.health()
        assert health.ok and health.orphan_records == 0 and health.ledger_mismatches == 0
    finally:
        mem.close()
