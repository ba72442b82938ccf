"""Latency of the SQLite search path (`resident_mb=0`) and its lexical part, per tenant.

    python benchmarks/lexical.py                       # 10k memories, 2 tenants, hash embedder
    python benchmarks/lexical.py --n 50000 --queries 300

The store holds N memories of 2 tenants (the texts of `recall.py`: a small vocabulary per
namespace, so query words match many rows, the costly case for lexical search), written
through the real `Store.insert` and `append_event` in transactions of 1,000, with the `hash`
embedder. A second connection with `resident_mb=0` then times, per query (a present state and
an intent from `recall.py`, tenants in turn):

* search: one `Store.search` (both dense rankings and the lexical one), k = 20;
* lexical: one `Store.lexical`, k = 20 (per-tenant BM25, `situated.store.lexical`);
* fts5: the query the SQLite path ran before (FTS5 `bm25()`, statistics of the whole file,
  joined to the gates), on the same file, for comparison on the same (shared, noisy) machine;

interleaved, and reports p50 / p90 in milliseconds, how many rows of the tenant the query's
terms match (what the lexical path scores), and the time the fill spent in
`situated.store.lexical.index` (the write-side cost).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall as rb

from situated import Memory, Principal
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import stored_form
from situated.store.ledger import EventType
from situated.store.scope import Eligibility
from situated.store.sqlite import lexical_terms

try:
    import situated.store.lexical as lexical
except ImportError:  # the code before it (PYTHONPATH=<old checkout>/src): no write-side timing
    lexical = None  # type: ignore[assignment]

TENANTS = 2
K = 20


def who(tenant: int) -> Principal:
    return Principal(tenant=f"tenant-{tenant:02d}", clearance="internal", name=f"b{tenant}")


FTS5_BEFORE = """SELECT f.rowid, -bm25(memories_fts) AS score FROM memories_fts f
    JOIN memories m ON m.rid = f.rowid WHERE memories_fts MATCH ? AND {where}
    ORDER BY bm25(memories_fts) LIMIT ?"""


def fts5_before(mem: Memory, terms: list[str], elig: Eligibility) -> list[tuple[int, float]]:
    """The SQLite path's lexical search before `situated.store.lexical` (global bm25)."""
    where, params = mem.store._where(elig)
    match = " OR ".join(f'"{t}"' for t in terms)
    rows = mem.store._all(FTS5_BEFORE.format(where=where), (match, *params, K))
    return [(int(r), float(s)) for r, s in rows]


def fill(path: Path, n: int, seed: int) -> tuple[float, float]:
    """Write n memories over `TENANTS` tenants; seconds taken, and of those in `index`."""
    world = rb.World(8, seed)
    specs = [world.memory(i) for i in range(n)]
    mem = Memory(path, embedder="hash")
    store = mem.store
    store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
    spent = [0.0]
    if lexical is not None:
        real = lexical.index

        def timed(*args: object) -> None:
            t = time.perf_counter()
            real(*args)  # type: ignore[arg-type]
            spent[0] += time.perf_counter() - t

        lexical.index = timed  # type: ignore[assignment]
    t0 = time.perf_counter()
    for start in range(0, n, rb.BULK_BATCH):
        batch = specs[start : start + rb.BULK_BATCH]
        texts = [s.kwargs["content"] for s in batch]
        states = [s.kwargs["state"].describe() if "state" in s.kwargs else "" for s in batch]
        cv, sv = mem.embedder.embed(texts), mem.embedder.embed(states)
        with store.transaction():
            for j, spec in enumerate(batch):
                p = who((start + j) % TENANTS)
                rec = rb._build(mem, p, spec.kwargs)
                vecs = {"content": cv[j], "state": sv[j] if states[j] else cv[j]}
                store.insert(rec, vecs, p.name, "bench",
                             analysis=(ANALYSIS_VERSION, stored_form(rec)))
                if mem.promotion.decide(rec).promote:
                    store.append_event(rec.id, EventType.PROMOTED, p.name, "bench")
    took = time.perf_counter() - t0
    if lexical is not None:
        lexical.index = real
    mem.close()
    return took, spent[0]


def pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories in the store")
    ap.add_argument("--queries", type=int, default=200, help="timed queries")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=None, help="keep the database here")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lexical-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"lexical-{args.n}.db"
    if not path.exists():
        took, indexing = fill(path, args.n, args.seed)
        print(f"filling {args.n} memories: {took:.1f} s, of which lexical.index {indexing:.2f} s "
              f"({1e3 * indexing / args.n:.3f} ms per memory)")
    mem = Memory(path, embedder="hash", resident_mb=0)
    world = rb.World(8, args.seed + 1)
    queries = [world.query(i % TENANTS) for i in range(args.queries)]
    search_ms: list[float] = []
    lexical_ms: list[float] = []
    fts5_ms: list[float] = []
    matched: list[int] = []
    for q in queries:
        text = f"{q.intent} {q.state.describe()}"
        elig = Eligibility.for_recall(who(q.tenant))
        qvec = mem.embedder.embed([text])[0]
        t0 = time.perf_counter_ns()
        mem.store.search(qvec, text, K, elig)
        t1 = time.perf_counter_ns()
        mem.store.lexical(text, K, elig)
        t2 = time.perf_counter_ns()
        fts5_before(mem, lexical_terms(text), elig)
        t3 = time.perf_counter_ns()
        search_ms.append((t1 - t0) / 1e6)
        lexical_ms.append((t2 - t1) / 1e6)
        fts5_ms.append((t3 - t2) / 1e6)
        matched.append(mem.store.lexical(text, 100_000, elig).__len__())
    terms = lexical_terms(f"{queries[0].intent} {queries[0].state.describe()}")
    print(f"N={args.n}, {TENANTS} tenants, {args.queries} queries, k={K}, e.g. terms {terms}")
    print(f"rows matched per query: median {statistics.median(matched):.0f}, max {max(matched)}")
    for name, xs in (("Store.search", search_ms), ("Store.lexical", lexical_ms),
                     ("fts5 (before)", fts5_ms)):
        print(f"{name:<14} p50 {pct(xs, 50):7.2f} ms   p90 {pct(xs, 90):7.2f} ms")
    print(f"database: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
