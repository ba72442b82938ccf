"""Trajectory distillation: finished episodes become lesson proposals that keep their states.

The trajectory format (JSON, validated by `Trajectory`):

    {"episode_id": "ep-17", "task": "boil water", "namespace": "kitchen",
     "steps": [{"observation": "You are in the kitchen. The stove is off.",
                "facts": {"room": "kitchen", "stove_on": false},
                "action": "turn on stove", "result": "The stove is now on.",
                "reward": 0.5}, ...],
     "outcome": {"success": true, "reward": 1.0}}

Required: `episode_id`, `task`, `steps` (1 to 500) and `outcome.success`; `namespace`
defaults to "default", and each step's `observation`, `facts` (flat: string, number, boolean or
null values), `observed` (flat facts about the surroundings, such as the state of each object
in view: kept by a lesson only where its outcome turned on them), `action`, `result` and
`reward` (the episode's reward or score after the step, when the environment reports one) may
be left out, and so may `outcome.reward` and `outcome.terminated` (whether the environment
ended the episode itself, as Gymnasium's `terminated`, rather than it running out of steps).
The README and `situated learn --help` show the same format.

What failed is read from the environment's numbers, never from words in its text when those
numbers exist (`failed_steps`): a step whose reward fell, and the last step of a failed episode
the environment ended (`terminated`). Only a trajectory without any reward falls back to words,
and then only in the first sentence of a step's result (the game's answer to the action, not
the description of a room that follows it).

Distillers turn a trajectory into `LessonDraft`s; `Memory.learn` sends each through the same
gates and promotion as `add`. The `rules` distiller (`RulesDistiller`, the only one shipped)
needs no model; the `llm` distiller (`situated.write.llm_distill`) asks a chat model for the
same drafts. Any object with `name`, `version` and `distill(trajectory)` (the `Distiller`
protocol) can be passed to `Memory.learn(distiller=...)`, or registered by name
(`situated.write.distillers`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from situated.models import MAX_CONTENT_CHARS, FactValue, State, check_unicode

MAX_STEPS = 500


class Step(BaseModel):
    """One step of an episode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    observation: str = Field(default="", max_length=8000)
    facts: dict[str, FactValue] = Field(default_factory=dict)
    observed: dict[str, FactValue] = Field(default_factory=dict)
    """What the agent saw of its surroundings (an object's state: `{"state_lamp": "on"}`):
    unlike `facts`, not a precondition of every lesson; a lesson keeps the ones its outcome
    turned on (`deciding_facts`)."""
    action: str = Field(default="", max_length=2000)
    result: str = Field(default="", max_length=8000)
    reward: float | None = Field(default=None, allow_inf_nan=False)
    """The episode's reward (or score) after this step, when the environment reports one: the
    step where it last changed is the one a success turned on (`decisive_step`)."""

    @field_validator("facts", "observed", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        State("", v)  # reuse State's validation of flat facts
        return v

    @field_validator("observation", "action", "result")
    @classmethod
    def _unicode(cls, v: str) -> str:
        return check_unicode(v, "text")


class EpisodeOutcome(BaseModel):
    """How the episode ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    success: bool
    reward: float | None = Field(default=None, allow_inf_nan=False)
    terminated: bool | None = None
    """The environment ended the episode itself (a goal reached, a game lost; Gymnasium's
    `terminated`), rather than the agent running out of steps; None when unknown. A failed
    episode the environment ended blames its last action."""


class Trajectory(BaseModel):
    """A finished episode, as `learn` accepts it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=2000)
    namespace: str = Field(default="default", min_length=1, max_length=200)
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    outcome: EpisodeOutcome

    @field_validator("episode_id", "task", "namespace")
    @classmethod
    def _unicode(cls, v: str) -> str:
        return check_unicode(v, "text")

    @classmethod
    def from_json(cls, text: str | bytes) -> Trajectory:
        """Parse and validate; text that is not JSON is a `ValidationError` like any other
        (`Memory.learn` turns either into an `InvalidInput` naming `trajectory`)."""
        return cls.model_validate_json(text)


@dataclass(frozen=True)
class LessonDraft:
    """A lesson a distiller proposes; `Memory.learn` turns it into an `add`."""

    content: str
    state: State
    action: str | None
    success: bool
    step: int | None
    conditions: tuple[str, ...] = ()
    failure_lesson: bool = False
    evidence: tuple[str, ...] = field(default_factory=tuple)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    """Who wrote the draft (a model's prompt template, model name, prompt hash), recorded with
    the proposal."""
    model_written: bool = False
    """Written by a model: its authority is never above `inferred`."""


class Distiller(Protocol):
    """Turns a trajectory into lesson drafts."""

    name: str
    version: str

    def distill(self, trajectory: Trajectory) -> list[LessonDraft]: ...


FAIL_WORDS = re.compile(
    r"\b(fail(?:ed|s|ure)?|error|cannot|can't|unable|nothing happens|no effect|invalid|"
    r"not possible|denied|wrong)\b",
    re.I,
)
"""Words that say an action failed; read only in the answer to an action of a trajectory
without rewards (`says_failed`)."""
_FIRST_SENTENCE = re.compile(r"\s*(.*?(?:[.!?](?=\s|$)|\n\s*\n|$))", re.S)


def _answer(result: str) -> str:
    """The first sentence of a step's result: the environment's answer to the action, before
    any description of the place that follows it."""
    m = _FIRST_SENTENCE.match(result)
    return m.group(1) if m else ""


def says_failed(result: str) -> bool:
    """Whether the answer to an action reads as a failure (the fallback for trajectories that
    carry no reward: only the first sentence of the result is read)."""
    return bool(FAIL_WORDS.search(_answer(result)))


def failed_steps(trajectory: Trajectory) -> list[int]:
    """Indices of the acted steps that failed, from the environment's numbers when it reports
    any: a step after which the reward is lower than before it (0 before the first step), and
    the last acted step of a failed episode the environment ended (`outcome.terminated`).
    Running out of steps blames nothing. Without any reward in the trajectory, a step failed
    when the first sentence of its result says so (`says_failed`), and a failed episode whose
    end is unknown blames its last step only when that step reads as failed; flavour text
    later in a result ("you can't miss the door") is never read."""
    steps = trajectory.steps
    acted = [i for i, s in enumerate(steps) if s.action.strip()]
    out: set[int] = set()
    rewarded = any(s.reward is not None for s in steps)
    if rewarded:
        prev = 0.0
        for i, s in enumerate(steps):
            if s.reward is None:
                continue
            if s.reward < prev and s.action.strip():
                out.add(i)
            prev = s.reward
    else:
        out.update(i for i in acted if says_failed(steps[i].result))
    if not trajectory.outcome.success and acted and trajectory.outcome.terminated:
        out.add(acted[-1])
    return sorted(out)


PLACE_KEYS = ("location", "room", "place", "page", "screen")
"""Facts that say where the agent is: a plan is split where they change, and they are always
preconditions of a plan piece (a route learned from the hallway is not a route from the
kitchen), never bindings to adapt."""
MAX_PLAN_ACTIONS = 200
"""Acted steps a success's plan lessons cover (long tasks have gold paths of 60-180 actions;
each piece is still one place's steps)."""


def fit_pieces(
    pieces: list[list[tuple[int, Step]]], budget: int
) -> list[list[tuple[int, Step]]]:
    """The pieces, each cut into consecutive runs whose actions joined by "; " fit in `budget`
    characters (a lesson's content has a size limit; a long task's piece in one room can
    exceed it). A single action longer than the budget stays alone."""
    out: list[list[tuple[int, Step]]] = []
    for piece in pieces:
        run: list[tuple[int, Step]] = []
        size = 0
        for i, step in piece:
            n = len(step.action.strip()) + 2
            if run and size + n > budget:
                out.append(run)
                run, size = [], 0
            run.append((i, step))
            size += n
        if run:
            out.append(run)
    return out


def derived_conditions(
    facts: Mapping[str, FactValue], action: str, always: Sequence[str] = ()
) -> tuple[str, ...]:
    """Preconditions from a step's facts: booleans, facts in `always`, and short categorical
    values the action does not name. A value the action names is a binding (adapted at
    recall), not a precondition; numbers are left out (one episode shows no threshold)."""
    out = []
    for key, value in sorted(facts.items()):
        if isinstance(value, bool):
            out.append(f"{key} == {'true' if value else 'false'}")
        elif (
            isinstance(value, str)
            and 0 < len(value) <= 40
            and (key in always or value.lower() not in action.lower())
            and "'" not in value
        ):
            out.append(f"{key} == '{value}'")
    return tuple(out)


def _place(step: Step) -> FactValue:
    return next((step.facts[k] for k in PLACE_KEYS if k in step.facts), None)


def plan_segments(steps: Sequence[tuple[int, Step]]) -> list[list[tuple[int, Step]]]:
    """Acted steps split where the agent's place changes (the step that moves stays with the
    piece it leaves), so each piece keeps the state it starts from."""
    pieces: list[list[tuple[int, Step]]] = []
    current: list[tuple[int, Step]] = []
    for i, step in steps:
        here = _place(step)  # a step that does not say where it is stays in the current piece
        if current and here is not None and here != _place(current[0][1]):
            pieces.append(current)
            current = []
        current.append((i, step))
    if current:
        pieces.append(current)
    return pieces


def observed_along(piece: Sequence[tuple[int, Step]]) -> dict[str, FactValue]:
    """The piece's first state facts, plus every fact first observed during the piece (a
    recipe read, a reading taken): the later actions acted on them, so the lesson keeps them
    with its state and its conditions. A fact the first state already has keeps that value."""
    facts = dict(piece[0][1].facts)
    for _, step in piece[1:]:
        for key, value in step.facts.items():
            facts.setdefault(key, value)
    return facts


def decisive_step(steps: Sequence[Step]) -> int | None:
    """The index of the acted step a finished episode's outcome turned on: the last acted step
    whose `reward` differs from the reward before it (0 before the first step), when steps
    carry rewards; else the last acted step. None when no step acted."""
    acted = [i for i, s in enumerate(steps) if s.action.strip()]
    if not acted:
        return None
    if any(s.reward is not None for s in steps):
        last, prev = None, 0.0
        for i, s in enumerate(steps):
            if s.reward is None:
                continue
            if s.reward != prev and s.action.strip():
                last = i
            prev = s.reward
        if last is not None:
            return last
    return acted[-1]


def split_at_decision(
    pieces: list[list[tuple[int, Step]]], decisive: int | None
) -> list[list[tuple[int, Step]]]:
    """The pieces with the one holding the decisive step cut just before it, so the decisive
    action starts a lesson of its own whose state is the observation it was taken on: what
    the outcome depended on (the light that came on, the reading taken, the door found open)
    becomes that lesson's facts and conditions, checked against the present when the agent
    gets there, instead of being hidden in the middle of a plan learned from an earlier state."""
    out: list[list[tuple[int, Step]]] = []
    for piece in pieces:
        cut = next((k for k, (i, _) in enumerate(piece) if i == decisive), 0)
        if cut > 0:
            out += [piece[:cut], piece[cut:]]
        else:
            out.append(piece)
    return out


def _names_subject(text: str, key: str) -> bool:
    """Whether `text` names what the fact `key` is about: its words as a phrase, or its words
    after the first ("state_red_light_bulb" -> "red light bulb")."""
    words = [w for w in re.split(r"[\W_]+", key.lower()) if w]
    for phrase in (" ".join(words), " ".join(words[1:])):
        if re.search(r"[a-z]", phrase) and re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text):
            return True
    return False


def deciding_facts(piece: Sequence[tuple[int, Step]], decisive: int) -> dict[str, FactValue]:
    """What the decisive step's outcome may have turned on, among the things observed in view
    (`Step.observed`) just before it: those that changed or first appeared since the piece
    started (a light that came on), and those of things the piece's actions name (the bulb
    the circuit was built with, lit or not). Incidental surroundings are left out."""
    at = next((s for i, s in piece if i == decisive), None)
    if at is None:
        return {}
    start = piece[0][1].observed
    named = " ".join(s.action.strip() for _, s in piece).lower()
    return {k: v for k, v in at.observed.items()
            if k not in start or start[k] != v or _names_subject(named, k)}


def shows_more(
    piece: Sequence[tuple[int, Step]], decisive: int | None, deciding: Mapping[str, FactValue]
) -> bool:
    """Whether the observation the decisive step was taken on shows something the piece's start
    did not: a deciding observation that changed or appeared, or a fact that would be a
    condition of the decisive lesson with another value than at the start. Only then is the
    decisive step cut off (`split_at_decision`): a lesson whose state cannot be told from the
    start of its piece would be served there, before the steps that lead to it."""
    at = next((s for i, s in piece if i == decisive), None)
    if at is None or at is piece[0][1]:
        return False
    start = {**piece[0][1].observed, **piece[0][1].facts}
    tail = [s for i, s in piece if decisive is not None and i >= decisive]
    facts = {**observed_along([(0, s) for s in tail]), **deciding}
    plan = "; ".join(s.action.strip() for s in tail)
    keys = {c.split(" ", 1)[0] for c in derived_conditions(facts, plan, list(deciding))}
    return any(k not in start or start[k] != facts[k] for k in keys)


class RulesDistiller:
    """No model. From a success: the plan, one lesson per place it passes through (each with the
    state it starts from, and the facts first observed along the way: `observed_along`), the
    step the outcome turned on starting a lesson of its own (`decisive_step`,
    `split_at_decision`) that also keeps, as facts and conditions, what was observed in view
    that the outcome turned on (`deciding_facts`). From any episode: a 'what went wrong' lesson
    per failed step (`failed_steps`: the reward fell, or the environment ended a failed
    episode there; words only without any reward), and for a failed episode one about its last
    action when that step failed (running out of steps blames nothing)."""

    name = "rules"
    version = "5"

    def distill(self, trajectory: Trajectory) -> list[LessonDraft]:
        t = trajectory
        ev = (f"episode:{t.episode_id}",)
        task = t.task.strip().rstrip(".")
        acted = [(i, s) for i, s in enumerate(t.steps) if s.action.strip()]
        drafts: list[LessonDraft] = []
        if t.outcome.success and acted:
            whole = plan_segments(acted[:MAX_PLAN_ACTIONS])
            decisive = decisive_step(t.steps)
            home = next((p for p in whole if any(i == decisive for i, _ in p)), None)
            deciding = deciding_facts(home, decisive) if home and decisive is not None else {}
            if home is None or not shows_more(home, decisive, deciding):
                decisive = None  # nothing new to see there: the piece keeps it, with its facts
            pieces = fit_pieces(split_at_decision(whole, decisive),
                                MAX_CONTENT_CHARS - len(task) - 120)
            for n, piece in enumerate(pieces, start=1):
                i0, first = piece[0]
                plan = "; ".join(s.action.strip() for _, s in piece)
                where = _place(first)
                part = (f" (part {n} of {len(pieces)}{f', from {where}' if where else ''})"
                        if len(pieces) > 1 else "")
                always = [k for k in PLACE_KEYS if k in first.facts]
                facts = observed_along(piece)
                if i0 == decisive or (home is not None and piece[-1] == home[-1]):
                    # what the outcome turned on is part of the lesson's state, and required
                    facts.update(deciding)
                    always += list(deciding)
                drafts.append(
                    LessonDraft(
                        content=f"To {task}{part}: {plan}.",
                        state=State(first.observation, facts),
                        action=plan,
                        success=True,
                        step=i0,
                        conditions=derived_conditions(facts, plan, always),
                        evidence=ev,
                    )
                )
        failed = failed_steps(t)
        for i in failed:
            s = t.steps[i]
            drafts.append(self._failure(
                f"What went wrong: '{s.action.strip()}' did not work here "
                f"({_clip(s.result)}); try something else.", i, s, ev))
        if not t.outcome.success and acted and acted[-1][0] in failed:
            i, last = acted[-1]
            drafts.append(self._failure(
                f"What went wrong: trying to {task}, the episode failed after "
                f"'{last.action.strip()}' ({_clip(last.result)}).", i, last, ev))
        return _unique(drafts)

    @staticmethod
    def _failure(content: str, i: int, s: Step, ev: tuple[str, ...]) -> LessonDraft:
        always = [k for k in PLACE_KEYS if k in s.facts]
        return LessonDraft(
            content=content,
            state=State(s.observation, s.facts),
            action=s.action.strip(),
            success=False,
            step=i,
            conditions=derived_conditions(s.facts, s.action, always),
            failure_lesson=True,
            evidence=(*ev, f"step:{i}"),
        )


def _clip(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _unique(drafts: Sequence[LessonDraft]) -> list[LessonDraft]:
    seen: set[str] = set()
    out = []
    for d in drafts:
        if d.content not in seen:
            seen.add(d.content)
            out.append(d)
    return out
