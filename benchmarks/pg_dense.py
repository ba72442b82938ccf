"""PostgreSQL's dense search and recall on one loaded store, HNSW-first against the planner's
own choice (`store.pg.search.ANN_FIRST`), over `backends.py`'s memories and queries.

    python benchmarks/pg_dense.py --dsn postgresql://... --n 100000 --load   # load it first
    python benchmarks/pg_dense.py --dsn postgresql://... --n 100000          # then measure

`--load` writes the n memories through `Store.insert_many` (as `backends.py` does) into the
(empty) database and runs VACUUM ANALYZE. Prints, for each setting: `Store.dense` p50/p95 ms
(content field, k=10, the recall's gates), whole `Memory.recall` p50/p95 ms, and recall@10 of
the HNSW-first results against the planner's (exact, for a tenant this size) ones.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import psycopg
from backends import TENANTS, load
from recall import Precomputed, World, principal

import situated.store.pg.search as pg_search
from situated import Memory
from situated.store.scope import Eligibility


def pcts(t: list[float]) -> tuple[float, float]:
    return round(statistics.median(t), 2), round(sorted(t)[int(len(t) * 0.95) - 1], 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--load", action="store_true")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    world = World(256, 7)
    specs = [world.memory(i) for i in range(a.n)]
    queries = [world.query(i % TENANTS) for i in range(a.queries)]
    emb = Precomputed(256)
    mem = Memory(a.dsn, embedder=emb)
    if a.load:
        load(mem, emb, specs)
        with psycopg.connect(a.dsn, autocommit=True) as c:
            c.execute("VACUUM ANALYZE memories, lexicon_postings, ledger")
    hits: dict[bool, list[list[int]]] = {}
    for ann in (True, False):
        pg_search.ANN_FIRST = ann
        dense, recall, hits[ann] = [], [], []
        for q in queries:
            elig = Eligibility.for_recall(principal(q.tenant))
            t0 = time.perf_counter()
            got = mem.store.dense("content", q.qvec, 10, elig)
            dense.append((time.perf_counter() - t0) * 1000)
            hits[ann].append([r for r, _ in got])
        for q in queries:
            emb.hand(q.qvec, q.svec)
            t0 = time.perf_counter()
            mem.recall(q.state, principal=principal(q.tenant), intent=q.intent)
            recall.append((time.perf_counter() - t0) * 1000)
        print(f"ANN_FIRST={ann}: dense p50/p95 {pcts(dense)} ms, recall p50/p95 "
              f"{pcts(recall)} ms", flush=True)
    at10 = statistics.mean(len(set(h) & set(t)) / max(1, len(t))
                           for h, t in zip(hits[True], hits[False], strict=True))
    print(f"recall@10 of HNSW-first against the planner's choice: {at10:.3f}")
    mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
