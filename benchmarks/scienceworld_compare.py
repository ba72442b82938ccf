"""Markdown tables from `situated eval scienceworld` results, side by side.

    python benchmarks/scienceworld_compare.py before=A/scienceworld.json after=B/scienceworld.json

For each result: the overall arms table (success, mean score, lift vs no memory, negative
transfer, wrong focus, tokens per episode; 95% intervals as in the result), compiled minus raw
replay paired by (task, variation) with a bootstrap interval, and the wall times. Then one
per-task row per task: no memory's mean score, and for each result compiled's success, mean
score, lift with its interval, negative transfer and tokens; last, the tasks where compiled is
below no memory. Reads only the JSON; runs nothing.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any

from situated.eval.envs.stats import bootstrap_mean


def _est(d: dict[str, float], pct: bool = False) -> str:
    k, n = (100.0, 0) if pct else (1.0, 1)
    return f"{d['value'] * k:.{n}f} [{d['low'] * k:.{n}f}, {d['high'] * k:.{n}f}]"


def overall(r: dict[str, Any]) -> None:
    print("| arm | success % | mean score | lift vs none | negative transfer % | "
          "wrong focus % | tokens/ep |")
    print("|---|---|---|---|---|---|---|")
    for arm, s in r["arms"].items():
        base = arm == "no_memory"
        print(f"| {arm} | {_est(s['success'], True)} | {_est(s['mean_score'])} | "
              f"{'-' if base else _est(s['lift'])} | "
              f"{'-' if base else _est(s['negative_transfer'], True)} | "
              f"{_est(s['wrong_focus'], True)} | {s['tokens_per_episode']:.0f} |")
    pairs: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    for e in r["episodes"]:
        pairs[(e["task"], e["variation"])][e["arm"]] = e["score"]
    diff = bootstrap_mean([float(p["compiled"] - p["raw_replay"]) for p in pairs.values()
                           if "compiled" in p and "raw_replay" in p])
    print(f"\ncompiled minus raw replay, paired: {diff.fmt()} (n={diff.n}); "
          f"wall {r['wall_seconds']}")


def per_task(runs: list[tuple[str, dict[str, Any]]]) -> None:
    head = "| task | n | no memory mean |"
    head += "".join(f" compiled {lab}: success % / mean / lift [95%] / neg. % / tokens |"
                    for lab, _ in runs)
    print(head + " raw replay mean |")
    print("|---" * (len(runs) + 4) + "|")
    below: dict[str, list[str]] = {lab: [] for lab, _ in runs}
    for task in runs[0][1]["per_task"]:
        first = runs[0][1]["per_task"][task]
        row = (f"| {task} | {first['compiled']['episodes']} | "
               f"{first['no_memory']['mean_score']['value']:.0f} |")
        for lab, r in runs:
            c, none = r["per_task"][task]["compiled"], r["per_task"][task]["no_memory"]
            lift = c["lift"]
            row += (f" {100 * c['success']['value']:.0f} / {c['mean_score']['value']:.0f} / "
                    f"{lift['value']:+.0f} [{lift['low']:+.0f}, {lift['high']:+.0f}] / "
                    f"{100 * c['negative_transfer']['value']:.0f} / "
                    f"{c['tokens_per_episode']:.0f} |")
            if c["mean_score"]["value"] < none["mean_score"]["value"]:
                below[lab].append(task)
        raw = runs[-1][1]["per_task"][task]["raw_replay"]["mean_score"]["value"]
        print(row + f" {raw:.0f} |")
    for lab, tasks in below.items():
        print(f"\ncompiled below no memory ({lab}): {len(tasks)}: {', '.join(tasks) or 'none'}")


def main(args: list[str]) -> None:
    runs = []
    for arg in args:
        label, _, path = arg.partition("=")
        with open(path) as fh:
            runs.append((label, json.load(fh)))
    for label, r in runs:
        print(f"\n{label}\n")
        overall(r)
    print()
    per_task(runs)


if __name__ == "__main__":
    main(sys.argv[1:])
