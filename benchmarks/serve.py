"""The HTTP door against the same operations called in-process, at 1, 8 and 32 clients.

Run from the repository root (see benchmarks/README.md):

    python benchmarks/serve.py --quick            # 10k memories, short cells (~2 minutes)
    python benchmarks/serve.py                    # 100k memories (the issue's setting)
    python benchmarks/serve.py --workers 1,2 --json out.json

A store of N memories over 10 tenants (each key sees its tenant's 10%) is filled through the
store's bulk path (the rows, vectors and ledger events `Memory.add` writes, 1,000 per
transaction). Then, in the same run, for each number of concurrent clients (threads):

* in-process: `Service.recall` / `Service.add` called directly (a pool of `Memory` objects,
  as `situated serve` holds per process);
* HTTP: the same requests to `situated serve` (a real subprocess on 127.0.0.1, uvicorn with
  `--workers W`, every worker on the same SQLite file), one keep-alive httpx client per
  thread, each request authenticated by its tenant's API key.

Each cell is bounded in requests and in seconds. Reported: throughput, p50 and p95 latency,
errors, and lost writes (acknowledged adds whose memory is not in the store afterwards), with
the HTTP/in-process ratio and difference of the p50s. The issue's target: HTTP recall p50
within 1.5 ms of the in-process call; no error and no lost write at 32 clients.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

try:
    import situated  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import httpx
from rich.console import Console
from rich.table import Table

from situated import Memory, Principal, State
from situated.models import Kind
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import stored_form
from situated.service import Pool, Service
from situated.service.models import AddRequest, KeyCreate, RecallRequest
from situated.store.ledger import EventType
from situated.store.scope import SYSTEM

TENANTS = 10
WORDS = ("refund annual monthly plan invoice shipping zone delay damaged replace discount "
         "coupon account password reset upgrade downgrade cancel renewal trial seats export "
         "report dashboard api webhook timeout retry quota limit region").split()


def tenant(n: int) -> Principal:
    return Principal(f"t{n}", {"support"}, "internal", f"bench-{n}")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def fill(path: Path, n: int, embedder: str, seed: int, console: Console) -> None:
    """N memories through `Store.insert` and `append_event`, 1,000 per transaction."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    with Memory(path, embedder=embedder) as mem:
        mem.store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
        for start in range(0, n, 1000):
            batch = []
            for i in range(start, min(n, start + 1000)):
                who = tenant(i % TENANTS)
                days = rng.randint(1, 90)
                state = State(f"customer on {_sentence(rng, 4)}, day {days}",
                              facts={"days": days, "plan": rng.choice(["annual", "monthly"])})
                rec = mem._build(
                    f"{_sentence(rng, 10)} (lesson {i})", who, Kind.LESSON,
                    f"ns{i % 5}", state, _sentence(rng, 3), True, None, None, None, (),
                    [f"days {'<=' if i % 2 else '>'} {rng.randint(10, 60)}"], None, None,
                    None, False, (), "internal", None, "inferred", None, None, None,
                )
                batch.append((rec, who))
            vecs = mem.embedder.embed([r.content for r, _ in batch]
                                      + [r.source.state.describe() for r, _ in batch
                                         if r.source.state])
            half = len(batch)
            with mem.store.transaction():
                for j, (rec, who) in enumerate(batch):
                    mem.store.insert(rec, who, {"content": vecs[j], "state": vecs[half + j]},
                                     "proposed via bulk load",
                                     analysis=(ANALYSIS_VERSION, stored_form(rec)))
                    mem.store.append_event(rec.id, SYSTEM, EventType.PROMOTED, who.name,
                                           "bulk load")
    console.print(f"filled {n:,} memories in {time.perf_counter() - t0:.0f} s")


@dataclass
class Cell:
    door: str
    op: str
    clients: int
    workers: int
    requests: int
    seconds: float
    per_s: float
    mean_ms: float
    p50_ms: float
    p95_ms: float
    errors: int
    lost: int = 0


def mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def drive(clients: int, budget: int, seconds: float,
          call: Callable[[int, int], str | None]) -> tuple[list[float], int, list[str], float]:
    """`clients` threads share `budget` calls (or stop at `seconds`): latencies (ms), errors,
    the ids returned (acknowledged writes), wall time."""
    lat: list[float] = []
    ids: list[str] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(budget))
    stop = time.perf_counter() + seconds

    def worker(w: int) -> None:
        nonlocal errors
        while time.perf_counter() < stop:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter_ns()
            try:
                got = call(w, i)
            except Exception:
                with lock:
                    errors += 1
                continue
            dt = (time.perf_counter_ns() - t0) / 1e6
            with lock:
                lat.append(dt)
                if got:
                    ids.append(got)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors, ids, time.perf_counter() - t0


def recall_body(rng: random.Random) -> dict[str, Any]:
    days = rng.randint(1, 90)
    return {"state": {"text": f"customer on {_sentence(rng, 4)}, day {days}",
                      "facts": {"days": days, "plan": "annual"}},
            "intent": _sentence(rng, 3), "namespace": f"ns{rng.randrange(5)}", "k": 5}


def add_body(i: int, door: str) -> dict[str, Any]:
    return {"content": f"{door} write {i}: {' '.join(random.Random(i).choices(WORDS, k=8))}",
            "namespace": "writes", "state": {"text": f"write {i}", "facts": {"n": i}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, embedder: str, workers: int, pool: int) -> tuple[Any, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", embedder, "serve",
         "--port", str(port), "--workers", str(workers), "--pool", str(pool)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"situated serve did not start: {proc.stderr.read() if proc.stderr else ''}")


def lost_writes(db: Path, embedder: str, ids: Sequence[tuple[int, str]]) -> int:
    with Memory(db, embedder=embedder) as mem:
        found = 0
        for t, mid in ids:
            try:
                mem.inspect(mid, principal=tenant(t))
                found += 1
            except Exception:
                pass
    return len(ids) - found


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="10k memories, short cells")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--workers", default="1,2", help="uvicorn worker processes to measure")
    ap.add_argument("--pool", type=int, default=2, help="Memory objects per process")
    ap.add_argument("--requests", type=int, default=400, help="calls per cell (at most)")
    ap.add_argument("--seconds", type=float, default=30, help="time per cell (at most)")
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.quick:
        a.memories, a.requests, a.seconds = 10_000, 150, 10
    console = Console(width=150)
    clients = [int(x) for x in a.clients.split(",")]
    workers = [int(x) for x in a.workers.split(",")]
    work = a.workdir or Path(tempfile.mkdtemp(prefix="situated-serve-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "serve.db"
    if not db.exists():
        fill(db, a.memories, a.embedder, a.seed, console)
    cells: list[Cell] = []

    # in-process: the service the server runs, called directly
    service = Service(Pool(lambda: Memory(db, embedder=a.embedder), a.pool))
    keys = [service.create_key(KeyCreate(tenant=f"t{t}", roles=["support"],
                                         actor=f"bench-{t}"), actor="bench").secret
            for t in range(TENANTS)]
    rng = random.Random(a.seed)
    bodies = [recall_body(rng) for _ in range(a.requests)]
    for _ in range(a.pool):  # warm every pooled Memory on every tenant (resident slices)
        for t in range(TENANTS):
            service.recall(tenant(t), RecallRequest.model_validate(bodies[t]))
    written: list[tuple[int, str]] = []
    for c in clients:
        lat, err, _, wall = drive(c, a.requests, a.seconds, lambda w, i: (service.recall(
            tenant(i % TENANTS), RecallRequest.model_validate(bodies[i])), None)[1])
        cells.append(Cell("in-process", "recall", c, 1, len(lat), wall,
                          len(lat) / wall, mean(lat),
                          pct(lat, .5), pct(lat, .95), err))
        base = len(written)

        def add_in(w: int, i: int, c: int = c) -> str:
            t = i % TENANTS
            doc = service.add(tenant(t), AddRequest(**add_body(i + 1_000_000 * c, "local")))
            written.append((t, doc.id))
            return doc.id

        lat, err, _, wall = drive(c, a.requests, a.seconds, add_in)
        cells.append(Cell("in-process", "add", c, 1, len(lat), wall,
                          len(lat) / wall, mean(lat),
                          pct(lat, .5), pct(lat, .95), err,
                          lost_writes(db, a.embedder, written[base:])))
    service.close()

    # HTTP: `situated serve` as a subprocess, W workers on the same file
    for w in workers:
        cells += http_cells(db, a, w, clients, keys, bodies)

    render(console, cells, a)
    if a.json:
        a.json.write_text(json.dumps({"memories": a.memories, "cells": [asdict(c) for c in cells],
                                      "cpus": os.cpu_count()}, indent=2))
    return 0


def http_cells(db: Path, a: argparse.Namespace, w: int, clients: Sequence[int],
               keys: Sequence[str], bodies: Sequence[dict[str, Any]]) -> list[Cell]:
    """Every cell of one server (`w` workers)."""
    cells: list[Cell] = []
    proc, url = start_server(db, a.embedder, w, a.pool)
    local = threading.local()

    def client(t: int) -> httpx.Client:
        pool = getattr(local, "clients", None)
        if pool is None:
            pool = local.clients = {}
        if t not in pool:
            pool[t] = httpx.Client(base_url=url, timeout=60,
                                   headers={"Authorization": f"Bearer {keys[t]}"})
        return pool[t]

    def recall_http(_w: int, i: int) -> None:
        client(i % TENANTS).post("/v1/recall", json=bodies[i]).raise_for_status()

    try:
        for _ in range(4 * w * a.pool):  # warm every worker's pool on every tenant
            for t in range(TENANTS):
                client(t).post("/v1/recall", json=bodies[t]).raise_for_status()
        for c in clients:
            lat, err, _, wall = drive(c, a.requests, a.seconds, recall_http)
            cells.append(Cell("http", "recall", c, w, len(lat), wall,
                          len(lat) / wall, mean(lat),
                              pct(lat, .5), pct(lat, .95), err))
            acked: list[tuple[int, str]] = []

            def add_http(_w: int, i: int, c: int = c, acked: list[Any] = acked) -> str:
                t = i % TENANTS
                r = client(t).post("/v1/memories",
                                   json=add_body(i + 1_000_000 * (c + 100 * w), "http"))
                r.raise_for_status()
                acked.append((t, r.json()["id"]))
                return str(r.json()["id"])

            lat, err, _, wall = drive(c, a.requests, a.seconds, add_http)
            cells.append(Cell("http", "add", c, w, len(lat), wall,
                          len(lat) / wall, mean(lat),
                              pct(lat, .5), pct(lat, .95), err,
                              lost_writes(db, a.embedder, acked)))
    finally:
        proc.terminate()
        proc.wait(30)
    return cells


def render(console: Console, cells: list[Cell], a: argparse.Namespace) -> None:
    table = Table(title=f"situated serve vs in-process: {a.memories:,} memories, "
                  f"{TENANTS} tenants, embedder {a.embedder}, pool {a.pool}", title_justify="left")
    for col in ("op", "clients", "door", "workers", "requests", "per s", "mean ms", "p50 ms",
                "p95 ms", "errors", "lost", "p50 +ms", "mean ratio"):
        table.add_column(col, justify="right" if col not in ("op", "door") else "left")
    local = {(c.op, c.clients): c for c in cells if c.door == "in-process"}
    for c in sorted(cells, key=lambda c: (c.op != "recall", c.clients, c.door != "in-process",
                                          c.workers)):
        base = local.get((c.op, c.clients))
        vs = base is not None and c.door == "http"
        table.add_row(c.op, str(c.clients), c.door, str(c.workers) if c.door == "http" else "-",
                      str(c.requests), f"{c.per_s:.0f}", f"{c.mean_ms:.1f}", f"{c.p50_ms:.2f}",
                      f"{c.p95_ms:.1f}", str(c.errors), str(c.lost),
                      f"{c.p50_ms - base.p50_ms:+.2f}" if vs and base else "",
                      f"{c.mean_ms / base.mean_ms:.2f}" if vs and base else "")
    console.print(table)
    console.print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
                  "client threads share them with the server processes. With C clients in a "
                  "closed loop, mean latency is about C / throughput; p50 in-process at 8 and "
                  "32 clients is low because the pool's queue is not fair (some threads wait "
                  "long: see p95), so compare means and throughput there.")


if __name__ == "__main__":
    raise SystemExit(main())
