"""Recall latency while other processes write: does a recall wait for the writers' lock?

Each recall persists a recall record. Those live in a file of their own
(`situated.store.recall_log`), so a recall should not queue behind memory writers, whose
transactions take the main file's one write lock and commit durably (fsync).

The script measures, in one run and on one store, recall latency with no writer, then with
`--writers` processes adding memories as fast as they can, and prints p50/p95 for each and the
ratio under load to idle. `--record-in-main` writes each recall record through the main file's
write lock instead (what recall did before the recall file), as the baseline of the same run.

    python benchmarks/contention.py [--memories 2000] [--recalls 300] [--writers 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

try:
    from situated import Memory, Principal, State
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from situated import Memory, Principal, State

WHO = Principal("acme", roles={"support"}, clearance="internal", name="bench")


def _writer(path: str, n: int, stop: mp.synchronize.Event, done: mp.Queue[int]) -> None:
    mem = Memory(path, embedder="hash", resident_mb=0)
    who = Principal("acme", roles={"support"}, name=f"writer{n}")
    count = 0
    while not stop.is_set():
        mem.add(f"writer {n} lesson {count}: {uuid.uuid4().hex}", principal=who,
                state=State("deploy", facts={"writer": n, "i": count}))
        count += 1
    done.put(count)
    mem.close()


def _recalls(mem: Memory, n: int, in_main: bool) -> list[float]:
    times = []
    for i in range(n):
        state = State("deploy failed on the api", facts={"service": "api", "i": i % 7})
        t0 = time.perf_counter()
        b = mem.recall(state, principal=WHO, k=5)
        if in_main:  # the old path: one more durable write under the main file's lock
            with mem.store.transaction():
                mem.store.db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, '') ON CONFLICT DO NOTHING",
                    (f"bench-{b.recall_id}",),
                )
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--recalls", type=int, default=300)
    ap.add_argument("--writers", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.db")
        mem = Memory(path, embedder="hash")
        mem.add_many(
            [{"content": f"lesson {i}: restart the {i % 13} service after a failed deploy",
              "state": State("deploy failed", {"service": f"s{i % 13}", "i": i})}
             for i in range(args.memories)],
            principal=WHO,
        )
        rows = []
        for in_main in (False, True):
            idle = _recalls(mem, args.recalls, in_main)
            stop = mp.Event()
            done: mp.Queue[int] = mp.Queue()
            procs = [mp.Process(target=_writer, args=(path, n, stop, done))
                     for n in range(args.writers)]
            for p in procs:
                p.start()
            time.sleep(1.0)  # writers under way
            t0 = time.perf_counter()
            busy = _recalls(mem, args.recalls, in_main)
            elapsed = time.perf_counter() - t0
            stop.set()
            written = sum(done.get() for _ in procs)
            for p in procs:
                p.join()
            rows.append(("main file (baseline)" if in_main else "recall file", idle, busy,
                         written / (elapsed + 1.0)))
        mem.close()
    print(f"recall latency, {args.memories} memories, {args.recalls} recalls, "
          f"{args.writers} writers")
    print(f"{'recall record in':<22} {'idle p50':>9} {'idle p95':>9} {'busy p50':>9} "
          f"{'busy p95':>9} {'p95 x idle':>10} {'writes/s':>9}")
    for name, idle, busy, rate in rows:
        print(f"{name:<22} {_pct(idle, 50):>9.1f} {_pct(idle, 95):>9.1f} "
              f"{_pct(busy, 50):>9.1f} {_pct(busy, 95):>9.1f} "
              f"{_pct(busy, 95) / _pct(idle, 95):>10.1f} {rate:>9.0f}")


if __name__ == "__main__":
    main()
