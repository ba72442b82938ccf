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
3. **Test** on the test games under three arms with the same agent (`twagent.CookAgent`):
   `no_memory`; `raw_replay` (the successful train episode whose first state is most similar
   to the query `intent + present state`, its actions pasted verbatim); `compiled`
   (`Memory.recall` in the `tw.cooking` namespace; guidance parsed from its rendered items).
   The agent consults at the start, when it changes room, when it has read the recipe, and
   when a plan runs out (at most `max_consults` times). Compiled recall gets each test
   episode's outcome through `Memory.feedback`; nothing is written from test games.

States are the game's own text (the room description and the inventory line); the facts are
those `twparse` extracts (location, and the recipe once the cookbook was read). Metrics per
arm: success (won), mean score (points / max points, %), lift in score over no memory (paired
by game), negative transfer (an episode that ends worse than no memory on the same game:
lower score, or lost where no memory was not), lost rate, steps, context tokens, consult
latency; Wilson intervals for rates, bootstrap for means.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from situated.embed import DEFAULT_EMBEDDER, Embedder
from situated.errors import UsageError
from situated.eval.envs.stats import Estimate, bootstrap_mean, wilson
from situated.eval.envs.swagent import NO_ADVICE, Advice, Plan, parse_guidance
from situated.eval.envs.twagent import CookAgent
from situated.eval.envs.twllm import LLMClient, LLMCookAgent
from situated.eval.envs.twparse import clean, inventory, location, parse_recipe, state_facts
from situated.eval.reader import parse_context
from situated.memory import Memory
from situated.models import LifecycleState, Principal, State
from situated.recall.compile import token_counter
from situated.write.distill import EpisodeOutcome, Step, Trajectory

ARMS: tuple[str, ...] = ("no_memory", "raw_replay", "compiled")
BASELINE = "no_memory"
TENANT = "textworld"
NAMESPACE = "tw.cooking"
INTENT = "cook the recipe from the cookbook and eat the meal"
RAW_HEADER = "Relevant past experience:"
OBS_CHARS = 2000
TEST_SEED_BASE = 10_000


class TextWorldMissing(UsageError):
    """The `textworld` package (the `textworld` extra) is not installed."""


def unavailable_reason() -> str | None:
    if importlib.util.find_spec("textworld") is None:
        return "the textworld package is not installed (pip install 'situated[textworld]')"
    if _tw_make() is None:
        return "tw-make (installed with textworld) is not on PATH or beside the interpreter"
    return None


def _tw_make() -> str | None:
    beside = Path(sys.executable).parent / "tw-make"
    return str(beside) if beside.exists() else shutil.which("tw-make")


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
    tw_make = _tw_make()
    if tw_make is None:
        raise TextWorldMissing("tw-make not found")
    cache.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Path]] = {"train": [], "test": []}
    plan = [("train", s) for s in range(1, cfg.train_games + 1)]
    plan += [("test", TEST_SEED_BASE + s) for s in range(1, cfg.test_games + 1)]
    for split, seed in plan:
        path = game_path(cache, cfg, split, seed)
        if not path.exists():
            cmd = [tw_make, *cfg.tw_make_args(), "--split", split, "--seed", str(seed),
                   "--output", str(path), "--silent", "-f"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode != 0 or not path.exists():
                raise UsageError(f"tw-make failed for {path.name}: {done.stderr[-300:]}")
        out[split].append(path)
    return out


# -- the game ---------------------------------------------------------------------------------


class TWGame:
    """One game through `textworld.start`, with admissible commands and the walkthrough."""

    def __init__(self, path: Path) -> None:
        import textworld

        infos = textworld.EnvInfos(admissible_commands=True, score=True, max_score=True,
                                   won=True, lost=True, description=True, inventory=True,
                                   extras=["walkthrough"])
        self._env = textworld.start(str(path), request_infos=infos)
        self.state: Any = None

    def reset(self) -> Any:
        self.state = self._env.reset()
        return self.state

    def step(self, command: str) -> tuple[Any, bool]:
        self.state, _, done = self._env.step(command)
        return self.state, bool(done)

    def close(self) -> None:
        self._env.close()


def observe(gs: Any) -> tuple[str, str | None, tuple[str, ...]]:
    """(observation text, room, inventory) of a game state: the game's own text."""
    desc = clean(str(gs.description or ""))
    inv_text = clean(str(gs.inventory or ""))
    return f"{desc}\n\n{inv_text}"[:OBS_CHARS], location(desc), inventory(inv_text)


# -- episodes ---------------------------------------------------------------------------------


@dataclass
class Episode:
    game: str
    split: str
    arm: str
    steps: list[Step] = field(default_factory=list)
    points: int = 0
    max_points: int = 1
    won: bool = False
    lost: bool = False
    advices: list[Advice] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    @property
    def score(self) -> float:
        return 100.0 * self.points / max(1, self.max_points)

    @property
    def episode_id(self) -> str:
        return f"{self.game}:{self.arm}"

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.advices)

    def trajectory(self) -> Trajectory:
        return Trajectory(episode_id=self.episode_id, task=INTENT, namespace=NAMESPACE,
                          steps=self.steps,
                          outcome=EpisodeOutcome(success=self.won, reward=self.score / 100))

    def row(self) -> dict[str, Any]:
        return {"game": self.game, "split": self.split, "arm": self.arm, "won": self.won,
                "lost": self.lost, "score": round(self.score, 1), "steps": len(self.steps),
                "consults": len(self.advices), "tokens": self.tokens, "used": sorted(self.used)}


def annotate(feedback: str, before: int, after: int, lost: bool) -> str:
    text = " ".join(clean(feedback).split())[:600]
    notes = [f"score {before} -> {after}"] if after != before else []
    if lost:
        notes.append("the task failed")
    return f"{text} [{': '.join(notes)}]" if notes else text


Consult = Callable[[State, frozenset[str]], Advice]


class TWAgent(Protocol):
    """What `run_episode` drives: `twagent.CookAgent` or `twllm.LLMCookAgent`."""

    started: set[str]
    used: set[str]
    recipe: Any

    @property
    def in_plan(self) -> bool: ...

    def advise(self, advice: Advice) -> None: ...

    def see(self, observation: str) -> None: ...

    def next_action(self, room: str, admissible: list[str],
                    inventory: tuple[str, ...]) -> tuple[str, str | None]: ...

    def result(self, action: str, plan_id: str | None, room: str, feedback: str) -> None: ...


AgentFactory = Callable[[str], TWAgent]


def run_episode(path: Path, split: str, arm: str, consult: Consult, cfg: TWConfig,
                fixed: Sequence[str] | None = None,
                agent_factory: AgentFactory | None = None) -> Episode:
    """Play one game: the walkthrough when `fixed` is given, else the agent with advice."""
    game = TWGame(path)
    ep = Episode(path.stem, split, arm)
    try:
        gs = game.reset()
        ep.max_points = int(gs.max_score or 1)
        agent: TWAgent = (agent_factory or CookAgent)(f"{cfg.seed}|{path.stem}")
        obs, room, inv = observe(gs)
        agent.see(obs)
        recipe = None

        def ask() -> None:
            advice = consult(State(obs, state_facts(room, recipe)), frozenset(agent.started))
            ep.advices.append(advice)
            agent.advise(advice)

        if fixed is None:
            ask()
        script = list(fixed) if fixed is not None else None
        while len(ep.steps) < cfg.step_cap:
            if script is not None:
                if not script:
                    break
                action, pid = script.pop(0), None
            else:
                action, pid = agent.next_action(room or "", list(gs.admissible_commands or []),
                                                inv)
            facts = state_facts(room, recipe)
            before = int(gs.score or 0)
            gs, done = game.step(action)
            feedback = str(gs.feedback or "")
            after = int(gs.score or 0)
            ep.steps.append(Step(observation=obs, facts=facts, action=action,
                                 result=annotate(feedback, before, after, bool(gs.lost))))
            agent.result(action, pid, room or "", feedback)
            read = parse_recipe(feedback)
            new_recipe = read is not None and recipe is None
            if read is not None:
                recipe = agent.recipe = read
            ep.points, ep.won, ep.lost = after, bool(gs.won), bool(gs.lost)
            if done or ep.won or ep.lost:
                break
            before_room = room
            obs, room, inv = observe(gs)
            agent.see(obs)
            plan_done = pid is not None and not agent.in_plan
            if script is None and len(ep.advices) < cfg.max_consults and (
                room != before_room or new_recipe or plan_done
            ):
                ask()
        ep.used = set(agent.used)
        return ep
    finally:
        game.close()


def walkthrough(path: Path) -> tuple[str, ...]:
    game = TWGame(path)
    try:
        return tuple(game.reset().get("extra.walkthrough") or ())
    finally:
        game.close()


# -- arms -------------------------------------------------------------------------------------


class NoMemory:
    name = "no_memory"

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        return NO_ADVICE

    def feedback(self, episode: Episode) -> None:
        return None


class RawReplay:
    """The most similar successful train episode, its actions pasted verbatim."""

    name = "raw_replay"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.index: list[tuple[str, tuple[str, ...], Any]] = []

    def add(self, ep: Episode) -> None:
        if ep.won and ep.steps:
            first = ep.steps[0]
            text = f"{INTENT} {State(first.observation, first.facts).describe()}"
            self.index.append((ep.episode_id, tuple(s.action for s in ep.steps),
                               self.embedder.embed_one(text)))

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        query = self.embedder.embed_one(f"{INTENT} {state.describe()}")
        cands = [c for c in self.index if c[0] not in exclude]
        if not cands:
            return Advice("NO_APPLICABLE_MEMORY", latency_ms=(time.perf_counter() - t0) * 1000)
        best = max(cands, key=lambda c: (float(c[2] @ query), c[0]))
        text = f"{RAW_HEADER}\n- To {INTENT}: {'; '.join(best[1])}."
        return Advice("GUIDED", plans=(Plan(best[0], best[1]),), text=text,
                      tokens=token_counter().count(text),
                      latency_ms=(time.perf_counter() - t0) * 1000, served=(best[0],))

    def feedback(self, episode: Episode) -> None:
        return None


class Compiled:
    """`Memory.recall`; plans and things to avoid are read from the rendered items."""

    name = "compiled"

    def __init__(self, mem: Memory, principal: Principal, cfg: TWConfig) -> None:
        self.mem, self.principal, self.cfg = mem, principal, cfg
        self.modes: Counter[str] = Counter()
        self.rejections: Counter[str] = Counter()

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        b = self.mem.recall(state, principal=self.principal, intent=INTENT, namespace=NAMESPACE,
                            k=self.cfg.k, budget_tokens=self.cfg.budget_tokens)
        latency = (time.perf_counter() - t0) * 1000
        plans: list[Plan] = []
        avoid: list[tuple[str, str]] = []
        text = b.render()
        for item in parse_context(text):  # what the agent reads: the rendered briefing
            if item.ref is None or item.labelled_rejected:
                continue
            plan, bad = parse_guidance(item.ref, item.text)
            if plan is not None and plan.id not in exclude:
                plans.append(plan)
            avoid += bad
        self.modes[b.mode.value] += 1
        self.rejections.update(r.reason.value for r in b.rejected)
        return Advice(b.mode.value, plans=tuple(plans), avoid=tuple(avoid), text=text,
                      tokens=token_counter().count(text), latency_ms=latency, ref=b.recall_id,
                      served=tuple(i.memory_id for i in b.items))

    def feedback(self, episode: Episode) -> None:
        for advice in episode.advices:
            if advice.ref is not None:
                self.mem.feedback(advice.ref, principal=self.principal, success=episode.won,
                                  used=[m for m in advice.served if m in episode.used],
                                  reward=episode.score / 100.0)


# -- memory building ----------------------------------------------------------------------------


def _no_advice(state: State, exclude: frozenset[str]) -> Advice:
    return NO_ADVICE


def build_memory(mem: Memory, principal: Principal, train: Sequence[Path], cfg: TWConfig,
                 raw: RawReplay, sink: list[dict[str, Any]]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    walks = {p: walkthrough(p) for p in train}

    def learn(ep: Episode) -> None:
        if not ep.steps:
            return
        traj = ep.trajectory()
        sink.append(traj.model_dump(mode="json"))
        counts["episodes"] += 1
        counts["won"] += ep.won
        for rec in mem.learn(traj, principal=principal):
            counts["proposed"] += 1
            counts[{LifecycleState.ACTIVE: "promoted", LifecycleState.PROPOSED: "held",
                    LifecycleState.REJECTED: "rejected"}.get(rec.state, "other")] += 1

    for i, p in enumerate(train):
        gold = run_episode(p, "train", "gold", _no_advice, cfg, fixed=walks[p])
        counts["gold_won"] += gold.won
        learn(gold)
        raw.add(gold)
        learn(run_episode(p, "train", "explore", _no_advice, cfg))
        if len(train) > 1:
            other = train[(i + 1) % len(train)]
            plan = Advice("GUIDED", plans=(Plan(f"gold:{other.stem}", walks[other]),))

            def fixed(state: State, exclude: frozenset[str], a: Advice = plan) -> Advice:
                return a

            learn(run_episode(p, "train", f"replay-{other.stem}", fixed, cfg))
    return dict(counts)


# -- metrics ------------------------------------------------------------------------------------


def summarise(episodes: Sequence[Episode], seed: int = 0) -> dict[str, dict[str, Any]]:
    base = {e.game: e for e in episodes if e.arm == BASELINE}
    out: dict[str, dict[str, Any]] = {}
    for arm in ARMS:
        eps = [e for e in episodes if e.arm == arm]
        if not eps:
            continue
        paired = [(e, base[e.game]) for e in eps if e.game in base]
        worse = sum(e.score < b.score or (e.lost and not b.lost) for e, b in paired)
        lat = sorted(a.latency_ms for e in eps for a in e.advices if a.latency_ms > 0)
        out[arm] = {
            "episodes": len(eps),
            "success": wilson(sum(e.won for e in eps), len(eps)).to_dict(),
            "mean_score": bootstrap_mean([e.score for e in eps], seed).to_dict(),
            "lift": bootstrap_mean([e.score - b.score for e, b in paired], seed).to_dict(),
            "negative_transfer": wilson(worse, len(paired)).to_dict(),
            "lost": wilson(sum(e.lost for e in eps), len(eps)).to_dict(),
            "steps_per_episode": statistics.fmean(len(e.steps) for e in eps),
            "tokens_per_episode": statistics.fmean(e.tokens for e in eps),
            "latency_p50_ms": lat[len(lat) // 2] if lat else float("nan"),
        }
    raw = {e.game: e for e in episodes if e.arm == "raw_replay"}
    if "compiled" in out and raw:
        pairs = [e.score - raw[e.game].score for e in episodes
                 if e.arm == "compiled" and e.game in raw]
        out["compiled"]["minus_raw_replay"] = bootstrap_mean(pairs, seed).to_dict()
    return out


# -- the run ------------------------------------------------------------------------------------


def make_config(quick: bool, train_games: int | None = None, test_games: int | None = None,
                seed: int = 0, *, step_cap: int | None = None,
                embedder: str = DEFAULT_EMBEDDER) -> TWConfig:
    """Quick: 4 train and 4 test games; full: 20 and 60. Any setting can be overridden."""
    return TWConfig(train_games=train_games or (4 if quick else 20),
                    test_games=test_games or (4 if quick else 60),
                    step_cap=step_cap or 60, seed=seed, embedder=embedder, quick=quick)


def run_textworld(
    quick: bool, out_dir: Path, console: Console | None = None, *,
    train_games: int | None = None, test_games: int | None = None, seed: int = 0,
    step_cap: int | None = None, embedder: str = DEFAULT_EMBEDDER,
    cache_dir: Path | None = None, llm: LLMClient | None = None,
) -> dict[str, Any]:
    """Generate games, build memory on train games, run the arms on unseen test games.

    With `llm`, an `twllm.LLMCookAgent` over that endpoint plays the test games (memory is
    still built by the non-LLM agent, so every test agent reads the same memory).

    Returns the JSON-ready result (also written to `out_dir/textworld.json`).
    """
    reason = unavailable_reason()
    if reason:
        raise TextWorldMissing(reason)
    cfg = make_config(quick, train_games, test_games, seed, step_cap=step_cap,
                      embedder=embedder)
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
    compiled = Compiled(mem, principal, cfg)
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
        built = build_memory(mem, principal, games["train"], cfg, raw, trajectories)
        t2 = time.perf_counter()
        console.log(f"memory from {len(games['train'])} train games: {built}")
        for path in games["test"]:
            for arm in arms:
                ep = run_episode(path, "test", arm.name, arm.consult, cfg,
                                 agent_factory=factory)
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
        "compiled_recall": {"modes": dict(compiled.modes),
                            "rejections": dict(compiled.rejections.most_common())},
        "episodes": [e.row() for e in episodes],
    }
    (out_dir / "textworld.json").write_text(json.dumps(result, indent=1, default=str))
    with (out_dir / "textworld-train-trajectories.jsonl").open("w") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    console.print(table(result))
    return result


def _est(d: dict[str, Any], pct: bool = False) -> str:
    return Estimate(float(d["value"]), float(d["low"]), float(d["high"]),
                    int(d["n"])).fmt(pct=pct, digits=0 if pct else 1)


def table(result: dict[str, Any]) -> Table:
    cfg, wall = result["config"], result["wall_seconds"]
    t = Table(
        title=f"TextWorld cooking, unseen test games: {cfg['train_games']} train, "
        f"{cfg['test_games']} test, cap {cfg['step_cap']} steps",
        caption=f"95% intervals (Wilson for rates, bootstrap for means). Wall {wall['total']:.0f}s "
        f"(games {wall['games']:.0f}s, memory {wall['build']:.0f}s, eval {wall['eval']:.0f}s).",
    )
    for col in ("arm", "success %", "mean score %", "lift vs none", "neg. transfer %",
                "lost %", "steps/ep", "tokens/ep"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for arm, s in result["arms"].items():
        base = arm == BASELINE
        t.add_row(arm, _est(s["success"], pct=True), _est(s["mean_score"]),
                  "-" if base else _est(s["lift"]),
                  "-" if base else _est(s["negative_transfer"], pct=True),
                  _est(s["lost"], pct=True), f"{s['steps_per_episode']:.1f}",
                  f"{s['tokens_per_episode']:.0f}")
    comp = result["arms"].get("compiled", {}).get("minus_raw_replay")
    if comp:
        t.caption = f"{t.caption} Compiled minus raw replay, paired: {_est(comp)}."
    return t
