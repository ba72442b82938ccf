"""Several processes writing at once: every acknowledged write survives, the ledger agrees."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import uuid
from pathlib import Path

from situated import Memory, Principal, State
from situated.store.ledger import EventType

WRITERS = 4
PER_WRITER = 20


def _writer(path: str, n: int, out: mp.Queue[str]) -> None:
    mem = Memory(path, embedder="hash")
    who = Principal(tenant=f"t{n % 2}", name=f"writer{n}")
    for i in range(PER_WRITER):
        # distinct texts: near-duplicates would (rightly) be merged into one memory
        rec = mem.add(f"writer {n} lesson {i}: {uuid.uuid4().hex}", principal=who,
                      state=State("case", facts={"writer": n, "i": i}))
        out.put(rec.id)  # acknowledged
        if i % 5 == 0:
            b = mem.recall(State("case", facts={"writer": n, "i": i}), principal=who)
            mem.feedback(b.recall_id, principal=who, success=True,
                         used=[x.memory_id for x in b.items][:1])
    mem.close()


def test_four_processes_write_concurrently(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    Memory(path, embedder="hash").close()  # create and bind first
    ctx = mp.get_context("spawn")
    q: mp.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, n, q)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    acked = set()
    while not q.empty():
        acked.add(q.get())
    assert len(acked) == WRITERS * PER_WRITER
    mem = Memory(path, embedder="hash")
    stored = {r[0] for r in mem.store._all("SELECT id FROM memories")}
    assert acked == stored
    assert mem.health().ok
    promoted = mem.store._all("SELECT COUNT(*) FROM ledger WHERE event = ?",
                              (EventType.PROMOTED.value,))[0][0]
    assert promoted == WRITERS * PER_WRITER


def _killable_writer(path: str, out: mp.Queue[str]) -> None:
    mem = Memory(path, embedder="hash")
    who = Principal(tenant="acme")
    i = 0
    while True:
        rec = mem.add(f"lesson {i}: {uuid.uuid4().hex}", principal=who,
                      state=State("s", facts={"i": i}))
        out.put(rec.id)
        i += 1


def test_sigkill_leaves_no_acknowledged_write_lost_and_no_orphan(tmp_path: Path) -> None:
    path = str(tmp_path / "kill.db")
    Memory(path, embedder="hash").close()
    ctx = mp.get_context("spawn")
    q: mp.Queue[str] = ctx.Queue()
    p = ctx.Process(target=_killable_writer, args=(path, q))
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
    mem = Memory(path, embedder="hash")
    stored = {r[0] for r in mem.store._all("SELECT id FROM memories")}
    assert acked <= stored
    health = mem.health()
    assert health.ok and health.orphan_records == 0
