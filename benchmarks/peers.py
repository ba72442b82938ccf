"""situated against mem0 on identical vectors: search latency and add throughput.

    pip install -e '.[peers,ann]'                     # mem0ai (local Qdrant), faiss
    python benchmarks/peers.py --quick                 # 2k memories, about a minute
    python benchmarks/peers.py                         # 2k, 20k and 100k memories
    python benchmarks/peers.py --sizes 100000 --queries 50 --json peers.json

Both stores hold the same memories of `benchmarks/recall.py`'s generator (10 tenants, so the
tenant filter selects 10%; 256 dimensions, clustered, fixed seed), and both see the same
vectors: situated through an `Embedder` that returns the precomputed vectors, mem0 through an
embedding model (mem0's own `EmbeddingBase`) that returns the same vectors for the same texts.
Nothing is embedded during a timed call, so the difference is the store and the search.

mem0 (`mem0ai`, the version installed) runs as its documentation's local setup: Qdrant in
local mode (`path`, in the process), SQLite history, `infer=False` (stored verbatim, no LLM),
telemetry off. Each memory is the lesson's content under its tenant as `user_id`.

Per query, interleaved so that a noisy neighbour hits both alike:

* mem0 search: `Memory.search(query, filters={"user_id": tenant}, top_k=5)`;
* situated recall: the whole pipeline (`run_recall`, stages 1-8, k=5: eligibility, both
  vector fields and BM25, dedupe, reconstruction, validation, scoring, compile, the recall
  record committed), which does far more than a search;
* situated dense: one `Store.dense` call (the eligible top 5 on the content vectors), the
  operation that corresponds to mem0's search.

Filling: situated through the set-based bulk path of `recall.py` (what `add_many` stores for
a plain memory); mem0 through its vector store's own `insert` with the payload its `add`
writes (`data`, `hash`, times, `text_lemmatized`, `user_id`), checked against a memory added
through `add` (same payload keys), because `add` one by one would take hours at 100k. Add
throughput is then timed through each library's public call, one memory per call, into the
filled store: mem0's `add(..., infer=False)` and situated's `Memory.add` (every write gate,
one durable commit each), both with precomputed vectors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:
    import situated  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent / "src"))

import recall as R  # noqa: E402  (the generator, the precomputed embedder, the bulk path)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from situated import Memory  # noqa: E402
from situated.store.scope import Eligibility  # noqa: E402

DIM = 256
K = 5
FILL_BATCH = 1000


def _mem0_quiet() -> None:
    os.environ["MEM0_TELEMETRY"] = "False"
    for name in ("mem0", "qdrant_client", "httpx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def open_mem0(root: Path, vectors: dict[str, np.ndarray]) -> Any:
    """mem0's local setup (`situated.eval.mem0_arm.local_mem0`), its embedding model
    returning `vectors[text]`."""
    from mem0.configs.embeddings.base import BaseEmbedderConfig
    from mem0.embeddings.base import EmbeddingBase

    from situated.eval.mem0_arm import local_mem0

    class Precomputed(EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return vectors[text].tolist()

    m = local_mem0(root, DIM)
    m.embedding_model = Precomputed(BaseEmbedderConfig(model="precomputed",
                                                       embedding_dims=DIM))
    return m


def mem0_payload(text: str, user: str) -> dict[str, Any]:
    """What mem0's `add(..., infer=False)` stores with a memory (`_create_memory`)."""
    from mem0.memory.main import lemmatize_for_bm25

    now = datetime.now(UTC).isoformat()
    return {"user_id": user, "data": text, "hash": hashlib.md5(text.encode()).hexdigest(),
            "created_at": now, "updated_at": now, "text_lemmatized": lemmatize_for_bm25(text)}


def fill_mem0(m: Any, specs: list[R.Spec], console: Console) -> float:
    """Every spec through mem0's vector store `insert`; seconds taken. Checks first that an
    `add` writes the payload keys the fill writes."""
    probe = specs[0]
    m.add(probe.kwargs["content"], user_id=f"t{probe.tenant}", infer=False)
    stored = m.vector_store.list(filters={"user_id": f"t{probe.tenant}"}, top_k=1)
    points = stored[0] if isinstance(stored, tuple | list) and stored and \
        isinstance(stored[0], list) else stored
    keys = set(points[0].payload) if points else set()
    want = set(mem0_payload("x", "u"))
    if not want <= keys:
        raise SystemExit(f"mem0's add stores {sorted(keys)}; the fill would store "
                         f"{sorted(want)}: update mem0_payload")
    t0 = time.perf_counter()
    for start in range(1, len(specs), FILL_BATCH):
        chunk = specs[start : start + FILL_BATCH]
        m.vector_store.insert(
            vectors=[s.content_vec.tolist() for s in chunk],
            payloads=[mem0_payload(s.kwargs["content"], f"t{s.tenant}") for s in chunk],
            ids=[str(uuid.uuid4()) for _ in chunk],
        )
    secs = time.perf_counter() - t0
    console.log(f"mem0 filled with {len(specs):,} memories in {secs:.1f}s")
    return secs


def pcts(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(xs, 50)), "p95_ms": float(np.percentile(xs, 95))}


def run_size(n: int, queries: int, add_n: int, seed: int, workdir: Path,
             console: Console) -> dict[str, Any]:
    world = R.World(DIM, seed)
    specs = [world.memory(i) for i in range(n)]
    extra = [world.memory(n + i) for i in range(add_n)]
    qs = [world.query(i % R.TENANTS) for i in range(queries + 10)]
    vectors = {s.kwargs["content"]: s.content_vec for s in specs + extra}
    vectors |= {f"{q.intent} {q.state.describe()}".strip(): q.qvec for q in qs}

    emb = R.Precomputed(DIM)
    mem = Memory(workdir / f"peers-{n}.db", embedder=emb, resident_mb=8000)
    t0 = time.perf_counter()
    R.bulk_load(mem, emb, specs)
    console.log(f"situated filled with {n:,} memories in {time.perf_counter() - t0:.1f}s")
    m = open_mem0(workdir / f"mem0-{n}", vectors)
    fill_mem0(m, specs, console)

    t_mem0: list[float] = []
    t_recall: list[float] = []
    t_dense: list[float] = []
    same = 0
    for i, q in enumerate(qs):
        text = f"{q.intent} {q.state.describe()}".strip()
        t0 = time.perf_counter_ns()
        found = m.search(text, filters={"user_id": f"t{q.tenant}"}, top_k=K)
        t1 = time.perf_counter_ns()
        emb.hand(q.qvec, q.svec)
        R.run_recall(mem.store, emb, mem.reconstructor, R.request(q, K))
        t2 = time.perf_counter_ns()
        hits = mem.store.dense("content", q.qvec, K, Eligibility.for_recall(R.principal(q.tenant)))
        t3 = time.perf_counter_ns()
        if i < 10:
            continue  # warm-up: slices load, graphs build, caches fill
        t_mem0.append((t1 - t0) / 1e6)
        t_recall.append((t2 - t1) / 1e6)
        t_dense.append((t3 - t2) / 1e6)
        got = found.get("results", []) if isinstance(found, dict) else list(found)
        mine = {mem.store.by_rids([r], Eligibility.for_recall(R.principal(q.tenant)))[r].content
                for r, _ in hits}
        same += len(mine & {h["memory"] for h in got}) / K

    t0 = time.perf_counter()
    for s in extra:
        m.add(s.kwargs["content"], user_id=f"t{s.tenant}", infer=False)
    mem0_add = add_n / (time.perf_counter() - t0)
    situated_add = R.add_one_by_one(mem, extra, emb)  # teaches `emb` the texts, then times
    if hasattr(m, "close"):
        m.close()
    mem.close()
    out = {"n": n, "queries": queries, "mem0_search": pcts(t_mem0),
           "situated_recall": pcts(t_recall), "situated_dense": pcts(t_dense),
           "top5_overlap": same / queries, "mem0_add_per_s": mem0_add,
           "situated_add_per_s": situated_add}
    out["recall_speedup_p50"] = out["mem0_search"]["p50_ms"] / out["situated_recall"]["p50_ms"]
    out["dense_speedup_p50"] = out["mem0_search"]["p50_ms"] / out["situated_dense"]["p50_ms"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,20000,100000")
    ap.add_argument("--quick", action="store_true", help="2,000 memories, 30 queries")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--add-n", type=int, default=200, help="memories added one by one")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    try:
        _mem0_quiet()
        import mem0  # noqa: F401
    except ImportError:
        raise SystemExit("mem0 is not installed: pip install -e '.[peers]'") from None
    import importlib.metadata as md

    sizes = [2000] if a.quick else [int(x) for x in a.sizes.split(",") if x]
    queries = 30 if a.quick else a.queries
    console = Console(width=160)
    load = os.getloadavg()
    results = []
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="situated-peers-") as tmp:
        workdir = a.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            results.append(run_size(n, queries, a.add_n, a.seed, workdir, console))
    wall = time.perf_counter() - wall
    t = Table(title=f"situated vs mem0 {md.version('mem0ai')} (local Qdrant) on identical "
                    f"vectors, ms p50 / p95 (load average at start {load[0]:.2f}, "
                    f"{os.cpu_count()} cores; {wall:.0f} s)")
    for col in ("N", "mem0 search", "situated recall (whole)", "x faster",
                "situated dense", "x faster", "top-5 overlap", "mem0 add/s",
                "situated add/s"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r['n']:,}",
            f"{r['mem0_search']['p50_ms']:.2f} / {r['mem0_search']['p95_ms']:.2f}",
            f"{r['situated_recall']['p50_ms']:.2f} / {r['situated_recall']['p95_ms']:.2f}",
            f"{r['recall_speedup_p50']:.1f}x",
            f"{r['situated_dense']['p50_ms']:.2f} / {r['situated_dense']['p95_ms']:.2f}",
            f"{r['dense_speedup_p50']:.1f}x", f"{r['top5_overlap']:.2f}",
            f"{r['mem0_add_per_s']:,.0f}", f"{r['situated_add_per_s']:,.0f}",
        )
    console.print(t)
    if a.json:
        a.json.write_text(json.dumps({"load_average": load, "results": results,
                                      "wall_s": wall}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
