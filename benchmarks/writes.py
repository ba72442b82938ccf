"""Write throughput: `Memory.add` one by one, `Memory.add_many`, and `situated import`.

    python benchmarks/writes.py                          # this tree's code
    python benchmarks/writes.py --baseline ../main       # and another tree's, side by side
    python benchmarks/writes.py --import-n 100000 --json out.json

Every run is the default embedder (`minilm-static`) with every write gate on, into a fresh
store per measurement, one durable commit (`synchronous = FULL`) per `add` call and per batch.
Memories are generated with a fixed seed: varied lessons of five topics, most with a source
state (text and facts) and conditions, some facts, notes and preferences; about 1% carry a
secret or an e-mail address (redacted), 2% restate an earlier memory (reinforced), and the
`support` topic touches sensitive surfaces (passwords, tokens: held for review).

Each measurement runs in its own process with BLAS and tokenizers pinned to one thread; the
two trees alternate per measurement, so a noisy neighbour slows both alike. A tree without
`Memory.import_records` (the baseline) is timed on `add_many` for the import row, said so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PIN = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false"}
TOPICS = {
    "refunds": ("refund invoice plan subscription charge credit receipt customer card renewal "
                "discount voucher order account", "offer issue prorate decline escalate confirm "
                "check explain waive", {"plan": ["annual", "monthly", "trial"],
                                        "region": ["eu", "us", "apac"]}),
    "deploy": ("deploy service migration rollback canary cluster release database pipeline build "
               "container node config alert", "pause drain restart promote verify scale page pin "
               "retry", {"env": ["staging", "production", "dev"],
                         "tests_passing": [True, False]}),
    "kitchen": ("mug kettle stove drawer cabinet fridge sink plate knife pot counter shelf towel",
                "open take put heat wash close fill move find", {"room": ["kitchen", "pantry"],
                                                                 "stove": ["on", "off"]}),
    "support": ("ticket password login user email phone agent queue reset token device session",
                "reset verify assign close reopen escalate unlock notify link merge",
                {"tier": ["free", "pro", "enterprise"], "verified": [True, False]}),
    "travel": ("flight hotel booking seat visa train ticket fare luggage gate itinerary passport",
               "book rebook cancel upgrade hold compare confirm reserve",
               {"cabin": ["economy", "business"], "international": [True, False]}),
}
FILLER = "the a when after before then if only first again carefully because so still".split()


def memories(n: int, seed: int) -> list[dict[str, Any]]:
    """`n` items of `add` arguments (JSON-ready: a state is {"text", "facts"})."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    names = list(TOPICS)
    for i in range(n):
        if out and rng.random() < 0.02:  # a restatement of an earlier memory
            out.append(dict(out[int(rng.integers(len(out)))]))
            continue
        ns = names[int(rng.integers(len(names)))]
        nouns, verbs, facts_dom = TOPICS[ns]
        nn, vv = nouns.split(), verbs.split()

        def words(k: int, nn: list[str] = nn, vv: list[str] = vv) -> str:
            return " ".join(str(w) for w in rng.choice(nn + vv + FILLER, k))

        content = (f"{str(rng.choice(vv)).capitalize()} the {rng.choice(nn)} {words(8)}; then "
                   f"{rng.choice(vv)} {words(5)} (case {i}).")
        roll = rng.random()
        if roll < 0.005:
            content += f" The password: Zq{int(rng.integers(10**6))}!x"
        elif roll < 0.01:
            content += f" Mail ops{i}@example.com about it."
        item: dict[str, Any] = {"content": content, "namespace": ns}
        shape = rng.random()
        facts = {k: (v[int(rng.integers(len(v)))]) for k, v in facts_dom.items()
                 if rng.random() < 0.8}
        if shape < 0.7:
            item["state"] = {"text": f"the {rng.choice(nn)} is {rng.choice(['open', 'down'])}, "
                                     f"{int(rng.integers(1, 9))} {rng.choice(nn)}s waiting, "
                                     f"{words(5)}", "facts": facts}
            item["action"] = f"{rng.choice(vv)} the {rng.choice(nn)}"
            item["success"] = bool(rng.random() < 0.8)
            if facts and rng.random() < 0.6:
                key = next(iter(facts))
                item["conditions"] = [f"{key} == {json.dumps(facts[key])}"]
        elif shape < 0.8:
            item |= {"kind": "fact", "entity": f"{rng.choice(nn)}-{i}", "attribute": "status",
                     "value": str(rng.choice(["ok", "late", "blocked"]))}
        else:
            item["kind"] = "note" if rng.random() < 0.5 else "preference"
        out.append(item)
    return out


# -- one measurement, in a child process ----------------------------------------------------


def child(mode: str, n: int, seed: int, workdir: str, batch: int,
          tenants: int = 1) -> dict[str, Any]:
    import warnings

    from situated import Memory, Principal, State

    warnings.simplefilter("ignore")  # redaction and unservable warnings: expected here
    items = memories(n, seed)
    for it in items:
        if isinstance(it.get("state"), dict):
            it["state_obj"] = State(it["state"]["text"], it["state"]["facts"])
    who = Principal(tenant="bench", roles={"admin"}, clearance="restricted", name="bench")
    path = Path(tempfile.mkdtemp(dir=workdir)) / "w.db"
    mem = Memory(path, embedder="minilm-static", reconstructor="rules")
    mem.add("warm the models and the gates", principal=who, kind="note")

    def kwargs(it: dict[str, Any]) -> dict[str, Any]:
        kw = {k: v for k, v in it.items() if k not in ("state", "state_obj")}
        if "state_obj" in it:
            kw["state"] = it["state_obj"]
        return kw

    done_as = mode
    curve: list[tuple[int, float]] = []  # (committed, seconds) after each import batch
    lines = [json.dumps({k: v for k, v in it.items() if k != "state_obj"}) for it in items]
    # import: the lines go round-robin to `tenants` tenants, imported one tenant after another
    owners = [Principal(tenant=f"bench{t}" if tenants > 1 else "bench", roles={"admin"},
                        clearance="restricted", name="bench") for t in range(tenants)]
    t0 = time.perf_counter()
    if mode == "add":
        for it in items:
            mem.add(principal=who, **kwargs(it))
    elif mode == "add_many":
        mem.add_many([kwargs(it) for it in items], principal=who, batch_size=batch)
    else:  # import
        if hasattr(mem, "import_records"):
            done = [0]

            log = Path(workdir) / "import-progress.txt"  # to follow a long run

            def progress(r: Any) -> None:
                curve.append((done[0] + r.committed, time.perf_counter() - t0))
                with log.open("a") as f:
                    f.write(f"{curve[-1][0]} {curve[-1][1]:.1f}\n")

            for t, owner in enumerate(owners):
                mem.import_records(lines[t::tenants], principal=owner, batch_size=batch,
                                   progress=progress)
                done[0] = curve[-1][0] if curve else 0
        else:
            done_as = "add_many (no import)"
            mem.add_many([kwargs(it) for it in items], principal=who, batch_size=batch)
    seconds = time.perf_counter() - t0
    by_state: dict[str, int] = {}
    for owner in (owners if mode == "import" else [who]):
        for state, count in mem.stats(principal=owner).memories_by_state.items():
            by_state[state] = by_state.get(state, 0) + count
    mem.close()
    return {"mode": mode, "ran": done_as, "n": n, "seconds": seconds, "per_s": n / seconds,
            "tenants": tenants if mode == "import" else 1, "by_state": by_state,
            "curve": curve,
            "db_mb": sum(p.stat().st_size for p in path.parent.iterdir()) / 1e6}


def measure(tree: Path, mode: str, n: int, seed: int, workdir: str, batch: int,
            tenants: int = 1) -> dict[str, Any]:
    env = os.environ | PIN | {"PYTHONPATH": str(tree / "src")}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--n", str(n),
         "--seed", str(seed), "--workdir", workdir, "--batch", str(batch),
         "--tenants", str(tenants)],
        env=env, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree} {mode} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--add-n", type=int, default=500, help="memories added one by one")
    ap.add_argument("--many-n", type=int, default=5000, help="memories in add_many")
    ap.add_argument("--import-n", type=int, default=20000, help="lines imported")
    ap.add_argument("--batch", type=int, default=1000, help="add_many / import batch size")
    ap.add_argument("--import-tenants", type=int, default=1,
                    help="import the lines round-robin into this many tenants (one import "
                         "call per tenant, one store), as a multi-tenant history would be")
    ap.add_argument("--skip", default="", help="paths not to measure: add,add_many,import")
    ap.add_argument("--baseline", type=Path, help="another source tree (e.g. main's worktree)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=["add", "add_many", "import"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tenants", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    workdir = a.workdir or tempfile.mkdtemp(prefix="situated-writes-")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    if a.child:
        print(json.dumps(child(a.child, a.n, a.seed, workdir, a.batch, a.tenants)))
        return

    from rich.console import Console
    from rich.table import Table

    trees = {"this tree": HERE.parent}
    if a.baseline is not None:
        trees["baseline"] = a.baseline.resolve()
    load = os.getloadavg()
    results: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in trees}
    skip = {m for m in a.skip.split(",") if m}
    modes = [(m, n) for m, n in (("add", a.add_n), ("add_many", a.many_n),
                                  ("import", a.import_n)) if m not in skip]
    for mode, n in modes:
        for name, tree in trees.items():
            results[name][mode] = measure(tree, mode, n, a.seed, workdir, a.batch,
                                          a.import_tenants if mode == "import" else 1)
    table = Table(title=f"writes per second (load average at start {load[0]:.2f}, "
                        f"{os.cpu_count()} cores; default embedder, all gates, durable commits)")
    table.add_column("path")
    table.add_column("n", justify="right")
    for name in trees:
        table.add_column(name, justify="right")
    if "baseline" in trees:
        table.add_column("speed-up", justify="right")
    for mode, label in (("add", "Memory.add, one call each"),
                        ("add_many", f"Memory.add_many, batches of {a.batch}"),
                        ("import", f"import_records, batches of {a.batch}, "
                                   f"{a.import_tenants} tenant(s)")):
        if mode in skip:
            continue
        row = [label, f"{results['this tree'][mode]['n']:,}"]
        for name in trees:
            r = results[name][mode]
            note = "" if r["ran"] == mode else " (add_many)"
            row.append(f"{r['per_s']:,.0f}{note}")
        if "baseline" in trees:
            mine, base = results["this tree"][mode], results["baseline"][mode]
            row.append(f"{mine['per_s'] / base['per_s']:.1f}x")
        table.add_row(*row)
    Console().print(table)
    imp = results["this tree"].get("import")
    if imp and imp["curve"]:
        # the import's rate as the store grows (the near-duplicate search grows with it)
        marks = imp["curve"][:: max(1, len(imp["curve"]) // 10)] + imp["curve"][-1:]
        prev = (0, 0.0)
        for committed, secs in marks:
            if committed > prev[0]:
                Console().print(f"  import: {committed:>9,} stored after {secs:7.1f} s "
                                f"({(committed - prev[0]) / (secs - prev[1]):,.0f}/s since "
                                "the last mark)")
                prev = (committed, secs)
    if a.json:
        a.json.write_text(json.dumps({"load_average": load, "results": results}, indent=1))


if __name__ == "__main__":
    main()
