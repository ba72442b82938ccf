"""TextWorld games of other shapes: does memory help, or at least not hurt, in worlds nobody in
this project wrote for? (optional extra `textworld`)

TextWorld's `tw-make custom` generates a random world (rooms, containers, doors, keys, objects,
with generated names and flavour text) and a quest in it: a sequence of actions (go, open,
unlock, take, put, close, lock ...) told in the game's opening text, worth a point per quest.
This evaluation:

1. **Games** of several shapes (`SHAPES`: rooms, objects, quest length, parallel quests),
   `train_games` per shape from seeds 1, 2, ... and `test_games` per shape from seeds 10001,
   ... (disjoint: every test world is one memory has never seen). Generated once into a cache
   directory (default `<out>/tw-games`), keyed by shape and seed.
2. **Memory**, one store per agent seed, from the train games only, through `Memory.learn`
   and the normal gates: each game's walkthrough, the agent exploring it, and the agent
   replaying the walkthrough of another train game of the same shape verbatim.
3. **Test** on every test game under the three arms of `twarms` (no memory, raw replay,
   compiled recall in the `tw.custom` namespace) with the same generic agent
   (`twexplore.ExploreAgent`: it explores the admissible commands and never reads the
   objective; it follows plans read from the rendered briefing), for each agent seed; the
   pairs (game, seed) are pooled.

States are the game's own text: the objective, the room's description and the inventory. By
default (`states="text"`) no parser's facts are given, so whatever structure memory finds in it
is its own reading; `states="parsed"` adds what the cooking reader `twparse` reads (only the
location, in these games), as a comparison row. Each step's reward is the score after it.

Metrics as in `twarms`, pooled and per shape; plus how many plans were served `APPLICABLE`
(every train plan comes from another world; the target is none) and served at all (any
verdict the agent acts on), and, in the train
trajectories, how many steps that did not fail (their reward did not fall) have a failure word
anywhere in their text (what the rules distiller before version 5 read as failures).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from situated.embed import DEFAULT_EMBEDDER
from situated.errors import InvalidInput
from situated.eval.envs.twarms import (
    ARMS,
    BASELINE,
    Compiled,
    NoMemory,
    RawReplay,
    build_memory,
    est,
    summarise,
)
from situated.eval.envs.twexplore import ExploreAgent
from situated.eval.envs.twgame import (
    TENANT,
    Episode,
    Play,
    TextWorldMissing,
    check_states,
    generate,
    run_episode,
    unavailable_reason,
)
from situated.memory import Memory
from situated.models import Principal
from situated.write.distill import FAIL_WORDS

NAMESPACE = "tw.custom"
INTENT = "complete the task the game sets"
TEST_SEED_BASE = 10_000


@dataclass(frozen=True)
class Shape:
    """One kind of game: `tw-make custom` settings."""

    name: str
    world_size: int
    nb_objects: int
    quest_length: int
    quests: int = 1

    @property
    def tag(self) -> str:
        return f"w{self.world_size}o{self.nb_objects}q{self.quest_length}p{self.quests}"

    def tw_make_args(self) -> list[str]:
        return ["custom", "--world-size", str(self.world_size), "--nb-objects",
                str(self.nb_objects), "--quest-length", str(self.quest_length),
                "--nb-parallel-quests", str(self.quests)]


SHAPES: tuple[Shape, ...] = (
    Shape("tiny", 2, 4, 2),
    Shape("small", 4, 8, 3, 2),
    Shape("medium", 6, 10, 4),
    Shape("wide", 8, 14, 5, 2),
    Shape("large", 10, 20, 6, 3),
)
"""Five shapes: 2 to 10 rooms, 4 to 20 objects, quests of 2 to 6 actions, 1 to 3 quests."""


@dataclass(frozen=True)
class CustomConfig:
    """One evaluation's settings (`seed` is the agent seed of the run in progress)."""

    shapes: tuple[Shape, ...]
    train_games: int
    test_games: int
    agent_seeds: tuple[int, ...]
    step_cap: int = 50
    states: str = "text"
    seed: int = 0
    embedder: str = DEFAULT_EMBEDDER
    k: int = 5
    budget_tokens: int = 600
    max_consults: int = 12
    quick: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("seed")
        return {**d, "arms": list(ARMS)}


def make_config(quick: bool, *, shapes: Sequence[str] | None = None,
                train_games: int | None = None, test_games: int | None = None,
                agent_seeds: Sequence[int] | None = None, step_cap: int | None = None,
                states: str = "text", embedder: str = DEFAULT_EMBEDDER) -> CustomConfig:
    """Quick: the two smallest shapes, 2 train and 2 test games each, agent seed 0; full: the
    five shapes, 4 train and 12 test games each (60 test games), agent seeds 0, 1, 2."""
    if shapes:
        known = {s.name: s for s in SHAPES}
        unknown = [n for n in shapes if n not in known]
        if unknown:
            raise InvalidInput("shapes", f"unknown {', '.join(unknown)}; use "
                               f"{', '.join(known)}")
        chosen = tuple(known[n] for n in dict.fromkeys(shapes))
    else:
        chosen = SHAPES[:2] if quick else SHAPES
    seeds = tuple(dict.fromkeys(agent_seeds)) if agent_seeds else ((0,) if quick else (0, 1, 2))
    return CustomConfig(shapes=chosen, train_games=train_games or (2 if quick else 4),
                        test_games=test_games or (2 if quick else 12), agent_seeds=seeds,
                        step_cap=step_cap or 50, states=check_states(states),
                        embedder=embedder, quick=quick)


def game_path(cache: Path, shape: Shape, split: str, seed: int) -> Path:
    return cache / f"custom-{shape.tag}-{split}-{seed}.z8"


def make_games(cfg: CustomConfig, cache: Path) -> dict[str, list[tuple[Shape, Path]]]:
    """Generate (or reuse) every shape's train and test games; fixed, disjoint seeds."""
    out: dict[str, list[tuple[Shape, Path]]] = {"train": [], "test": []}
    for shape in cfg.shapes:
        plan = [("train", s) for s in range(1, cfg.train_games + 1)]
        plan += [("test", TEST_SEED_BASE + s) for s in range(1, cfg.test_games + 1)]
        for split, seed in plan:
            path = generate(game_path(cache, shape, split, seed),
                            [*shape.tw_make_args(), "--seed", str(seed)])
            out[split].append((shape, path))
    return out


def play_for(states: str) -> Play:
    return Play(intent=INTENT, namespace=NAMESPACE, states=states, objective=True,
                agent=ExploreAgent)


def flavour_failures(trajectories: Sequence[dict[str, Any]]) -> int:
    """Steps whose reward did not fall but whose text has a failure word somewhere (what the
    rules distiller before version 5 wrote a 'what went wrong' lesson for)."""
    n = 0
    for t in trajectories:
        prev = 0.0
        for step in t["steps"]:
            reward = step.get("reward")
            worked = reward is None or reward >= prev
            prev = reward if reward is not None else prev
            n += worked and bool(FAIL_WORDS.search(step.get("result", "")))
    return n


def run_textworld_custom(
    quick: bool, out_dir: Path, console: Console | None = None, *,
    shapes: Sequence[str] | None = None, train_games: int | None = None,
    test_games: int | None = None, agent_seeds: Sequence[int] | None = None,
    step_cap: int | None = None, states: str = "text", embedder: str = DEFAULT_EMBEDDER,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Generate games of several shapes, build memory on train games, run the arms on unseen
    test games with the generic agent, for each agent seed.

    Args:
        quick: two shapes, 2 train and 2 test games each, one agent seed.
        out_dir: where `textworld-custom.json`, the train trajectories and the memory files go.
        console: rich console for progress and tables (None: silent).
        shapes: names from `SHAPES` (default: all five).
        train_games: train games per shape (default 4).
        test_games: test games per shape (default 12).
        agent_seeds: the generic agent's seeds (default 0, 1, 2), pooled.
        step_cap: steps per episode (default 50).
        states: `text` (the game's text only) or `parsed` (with `twparse`'s facts).
        embedder: the embedder for situated and for raw replay's similarity.
        cache_dir: where generated games are kept (default `<out_dir>/tw-games`).

    Returns:
        The JSON-ready result (also written to `out_dir/textworld-custom.json`).
    """
    reason = unavailable_reason()
    if reason:
        raise TextWorldMissing(reason)
    cfg = make_config(quick, shapes=shapes, train_games=train_games, test_games=test_games,
                      agent_seeds=agent_seeds, step_cap=step_cap, states=states,
                      embedder=embedder)
    console = console or Console(quiet=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    games = make_games(cfg, Path(cache_dir) if cache_dir else out_dir / "tw-games")
    t_games = time.perf_counter() - t0
    console.log(f"{len(games['train'])} train and {len(games['test'])} test games ready in "
                f"{t_games:.0f}s")
    play = play_for(cfg.states)
    train = [p for _, p in games["train"]]
    shape_of = {p.stem: s.name for s, p in games["train"] + games["test"]}
    principal = Principal(tenant=TENANT, name="tw-agent")
    episodes: list[Episode] = []
    trajectories: list[dict[str, Any]] = []
    built: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    served: Counter[str] = Counter()
    rejections: Counter[str] = Counter()
    t_build = t_eval = 0.0

    def partner(i: int) -> Path:  # the next train game of the same shape
        shape = games["train"][i][0]
        same = [p for s, p in games["train"] if s == shape]
        return same[(same.index(train[i]) + 1) % len(same)]

    for agent_seed in cfg.agent_seeds:
        run_cfg = replace(cfg, seed=agent_seed)
        db = out_dir / f"textworld-custom-memory-s{agent_seed}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        mem = Memory(db, embedder=cfg.embedder)
        raw = RawReplay(mem.embedder, INTENT)
        compiled = Compiled(mem, principal, run_cfg, play)
        arms: list[NoMemory | RawReplay | Compiled] = [NoMemory(), raw, compiled]
        try:
            t1 = time.perf_counter()
            built.update(build_memory(mem, principal, train, run_cfg, raw, trajectories, play,
                                      partner))
            t2 = time.perf_counter()
            for _, path in games["test"]:
                for arm in arms:
                    ep = run_episode(path, "test", arm.name, arm.consult, run_cfg, play=play)
                    episodes.append(ep)
                    arm.feedback(ep)
            t3 = time.perf_counter()
        finally:
            mem.close()
        t_build += t2 - t1
        t_eval += t3 - t2
        modes.update(compiled.modes)
        served.update(compiled.served)
        rejections.update(compiled.rejections)
        means = {a.name: sum(e.score for e in episodes if e.arm == a.name
                             and e.agent_seed == agent_seed) / max(1, len(games["test"]))
                 for a in arms}
        console.log(f"agent seed {agent_seed}: memory {t2 - t1:.0f}s, eval {t3 - t2:.0f}s; "
                    "mean scores " + ", ".join(f"{k}={v:.1f}" for k, v in means.items()))
    per_shape = {
        s.name: summarise([e for e in episodes if shape_of[e.game] == s.name])
        for s in cfg.shapes
    }
    consults = sum(modes.values())
    result = {
        "benchmark": "textworld-custom",
        "config": {**cfg.to_dict(), "shapes": [asdict(s) for s in cfg.shapes]},
        "games": {k: [p.name for _, p in v] for k, v in games.items()},
        "wall_seconds": {"games": round(t_games, 1), "build": round(t_build, 1),
                         "eval": round(t_eval, 1), "total": round(time.perf_counter() - t0, 1)},
        "memory": {**dict(built), "flavour_failure_words": flavour_failures(trajectories)},
        "arms": summarise(episodes),
        "per_shape": per_shape,
        "agent": {"name": "explore"},
        "compiled_recall": {
            "consults": consults, "modes": dict(modes), "served": dict(served),
            "other_world_plans_applicable": served.get("plan APPLICABLE", 0),
            "other_world_plans_served": sum(n for k, n in served.items()
                                            if k.startswith("plan ")),
            "rejections": dict(rejections.most_common()),
        },
        "episodes": [e.row() | {"shape": shape_of[e.game]} for e in episodes],
    }
    (out_dir / "textworld-custom.json").write_text(json.dumps(result, indent=1, default=str))
    with (out_dir / "textworld-custom-train-trajectories.jsonl").open("w") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    for tab in tables(result):
        console.print(tab)
    return result


def tables(result: dict[str, Any]) -> list[Table]:
    """The pooled table and the per-shape table."""
    cfg, wall = result["config"], result["wall_seconds"]
    rec = result["compiled_recall"]
    head = Table(
        title=f"TextWorld custom games, {len(cfg['shapes'])} shapes: {len(result['games']['test'])}"
        f" unseen test games x {len(cfg['agent_seeds'])} agent seeds (generic agent), cap "
        f"{cfg['step_cap']} steps, states {cfg['states']}",
        caption=f"95% intervals (Wilson for rates, bootstrap for means), paired by game and "
        f"seed. Plans from another world served APPLICABLE: "
        f"{rec['other_world_plans_applicable']} (served at all: "
        f"{rec['other_world_plans_served']}) in {rec['consults']} consultations. Wall "
        f"{wall['total']:.0f}s (games {wall['games']:.0f}s, memory {wall['build']:.0f}s, "
        f"eval {wall['eval']:.0f}s).",
    )
    for col in ("arm", "success %", "mean score %", "lift vs none", "neg. transfer %",
                "steps/ep", "tokens/ep", "consult ms p50"):
        head.add_column(col, justify="left" if col == "arm" else "right")
    for arm, s in result["arms"].items():
        base = arm == BASELINE
        lat = s["latency_p50_ms"]
        head.add_row(arm, est(s["success"], pct=True), est(s["mean_score"]),
                     "-" if base else est(s["lift"]),
                     "-" if base else est(s["negative_transfer"], pct=True),
                     f"{s['steps_per_episode']:.1f}", f"{s['tokens_per_episode']:.0f}",
                     "-" if base or lat != lat else f"{lat:.0f}")
    comp = result["arms"].get("compiled", {}).get("minus_raw_replay")
    if comp:
        head.caption = f"{head.caption} Compiled minus raw replay, paired: {est(comp)}."
    per = Table(title="Per shape: mean score % (compiled lift vs none [95%])")
    per.add_column("shape")
    for arm in ARMS:
        per.add_column(arm, justify="right")
    for name, arms in result["per_shape"].items():
        cells = []
        for arm in ARMS:
            s = arms.get(arm)
            if s is None:
                cells.append("-")
                continue
            cell = f"{s['mean_score']['value']:.1f}"
            if arm != BASELINE:
                cell += f" ({est(s['lift'])})"
            cells.append(cell)
        per.add_row(name, *cells)
    return [head, per]
