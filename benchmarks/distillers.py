"""The rules distiller against the LLM distiller on the same trajectories, side by side.

    python benchmarks/distillers.py TRAJECTORIES.jsonl [--limit 12]
        [--base-url http://127.0.0.1:8089] [--model NAME] [--timeout 120]

TRAJECTORIES.jsonl holds one `learn` trajectory per line (for example the
`scienceworld-train-trajectories.jsonl` that `situated eval scienceworld` writes). Each
distiller learns every trajectory into a fresh store through every write gate; the table gives,
per distiller: lessons proposed (success and failure lessons), promoted, held for review and
rejected by the gates, the LLM's fallbacks to the rules distiller (counted in `health`), and
the wall time per trajectory. An OpenAI-compatible chat endpoint serves the LLM distiller
(`scripts/local_model.sh start` serves a small local model). Threads are pinned to one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    from situated import Memory, Principal

    parser = argparse.ArgumentParser()
    parser.add_argument("trajectories", type=Path)
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--base-url", default="http://127.0.0.1:8089")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct-Q4_1")
    parser.add_argument("--timeout", type=float, default=120.0)
    opts = parser.parse_args()
    lines = opts.trajectories.read_text("utf-8").splitlines()
    trajectories = [json.loads(x) for x in lines if x.strip()][: opts.limit]
    who = Principal("bench", roles={"reviewer"}, clearance="restricted", name="bench")
    rows = []
    for name in ("rules", "llm"):
        with tempfile.TemporaryDirectory() as tmp:
            mem = Memory(Path(tmp) / "d.db", embedder="minilm-static")
            states: Counter[str] = Counter()
            kinds: Counter[str] = Counter()
            seconds: list[float] = []
            options = ({"base_url": opts.base_url, "model": opts.model,
                        "timeout": opts.timeout} if name == "llm" else None)
            for t in trajectories:
                started = time.perf_counter()
                out = mem.learn(t, principal=who, distiller=name, distiller_options=options)
                seconds.append(time.perf_counter() - started)
                for rec in out:
                    states[rec.state.value] += 1
                    kinds["failure" if rec.source.outcome.success is False else "success"] += 1
            fallbacks = mem.health().failures.get("distiller:llm", 0)
            mem.close()
        rows.append((name, sum(states.values()), kinds["success"], kinds["failure"],
                     states["ACTIVE"], states["PROPOSED"], states["REJECTED"], fallbacks,
                     statistics.median(seconds), max(seconds)))
    print(f"{len(trajectories)} trajectories from {opts.trajectories.name}; llm: {opts.model} "
          f"at {opts.base_url}")
    print("| distiller | lessons | success / failure | promoted | held | rejected | "
          "fallbacks to rules | s per trajectory p50 / max |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, s, f, act, held, rej, fb, p50, mx in rows:
        print(f"| {name} | {n} | {s} / {f} | {act} | {held} | {rej} | {fb} | "
              f"{p50:.2f} / {mx:.2f} |")


if __name__ == "__main__":
    main()
