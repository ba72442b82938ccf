"""One TextWorld game played by one agent (optional extra `textworld`): the game through
`textworld.start`, the states an episode records, and `run_episode`, shared by the cooking
benchmark (`textworld`) and the custom-games benchmark (`twcustom`).

A state is the game's own text: the notes the agent keeps (the objective, for benchmarks that
give it; the cookbook's text once read), the room's description and the inventory line. With
`states="parsed"` it also carries the facts `twparse` reads from that text (location, and the
recipe once read); with `states="text"` it carries none, so whatever structure memory finds in
it is its own reading. Each step records the score after it as `reward` (points / max points)
and the episode whether the game ended it (won or lost) rather than the step cap, which is
what the rules distiller reads failure from.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from situated.errors import InvalidInput, UsageError
from situated.eval.envs.swagent import Advice
from situated.eval.envs.twagent import CookAgent
from situated.eval.envs.twparse import clean, inventory, location, parse_recipe, state_facts
from situated.models import FactValue, State
from situated.write.distill import EpisodeOutcome, Step, Trajectory

TENANT = "textworld"
NAMESPACE = "tw.cooking"
INTENT = "cook the recipe from the cookbook and eat the meal"
OBS_CHARS = 2000
STATES: tuple[str, ...] = ("parsed", "text")
"""How a state reaches memory: `parsed`, the game's text with the facts `twparse` reads
(location, the recipe once read); `text`, the game's text alone."""


class TextWorldMissing(UsageError):
    """The `textworld` package (the `textworld` extra) is not installed."""


def unavailable_reason() -> str | None:
    if importlib.util.find_spec("textworld") is None:
        return "the textworld package is not installed (pip install 'situated[textworld]')"
    if tw_make() is None:
        return "tw-make (installed with textworld) is not on PATH or beside the interpreter"
    return None


def tw_make() -> str | None:
    beside = Path(sys.executable).parent / "tw-make"
    return str(beside) if beside.exists() else shutil.which("tw-make")


def check_states(states: str) -> str:
    if states not in STATES:
        raise InvalidInput("states", f"use one of {', '.join(STATES)}")
    return states


class Settings(Protocol):
    """What an episode needs of a benchmark's configuration."""

    @property
    def step_cap(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def max_consults(self) -> int: ...


# -- the game ---------------------------------------------------------------------------------


class TWGame:
    """One game through `textworld.start`, with admissible commands and the walkthrough."""

    def __init__(self, path: Path) -> None:
        import textworld

        infos = textworld.EnvInfos(admissible_commands=True, score=True, max_score=True,
                                   won=True, lost=True, description=True, inventory=True,
                                   objective=True, extras=["walkthrough"])
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


def observe(gs: Any, notes: Sequence[str] = ()) -> tuple[str, str | None, tuple[str, ...]]:
    """(observation text, room, inventory) of a game state: the game's own text (the room's
    description and the inventory), after `notes` (text the agent keeps: the objective, the
    cookbook once read)."""
    desc = clean(str(gs.description or ""))
    inv_text = clean(str(gs.inventory or ""))
    text = "\n\n".join([*(n for n in notes if n), desc, inv_text])
    return text[:OBS_CHARS], location(desc), inventory(inv_text)


@dataclass(frozen=True)
class Play:
    """What one benchmark's episodes are about and how they are recorded."""

    intent: str = INTENT
    namespace: str = NAMESPACE
    states: str = "parsed"
    objective: bool = False
    """The game's objective (its opening text) is part of every state's text."""
    agent: Callable[[str], TWAgent] | None = None
    """The agent for a seed (None: the cooking agent)."""

    def facts(self, room: str | None,
              recipe: tuple[tuple[str, tuple[str, ...]], ...] | None) -> dict[str, FactValue]:
        return state_facts(room, recipe) if self.states == "parsed" else {}


COOKING = Play()


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
    ended: bool = False
    """The game ended the episode (won or lost), not the step cap."""
    advices: list[Advice] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    agent_seed: int = 0
    intent: str = INTENT
    namespace: str = NAMESPACE

    @property
    def score(self) -> float:
        return 100.0 * self.points / max(1, self.max_points)

    @property
    def episode_id(self) -> str:
        return f"{self.game}:{self.arm}" + (f":s{self.agent_seed}" if self.agent_seed else "")

    @property
    def key(self) -> tuple[str, int]:
        """What arms are paired by: the game and the agent's seed."""
        return self.game, self.agent_seed

    @property
    def tokens(self) -> int:
        return sum(a.tokens for a in self.advices)

    def trajectory(self) -> Trajectory:
        return Trajectory(episode_id=self.episode_id, task=self.intent, namespace=self.namespace,
                          steps=self.steps,
                          outcome=EpisodeOutcome(success=self.won, reward=self.score / 100,
                                                 terminated=self.ended))

    def row(self) -> dict[str, Any]:
        return {"game": self.game, "split": self.split, "arm": self.arm,
                "agent_seed": self.agent_seed, "won": self.won,
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
    """What `run_episode` drives: `twagent.CookAgent`, `twexplore.ExploreAgent` or
    `twllm.LLMCookAgent`."""

    started: set[str]
    used: set[str]

    @property
    def in_plan(self) -> bool: ...

    def advise(self, advice: Advice) -> None: ...

    def see(self, observation: str) -> None: ...

    def next_action(self, room: str, admissible: list[str],
                    inventory: tuple[str, ...]) -> tuple[str, str | None]: ...

    def result(self, action: str, plan_id: str | None, room: str, feedback: str) -> None: ...


AgentFactory = Callable[[str], TWAgent]


def run_episode(path: Path, split: str, arm: str, consult: Consult, cfg: Settings,
                fixed: Sequence[str] | None = None,
                agent_factory: AgentFactory | None = None, play: Play = COOKING) -> Episode:
    """Play one game: the walkthrough when `fixed` is given, else the agent with advice.

    Each step records the game's text before it, the facts of `play.states`, the game's answer
    (with the score change) and the score after it as `reward` (points / max points); the
    episode's outcome says whether the game ended it (won or lost) or the step cap did."""
    game = TWGame(path)
    ep = Episode(path.stem, split, arm, agent_seed=cfg.seed, intent=play.intent,
                 namespace=play.namespace)
    try:
        gs = game.reset()
        ep.max_points = int(gs.max_score or 1)
        factory = agent_factory or play.agent or CookAgent
        agent: TWAgent = factory(f"{cfg.seed}|{path.stem}")
        objective = clean(str(gs.objective or "")) if play.objective else ""
        notes = [f"Objective: {objective}"] if objective else []
        obs, room, inv = observe(gs, notes)
        agent.see(obs)
        recipe = None

        def ask() -> None:
            advice = consult(State(obs, play.facts(room, recipe)), frozenset(agent.started))
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
            facts = play.facts(room, recipe)
            before = int(gs.score or 0)
            gs, done = game.step(action)
            feedback = str(gs.feedback or "")
            after = int(gs.score or 0)
            ep.steps.append(Step(observation=obs, facts=facts, action=action,
                                 result=annotate(feedback, before, after, bool(gs.lost)),
                                 reward=after / max(1, ep.max_points)))
            agent.result(action, pid, room or "", feedback)
            read = parse_recipe(feedback)
            new_recipe = read is not None and recipe is None
            if read is not None:
                recipe = read
                notes = [*notes[:1 if objective else 0], clean(feedback)]
            ep.points, ep.won, ep.lost = after, bool(gs.won), bool(gs.lost)
            if done or ep.won or ep.lost:
                ep.ended = True
                break
            before_room = room
            obs, room, inv = observe(gs, notes)
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


def generate(path: Path, args: Sequence[str]) -> Path:
    """`tw-make <args> --output path` unless `path` is already there (the cache)."""
    if path.exists():
        return path
    exe = tw_make()
    if exe is None:
        raise TextWorldMissing("tw-make not found")
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [exe, *args, "--output", str(path), "--silent", "-f"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not path.exists():
        raise UsageError(f"tw-make failed for {path.name}: {done.stderr[-300:]}")
    return path
