"""`run_eval`: every arm on every scenario for every seed, then the scorecard and its files."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from situated.embed import DEFAULT_EMBEDDER, Embedder, get_embedder
from situated.errors import InvalidInput
from situated.eval.agents import (
    Agent,
    Guidance,
    LLMAgent,
    SimulatedAgent,
    common_random_number,
)
from situated.eval.arms import (
    ARM_NAMES,
    Arm,
    Compiled,
    Unsupported,
    build_world,
    make_arms,
    revoke_available,
)
from situated.eval.generator import generate
from situated.eval.metrics import Row, Scorecard, scorecard
from situated.eval.reader import TextAgent
from situated.eval.scenarios import SLICES, Scenario, load_many, shipped_paths
from situated.recall.reconstruct.base import available_reconstructors

QUICK_SEEDS = (1, 2, 3)
DEFAULT_SEEDS = (1, 2, 3, 4, 5)
DEFAULT_PER_CELL = 6
"""Generated scenarios per (domain, slice) and seed in the default (not quick) run."""
DEFAULT_K = 3
DEFAULT_BUDGET = 400


@dataclass
class EvalResult:
    """Everything one evaluation produced."""

    config: dict[str, Any]
    rows: list[Row]
    scorecard: Scorecard
    unsupported: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    writes: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    elapsed_s: float = 0.0


def parse_seeds(text: str | None) -> list[int] | None:
    """`"1,2,3"` -> [1, 2, 3]; None or blank -> None (the defaults). For the CLI."""
    if text is None or not text.strip():
        return None
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidInput(
            "seeds", f"expected comma-separated integers, got {text!r:.40}"
        ) from None
    if not seeds or not all(0 <= s < 2**32 for s in seeds):
        raise InvalidInput("seeds", f"expected comma-separated integers from 0 to 2**32-1, "
                           f"got {text!r:.40}")
    return seeds


def parse_arms(text: str | None) -> list[str] | None:
    """`"no_memory,compiled"` -> the list; None or blank -> None (the default arms)."""
    if text is None or not text.strip():
        return None
    return [a.strip() for a in text.split(",") if a.strip()]


def scenarios_for_seed(
    seed: int, paths: Sequence[Path] | None, quick: bool, per_cell: int | None
) -> list[Scenario]:
    """User files as given; otherwise the shipped files, plus generated ones unless quick."""
    if paths:
        return load_many(paths)
    shipped = load_many(shipped_paths())
    if quick:
        return shipped
    return shipped + generate(seed, per_cell if per_cell is not None else DEFAULT_PER_CELL)


def text_only(sc: Scenario) -> Scenario:
    """The scenario with its states as text only: no structured facts in the present state or
    in any memory's source state, and no writer-given conditions (which name facts)."""
    present = sc.present.model_copy(update={"facts": {}})
    mems = tuple(
        m.model_copy(update={
            "state": None if m.state is None else m.state.model_copy(update={"facts": {}}),
            "conditions": (),
        })
        for m in sc.memories
    )
    return sc.model_copy(update={"present": present, "memories": mems})


def make_row(seed: int, sc: Scenario, arm: str, g: Guidance, success: bool,
             probability: float | None, writes: dict[str, str] | None = None) -> Row:
    """Count what the arm served against the scenario's ground truth."""
    served = tuple(dict.fromkeys(g.keys))
    mems = [sc.memory(k) for k in served]
    held = sc.memories
    writes = writes or {}
    reasons = dict(g.rejected)
    # where each applicable memory that was not served got lost
    lost = "NOT_IN_TOP_K" if g.mode is None else "NOT_RETRIEVED"
    false_rejections = () if arm == "no_memory" else tuple(
        writes.get(m.key) or reasons.get(m.key) or lost
        for m in held if m.applies and m.key not in served
    )
    false_acceptances = tuple(
        next((t for t in m.tags if t != "no_source_state"), "inapplicable")
        for m in mems if not m.applies
    )
    return Row(
        seed=seed, scenario_id=sc.id, domain=sc.domain, slice=sc.slice, arm=arm,
        success=success, probability=None if probability is None else round(probability, 6),
        served=served,
        applicable_held=sum(m.applies for m in held),
        applicable_served=sum(m.applies for m in mems),
        inapplicable_held=sum(not m.applies for m in held),
        inapplicable_served=sum(not m.applies for m in mems),
        poisoned_held=sum(sc.is_poisoned(m) for m in held),
        poisoned_served=sum(sc.is_poisoned(m) for m in mems),
        leaks=sum(not sc.in_scope(m) for m in mems),
        stale_served=sum(sc.is_stale(m) for m in mems),
        revoked_served=sum(m.consent_revoked for m in mems),
        tokens=g.tokens,
        latency_ms=round(g.latency_ms, 3),
        mode=g.mode,
        false_rejections=false_rejections,
        false_acceptances=false_acceptances,
    )


def _bump(counts: dict[str, int], key: str, n: int) -> None:
    if n:
        counts[key] = counts.get(key, 0) + n


def _quiet() -> Console:
    return Console(quiet=True)


def run_eval(
    scenario_paths: list[Path] | None,
    seeds: list[int] | None,
    quick: bool,
    out_dir: Path,
    console: Console | None = None,
    *,
    embedder: str | Embedder = DEFAULT_EMBEDDER,
    agent: Agent | None = None,
    arms: Sequence[str] | None = None,
    k: int = DEFAULT_K,
    budget_tokens: int = DEFAULT_BUDGET,
    per_cell: int | None = None,
    plots: bool = True,
    states_as_text: bool = False,
) -> EvalResult:
    """Run the Memory Decision Scorecard and write `results.json` and the plots to `out_dir`.

    Args:
        scenario_paths: scenario files (JSON or YAML); None runs the shipped set (plus
            generated scenarios unless `quick`).
        seeds: seeds to run; None or empty uses 1,2,3 (quick) or 1..5 (default).
        quick: the shipped scenarios only (under a minute).
        out_dir: where `results.json`, `lift_by_slice.png` and `tokens_vs_success.png` go.
        console: rich console for the progress bar and the tables (None: silent).
        embedder: embedder name or instance for situated and the replay baselines.
        agent: the agent; default `TextAgent()` (reads the rendered context only;
            `SimulatedAgent()` scores from ground-truth effects: a unit check of the metrics).
        arms: arm names; default no_memory, raw_replay, utility_replay, compiled. Also
            `unscoped_replay` and `compiled:<reconstructor>` (e.g. `compiled:learned`).
        k: memories per task for every arm.
        budget_tokens: compiled recall's token budget.
        per_cell: generated scenarios per (domain, slice) per seed in the default run.
        plots: write the PNG plots.
        states_as_text: withhold structured facts and conditions (`text_only`): states are
            text as an agent observes them.
    """
    from situated.eval.report import print_scorecard, write_json, write_plots

    started = time.perf_counter()
    console = console or _quiet()
    seed_list = list(seeds) if seeds else list(QUICK_SEEDS if quick else DEFAULT_SEEDS)
    if len(set(seed_list)) != len(seed_list):
        raise InvalidInput("seeds", "seeds must be distinct")
    if isinstance(k, bool) or not 1 <= k <= 20:
        raise InvalidInput("k", "must be from 1 to 20")
    emb = get_embedder(embedder) if isinstance(embedder, str) else embedder
    the_agent: Agent = agent or TextAgent()
    notes: list[str] = []
    arm_names = list(arms) if arms else list(ARM_NAMES)
    if "learned" in available_reconstructors() and "compiled:learned" not in arm_names:
        notes.append(
            "compiled:learned is not in this run: the `learned` reconstructor behaves exactly "
            "like `rules` until its store holds enough labelled feedback, and every scenario "
            "here starts from a fresh store (add it with arms=[..., 'compiled:learned'])"
        )
    arm_objs: list[Arm] = make_arms(arm_names, k, budget_tokens)
    per_seed = {s: scenarios_for_seed(s, scenario_paths, quick, per_cell) for s in seed_list}
    if states_as_text:
        per_seed = {s: [text_only(sc) for sc in v] for s, v in per_seed.items()}
    revoke_missing = revoke_available()

    rows: list[Row] = []
    unsupported: dict[str, str] = {}
    skipped: dict[str, int] = {}
    writes: dict[str, dict[str, int]] = {
        "held_for_review": {}, "refused_at_write": {}, "merged_into_an_earlier_memory": {},
    }
    total = sum(len(v) for v in per_seed.values())
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="situated-eval-") as tmp, Progress(
        TextColumn("[bold]situated eval[/bold] {task.description}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True,
    ) as progress:
        task = progress.add_task("", total=total)
        n = 0
        for seed in seed_list:
            progress.update(task, description=f"seed {seed}")
            for sc in per_seed[seed]:
                progress.advance(task)
                if revoke_missing and any(m.consent_revoked for m in sc.memories):
                    unsupported[sc.slice] = revoke_missing
                    skipped[sc.slice] = skipped.get(sc.slice, 0) + 1
                    continue
                n += 1
                path = Path(tmp) / f"s{n}.db"
                try:
                    world = build_world(sc, path, emb)
                except Unsupported as exc:
                    unsupported[sc.slice] = str(exc)
                    skipped[sc.slice] = skipped.get(sc.slice, 0) + 1
                    continue
                try:
                    _bump(writes["held_for_review"], sc.slice, len(world.held))
                    _bump(writes["refused_at_write"], sc.slice, len(world.refused))
                    _bump(writes["merged_into_an_earlier_memory"], sc.slice, len(world.merged))
                    u = common_random_number(seed, sc.id)
                    at_write = {k: "HELD_FOR_REVIEW" for k in world.held}
                    at_write |= {k: "REFUSED_AT_WRITE" for k in world.refused}
                    at_write |= {k: "MERGED_AT_WRITE" for k in world.merged}
                    for arm in arm_objs:
                        g = arm.serve(world)
                        a = the_agent.attempt(sc, g, u)
                        rows.append(make_row(seed, sc, arm.name, g, a.success, a.probability,
                                             at_write if isinstance(arm, Compiled) else None))
                finally:
                    world.close()
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{path}{suffix}").unlink(missing_ok=True)

    card = scorecard(rows, [a.name for a in arm_objs], SLICES)
    config = {
        "seeds": seed_list,
        "quick": quick,
        "scenario_files": [str(p) for p in scenario_paths] if scenario_paths else
        [p.name for p in shipped_paths()],
        "generated_per_cell": None if (scenario_paths or quick) else
        (per_cell if per_cell is not None else DEFAULT_PER_CELL),
        "scenarios_per_seed": {str(s): len(v) for s, v in per_seed.items()},
        "tasks": len(rows) // max(1, len(arm_objs)),
        "embedder": emb.model_ref,
        "agent": the_agent.describe()
        if isinstance(the_agent, SimulatedAgent | TextAgent | LLMAgent)
        else {"name": the_agent.name},
        "arms": [a.name for a in arm_objs],
        "k": k,
        "budget_tokens": budget_tokens,
        "states_as_text": states_as_text,
    }
    result = EvalResult(config, rows, card, unsupported, skipped, writes, notes)
    result.elapsed_s = round(time.perf_counter() - started, 2)
    result.files["results"] = write_json(result, out_dir / "results.json")
    if plots:
        result.files.update(write_plots(result, out_dir))
    print_scorecard(result, console)
    return result
