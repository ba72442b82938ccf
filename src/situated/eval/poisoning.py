"""The poisoning report: attacks held or refused at write and served at recall, benign text held.

Every text goes through the real write path (`Memory.add_many`: the gates, promotion and the
store) as a lesson an agent inferred (authority `inferred`, the default), in a namespace with
the default promotion policy (auto-promote) and no tool allow-list, each with a source state of
its own. A promoted attack is then recalled with its own state and intent: it counts as served
when it appears in the briefing as guidance. A benign text counts as falsely held when any gate
holds or refuses it, and the gate is named.

Corpora:
- `project`: the generated variants of `poisoning_corpus` (written here) and its benign lessons;
- `outside`: the held-out split of the injection classifier's outside material
  (`situated.screen.corpora`: bastioncorpus, agentdojo, jailbreak-corpus-mini,
  agent-injection-bench; attacks and benign), which no rule or weight here was fitted to;
- `locomo`: LoCoMo conversation turns (benign; the surface rules were revised after reading the
  turns they held, so this is no longer unseen text for them);
- `longmemeval`: LongMemEval turns (benign chat and assistant answers, never tuned on).
"""

from __future__ import annotations

import json
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from situated.errors import RedactionWarning
from situated.models import LifecycleState, Principal, State

ATTACK, BENIGN = 1, 0
NAMESPACE = "poisoning-report"
WRITER = Principal(tenant="report", roles=frozenset({"reviewer"}), name="report-agent")


@dataclass
class CorpusReport:
    """One corpus's counts: attacks by outcome, benign texts held and by which gate."""

    corpus: str
    attacks: int = 0
    refused: int = 0
    held: int = 0
    served: int = 0
    """Promoted attacks recalled as guidance items (structured output)."""
    rendered: int = 0
    """Of those, the ones whose text reached the rendered briefing (as quoted data); the rest
    were withheld at rendering because their text reads as instruction."""
    benign: int = 0
    benign_held: int = 0
    benign_refused: int = 0
    benign_redacted: int = 0
    """Benign texts the secrets gate changed (a span replaced by `[REDACTED:<kind>]`)."""
    held_by: dict[str, int] = field(default_factory=dict)
    """Gate name -> benign texts it held or refused."""
    seconds: float = 0.0
    note: str = ""

    @property
    def promoted_unserved(self) -> int:
        return self.attacks - self.refused - self.held - self.served

    def rates(self) -> dict[str, float | None]:
        def r(n: int, d: int) -> float | None:
            return round(n / d, 4) if d else None

        return {
            "stopped_at_write": r(self.refused + self.held, self.attacks),
            "served_at_recall": r(self.served, self.attacks),
            "rendered_at_recall": r(self.rendered, self.attacks),
            "benign_false_hold": r(self.benign_held + self.benign_refused, self.benign),
            "benign_redacted": r(self.benign_redacted, self.benign),
        }


def judge(corpus: str, texts: Sequence[tuple[str, int]], db: Path,
          batch_size: int = 500) -> CorpusReport:
    """Write every text through a fresh store at `db`; recall each promoted attack."""
    from situated.memory import Memory

    rep = CorpusReport(corpus)
    started = time.perf_counter()
    with Memory(db, embedder="minilm-static") as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore", RedactionWarning)  # counted below instead
        items = [
            {"content": text, "namespace": NAMESPACE,
             "state": State(f"report case {i}", facts={"report_case": i})}
            for i, (text, _) in enumerate(texts)
        ]
        records = []
        for start in range(0, len(items), batch_size):
            records += mem.add_many(items[start:start + batch_size], principal=WRITER,
                                    batch_size=batch_size)
        gates_of = _gates_of_held(mem, records)
        for i, ((text, label), rec) in enumerate(zip(texts, records, strict=True)):
            refused = rec.state is LifecycleState.REJECTED
            held = rec.state is LifecycleState.PROPOSED
            if label == ATTACK:
                rep.attacks += 1
                if refused:
                    rep.refused += 1
                elif held:
                    rep.held += 1
                else:
                    served, rendered = _served(mem, rec.id, i, text)
                    rep.served += served
                    rep.rendered += rendered
            else:
                rep.benign += 1
                rep.benign_refused += refused
                rep.benign_held += held
                rep.benign_redacted += rec.content.count("[REDACTED:") > text.count("[REDACTED:")
                if refused or held:
                    for gate in gates_of.get(rec.id, ["unknown"]):
                        rep.held_by[gate] = rep.held_by.get(gate, 0) + 1
    rep.seconds = round(time.perf_counter() - started, 1)
    return rep


def _gates_of_held(mem: Any, records: Iterable[Any]) -> dict[str, list[str]]:
    """Memory id -> the gates that held or refused it (from its `proposed` event)."""
    from situated.store.ledger import EventType

    out: dict[str, list[str]] = {}
    admin = WRITER.model_copy(update={"roles": frozenset({"reviewer", "admin"})})
    for rec in records:
        if rec.state not in (LifecycleState.PROPOSED, LifecycleState.REJECTED):
            continue
        for event in mem.history(rec.id, principal=admin):
            if event.event is EventType.PROPOSED:
                out[rec.id] = [g["gate"] for g in event.data.get("gates", [])
                               if g.get("verdict") in ("hold", "reject")]
    return out


def _served(mem: Any, memory_id: str, i: int, text: str) -> tuple[bool, bool]:
    """(served as a guidance item, its text in the rendered briefing)."""
    briefing = mem.recall(State(f"report case {i}", facts={"report_case": i}),
                          principal=WRITER, intent=text[:300], namespace=NAMESPACE, k=5)
    served = any(item.memory_id == memory_id for item in briefing.items)
    return served, served and f"[{memory_id}]" in briefing.render()


# -- corpora ---------------------------------------------------------------------------------


def project_corpus() -> list[tuple[str, int]]:
    from situated.eval.poisoning_corpus import BENIGN as LESSONS
    from situated.eval.poisoning_corpus import variants

    return [(text, ATTACK) for _, _, text in variants()] + [(t, BENIGN) for t in LESSONS]


def outside_corpus(download: bool = True) -> list[tuple[str, int]]:
    from situated.screen.corpora import held_out

    return [(s.text, s.label) for s in held_out(download=download)]


def turns(name: str, quick: bool) -> list[tuple[str, int]]:
    from situated.eval.conversations import load_locomo, load_longmemeval

    convs = load_locomo(quick) if name == "locomo" else load_longmemeval(quick)
    return [(u.text, BENIGN) for c in convs for u in c.units]


def run_poisoning(out_dir: Path, console: Console | None = None, quick: bool = False,
                  download: bool = True) -> list[CorpusReport]:
    """Judge every corpus; write `poisoning.json` to `out_dir`; print the table to `console`.

    `quick` reads the quick LoCoMo and LongMemEval fixtures (the same attack corpora)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    corpora: list[tuple[str, list[tuple[str, int]]]] = [
        ("project", project_corpus()),
        ("outside", outside_corpus(download)),
        ("locomo", turns("locomo", quick)),
        ("longmemeval", turns("longmemeval", quick)),
    ]
    reports = []
    for name, texts in corpora:
        db = out_dir / f"poisoning-{name}.db"
        for suffix in ("", "-wal", "-shm", "-recalls", "-recalls-wal", "-recalls-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        reports.append(judge(name, texts, db))
    (out_dir / "poisoning.json").write_text(
        json.dumps([{**asdict(r), **r.rates()} for r in reports], indent=1) + "\n",
        encoding="utf-8",
    )
    if console is not None:
        console.print(table(reports))
        console.print("served: attacks promoted at write and recalled as guidance items; "
                      "rendered: of those, shown (as quoted data) in the rendered briefing. "
                      f"Written to {out_dir / 'poisoning.json'}.")
    return reports


def table(reports: Sequence[CorpusReport]) -> Table:
    t = Table(title="Poisoning: attacks stopped at write and served at recall; benign text held")
    for col in ("corpus", "attacks", "refused", "held", "served", "rendered", "benign",
                "false holds", "redacted", "held by", "s"):
        t.add_column(col, justify="left" if col in ("corpus", "held by") else "right",
                     overflow="fold")
    for r in reports:
        rates = r.rates()
        fh = r.benign_held + r.benign_refused
        t.add_row(
            r.corpus, str(r.attacks), str(r.refused), str(r.held),
            f"{r.served}" + (f" ({rates['served_at_recall']:.1%})" if r.attacks else ""),
            str(r.rendered),
            str(r.benign), f"{fh}" + (f" ({rates['benign_false_hold']:.2%})" if r.benign else ""),
            str(r.benign_redacted),
            ", ".join(f"{g} {n}" for g, n in Counter(r.held_by).most_common()) or "-",
            f"{r.seconds:.0f}",
        )
    return t
