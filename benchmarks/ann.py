"""The approximate index of large tenants (`situated.store.ann`): which library, its recall@10
against exact search on real embeddings, and its latency and memory up to 1M rows.

Run from the repository root (see benchmarks/README.md):

    python benchmarks/ann.py                        # all parts, about 10 minutes
    python benchmarks/ann.py --parts real,scale --scale-n 1000000

Parts (each prints a table; numbers are measured in this run, threads pinned to one):

* libraries: faiss HNSW (float32, and 8-bit codes with exact re-rank: what situated uses) and
  usearch HNSW over the same clustered vectors; unfiltered and with 30% of the rows eligible
  (faiss: the mask applied inside the walk; usearch's Python API has no predicate, so it
  over-fetches 4k and filters after).
* real: recall@10 of situated's graph search (`Graph.search`) against exact on real text
  embeddings (minilm-static): the LoCoMo turns with the LoCoMo questions as queries, and the
  recall benchmark's generated memories with its generated present states as queries; all rows
  eligible, and 30% eligible.
* scale: the graph alone over N resident vectors (clustered, 256 dimensions): build time,
  p50/p95 of the graph search and of numpy exact (`mat @ q` + argpartition) in the same run,
  recall@10, graph MB against the raw vectors' MB, process RSS.
* neardup: the write path's near-duplicate search of one batch (`Graph.search_many`, what
  `Store.dense_many` runs for a large tenant) against the exact matrix product it replaces:
  1,000 queries that restate stored rows (each a stored vector plus a little noise), top 5;
  seconds per batch and the share of queries whose restated row comes back first.
* store: a one-tenant store of N memories (the recall benchmark's bulk load), whole recall
  through the approximate index against the same file searched exactly, and numpy.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import situated  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console
from rich.table import Table
from threadpoolctl import threadpool_limits

from situated.store.ann import EF_SEARCH, Graph

F32 = npt.NDArray[np.float32]
K = 10
QUERIES = 300
ELIGIBLE = 0.3


def _faiss() -> Any:
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def exact_top(mat: F32, q: F32, k: int, allowed: npt.NDArray[np.bool_] | None) -> set[int]:
    sims = mat @ q
    if allowed is not None:
        sims = np.where(allowed, sims, -np.inf)
    return set(np.argpartition(-sims, k)[:k].tolist())


def clustered(n: int, dim: int, seed: int, centres: int = 200) -> tuple[F32, F32]:
    """Rows and queries near shared cluster centres (the recall benchmark's shape: cosine to
    the centre about 0.74), generated in bulk."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)

    def near(m: int) -> F32:
        x = c[rng.integers(centres, size=m)] + rng.standard_normal((m, dim)).astype(
            np.float32) * (0.9 / np.sqrt(dim))
        out: F32 = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
        return out

    rows = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        rows[lo:lo + 100_000] = near(min(100_000, n - lo))
    return rows, near(QUERIES)


def measure(
    search: Callable[[F32, npt.NDArray[np.bool_] | None], Sequence[int]], mat: F32, qs: F32,
    allowed: npt.NDArray[np.bool_] | None,
) -> tuple[float, float, float]:
    """(p50 ms, p95 ms, recall@10 against exact) over the queries."""
    lat, hits = [], 0
    for q in qs:
        t0 = time.perf_counter()
        got = search(q, allowed)
        lat.append((time.perf_counter() - t0) * 1e3)
        hits += len(set(int(x) for x in got) & exact_top(mat, q, K, allowed))
    return pct(lat, 50), pct(lat, 95), hits / (K * len(qs))


def ours(
    g: Graph, mat: F32, ef: int = EF_SEARCH
) -> Callable[[F32, npt.NDArray[np.bool_] | None], Sequence[int]]:
    everyone = np.ones(len(mat), dtype=np.bool_)

    def search(q: F32, allowed: npt.NDArray[np.bool_] | None) -> Sequence[int]:
        a = everyone if allowed is None else allowed
        got = g.search(mat, q, K, a, int(a.sum()) if allowed is not None else len(mat), ef)
        if got is None:  # the slice would search exactly: count it as exact
            return sorted(exact_top(mat, q, K, a))
        return got.tolist()
    return search


def part_libraries(console: Console, n: int, dim: int) -> list[dict[str, Any]]:
    import usearch.index as ui

    faiss = _faiss()
    mat, qs = clustered(n, dim, seed=1)
    allowed = np.random.default_rng(2).random(n) < ELIGIBLE
    out = []
    t0 = time.perf_counter()
    flat = faiss.IndexHNSWFlat(dim, 16, faiss.METRIC_INNER_PRODUCT)
    flat.hnsw.efConstruction = 64
    flat.add(mat)
    flat_s = time.perf_counter() - t0

    def faiss_flat(q: F32, a: npt.NDArray[np.bool_] | None) -> Sequence[int]:
        p = faiss.SearchParametersHNSW()
        p.efSearch = EF_SEARCH
        if a is not None:
            bits = np.packbits(a, bitorder="little")
            p.sel = faiss.IDSelectorBitmap(len(a), faiss.swig_ptr(bits))
        _, ids = flat.search(q[None, :], K, params=p)
        return [int(i) for i in ids[0] if i >= 0]

    t0 = time.perf_counter()
    g = Graph.build("content", mat)
    sq_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    us = ui.Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=64,
                  expansion_search=EF_SEARCH)
    us.add(np.arange(n), mat, threads=1)
    us_s = time.perf_counter() - t0

    def usearch(q: F32, a: npt.NDArray[np.bool_] | None) -> Sequence[int]:
        if a is None:
            return [int(x) for x in us.search(q, K, threads=1).keys]
        keys = us.search(q, 4 * K, threads=1).keys
        return [int(x) for x in keys if a[int(x)]][:K]

    flat_mb = (n * dim * 4 + flat.hnsw.neighbors.size() * 4) / 1e6
    for name, fn, build, mb in (
        ("faiss HNSW float32 (M=16)", faiss_flat, flat_s, flat_mb),
        ("faiss HNSW 8-bit + exact re-rank (situated)", ours(g, mat), sq_s, g.nbytes / 1e6),
        ("usearch HNSW float32 (M=16), filter after", usearch, us_s, us.memory_usage / 1e6),
    ):
        p50, _, r = measure(fn, mat, qs, None)
        fp50, _, fr = measure(fn, mat, qs, allowed)
        out.append({"library": name, "build_s": build, "p50_ms": p50, "recall": r,
                    "filtered_p50_ms": fp50, "filtered_recall": fr, "mb": mb})
    lat = []
    for q in qs:
        t0 = time.perf_counter()
        exact_top(mat, q, K, None)
        lat.append((time.perf_counter() - t0) * 1e3)
    t = Table(title=f"HNSW libraries, {n:,} clustered rows x {dim}, 1 thread, k={K}, "
                    f"efSearch {EF_SEARCH}; numpy exact p50 {pct(lat, 50):.2f} ms")
    for col in ("library", "build s", "p50 ms", "recall@10", f"{ELIGIBLE:.0%} eligible: p50 ms",
                "recall@10", "index MB"):
        t.add_column(col)
    for r in out:
        t.add_row(r["library"], f"{r['build_s']:.1f}", f"{r['p50_ms']:.3f}", f"{r['recall']:.3f}",
                  f"{r['filtered_p50_ms']:.3f}", f"{r['filtered_recall']:.3f}", f"{r['mb']:.0f}")
    console.print(t)
    return out


def part_real(console: Console, generated: int) -> list[dict[str, Any]]:
    from recall import World

    from situated.embed import get_embedder
    from situated.eval.conversations import load_locomo

    emb = get_embedder("minilm-static")
    sets: list[tuple[str, F32, F32]] = []
    convs = load_locomo()
    turns = [u.text for c in convs for u in c.units]
    questions = [q.text for c in convs for q in c.questions]
    sets.append((f"LoCoMo turns ({len(turns):,}), its {len(questions)} questions",
                 emb.embed(turns), emb.embed(questions)))
    world = World(emb.dim, seed=7)
    texts = [world.memory(i).kwargs["content"] for i in range(generated)]
    queries = []
    for i in range(QUERIES):
        q = world.query(i % 10)
        queries.append(f"{q.intent} {q.state.describe()}")
    sets.append((f"generated memories ({generated:,}), generated present states",
                 emb.embed(texts), emb.embed(queries)))
    out = []
    t = Table(title=f"recall@10 of situated's graph against exact, minilm-static ({emb.dim} "
                    "dimensions)")
    for col in ("rows", "build s", "all eligible: recall@10", "p50 ms",
                f"{ELIGIBLE:.0%} eligible: recall@10", "p50 ms"):
        t.add_column(col)
    for name, mat, qs in sets:
        mat = np.ascontiguousarray(mat, dtype=np.float32)
        t0 = time.perf_counter()
        g = Graph.build("content", mat)
        build = time.perf_counter() - t0
        allowed = np.random.default_rng(3).random(len(mat)) < ELIGIBLE
        p50, _, r = measure(ours(g, mat), mat, qs, None)
        fp50, _, fr = measure(ours(g, mat), mat, qs, allowed)
        out.append({"set": name, "build_s": build, "recall": r, "p50_ms": p50,
                    "filtered_recall": fr, "filtered_p50_ms": fp50})
        t.add_row(name, f"{build:.1f}", f"{r:.3f}", f"{p50:.3f}", f"{fr:.3f}", f"{fp50:.3f}")
    console.print(t)
    return out


def part_scale(
    console: Console, sizes: Sequence[int], dim: int, efs: Sequence[int]
) -> list[dict[str, Any]]:
    out = []
    t = Table(title=f"the graph alone over resident vectors ({dim} dimensions, clustered), "
                    f"1 thread, k={K}")
    for col in ("rows", "build s", "efSearch", "graph p50/p95 ms", "numpy exact p50/p95 ms",
                "recall@10", f"{ELIGIBLE:.0%} eligible p50 ms / recall@10",
                "raw MB", "graph MB", "RSS MB"):
        t.add_column(col)
    for n in sizes:
        mat, qs = clustered(n, dim, seed=4)
        t0 = time.perf_counter()
        g = Graph.build("content", mat)
        build = time.perf_counter() - t0
        lat = []
        for q in qs:
            t0 = time.perf_counter()
            sims = mat @ q
            top = np.argpartition(-sims, K)[:K]
            top[np.argsort(-sims[top])]
            lat.append((time.perf_counter() - t0) * 1e3)
        allowed = np.random.default_rng(5).random(n) < ELIGIBLE
        for ef in efs:
            p50, p95, r = measure(ours(g, mat, ef), mat, qs, None)
            fp50, _, fr = measure(ours(g, mat, ef), mat, qs, allowed)
            row = {"rows": n, "build_s": build, "ef": ef, "p50_ms": p50, "p95_ms": p95,
                   "numpy_p50_ms": pct(lat, 50), "numpy_p95_ms": pct(lat, 95), "recall": r,
                   "filtered_p50_ms": fp50, "filtered_recall": fr, "raw_mb": mat.nbytes / 1e6,
                   "graph_mb": g.nbytes / 1e6, "rss_mb": rss_mb()}
            out.append(row)
            t.add_row(f"{n:,}", f"{build:.0f}", str(ef), f"{p50:.3f} / {p95:.3f}",
                      f"{row['numpy_p50_ms']:.2f} / {row['numpy_p95_ms']:.2f}", f"{r:.3f}",
                      f"{fp50:.3f} / {fr:.3f}", f"{row['raw_mb']:.0f}",
                      f"{row['graph_mb']:.0f}", f"{row['rss_mb']:.0f}")
            console.print(f"{n:,} rows, efSearch {ef}: p50 {p50:.3f} ms, recall@10 {r:.3f}")
        del g, mat
    console.print(t)
    return out


def part_neardup(console: Console, sizes: Sequence[int], dim: int,
                 batch: int = 1000) -> list[dict[str, Any]]:
    out = []
    t = Table(title=f"near-duplicate search of one batch of {batch:,} restatements, top 5, "
                    "1 thread")
    for col in ("rows", "exact product s", "graph walk s", "x faster", "restated row first: "
                "exact / graph"):
        t.add_column(col)
    rng = np.random.default_rng(9)
    for n in sizes:
        mat, _ = clustered(n, dim, seed=4)
        g = Graph.build("content", mat)
        picked = rng.choice(n, batch, replace=False)
        qs = mat[picked] + 0.05 * rng.standard_normal((batch, dim)).astype(np.float32) / np.sqrt(
            dim)
        qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
        allowed = np.ones(n, dtype=np.bool_)
        t0 = time.perf_counter()
        sims = mat @ qs.T
        exact_first = np.argmax(sims, axis=0)
        exact_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        hits = g.search_many(mat, qs, 5, allowed, n, EF_SEARCH)
        graph_s = time.perf_counter() - t0
        found = np.mean([h is not None and len(h) and h[0] == p
                         for h, p in zip(hits, picked, strict=True)])
        row = {"rows": n, "exact_s": exact_s, "graph_s": graph_s,
               "exact_first": float(np.mean(exact_first == picked)), "graph_first": found}
        out.append(row)
        t.add_row(f"{n:,}", f"{exact_s:.2f}", f"{graph_s:.2f}", f"{exact_s / graph_s:.1f}x",
                  f"{row['exact_first']:.3f} / {found:.3f}")
        del g, mat, sims
    console.print(t)
    return out


def part_store(
    console: Console, n: int, dim: int, workdir: Path, tenants: int, ann_rows: int
) -> dict[str, Any]:
    """A store of `tenants` tenants (memories dealt in turn): whole recall of the first
    tenant through its graphs vs the same file searched exactly."""
    from recall import Baseline, Precomputed, World, bulk_load, request

    from situated import Memory
    from situated.recall.pipeline import run_recall
    from situated.recall.retrieve import retrieve
    from situated.store.scope import Eligibility

    world = World(dim, seed=7)
    specs = [replace(world.memory(i), tenant=i % tenants) for i in range(n)]
    emb = Precomputed(dim)
    path = workdir / f"ann-store-{n}-{dim}-{tenants}.db"
    t0 = time.perf_counter()
    if not path.exists():
        mem = Memory(path, embedder=emb, ann_rows=0)
        bulk_load(mem, emb, specs)
        mem.close()
    load_s = time.perf_counter() - t0
    arms = {"approximate": Memory(path, embedder=emb, ann_rows=ann_rows, resident_mb=4096),
            "exact": Memory(path, embedder=emb, ann_rows=0, resident_mb=4096)}
    qs = [world.query(0) for _ in range(QUERIES)]
    for mem in arms.values():
        mem.store.resident.load_after = 1
    t0 = time.perf_counter()
    for mem in arms.values():  # load the slices (and build or load the graphs)
        q = qs[0]
        emb.hand(q.qvec, q.svec)
        run_recall(mem.store, emb, mem.reconstructor, request(q))
    warm_s = time.perf_counter() - t0
    if not arms["approximate"].store.resident.slices["tenant-00"].graphs:
        raise SystemExit("no graphs were built: raise --store-n or lower --store-ann-rows")
    s = arms["exact"].store.resident.slices["tenant-00"]
    base = Baseline(s.matrix("content"), s.rids[: s.n])
    timings: dict[str, dict[str, list[float]]] = {a: {"dense": [], "retrieve": [], "recall": []}
                                                  for a in arms}
    numpy_ms, agree = [], 0
    for q in qs:
        t0 = time.perf_counter()
        truth = base.search(q.qvec, 20)
        numpy_ms.append((time.perf_counter() - t0) * 1e3)
        for name, mem in arms.items():
            req = request(q)
            elig = Eligibility.for_recall(req.principal, None, time.time())
            t0 = time.perf_counter()
            got = mem.store.dense("content", q.qvec, 20, elig)
            timings[name]["dense"].append((time.perf_counter() - t0) * 1e3)
            if name == "approximate":
                agree += len({r for r, _ in got[:10]} & set(truth[:10].tolist()))
            t0 = time.perf_counter()
            retrieve(mem.store, q.qvec, f"{q.intent} {q.state.describe()}", elig, 20)
            timings[name]["retrieve"].append((time.perf_counter() - t0) * 1e3)
            emb.hand(q.qvec, q.svec)
            t0 = time.perf_counter()
            run_recall(mem.store, emb, mem.reconstructor, req)
            timings[name]["recall"].append((time.perf_counter() - t0) * 1e3)
    g = arms["approximate"].store.resident.slices["tenant-00"]
    res = {"rows": s.n, "load_s": load_s, "warm_s": warm_s, "numpy_p50_ms": pct(numpy_ms, 50),
           "recall_at_10": agree / (10 * len(qs)), "graphs": sorted(g.graphs),
           "resident_mb": g.nbytes / 1e6,
           "graph_mb": sum(x.nbytes for x in g.graphs.values()) / 1e6,
           "raw_vectors_mb": 2 * s.n * dim * 4 / 1e6, "rss_mb": rss_mb(),
           "timings": {a: {k: (pct(v, 50), pct(v, 95)) for k, v in d.items()}
                       for a, d in timings.items()}}
    t = Table(title=f"a tenant of {s.n:,} memories ({dim} dims, graphs from {ann_rows:,} rows): "
                    f"numpy exact p50 "
                    f"{res['numpy_p50_ms']:.2f} ms; recall@10 of the approximate dense search "
                    f"{res['recall_at_10']:.3f}; its slice {res['resident_mb']:.0f} MB (graphs "
                    f"{res['graph_mb']:.0f}) for {res['raw_vectors_mb']:.0f} MB of raw vectors")
    for col in ("search", "dense p50/p95 ms", "retrieve p50/p95 ms", "whole recall p50/p95 ms",
                "recall p50 / numpy"):
        t.add_column(col)
    for a, d in res["timings"].items():
        t.add_row(a, *(f"{d[k][0]:.2f} / {d[k][1]:.2f}" for k in ("dense", "retrieve", "recall")),
                  f"{d['recall'][0] / res['numpy_p50_ms']:.1f}x")
    console.print(t)
    for mem in arms.values():
        mem.close()
    return res


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--parts", default="libraries,real,scale,store")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--libraries-n", type=int, default=100_000)
    ap.add_argument("--generated-n", type=int, default=100_000)
    ap.add_argument("--scale-n", default="100000,1000000", help="comma-separated row counts")
    ap.add_argument("--scale-ef", default=str(EF_SEARCH), help="comma-separated efSearch values")
    ap.add_argument("--store-n", type=int, default=100_000)
    ap.add_argument("--store-tenants", type=int, default=1)
    ap.add_argument("--store-ann-rows", type=int, default=50_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp"))
    a = ap.parse_args(argv)
    console = Console(width=160)
    parts = set(a.parts.split(","))
    _faiss()
    with threadpool_limits(limits=1):
        if "libraries" in parts:
            part_libraries(console, a.libraries_n, a.dim)
        if "real" in parts:
            part_real(console, a.generated_n)
        if "scale" in parts:
            part_scale(console, [int(x) for x in a.scale_n.split(",")], a.dim,
                       [int(x) for x in a.scale_ef.split(",")])
        if "neardup" in parts:
            part_neardup(console, [int(x) for x in a.scale_n.split(",")], a.dim)
        if "store" in parts:
            part_store(console, a.store_n, a.dim, a.workdir, a.store_tenants, a.store_ann_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
