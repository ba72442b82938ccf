"""ScienceWorld: does memory help across unseen variations? (optional extra `scienceworld`)

ScienceWorld (Wang et al., 2022; PyPI `scienceworld`, a Scala simulator driven over py4j on
a local Java runtime, no network) has 30 tasks, each with variations split into train, dev and
test. A wrong `focus on` ends an episode with score -100, so a lesson replayed in the wrong
state does measurable harm: the environment itself measures negative transfer.

The evaluation, for each task:

1. Build memory from **train** variations only, through `Memory.learn` and the normal gates:
   the gold path of each train variation (`generateGoldPath=True`), plus failed episodes so that
   failure lessons exist: the exploring agent on the same variation, and the agent replaying the
   next train variation's gold path verbatim (the way past experience misleads).
2. Run the same agent (`swagent.BriefedAgent`) on **test** variations under four arms:
   `no_memory`; `raw_replay` (the most similar successful train episode of the task, by cosine
   similarity of the query `intent + present state` to the episode's first state, its actions
   pasted verbatim); `utility_replay` (the same candidates ranked by 0.5 x similarity + 0.5 x
   utility, utility being the Beta(1,1) mean of the episode's success when replayed in earlier
   test episodes); `compiled` (`Memory.recall` with the task's namespace). Each arm is consulted
   at the start of an episode, whenever the agent changes room, and when a plan runs out (at
   most `max_consults` times). After each test episode, `utility_replay` and `compiled` receive
   its outcome (`Memory.feedback` with the memories the agent acted on); no memory content is
   ever written from test variations.

Trajectories (`situated.write.distill.Trajectory`): one step per action the simulator accepted.
`observation` is the simulator's own text before the action: the task description, the `look
around` text and the inventory. With `states="parsed"` (the default) `facts` are those of
`swparse.state_facts` (location, inventory, visible objects, and the task's target, rooms,
answer boxes and threshold parsed from the description) and `observed` those of
`swparse.observed_facts` (the states of the objects in view, which the present state at a
consultation carries too); with `states="text"` there are neither, so whatever structure
memory finds in the text is its own reading. `result` is the simulator's answer,
followed by the score change when there is one (`[score 50 -> -100: the task failed]` when the
score drops below zero, the environment's failure signal); `reward` is the score after the
step / 100 (the distiller's `decisive_step` is where it last changed; a fall is a failure).
The outcome is success when the score reaches 100; the reward is score / 100; `terminated`
says whether the simulator ended the episode (completed, or a score below zero) rather than
the step cap.

Speed: the simulator's `step()` wrapper rebuilds the full valid-action list on every call
(80-600 ms); this module calls the server's `step`, `getScore` and `getCompleted` directly and
reads `look` and `inventory` through the free actions (a few ms per step). An action the parser
does not accept returns "No known action matches that input." without spending a move; the
agent uses that as its validity check. An ambiguous action is resolved with the first choice.

Metrics per arm, overall and per task: success rate (score 100), mean final score, mean lift
in score over no memory (paired by variation), negative-transfer rate (episodes whose final
score is lower than no memory's on the same variation; a wrong-focus termination counts),
wrong-focus rate (final score below zero), steps, context tokens (the library's token counter
on the rendered context) and consultation latency. Rates carry Wilson 95% intervals, means a
percentile-bootstrap 95% interval.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from situated.embed import DEFAULT_EMBEDDER, Embedder
from situated.errors import InvalidInput, UsageError
from situated.eval.envs.stats import Estimate, bootstrap_mean, wilson
from situated.eval.envs.swagent import (
    NO_ADVICE,
    Advice,
    BriefedAgent,
    Plan,
    read_briefing,
)
from situated.eval.envs.swparse import (
    AMBIGUOUS,
    Room,
    is_invalid,
    observed_facts,
    parse_inventory,
    parse_look,
    short_task,
    state_facts,
    task_facts,
)
from situated.eval.envs.swtasks import resolve_tasks
from situated.memory import Memory
from situated.models import FactValue, LifecycleState, Principal, State
from situated.recall.compile import token_counter
from situated.safety import injection_findings
from situated.write.distill import EpisodeOutcome, Step, Trajectory

TASKS_FULL: tuple[str, ...] = (
    "find-animal",
    "lifespan-longest-lived",
    "power-component",
    "test-conductivity",
    "chemistry-mix-paint-secondary-color",
    "use-thermometer",
    "identify-life-stages-2",
)
"""Seven tasks of different kinds: finding and classifying, biology knowledge, building a
circuit, testing conductivity, mixing paint, measuring temperature, life stages."""
TASKS_QUICK: tuple[str, ...] = ("power-component", "lifespan-longest-lived")
ARMS: tuple[str, ...] = ("no_memory", "raw_replay", "utility_replay", "compiled")
BASELINE = "no_memory"
TENANT = "scienceworld"
RAW_HEADER = "Relevant past experience:"
OBS_CHARS = 3000
RESULT_CHARS = 600
STATES: tuple[str, ...] = ("parsed", "text")


class ScienceWorldMissing(UsageError):
    """The `scienceworld` package (the `scienceworld` extra) or a Java runtime is missing."""


def unavailable_reason() -> str | None:
    """Why the ScienceWorld evaluation cannot run here, or None when it can."""
    if importlib.util.find_spec("scienceworld") is None:
        return "the scienceworld package is not installed (pip install 'situated[scienceworld]')"
    if shutil.which("java") is None:
        return "no Java runtime on PATH (ScienceWorld runs on Java 8 or later)"
    return None


@dataclass(frozen=True)
class SWConfig:
    """One evaluation's settings."""

    tasks: tuple[str, ...]
    train_variations: int
    test_variations: int
    step_cap: int
    seed: int = 0
    embedder: str = DEFAULT_EMBEDDER
    k: int = 5
    budget_tokens: int = 600
    max_consults: int = 12
    feedback: bool = True
    quick: bool = False
    gold_factor: float = 1.5
    """Each task's step cap is at least this times its longest train gold path (0: off), so
    long tasks (gold paths of 60-180 actions) can be solved at all."""
    states: str = "parsed"
    """`parsed`: the simulator's text with `swparse`'s facts; `text`: the text alone."""

    def fitted(self, gold_lengths: Sequence[int]) -> SWConfig:
        """This configuration with the step cap raised to fit the task's gold paths."""
        if self.gold_factor <= 0 or not gold_lengths:
            return self
        need = math.ceil(self.gold_factor * max(gold_lengths))
        return replace(self, step_cap=max(self.step_cap, need))

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks), "train_variations": self.train_variations,
            "test_variations": self.test_variations, "step_cap": self.step_cap,
            "seed": self.seed, "embedder": self.embedder, "k": self.k,
            "budget_tokens": self.budget_tokens, "max_consults": self.max_consults,
            "feedback": self.feedback, "quick": self.quick, "arms": list(ARMS),
            "gold_factor": self.gold_factor, "states": self.states,
        }


# -- the simulator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StepOutcome:
    """The simulator's answer to one action."""

    text: str
    valid: bool
    score: int
    done: bool


class SWEnv:
    """ScienceWorld through its fast step path (see the module docstring)."""

    def __init__(self) -> None:
        from scienceworld import ScienceWorldEnv

        self._env = ScienceWorldEnv("", envStepLimit=100_000)
        self._server = self._env.server
        self._closed = False

    def load(self, task: str, variation: int, gold: bool = False) -> tuple[str, ...]:
        """Load a variation; returns its gold action sequence when `gold` is set."""
        self._env.load(task, variation, "", generateGoldPath=gold)
        return tuple(self._env.get_gold_action_sequence()) if gold else ()

    def variations(self, task: str, split: str) -> list[int]:
        self._env.load(task, 0, "")
        get: Callable[[], list[int]] = {
            "train": self._env.get_variations_train,
            "dev": self._env.get_variations_dev,
            "test": self._env.get_variations_test,
        }[split]
        return sorted(int(v) for v in get())

    def description(self) -> str:
        text = str(self._env.get_task_description())
        return text.replace("Task Description:", "").strip()

    def look(self) -> str:
        return str(self._server.freeActionLook())

    def inventory(self) -> str:
        return str(self._server.freeActionInventory())

    def score(self) -> int:
        return round(100 * float(self._server.getScore()))

    def step(self, action: str) -> StepOutcome:
        text = str(self._server.step(action))
        if text.startswith(AMBIGUOUS):
            text = str(self._server.step("0"))
        if is_invalid(text):
            return StepOutcome(text, False, self.score(), False)
        score = self.score()
        return StepOutcome(text, True, score, bool(self._server.getCompleted()) or score < 0)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()
            # ScienceWorldEnv.__del__ closes again and fails on the closed pipe
            self._env.close = _noop


def _noop() -> None:
    return None


# -- episodes --------------------------------------------------------------------------------


@dataclass
class Episode:
    """One episode of one arm (or of memory building) on one variation."""

    task: str
    variation: int
    split: str
    arm: str
    description: str
    steps: list[Step] = field(default_factory=list)
    score: int = 0
    attempts: int = 0
    advices: list[Advice] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    guided_steps: int = 0
    ended: bool = False
    """The simulator ended the episode (completed, or failed), not the step cap."""

    @property
    def success(self) -> bool:
        return self.score >= 100

    @property
    def wrong_focus(self) -> bool:
        return self.score < 0

    @property
    def episode_id(self) -> str:
        return f"{self.task}:{self.split}:{self.variation}:{self.arm}"

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.advices)

    def trajectory(self) -> Trajectory:
        return Trajectory(
            episode_id=self.episode_id, task=short_task(self.description),
            namespace=namespace(self.task), steps=self.steps,
            outcome=EpisodeOutcome(success=self.success, reward=self.score / 100.0,
                                   terminated=self.ended),
        )

    def row(self) -> dict[str, Any]:
        return {
            "task": self.task, "variation": self.variation, "split": self.split,
            "arm": self.arm, "score": self.score, "success": self.success,
            "wrong_focus": self.wrong_focus, "steps": len(self.steps),
            "attempts": self.attempts, "guided_steps": self.guided_steps,
            "consults": len(self.advices),
            "guided_consults": sum(a.mode == "GUIDED" for a in self.advices),
            "tokens": self.tokens, "used": sorted(self.used),
        }


def namespace(task: str) -> str:
    return f"sw.{task}"


def annotate(text: str, before: int, after: int) -> str:
    """The simulator's answer, clipped, with the score change appended when there is one."""
    text = " ".join(text.split())
    if len(text) > RESULT_CHARS:
        text = text[: RESULT_CHARS - 1] + "…"
    if after == before:
        return text
    note = f"score {before} -> {after}"
    if after < 0:
        note += ": the task failed"
    return f"{text} [{note}]"


Consult = Callable[[State, str, frozenset[str]], Advice]


@dataclass(frozen=True)
class Seen:
    """What the agent sees before an action: the simulator's text and what it is read into."""

    text: str
    room: Room
    inventory: tuple[str, ...]

    @classmethod
    def read(cls, env: SWEnv, description: str) -> Seen:
        look, inv_text = env.look(), env.inventory()
        text = f"{description}\n\n{look}\n\n{inv_text}"[:OBS_CHARS]
        return cls(text, parse_look(look), parse_inventory(inv_text))

    def facts(self, cfg: SWConfig, tfacts: dict[str, FactValue]) -> dict[str, FactValue]:
        return state_facts(self.room, self.inventory, tfacts) if cfg.states == "parsed" else {}

    def observed(self, cfg: SWConfig) -> dict[str, FactValue]:
        return observed_facts(self.room) if cfg.states == "parsed" else {}

    def step(self, cfg: SWConfig, tfacts: dict[str, FactValue], action: str, result: str,
             reward: float) -> Step:
        return Step(observation=self.text, facts=self.facts(cfg, tfacts),
                    observed=self.observed(cfg), action=action, result=result, reward=reward)


def run_episode(
    env: SWEnv,
    task: str,
    variation: int,
    split: str,
    arm: str,
    consult: Consult,
    cfg: SWConfig,
) -> Episode:
    """Run the agent on one variation, consulting `consult` for advice (see the module doc)."""
    env.load(task, variation)
    desc = env.description()
    tfacts = task_facts(desc)
    intent = short_task(desc)
    ep = Episode(task, variation, split, arm, desc)
    agent = BriefedAgent(desc, f"{cfg.seed}|{task}|{variation}")
    seen = Seen.read(env, desc)

    def ask() -> None:
        state = State(seen.text, {**seen.observed(cfg), **seen.facts(cfg, tfacts)})
        advice = consult(state, intent, frozenset(agent.started))
        ep.advices.append(advice)
        agent.advise(advice)

    ask()
    score = 0  # the server reports the previous episode's score until the first step
    while len(ep.steps) < cfg.step_cap and ep.attempts < 4 * cfg.step_cap:
        action, plan_id = agent.next_action(seen.room, seen.inventory)
        ep.attempts += 1
        out = env.step(action)
        agent.result(action, plan_id, out.valid, seen.room)
        if not out.valid:
            continue
        ep.steps.append(seen.step(cfg, tfacts, action, annotate(out.text, score, out.score),
                                  out.score / 100.0))
        ep.guided_steps += plan_id is not None
        score = out.score
        if out.done:
            ep.ended = True
            break
        before = seen.room.name
        seen = Seen.read(env, desc)
        moved = seen.room.name != before
        plan_done = plan_id is not None and not agent.in_plan
        if len(ep.advices) < cfg.max_consults and (moved or plan_done):
            ask()
    ep.score = score
    ep.used = set(agent.used)
    return ep


def gold_episode(env: SWEnv, task: str, variation: int,
                 cfg: SWConfig) -> tuple[Episode, tuple[str, ...]]:
    """Execute a train variation's gold path; returns the episode and the gold actions."""
    gold = env.load(task, variation, gold=True)
    desc = env.description()
    tfacts = task_facts(desc)
    ep = Episode(task, variation, "train", "gold", desc)
    score = 0
    for action in gold:
        seen = Seen.read(env, desc)
        out = env.step(action)
        ep.attempts += 1
        if not out.valid:
            continue
        ep.steps.append(seen.step(cfg, tfacts, action, annotate(out.text, score, out.score),
                                  out.score / 100.0))
        score = out.score
        if out.done:
            ep.ended = True
            break
    ep.score = score
    return ep, gold


# -- arms ------------------------------------------------------------------------------------


class Arm(Protocol):
    """What one memory system puts in the agent's context."""

    name: str

    def consult(self, task: str, state: State, intent: str, exclude: frozenset[str]) -> Advice:
        """Advice for the present state; `exclude` holds plans the agent already took."""

    def feedback(self, episode: Episode) -> None:
        """The outcome of a finished test episode."""


class NoMemory:
    """Nothing in context: the agent explores."""

    name = "no_memory"

    def consult(self, task: str, state: State, intent: str, exclude: frozenset[str]) -> Advice:
        return NO_ADVICE

    def feedback(self, episode: Episode) -> None:
        return None


@dataclass
class _Replayable:
    id: str
    actions: tuple[str, ...]
    vector: Any
    uses: int = 0
    successes: int = 0

    @property
    def utility(self) -> float:
        return (self.successes + 1) / (self.uses + 2)


class Replay:
    """Whole successful train episodes, pasted verbatim (see the module docstring)."""

    def __init__(self, name: str, embedder: Embedder, utility: bool) -> None:
        self.name = name
        self.embedder = embedder
        self.utility = utility
        self.index: dict[str, list[_Replayable]] = {}

    def add(self, episode: Episode) -> None:
        if not episode.success or not episode.steps:
            return
        first = episode.steps[0]
        first_state = State(first.observation, first.facts)
        text = f"{short_task(episode.description)} {first_state.describe()}"
        self.index.setdefault(episode.task, []).append(
            _Replayable(episode.episode_id, tuple(s.action for s in episode.steps),
                        self.embedder.embed_one(text))
        )

    def consult(self, task: str, state: State, intent: str, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        query = self.embedder.embed_one(f"{intent} {state.describe()}")
        cands = [e for e in self.index.get(task, []) if e.id not in exclude]
        if not cands:
            return Advice("NO_APPLICABLE_MEMORY",
                          latency_ms=(time.perf_counter() - t0) * 1000)

        def rank(e: _Replayable) -> tuple[float, str]:
            sim = float(e.vector @ query)
            return (-(0.5 * sim + 0.5 * e.utility) if self.utility else -sim, e.id)

        best = min(cands, key=rank)
        text = f"{RAW_HEADER}\n- To {intent}: {'; '.join(best.actions)}."
        return Advice(
            "GUIDED", plans=(Plan(best.id, best.actions),), text=text,
            tokens=token_counter().count(text), latency_ms=(time.perf_counter() - t0) * 1000,
            served=(best.id,),
        )

    def feedback(self, episode: Episode) -> None:
        if not self.utility:
            return
        served = {s for a in episode.advices for s in a.served}
        for e in self.index.get(episode.task, []):
            if e.id in served and e.id in episode.used:
                e.uses += 1
                e.successes += episode.success


class Compiled:
    """`Memory.recall`: guidance checked against the present state and adapted to it."""

    name = "compiled"

    def __init__(self, mem: Memory, principal: Principal, cfg: SWConfig) -> None:
        self.mem = mem
        self.principal = principal
        self.cfg = cfg
        self.rejections: Counter[str] = Counter()
        self.served_kinds: Counter[str] = Counter()
        self.modes: Counter[str] = Counter()

    def consult(self, task: str, state: State, intent: str, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        b = self.mem.recall(
            state, principal=self.principal, intent=intent, namespace=namespace(task),
            k=self.cfg.k, budget_tokens=self.cfg.budget_tokens,
        )
        advice, kinds = read_briefing(b, (time.perf_counter() - t0) * 1000, exclude)
        self.served_kinds.update(kinds)
        self.rejections.update(r.reason.value for r in b.rejected)
        self.modes[b.mode.value] += 1
        return advice

    def feedback(self, episode: Episode) -> None:
        if not self.cfg.feedback:
            return
        for advice in episode.advices:
            if advice.ref is None:
                continue
            used = [m for m in advice.served if m in episode.used]
            self.mem.feedback(
                advice.ref, principal=self.principal, success=episode.success, used=used,
                reward=episode.score / 100.0,
            )


# -- memory building -------------------------------------------------------------------------


@dataclass
class BuildStats:
    """What `learn` made of one task's train episodes."""

    task: str
    train_variations: list[int]
    episodes: int = 0
    gold_ok: int = 0
    successes: int = 0
    proposed: int = 0
    promoted: int = 0
    held: int = 0
    rejected: int = 0
    reinforced: int = 0
    plan_lessons: int = 0
    failure_lessons: int = 0
    held_plan: int = 0
    held_failure: int = 0
    held_reasons: Counter[str] = field(default_factory=Counter)
    held_examples: list[dict[str, Any]] = field(default_factory=list)
    gold_lengths: list[int] = field(default_factory=list)
    step_cap: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "train_variations": self.train_variations,
            "episodes": self.episodes, "gold_ok": self.gold_ok, "successes": self.successes,
            "proposed": self.proposed, "promoted": self.promoted, "held": self.held,
            "rejected": self.rejected, "reinforced": self.reinforced,
            "plan_lessons": self.plan_lessons, "failure_lessons": self.failure_lessons,
            "held_plan": self.held_plan, "held_failure": self.held_failure,
            "held_reasons": dict(self.held_reasons), "held_examples": self.held_examples[:10],
            "gold_lengths": self.gold_lengths, "step_cap": self.step_cap,
        }


def _learn(mem: Memory, principal: Principal, ep: Episode, stats: BuildStats,
           seen: set[str], sink: list[dict[str, Any]]) -> None:
    if not ep.steps:
        return
    traj = ep.trajectory()
    sink.append(traj.model_dump(mode="json"))
    stats.episodes += 1
    stats.successes += ep.success
    for rec in mem.learn(traj, principal=principal):
        stats.proposed += 1
        plan = rec.content.startswith("To ")
        if rec.id in seen:
            stats.reinforced += 1
            continue
        seen.add(rec.id)
        stats.plan_lessons += plan
        stats.failure_lessons += not plan
        if rec.state is LifecycleState.ACTIVE:
            stats.promoted += 1
        elif rec.state is LifecycleState.REJECTED:
            stats.rejected += 1
        elif rec.state is LifecycleState.PROPOSED:
            stats.held += 1
            stats.held_plan += plan
            stats.held_failure += not plan
            _held_reasons(mem, rec.id, rec.content, stats)


def _held_reasons(mem: Memory, memory_id: str, content: str, stats: BuildStats) -> None:
    reviewer = Principal(tenant=TENANT, roles={"reviewer"}, clearance="restricted",
                         name="eval-reviewer")
    reasons: list[str] = []
    for event in mem.history(memory_id, principal=reviewer):
        for gate in event.data.get("gates", []):
            if gate.get("verdict") == "hold":
                reasons += [f"{gate['gate']}: {r}" for r in gate.get("reasons", [])]
    stats.held_reasons.update(reasons)
    stats.held_examples.append({
        "id": memory_id, "content": content[:300], "reasons": reasons,
        "matched": [f"{f.reason}: {f.excerpt!r}" for f in injection_findings(content)],
    })


def build_memory(
    env: SWEnv, mem: Memory, principal: Principal, task: str, train: Sequence[int],
    cfg: SWConfig, replays: Sequence[Replay], sink: list[dict[str, Any]],
) -> BuildStats:
    """Gold paths and failed episodes on train variations, learned through the gates."""
    stats = BuildStats(task, list(train))
    seen: set[str] = set()
    golds: dict[int, tuple[str, ...]] = {}
    for v in train:
        ep, gold = gold_episode(env, task, v, cfg)
        golds[v] = gold
        stats.gold_ok += ep.success
        _learn(mem, principal, ep, stats, seen, sink)
        for r in replays:
            r.add(ep)
    stats.gold_lengths = [len(g) for g in golds.values()]
    cfg = cfg.fitted(stats.gold_lengths)
    stats.step_cap = cfg.step_cap
    for i, v in enumerate(train):
        explore = run_episode(env, task, v, "train", "explore", _no_advice, cfg)
        _learn(mem, principal, explore, stats, seen, sink)
        if len(train) > 1:
            other = train[(i + 1) % len(train)]
            plan = Plan(f"gold:{task}:{other}", golds[other])
            advice = Advice("GUIDED", plans=(plan,))

            def fixed(state: State, intent: str, exclude: frozenset[str],
                      a: Advice = advice) -> Advice:
                return a

            cross = run_episode(env, task, v, "train", f"replay-{other}", fixed, cfg)
            _learn(mem, principal, cross, stats, seen, sink)
    return stats


def _no_advice(state: State, intent: str, exclude: frozenset[str]) -> Advice:
    return NO_ADVICE


# -- metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmSummary:
    """One arm's numbers over a set of episodes."""

    episodes: int
    success: Estimate
    mean_score: Estimate
    lift: Estimate
    negative_transfer: Estimate
    wrong_focus: Estimate
    steps: float
    tokens: float
    consults: float
    guided_share: float
    latency_p50_ms: float
    latency_p95_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes, "success": self.success.to_dict(),
            "mean_score": self.mean_score.to_dict(), "lift": self.lift.to_dict(),
            "negative_transfer": self.negative_transfer.to_dict(),
            "wrong_focus": self.wrong_focus.to_dict(), "steps_per_episode": self.steps,
            "tokens_per_episode": self.tokens, "consults_per_episode": self.consults,
            "guided_share": self.guided_share, "latency_p50_ms": self.latency_p50_ms,
            "latency_p95_ms": self.latency_p95_ms,
        }


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def paired_difference(
    episodes: Sequence[Episode], arm: str, other: str, seed: int = 0
) -> Estimate:
    """Mean score of `arm` minus `other` on the same (task, variation), with its interval."""
    theirs = {(e.task, e.variation): e.score for e in episodes if e.arm == other}
    return bootstrap_mean([float(e.score - theirs[(e.task, e.variation)]) for e in episodes
                           if e.arm == arm and (e.task, e.variation) in theirs], seed)


def below_baseline(per_task: dict[str, dict[str, dict[str, Any]]], arm: str) -> list[str]:
    """Tasks where `arm`'s mean score is below no memory's."""
    return [t for t, arms in per_task.items() if arm in arms and BASELINE in arms
            and arms[arm]["mean_score"]["value"] < arms[BASELINE]["mean_score"]["value"]]


def summarise(episodes: Sequence[Episode], seed: int = 0) -> dict[str, ArmSummary]:
    """Per-arm numbers; lift and negative transfer are paired with no memory by variation."""
    base = {(e.task, e.variation): e.score for e in episodes if e.arm == BASELINE}
    out: dict[str, ArmSummary] = {}
    for arm in ARMS:
        eps = [e for e in episodes if e.arm == arm]
        if not eps:
            continue
        n = len(eps)
        paired = [e for e in eps if (e.task, e.variation) in base]
        worse = sum(e.score < base[(e.task, e.variation)] for e in paired)
        latencies = [a.latency_ms for e in eps for a in e.advices if a.latency_ms > 0]
        consults = [a for e in eps for a in e.advices]
        out[arm] = ArmSummary(
            episodes=n,
            success=wilson(sum(e.success for e in eps), n),
            mean_score=bootstrap_mean([float(e.score) for e in eps], seed),
            lift=bootstrap_mean(
                [float(e.score - base[(e.task, e.variation)]) for e in paired], seed
            ),
            negative_transfer=wilson(worse, len(paired)),
            wrong_focus=wilson(sum(e.wrong_focus for e in eps), n),
            steps=statistics.fmean(len(e.steps) for e in eps),
            tokens=statistics.fmean(e.tokens for e in eps),
            consults=statistics.fmean(len(e.advices) for e in eps),
            guided_share=(sum(a.mode == "GUIDED" for a in consults) / len(consults))
            if consults else 0.0,
            latency_p50_ms=_pct(latencies, 0.5),
            latency_p95_ms=_pct(latencies, 0.95),
        )
    return out


# -- the run ---------------------------------------------------------------------------------


def make_config(
    quick: bool,
    tasks: Sequence[str] | None = None,
    variations: int | None = None,
    seed: int = 0,
    *,
    train_variations: int | None = None,
    step_cap: int | None = None,
    embedder: str = DEFAULT_EMBEDDER,
    feedback: bool = True,
    states: str = "parsed",
) -> SWConfig:
    """The quick (2 tasks, 4 train and 5 test variations, 30 steps) or full (7 tasks, 15 and
    15, 50 steps) configuration, with any setting overridden; `tasks` may say `all` (the 30
    tasks of `swtasks.TASKS_ALL`), and an unknown task is an `InvalidInput` naming `tasks`."""
    chosen = resolve_tasks(tasks) or (TASKS_QUICK if quick else TASKS_FULL)
    if states not in STATES:
        raise InvalidInput("states", f"use one of {', '.join(STATES)}")
    return SWConfig(
        tasks=chosen,
        train_variations=train_variations or (4 if quick else 15),
        test_variations=variations or (5 if quick else 15),
        step_cap=step_cap or (30 if quick else 50),
        seed=seed, embedder=embedder, feedback=feedback, quick=quick, states=states,
    )


def run_scienceworld(
    quick: bool,
    out_dir: Path,
    console: Console | None = None,
    tasks: Sequence[str] | None = None,
    variations: int | None = None,
    seed: int = 0,
    *,
    train_variations: int | None = None,
    step_cap: int | None = None,
    embedder: str = DEFAULT_EMBEDDER,
    feedback: bool = True,
    states: str = "parsed",
) -> dict[str, Any]:
    """Build memory on train variations, evaluate the four arms on test variations.

    Args:
        quick: 2 tasks, 4 train and 5 test variations, 30 steps (about a minute).
        out_dir: where `scienceworld.json`, the plots, the train trajectories and the memory
            file go.
        console: rich console for progress and tables (None: silent).
        tasks: task names, or `all` for the 30 tasks (default: `TASKS_QUICK` or `TASKS_FULL`).
        variations: test variations per task (the first ones of the test split).
        seed: seeds the exploration policy (the same for every arm).
        train_variations: train variations per task used to build memory.
        step_cap: accepted actions per episode.
        embedder: the embedder for situated and for the replay arms' similarity.
        feedback: give test outcomes to `utility_replay` and `compiled`.
        states: `parsed` (the simulator's text with `swparse`'s facts) or `text` (the text
            alone: no parser's facts).

    Returns:
        The JSON-ready result (also written to `out_dir/scienceworld.json`).
    """
    cfg = make_config(quick, tasks, variations, seed, train_variations=train_variations,
                      step_cap=step_cap, embedder=embedder, feedback=feedback, states=states)
    reason = unavailable_reason()
    if reason:
        raise ScienceWorldMissing(reason)
    console = console or Console(quiet=True)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / "scienceworld-memory.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    t_start = time.perf_counter()
    principal = Principal(tenant=TENANT, name="sw-agent")
    mem = Memory(db, embedder=cfg.embedder, reconstructor="rules")
    env = SWEnv()
    build: list[BuildStats] = []
    trajectories: list[dict[str, Any]] = []
    episodes: list[Episode] = []
    splits: dict[str, dict[str, list[int]]] = {}
    raw = Replay("raw_replay", mem.embedder, utility=False)
    util = Replay("utility_replay", mem.embedder, utility=True)
    compiled = Compiled(mem, principal, cfg)
    arms: list[Arm] = [NoMemory(), raw, util, compiled]
    t_build = t_eval = 0.0
    try:
        for task in cfg.tasks:
            train = env.variations(task, "train")[: cfg.train_variations]
            test = env.variations(task, "test")[: cfg.test_variations]
            splits[task] = {"train": train, "test": test}
            t0 = time.perf_counter()
            stats = build_memory(env, mem, principal, task, train, cfg, (raw, util), trajectories)
            build.append(stats)
            t1 = time.perf_counter()
            t_build += t1 - t0
            console.log(f"{task}: memory from {len(train)} train variations "
                        f"({stats.episodes} episodes, {stats.promoted} lessons promoted, "
                        f"{stats.held} held) in {t1 - t0:.0f}s")
            task_cfg = replace(cfg, step_cap=stats.step_cap or cfg.step_cap)
            for v in test:
                for arm in arms:
                    def consult(state: State, intent: str, exclude: frozenset[str],
                                a: Arm = arm, t: str = task) -> Advice:
                        return a.consult(t, state, intent, exclude)

                    ep = run_episode(env, task, v, "test", arm.name, consult, task_cfg)
                    episodes.append(ep)
                    arm.feedback(ep)
            t_eval += time.perf_counter() - t1
            means = {a.name: statistics.fmean(e.score for e in episodes
                                              if e.task == task and e.arm == a.name)
                     for a in arms}
            console.log(f"{task}: {len(test)} test variations x {len(arms)} arms in "
                        f"{time.perf_counter() - t1:.0f}s; mean scores "
                        + ", ".join(f"{k}={v:.0f}" for k, v in means.items()))
    finally:
        env.close()
        mem.close()
    wall = time.perf_counter() - t_start
    result = _result(cfg, splits, build, episodes, compiled, trajectories,
                     {"build": t_build, "eval": t_eval, "total": wall})
    result["plots"] = {k: str(v) for k, v in write_plots(result, out_dir).items()}
    (out_dir / "scienceworld.json").write_text(json.dumps(result, indent=1, default=str))
    with (out_dir / "scienceworld-train-trajectories.jsonl").open("w") as fh:
        for t in trajectories:
            fh.write(json.dumps(t) + "\n")
    print_tables(result, console)
    if not result["plots"]:
        console.print("plots skipped: matplotlib is not installed (pip install 'situated[eval]')")
    return result


def _result(
    cfg: SWConfig, splits: dict[str, dict[str, list[int]]], build: list[BuildStats],
    episodes: list[Episode], compiled: Compiled, trajectories: list[dict[str, Any]],
    wall: dict[str, float],
) -> dict[str, Any]:
    overall = summarise(episodes, cfg.seed)
    per_task = {
        task: {arm: s.to_dict() for arm, s in
               summarise([e for e in episodes if e.task == task], cfg.seed).items()}
        for task in cfg.tasks
    }
    totals = Counter[str]()
    held_reasons = Counter[str]()
    for b in build:
        totals.update({k: v for k, v in b.to_dict().items() if isinstance(v, int)})
        held_reasons.update(b.held_reasons)
    return {
        "benchmark": "scienceworld",
        "config": cfg.to_dict(),
        "splits": splits,
        "wall_seconds": {k: round(v, 1) for k, v in wall.items()},
        "memory": {
            "per_task": [b.to_dict() for b in build],
            "totals": dict(totals),
            "held_reasons": dict(held_reasons),
            "train_episode_ids": [t["episode_id"] for t in trajectories],
        },
        "arms": {arm: s.to_dict() for arm, s in overall.items()},
        "compiled_minus_raw_replay": paired_difference(
            episodes, "compiled", "raw_replay", cfg.seed).to_dict(),
        "compiled_below_no_memory": below_baseline(per_task, "compiled"),
        "per_task": per_task,
        "compiled_recall": {
            "modes": dict(compiled.modes),
            "served": dict(compiled.served_kinds),
            "rejections": dict(compiled.rejections.most_common()),
        },
        "episodes": [e.row() for e in episodes],
    }


# -- tables ----------------------------------------------------------------------------------


def _fmt_ms(v: float) -> str:
    return "-" if v != v else f"{v:.0f}"


def print_tables(result: dict[str, Any], console: Console) -> None:
    for table in tables(result):
        console.print(table)


def tables(result: dict[str, Any]) -> list[Table]:
    """The headline table, the per-task table and the memory-building table."""
    cfg = result["config"]
    wall = result["wall_seconds"]
    n_test = sum(len(s["test"]) for s in result["splits"].values())
    head = Table(
        title=f"ScienceWorld, unseen test variations: {len(cfg['tasks'])} tasks, "
        f"{n_test} test variations, cap {cfg['step_cap']} steps (raised per task to "
        f"{cfg.get('gold_factor', 0)}x its longest train gold path), seed {cfg['seed']}, "
        f"states {cfg.get('states', 'parsed')}",
        caption=f"95% intervals in brackets (Wilson for rates, bootstrap for means). "
        f"Wall time {wall['total']:.0f}s (memory {wall['build']:.0f}s, eval {wall['eval']:.0f}s).",
    )
    for col in ("arm", "success %", "mean score", "lift vs none", "neg. transfer %",
                "wrong focus %", "steps/ep", "tokens/ep", "guided %", "consult ms p50/p95"):
        head.add_column(col, justify="left" if col == "arm" else "right")
    for arm, s in result["arms"].items():
        base = arm == BASELINE
        head.add_row(
            arm, _est(s["success"], pct=True), _est(s["mean_score"]),
            "-" if base else _est(s["lift"]),
            "-" if base else _est(s["negative_transfer"], pct=True),
            _est(s["wrong_focus"], pct=True), f"{s['steps_per_episode']:.1f}",
            f"{s['tokens_per_episode']:.0f}", f"{100 * s['guided_share']:.0f}",
            "-" if base else f"{_fmt_ms(s['latency_p50_ms'])} / {_fmt_ms(s['latency_p95_ms'])}",
        )
    diff = result.get("compiled_minus_raw_replay")
    below = result.get("compiled_below_no_memory")
    if diff is not None and below is not None:
        head.caption = (f"{head.caption} Compiled minus raw replay, paired: {_est(diff)}. "
                        f"Tasks where compiled is below no memory: {', '.join(below) or 'none'}.")
    per = Table(title="Per task: success % / mean score / negative transfer %")
    per.add_column("task")
    for arm in ARMS:
        per.add_column(arm, justify="right")
    for task, arms in result["per_task"].items():
        cells = []
        for arm in ARMS:
            s = arms.get(arm)
            if s is None:
                cells.append("-")
                continue
            nt = "-" if arm == BASELINE else f"{100 * s['negative_transfer']['value']:.0f}"
            cells.append(f"{100 * s['success']['value']:.0f} / "
                         f"{s['mean_score']['value']:.0f} / {nt}")
        per.add_row(task, *cells)
    mem = Table(title="Memory built from train variations (Memory.learn, normal gates)")
    for col in ("task", "train var.", "episodes", "gold ok", "lessons", "promoted", "held",
                "rejected", "reinforced"):
        mem.add_column(col, justify="left" if col == "task" else "right")
    for b in result["memory"]["per_task"]:
        mem.add_row(
            b["task"], str(len(b["train_variations"])), str(b["episodes"]),
            f"{b['gold_ok']}/{len(b['train_variations'])}",
            str(b["plan_lessons"] + b["failure_lessons"]), str(b["promoted"]), str(b["held"]),
            str(b["rejected"]), str(b["reinforced"]),
        )
    return [head, per, mem]


def _est(d: dict[str, float], pct: bool = False) -> str:
    return Estimate(float(d["value"]), float(d["low"]), float(d["high"]),
                    int(d["n"])).fmt(pct=pct, digits=0 if pct else 1)


def write_plots(result: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Mean score per task and arm (95% intervals), and negative transfer per arm (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    colors = plt.get_cmap("tab10")
    tasks = list(result["per_task"])
    groups = [*tasks, "all"]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.4 * len(groups)), 5))
    width = 0.8 / len(ARMS)
    for j, arm in enumerate(ARMS):
        xs, means, lo, hi = [], [], [], []
        for i, g in enumerate(groups):
            s = result["arms"].get(arm) if g == "all" else result["per_task"][g].get(arm)
            if s is None or not s["mean_score"]["n"]:
                continue
            m = s["mean_score"]
            xs.append(i + (j - (len(ARMS) - 1) / 2) * width)
            means.append(m["value"])
            lo.append(m["value"] - m["low"])
            hi.append(m["high"] - m["value"])
        ax.bar(xs, means, width, yerr=[lo, hi], capsize=2, label=arm, color=colors(j))
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g.replace("-", "-\n", 1) for g in groups], fontsize=8)
    ax.set_ylabel("final score (-100 = failed, 100 = done; 95% interval)")
    ax.set_title("ScienceWorld test variations: mean final score by task and arm")
    ax.legend(fontsize=8)
    fig.tight_layout()
    files = {"scores_by_task": out_dir / "scienceworld-scores.png"}
    fig.savefig(files["scores_by_task"], dpi=110, metadata={"Software": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    arms = [a for a in ARMS if a != BASELINE and a in result["arms"]]
    for j, arm in enumerate(arms):
        nt = result["arms"][arm]["negative_transfer"]
        wf = result["arms"][arm]["wrong_focus"]
        for k, (est, hatch) in enumerate(((nt, ""), (wf, "//"))):
            x = j + (k - 0.5) * 0.38
            ax.bar([x], [100 * est["value"]], 0.36, hatch=hatch, color=colors(j + 1),
                   yerr=[[100 * (est["value"] - est["low"])], [100 * (est["high"] - est["value"])]],
                   capsize=3, edgecolor="black", linewidth=0.5)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms)
    ax.set_ylabel("% of test episodes (95% interval)")
    ax.set_title("Negative transfer (plain) and wrong-focus terminations (hatched)")
    fig.tight_layout()
    files["negative_transfer"] = out_dir / "scienceworld-negative-transfer.png"
    fig.savefig(files["negative_transfer"], dpi=110, metadata={"Software": None})
    plt.close(fig)
    return files
