"""TextWorld cooking games: does memory help on unseen layouts? (optional extra `textworld`)

TextWorld (Côté et al., 2018; PyPI `textworld`, MIT) generates text games offline with
`tw-make`. This evaluation uses its cooking games (`tw-make tw-cooking`): find the recipe's
ingredients across the rooms, prepare them as the cookbook says (slice, dice, chop; fry with
the stove, roast with the oven, grill with the BBQ), prepare the meal and eat it. A wrong
preparation (roasting what must be fried) ends the game as lost, so a lesson replayed in the
wrong game does measurable harm.

1. **Games**: `train_games` games (default 20) from TextWorld's `train` split (seeds 1, 2,
   ...) and `test_games` (default 60) from its `test` split (seeds 10001, ...): every test
   game has a layout not seen in training, and its foods are unseen or prepared in ways
   unseen for that food.
   Generated once into a cache directory (default: `<out>/tw-games`), keyed by settings.
2. **Memory** from train games only, through `Memory.learn` and the normal gates: the
   walkthrough of each train game, the agent exploring it on its own, and the agent replaying
   another train game's walkthrough verbatim (which fails where the recipes differ).
3. **Test** on the test games under three arms (`twarms`) with the same agent
   (`twagent.CookAgent`): `no_memory`; `raw_replay` (the successful train episode whose first
   state is most similar to the query `intent + present state`, its actions pasted verbatim);
   `compiled` (`Memory.recall` in the `tw.cooking` namespace; guidance parsed from its rendered
   items).
   The agent consults at the start, when it changes room, when it has read the recipe, and
   when a plan runs out (at most `max_consults` times). Compiled recall gets each test
   episode's outcome through `Memory.feedback`; nothing is written from test games.

States are the game's own text (the room description and the inventory line, after the
cookbook's text once read); with `states="parsed"` (the default here) the facts are those
`twparse` extracts (location, and the recipe once the cookbook was read); with `states="text"`
there are none (`twgame`). Metrics (`twarms`) per arm: success (won), mean score (points /
max points, %), lift in score over no memory (paired by game), negative transfer (an episode
that ends worse than no memory on the same game: lower score, or lost where no memory was
not), lost rate, steps, context tokens, consult latency; Wilson intervals for rates,
bootstrap for means.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from situated.embed import DEFAULT_EMBEDDER
from situated.eval.envs.twarms import (
    ARMS,
    BASELINE,
    RAW_HEADER,
    Compiled,
    NoMemory,
    RawReplay,
    build_memory,
    est,
    summarise,
)
from situated.eval.envs.twgame import (
    COOKING,
    INTENT,
    TENANT,
    AgentFactory,
    Episode,
    TextWorldMissing,
    TWAgent,
    annotate,
    check_states,
    generate,
    run_episode,
    unavailable_reason,
)
from situated.eval.envs.twllm import LLMClient, LLMCookAgent
from situated.memory import Memory
from situated.models import Principal

__all__ = [
    "ARMS", "BASELINE", "RAW_HEADER", "Episode", "TWConfig", "TextWorldMissing", "annotate",
    "make_config", "make_games", "run_episode", "run_textworld", "summarise", "table",
    "unavailable_reason",
]

TEST_SEED_BASE = 10_000


@dataclass(frozen=True)
class TWConfig:
    """One evaluation's settings (the game settings are `tw-make tw-cooking` options)."""

    train_games: int
    test_games: int
    step_cap: int = 60
    recipe: int = 1
    take: int = 1
    go: int = 6
    seed: int = 0
    embedder: str = DEFAULT_EMBEDDER
    k: int = 5
    budget_tokens: int = 600
    max_consults: int = 12
    quick: bool = False
    states: str = "parsed"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "arms": list(ARMS)}

    def tw_make_args(self) -> list[str]:
        return ["tw-cooking", "--recipe", str(self.recipe), "--take", str(self.take),
                "--go", str(self.go), "--open", "--cook", "--cut"]


def game_path(cache: Path, cfg: TWConfig, split: str, seed: int) -> Path:
    tag = f"r{cfg.recipe}t{cfg.take}g{cfg.go}"
    return cache / f"cooking-{tag}-{split}-{seed}.z8"


def make_games(cfg: TWConfig, cache: Path) -> dict[str, list[Path]]:
    """Generate (or reuse) the train and test games with `tw-make`; fixed seeds."""
    out: dict[str, list[Path]] = {"train": [], "test": []}
    plan = [("train", s) for s in range(1, cfg.train_games + 1)]
    plan += [("test", TEST_SEED_BASE + s) for s in range(1, cfg.test_games + 1)]
    for split, seed in plan:
        path = game_path(cache, cfg, split, seed)
        out[split].append(generate(path, [*cfg.tw_make_args(), "--split", split,
                                          "--seed", str(seed)]))
    return out


# -- the run ------------------------------------------------------------------------------------


def make_config(quick: bool, train_games: int | None = None, test_games: int | None = None,
                seed: int = 0, *, step_cap: int | None = None,
                embedder: str = DEFAULT_EMBEDDER, states: str = "parsed") -> TWConfig:
    """Quick: 4 train and 4 test games; full: 20 and 60. Any setting can be overridden."""
    return TWConfig(train_games=train_games or (4 if quick else 20),
                    test_games=test_games or (4 if quick else 60),
                    step_cap=step_cap or 60, seed=seed, embedder=embedder, quick=quick,
                    states=check_states(states))


def run_textworld(
    quick: bool, out_dir: Path, console: Console | None = None, *,
    train_games: int | None = None, test_games: int | None = None, seed: int = 0,
    step_cap: int | None = None, embedder: str = DEFAULT_EMBEDDER,
    cache_dir: Path | None = None, llm: LLMClient | None = None, states: str = "parsed",
) -> dict[str, Any]:
    """Generate games, build memory on train games, run the arms on unseen test games.

    `states`: `parsed` (the game's text and `twparse`'s facts) or `text` (the text alone).
    With `llm`, an `twllm.LLMCookAgent` over that endpoint plays the test games (memory is
    still built by the non-LLM agent, so every test agent reads the same memory).

    Returns the JSON-ready result (also written to `out_dir/textworld.json`).
    """
    reason = unavailable_reason()
    if reason:
        raise TextWorldMissing(reason)
    cfg = make_config(quick, train_games, test_games, seed, step_cap=step_cap,
                      embedder=embedder, states=states)
    play = replace(COOKING, states=cfg.states)
    console = console or Console(quiet=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    games = make_games(cfg, Path(cache_dir) if cache_dir else out_dir / "tw-games")
    t_games = time.perf_counter() - t0
    db = out_dir / "textworld-memory.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    principal = Principal(tenant=TENANT, name="tw-agent")
    mem = Memory(db, embedder=cfg.embedder)
    raw = RawReplay(mem.embedder)
    compiled = Compiled(mem, principal, cfg, play)
    arms: list[NoMemory | RawReplay | Compiled] = [NoMemory(), raw, compiled]
    trajectories: list[dict[str, Any]] = []
    episodes: list[Episode] = []
    factory: AgentFactory | None = None
    if llm is not None:
        client = llm

        def factory(seed: str) -> TWAgent:
            return LLMCookAgent(client, INTENT)

    try:
        t1 = time.perf_counter()
        built = build_memory(mem, principal, games["train"], cfg, raw, trajectories, play)
        t2 = time.perf_counter()
        console.log(f"memory from {len(games['train'])} train games: {built}")
        for path in games["test"]:
            for arm in arms:
                ep = run_episode(path, "test", arm.name, arm.consult, cfg,
                                 agent_factory=factory, play=play)
                episodes.append(ep)
                arm.feedback(ep)
        t3 = time.perf_counter()
    finally:
        mem.close()
    result = {
        "benchmark": "textworld",
        "config": cfg.to_dict(),
        "games": {k: [p.name for p in v] for k, v in games.items()},
        "wall_seconds": {"games": round(t_games, 1), "build": round(t2 - t1, 1),
                         "eval": round(t3 - t2, 1), "total": round(time.perf_counter() - t0, 1)},
        "memory": built,
        "arms": summarise(episodes, cfg.seed),
        "agent": {"name": "cook"} if llm is None else {
            "name": "llm", "model": llm.model, "requests": llm.requests,
            "failures": llm.failures, "seconds": round(llm.seconds, 1),
            "tokens": dict(llm.tokens)},
        "compiled_recall": {"modes": dict(compiled.modes), "served": dict(compiled.served),
                            "rejections": dict(compiled.rejections.most_common())},
        "episodes": [e.row() for e in episodes],
    }
    (out_dir / "textworld.json").write_text(json.dumps(result, indent=1, default=str))
    with (out_dir / "textworld-train-trajectories.jsonl").open("w") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    console.print(table(result))
    return result


def table(result: dict[str, Any]) -> Table:
    cfg, wall = result["config"], result["wall_seconds"]
    t = Table(
        title=f"TextWorld cooking, unseen test games: {cfg['train_games']} train, "
        f"{cfg['test_games']} test, cap {cfg['step_cap']} steps, states "
        f"{cfg.get('states', 'parsed')}",
        caption=f"95% intervals (Wilson for rates, bootstrap for means). Wall {wall['total']:.0f}s "
        f"(games {wall['games']:.0f}s, memory {wall['build']:.0f}s, eval {wall['eval']:.0f}s).",
    )
    for col in ("arm", "success %", "mean score %", "lift vs none", "neg. transfer %",
                "lost %", "steps/ep", "tokens/ep"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for arm, s in result["arms"].items():
        base = arm == BASELINE
        t.add_row(arm, est(s["success"], pct=True), est(s["mean_score"]),
                  "-" if base else est(s["lift"]),
                  "-" if base else est(s["negative_transfer"], pct=True),
                  est(s["lost"], pct=True), f"{s['steps_per_episode']:.1f}",
                  f"{s['tokens_per_episode']:.0f}")
    comp = result["arms"].get("compiled", {}).get("minus_raw_replay")
    if comp:
        t.caption = f"{t.caption} Compiled minus raw replay, paired: {est(comp)}."
    return t
