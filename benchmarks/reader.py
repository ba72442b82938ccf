"""Recall latency with the reader: what reading the present state and judging each candidate
by its readings add to a recall, at 10k memories (target: <= 1 ms added at p50).

Run from the repository root:

    python benchmarks/reader.py                 # 10k memories, 300 recalls
    python benchmarks/reader.py --n 2000 --queries 100

The store is filled like `benchmarks/recall.py`'s (10 tenants, clustered vectors, the same
bulk path), but every source state and every present state is a sentence of English of one of
several shapes (machines and their states, amounts with units, codes, holders, places),
numbered so that no two present states are the same text (the reader's per-text cache never
hits). Query vectors are precomputed, so timings exclude embedding.

Per recall, in the same run: the whole pipeline (`run_recall`, stages 1-8), and inside it the
reader's two parts, timed by wrapping them: reading the present (`reader.read`, once per
recall) and the then/now judgement of each candidate that reaches the `rules` reconstructor
(`reader.compare.judge`). Source states and lessons are read at write (stored with each
memory's analysis), so a recall reads only the present. The table gives p50 and p95 of each,
and the reader's share of the recall.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).parent))

import recall as bench
from rich.console import Console
from rich.table import Table

from situated import Memory, State
from situated.recall import pipeline
from situated.recall.reconstruct import rules
from situated.recall.reconstruct.rules import RulesReconstructor

THINGS = ("pump", "replica", "washer", "backup job", "primary database", "front door",
          "dishwasher", "build agent", "freezer", "printer")
STATES = ("running", "stopped", "idle", "open", "closed", "locked", "broken", "working",
          "full", "empty", "on", "off")
UNITS = (("percent", 100), ("seconds", 60), ("minutes", 600), ("days", 40), ("dollars", 900),
         ("GB", 500))


def situation(rng: Any, i: int) -> str:
    """A present or source state in English: two or three clauses of different shapes."""
    a, b = (str(x) for x in rng.choice(THINGS, 2, replace=False))
    unit, top = UNITS[int(rng.integers(len(UNITS)))]
    parts = [
        f"The {a} is {rng.choice(STATES)}",
        f"the {b} reports {int(rng.integers(1, top))} {unit}",
    ]
    roll = rng.random()
    if roll < 0.3:
        parts.append(f"error E{int(rng.integers(10, 99))} shows on unit {i}")
    elif roll < 0.6:
        parts.append(f"a maintenance job holds the lock on shelf {i}")
    else:
        parts.append(f"no operator was on site at hour {i % 24}")
    return "; ".join(parts) + "."


def timed(fn: Callable[..., Any], into: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            into.append((time.perf_counter_ns() - t0) / 1e6)

    return wrapper


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else (xs or [0.0])[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories in the store")
    ap.add_argument("--queries", type=int, default=300, help="timed recalls")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    console = Console()
    world = bench.World(256, args.seed)
    specs = [world.memory(i) for i in range(args.n)]
    for i, spec in enumerate(specs):
        st = spec.kwargs.get("state")
        if st is not None:
            text = situation(world.rng, i)
            spec.kwargs["state"] = State(text, facts=st.facts if world.rng.random() < 0.4
                                         else {})
            spec.kwargs.pop("conditions", None)
    with tempfile.TemporaryDirectory(prefix="situated-reader-") as tmp:
        emb = bench.Precomputed(256)
        emb.learn_specs(specs)
        mem = Memory(Path(tmp) / "reader.db", embedder=emb)
        t0 = time.perf_counter()
        bench.bulk_load(mem, emb, specs)
        load_s = time.perf_counter() - t0
        queries = []
        for i in range(args.queries + 20):
            q = world.query(i % bench.TENANTS)
            text = situation(world.rng, args.n + i)
            queries.append(bench.Query(q.tenant, State(text), q.intent, q.qvec, q.svec))
        reads: list[float] = []
        judges: list[float] = []
        pipeline.read = timed(pipeline.read, reads)  # type: ignore[assignment]
        rules.judge = timed(rules.judge, judges)  # type: ignore[assignment]
        recon = RulesReconstructor()
        totals: list[float] = []
        readers: list[float] = []
        per_read: list[float] = []
        per_judge: list[float] = []
        candidates: list[int] = []
        for n, q in enumerate(queries):
            reads.clear()
            judges.clear()
            emb.hand(q.qvec, q.svec)
            t0 = time.perf_counter_ns()
            pipeline.run_recall(mem.store, emb, recon, bench.request(q))
            total = (time.perf_counter_ns() - t0) / 1e6
            if n < 20:
                continue  # warm-up: caches of word lookups, the lexicon's first load
            totals.append(total)
            readers.append(sum(reads) + sum(judges))
            per_read.append(sum(reads))
            per_judge.append(sum(judges))
            candidates.append(len(judges))
        mem.close()
    table = Table(title=f"Recall with the reader: {args.n:,} memories, {len(totals)} recalls, "
                        f"store filled in {load_s:.0f} s")
    for col in ("", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right" if col else "left")
    for name, xs in (("recall (stages 1-8)", totals), ("reader added (read + judges)", readers),
                     ("  read the present", per_read), ("  judge candidates", per_judge)):
        table.add_row(name, f"{pct(xs, 50):.3f}", f"{pct(xs, 95):.3f}")
    share = statistics.median(r / t for r, t in zip(readers, totals, strict=True))
    table.add_row("reader / recall (median ratio)", f"{share:.1%}", "")
    table.add_row("candidates judged per recall (median)", f"{statistics.median(candidates):g}",
                  "")
    console.print(table)
    target = pct(readers, 50) <= 1.0
    console.print(f"target <= 1 ms added at p50: {'met' if target else 'missed'} "
                  f"({pct(readers, 50):.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
