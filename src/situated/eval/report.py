"""The scorecard in a terminal (rich tables), as JSON, and as PNG plots (matplotlib, Agg)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from situated.eval.metrics import ArmSummary, Interval

if TYPE_CHECKING:
    from situated.eval.runner import EvalResult

BASELINE = "no_memory"
REFERENCE = "compiled"


def _pp(iv: Interval) -> str:
    """Percentage points with a signed interval."""
    return iv.fmt(pct=True, signed=True)


def _pct(iv: Interval) -> str:
    return iv.fmt(pct=True)


def _ms(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.1f}"


def headline_table(result: EvalResult) -> Table:
    """One row per arm: the Memory Decision Scorecard."""
    cfg = result.config
    t = Table(
        title=f"Memory Decision Scorecard: {cfg['tasks']} tasks x {len(cfg['arms'])} arms, "
        f"seeds {','.join(map(str, cfg['seeds']))}",
        caption="success, lift and negative transfer in % / percentage points with 95% "
        "intervals; lift = arm - no memory on the same task",
    )
    for col, just in (
        ("arm", "left"), ("success %", "right"), ("lift vs no memory, pp", "right"),
        ("negative transfer %", "right"), ("false accept", "right"), ("false reject", "right"),
        ("poisoned served", "right"), ("leaks", "right"), ("stale served", "right"),
        ("tokens/task", "right"), ("recall ms p50/p95", "right"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for arm, s in result.scorecard.overall.items():
        t.add_row(*headline_cells(arm, s))
    return t


def paired_table(result: EvalResult) -> Table | None:
    ref = result.scorecard.overall.get(REFERENCE)
    if ref is None or not ref.vs:
        return None
    t = Table(title=f"Paired differences: {REFERENCE} minus each arm (pp, 95% interval)")
    t.add_column("versus")
    t.add_column("all tasks", justify="right")
    slices = list(result.scorecard.slices)
    for s in slices:
        t.add_column(s.replace("_", " "), justify="right")
    for other in [BASELINE, *ref.vs]:
        cells = [_pp(ref.lift if other == BASELINE else ref.vs[other])]
        for s in slices:
            sref = result.scorecard.slices[s].get(REFERENCE)
            if sref is None:
                cells.append("-")
                continue
            iv = sref.lift if other == BASELINE else sref.vs.get(other)
            cells.append(_short(iv))
        t.add_row(other, *cells)
    return t


def _short(iv: Interval | None) -> str:
    if iv is None or iv.n == 0 or math.isnan(iv.mean):
        return "-"
    return f"{100 * iv.mean:+.0f} [{100 * iv.low:+.0f},{100 * iv.high:+.0f}]"


def slice_table(result: EvalResult) -> Table:
    """Per slice: lift, negative transfer, false acceptance and rejection of each arm."""
    arms = [a for a in result.scorecard.arms if a != BASELINE]
    t = Table(title="By slice: lift pp [95%] / negative transfer % / false accept % / "
                    "false reject %")
    t.add_column("slice")
    t.add_column("tasks", justify="right")
    t.add_column("no memory success %", justify="right")
    for a in arms:
        t.add_column(a, justify="right")
    for s, by_arm in result.scorecard.slices.items():
        base = by_arm.get(BASELINE)
        cells = []
        for a in arms:
            sm = by_arm.get(a)
            cells.append("-" if sm is None else _slice_cell(sm))
        t.add_row(
            s.replace("_", " "), str(base.tasks if base else 0),
            f"{100 * base.success.mean:.0f}" if base and base.tasks else "-", *cells,
        )
    for s, reason in sorted(result.unsupported.items()):
        t.add_row(s.replace("_", " "), "0", "-", *[f"not yet supported: {reason}"] + [""] * (
            len(arms) - 1))
    return t


def _slice_cell(s: ArmSummary) -> str:
    def r(v: float) -> str:
        return "-" if math.isnan(v) else f"{100 * v:.0f}"

    return (f"{_short(s.lift)} / {r(s.negative_transfer.mean)} / "
            f"{r(s.false_acceptance.value)} / {r(s.false_rejection.value)}")


def diagnostic_table(result: EvalResult) -> Table:
    t = Table(title="Diagnostic only, never the headline: accepted-only lift (tasks where the "
                    "arm served at least one memory)")
    t.add_column("arm")
    t.add_column("tasks with memory served", justify="right")
    t.add_column("accepted-only lift, pp", justify="right")
    for arm, s in result.scorecard.overall.items():
        if arm == BASELINE:
            continue
        t.add_row(arm, f"{s.accepted_tasks}/{s.tasks}", _pp(s.accepted_only_lift))
    return t


def errors_table(result: EvalResult) -> Table:
    """Where each arm's false rejections and false acceptances came from."""
    arms = [a for a in result.scorecard.arms if a != BASELINE]
    t = Table(title="Errors by cause: applicable memories not served (by reason) and "
                    "inapplicable memories served (by kind)")
    t.add_column("error")
    t.add_column("cause")
    for a in arms:
        t.add_column(a, justify="right")
    overall = result.scorecard.overall
    for label, attr in (("false rejection", "false_rejections_by_reason"),
                        ("false acceptance", "false_acceptances_by_kind")):
        causes: list[str] = []
        for a in arms:
            causes += [c for c in getattr(overall[a], attr) if c not in causes]
        for c in causes:
            t.add_row(label, c, *[str(getattr(overall[a], attr).get(c, 0)) for a in arms])
    return t


def print_scorecard(result: EvalResult, console: Console) -> None:
    """Print every table and the notes."""
    console.print(headline_table(result))
    paired = paired_table(result)
    if paired is not None:
        console.print(paired)
    console.print(slice_table(result))
    console.print(errors_table(result))
    console.print(diagnostic_table(result))
    cfg = result.config
    agent = cfg["agent"]
    if agent.get("name") == "simulated":
        console.print(
            f"agent: simulated (base rate {agent['base_rate']}, follows relevant guidance "
            f"{agent['follow']:.0%}, success {agent['helped']:.0%} when it applies, "
            f"{agent['misled']:.0%} when it does not, -{agent['distraction_per_100_tokens']} per "
            "100 useless tokens); embedder "
            f"{cfg['embedder']}; k={cfg['k']}, compiled budget {cfg['budget_tokens']} tokens"
        )
    if agent.get("name") == "text":
        console.print(
            "agent: text (reads only the rendered context: trusts a labelled item in "
            f"proportion to its confidence, fully from {agent['trust_full']}; observation "
            f"check {'on' if agent['check_observation'] else 'off'}; "
            f"-{agent['distraction_per_100_tokens']} per 100 context tokens of every arm; "
            f"gullibility {agent['gullibility']}); "
            f"embedder {cfg['embedder']}; k={cfg['k']}, compiled budget {cfg['budget_tokens']} "
            "tokens"
        )
    for s, reason in sorted(result.unsupported.items()):
        console.print(f"slice {s}: not yet supported ({reason}); "
                      f"{result.skipped.get(s, 0)} scenario runs skipped for every arm")
    for what, counts in result.writes.items():
        if counts:
            detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            console.print(f"memories {what.replace('_', ' ')} by situated: {detail}")
    for note in result.notes:
        console.print(f"note: {note}")
    for name, path in result.files.items():
        console.print(f"wrote {name}: {path}")
    console.print(f"elapsed {result.elapsed_s:.1f} s")


def headline_cells(arm: str, s: ArmSummary) -> list[str]:
    """One arm's row of the headline table (the same cells in the terminal and in Markdown)."""
    base = arm == BASELINE
    return [
        arm, _pct(s.success), "-" if base else _pp(s.lift),
        "-" if base else _pct(s.negative_transfer),
        "-" if base else s.false_acceptance.fmt(), "-" if base else s.false_rejection.fmt(),
        "-" if base else f"{s.poisoned_served.num}/{s.poisoned_served.den}",
        "-" if base else str(s.leaks), "-" if base else str(s.stale_served),
        f"{s.tokens_per_task:.0f}",
        "-" if base else f"{_ms(s.latency_p50_ms)} / {_ms(s.latency_p95_ms)}",
    ]


def markdown_headline(result: EvalResult) -> str:
    """The headline table as Markdown (for a README)."""
    head = ("| arm | success % | lift vs no memory, pp | negative transfer % | false accept | "
            "false reject | poisoned served | leaks | stale served | tokens/task | "
            "recall ms p50/p95 |")
    lines = [head, "|" + "---|" * 11]
    for arm, s in result.scorecard.overall.items():
        lines.append("| " + " | ".join(headline_cells(arm, s)) + " |")
    return "\n".join(lines)


def to_dict(result: EvalResult) -> dict[str, Any]:
    """The JSON document: config, scorecard, and every per-task row."""
    return {
        "format": "situated-eval-results/1",
        "config": result.config,
        "elapsed_s": result.elapsed_s,
        "unsupported_slices": result.unsupported,
        "skipped_runs": result.skipped,
        "writes": result.writes,
        "notes": result.notes,
        "scorecard": result.scorecard.to_dict(),
        "rows": [asdict(r) for r in result.rows],
    }


def write_json(result: EvalResult, path: Path) -> Path:
    path.write_text(json.dumps(to_dict(result), indent=1, sort_keys=True) + "\n",
                    encoding="utf-8")
    return path


def write_plots(result: EvalResult, out_dir: Path) -> dict[str, Path]:
    """Lift with intervals per slice, and tokens versus success; needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        result.notes.append(
            "plots skipped: matplotlib is not installed (pip install 'situated[eval]')"
        )
        return {}
    card = result.scorecard
    arms = [a for a in card.arms if a != BASELINE]
    groups = ["overall", *card.slices]
    files: dict[str, Path] = {}
    colors = plt.get_cmap("tab10")

    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(groups) * max(1, len(arms)) / 2), 5))
    width = 0.8 / max(1, len(arms))
    for j, arm in enumerate(arms):
        means, lo, hi, xs = [], [], [], []
        for i, g in enumerate(groups):
            s = card.overall.get(arm) if g == "overall" else card.slices[g].get(arm)
            if s is None or s.lift.n == 0:
                continue
            xs.append(i + (j - (len(arms) - 1) / 2) * width)
            means.append(100 * s.lift.mean)
            lo.append(100 * (s.lift.mean - s.lift.low))
            hi.append(100 * (s.lift.high - s.lift.mean))
        ax.bar(xs, means, width, yerr=[lo, hi], capsize=2, label=arm, color=colors(j))
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g.replace("_", "\n") for g in groups], fontsize=8)
    ax.set_ylabel("lift over no memory (percentage points, 95% interval)")
    ax.set_title("Memory lift by slice")
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["lift_by_slice"] = out_dir / "lift_by_slice.png"
    fig.savefig(files["lift_by_slice"], dpi=110, metadata={"Software": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 5))
    for j, arm in enumerate(card.arms):
        s = card.overall[arm]
        ax.errorbar(
            [s.tokens_per_task], [100 * s.success.mean],
            yerr=[[100 * (s.success.mean - s.success.low)],
                  [100 * (s.success.high - s.success.mean)]],
            fmt="o", markersize=9, capsize=3, color=colors(j), label=arm,
        )
        pts = [(v[arm].tokens_per_task, 100 * v[arm].success.mean)
               for v in card.slices.values() if arm in v and v[arm].tasks]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=12, alpha=0.35,
                       color=colors(j))
    ax.set_xlabel("context tokens per task")
    ax.set_ylabel("task success % (95% interval; small dots: slices)")
    ax.set_title("Tokens versus success")
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["tokens_vs_success"] = out_dir / "tokens_vs_success.png"
    fig.savefig(files["tokens_vs_success"], dpi=110, metadata={"Software": None})
    plt.close(fig)
    return files
