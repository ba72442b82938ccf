"""A text applicability set from outside text: minimally edited pairs of ScienceWorld
observations, false acceptance and false rejection per kind of difference.

Run from the repository root:

    python benchmarks/sw_observations.py            # once: harvest and cache (Java 17)
    python benchmarks/text_applicability.py         # 120 edits per kind
    python benchmarks/text_applicability.py --quick # 20 edits per kind
    python benchmarks/text_applicability.py --before /tmp/old127/src   # and a "before" row

Base situations are what ScienceWorld printed (`look around` of each room its gold paths
visit, inventories, object descriptions, each action's answer), cached by
`benchmarks/sw_observations.py`; `benchmarks/text_pairs.py` builds the pairs (see its
docstring for the kinds and how each pair is labelled). Per pair, in a namespace of its own
of one store: `Memory.add(lesson, state=State(base), action=..., success=True)`, then
`Memory.recall(State(present))`. The pair counts as *served* when the lesson is among the
briefing's items (APPLICABLE or PARTIAL). False acceptance: an inapplicable pair served;
false rejection: an applicable pair not served (rejected for any reason, or asked for
evidence). Intervals are Wilson 95% intervals.

`--before PATH` runs the same pairs again in a child process with `PYTHONPATH=PATH` (the code
of an older commit, e.g. `git worktree add /tmp/old127 127d104`) and prints its table too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).parent))

import sw_observations
import text_pairs
from rich.console import Console
from rich.table import Table

SEED = 30
PER_KIND = 120
QUICK_PER_KIND = 20


def observations(data: dict[str, Any]) -> list[text_pairs.Observation]:
    out = []
    for ep in data["episodes"]:
        for i, o in enumerate(ep["observations"]):
            out.append(text_pairs.Observation(
                o["text"], o["kind"], f"{ep['task']}/v{ep['variation']}#{i}", o["action"]))
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    r = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, (c - r) / d), min(1.0, (c + r) / d))


def run_pairs(pairs: list[text_pairs.Pair]) -> list[dict[str, Any]]:
    """Each pair through `Memory.add` and `Memory.recall`; one row per pair."""
    import situated
    from situated import Memory, Principal, State

    me = Principal(tenant="textbench", roles=set(), clearance="internal")
    rows = []
    with tempfile.TemporaryDirectory(prefix="situated-textbench-") as tmp:
        mem = Memory(Path(tmp) / "pairs.db", embedder="minilm-static", reconstructor="rules")
        try:
            for i, p in enumerate(pairs):
                ns = f"pair{i}"
                t0 = time.perf_counter()
                rec = mem.add(p.lesson, principal=me, namespace=ns, state=State(p.base),
                              action="followed the lesson", success=True)
                t1 = time.perf_counter()
                b = mem.recall(State(p.present), principal=me, namespace=ns,
                               budget_tokens=800)
                t2 = time.perf_counter()
                item = next((x for x in b.items if x.memory_id == rec.id), None)
                rej = next((x for x in b.rejected if x.memory_id == rec.id), None)
                if item is not None:
                    outcome, detail = str(item.verdict), ""
                elif rej is not None:
                    outcome = f"{rej.verdict or 'REJECTED'}:{rej.reason}"
                    detail = rej.detail
                else:
                    outcome, detail = f"ABSENT({rec.state})", ""
                rows.append({
                    "kind": p.kind, "variant": p.variant, "applicable": p.applicable,
                    "served": item is not None, "outcome": outcome, "detail": detail[:300],
                    "confidence": item.confidence if item is not None else None,
                    "lesson": p.lesson, "edit": p.edit, "origin": p.origin,
                    "add_ms": round((t1 - t0) * 1e3, 2), "recall_ms": round((t2 - t1) * 1e3, 2),
                })
        finally:
            mem.close()
    return [{**r, "code": str(Path(situated.__file__).parent.parent)} for r in rows]


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for kind in (*text_pairs.KINDS, "all"):
        mine = [r for r in rows if kind in ("all", r["kind"])]
        if not mine:
            continue
        bad = [r for r in mine if not r["applicable"]]
        good = [r for r in mine if r["applicable"]]
        fa = sum(r["served"] for r in bad)
        fr = sum(not r["served"] for r in good)
        out[kind] = {
            "n_inapplicable": len(bad), "false_acceptance": fa,
            "fa_rate": fa / len(bad) if bad else None, "fa_ci": wilson(fa, len(bad)),
            "n_applicable": len(good), "false_rejection": fr,
            "fr_rate": fr / len(good) if good else None, "fr_ci": wilson(fr, len(good)),
            "verdicts_inapplicable": dict(Counter(_short(r["outcome"]) for r in bad)),
            "verdicts_applicable": dict(Counter(_short(r["outcome"]) for r in good)),
        }
    return out


def _short(outcome: str) -> str:
    return (outcome.replace("NOT_APPLICABLE:", "NA:").replace("INSUFFICIENT_EVIDENCE:", "IE:")
            .replace("SOURCE_STATE_MISMATCH", "SSM").replace("CONDITION_FAILED", "COND")
            .replace("LOW_EXPECTED_UTILITY", "LEU").replace("MISSING_EVIDENCE", "MISS"))


def _rate(k: int, n: int, ci: tuple[float, float]) -> str:
    if n == 0:
        return "-"
    return f"{k}/{n} = {k / n:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def _counts(c: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: -kv[1]))


def table(title: str, summary: dict[str, dict[str, Any]]) -> Table:
    t = Table(title=title)
    for col in ("kind", "false acceptance (named edit)", "false rejection (control)",
                "verdicts, inapplicable", "verdicts, applicable"):
        t.add_column(col)
    for kind, s in summary.items():
        t.add_row(kind, _rate(s["false_acceptance"], s["n_inapplicable"], s["fa_ci"]),
                  _rate(s["false_rejection"], s["n_applicable"], s["fr_ci"]),
                  _counts(s["verdicts_inapplicable"]), _counts(s["verdicts_applicable"]))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_PER_KIND} edits per kind")
    ap.add_argument("--per-kind", type=int, default=None, help=f"edits per kind ({PER_KIND})")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--cache", type=Path, default=sw_observations.CACHE)
    ap.add_argument("--json", type=Path, default=None, help="write every row and the summary")
    ap.add_argument("--before", type=Path, default=None,
                    help="source folder of older code to run the same pairs with")
    ap.add_argument("--examples", type=int, default=3,
                    help="wrong verdicts printed per kind (text, expected, got)")
    args = ap.parse_args(argv)
    console = Console(width=200)
    per_kind = args.per_kind or (QUICK_PER_KIND if args.quick else PER_KIND)
    data = sw_observations.load(args.cache)
    obs = observations(data)
    pairs = text_pairs.build(obs, per_kind, args.seed)
    t0 = time.perf_counter()
    rows = run_pairs(pairs)
    wall = time.perf_counter() - t0
    summary = summarise(rows)
    result: dict[str, Any] = {
        "config": {"seed": args.seed, "per_kind": per_kind, "pairs": len(pairs),
                   "observations": len(obs), "source": data.get("source"),
                   "scienceworld": data.get("version"), "code": rows[0]["code"] if rows else ""},
        "wall_seconds": round(wall, 1), "summary": summary, "rows": rows,
    }
    console.print(f"{len(obs)} ScienceWorld observations of {len(data['episodes'])} episodes; "
                  f"{len(pairs)} pairs (seed {args.seed}, {per_kind} edits per kind)")
    console.print(table(f"Text applicability: this code ({wall:.0f} s)", summary))
    if args.examples:
        _examples(console, rows, args.examples)
    if args.before is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "before.json"
            env = {**os.environ, "PYTHONPATH": str(args.before)}
            cmd = [sys.executable, __file__, "--per-kind", str(per_kind), "--seed",
                   str(args.seed), "--cache", str(args.cache), "--json", str(out),
                   "--examples", "0"]
            subprocess.run(cmd, env=env, check=True, capture_output=True)
            before = json.loads(out.read_text())
        result["before"] = {k: before[k] for k in ("config", "wall_seconds", "summary")}
        console.print(table(f"Text applicability: before ({before['config']['code']}, "
                            f"{before['wall_seconds']:.0f} s)", before["summary"]))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


def _examples(console: Console, rows: list[dict[str, Any]], n: int) -> None:
    for kind in text_pairs.KINDS:
        wrong = [r for r in rows if r["kind"] == kind and r["served"] != r["applicable"]]
        for r in wrong[:n]:
            expected = "served" if r["applicable"] else "not served"
            console.print(f"[{kind}/{r['variant']}] {r['edit']} | lesson: {r['lesson']!r} | "
                          f"expected {expected}, got {r['outcome']} {r['detail'][:160]!r}",
                          markup=False)


if __name__ == "__main__":
    raise SystemExit(main())
