"""Trajectory distillation: finished episodes become lesson proposals that keep their states.

The trajectory format (JSON, validated by `Trajectory`):

    {"episode_id": "ep-17", "task": "boil water", "namespace": "kitchen",
     "steps": [{"observation": "You are in the kitchen. The stove is off.",
                "facts": {"room": "kitchen", "stove_on": false},
                "action": "turn on stove", "result": "The stove is now on."}, ...],
     "outcome": {"success": true, "reward": 1.0}}

Distillers turn a trajectory into `LessonDraft`s; `Memory.learn` sends each through the same
gates and promotion as `add`. The `rules` distiller needs no model; the `llm` distiller (see
`situated.write.distill_llm`) writes lessons in the same typed form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from situated.models import FactValue, State

MAX_STEPS = 500


class Step(BaseModel):
    """One step of an episode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    observation: str = Field(default="", max_length=8000)
    facts: dict[str, FactValue] = Field(default_factory=dict)
    action: str = Field(default="", max_length=2000)
    result: str = Field(default="", max_length=8000)

    @field_validator("facts", mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        State("", v)  # reuse State's validation of flat facts
        return v


class EpisodeOutcome(BaseModel):
    """How the episode ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    success: bool
    reward: float | None = None


class Trajectory(BaseModel):
    """A finished episode, as `learn` accepts it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str = Field(min_length=1, max_length=200)
    task: str = Field(min_length=1, max_length=2000)
    namespace: str = Field(default="default", min_length=1, max_length=200)
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    outcome: EpisodeOutcome

    @classmethod
    def from_json(cls, text: str | bytes) -> Trajectory:
        return cls.model_validate(json.loads(text))


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


class Distiller(Protocol):
    """Turns a trajectory into lesson drafts."""

    name: str
    version: str

    def distill(self, trajectory: Trajectory) -> list[LessonDraft]: ...


_FAIL_WORDS = re.compile(
    r"\b(fail(?:ed|s|ure)?|error|cannot|can't|unable|nothing happens|no effect|invalid|"
    r"not possible|denied|wrong)\b",
    re.I,
)


def derived_conditions(facts: Mapping[str, FactValue], action: str) -> tuple[str, ...]:
    """Preconditions from a step's facts: booleans and short categorical values the action
    does not name. A value the action names is a binding (adapted at recall), not a
    precondition; numbers are left out (their thresholds are unknown from one episode)."""
    out = []
    for key, value in sorted(facts.items()):
        if isinstance(value, bool):
            out.append(f"{key} == {'true' if value else 'false'}")
        elif (
            isinstance(value, str)
            and 0 < len(value) <= 40
            and value.lower() not in action.lower()
            and "'" not in value
        ):
            out.append(f"{key} == '{value}'")
    return tuple(out)


class RulesDistiller:
    """No model: a plan lesson from a success, a 'what went wrong' lesson from a failure,
    and a lesson per step whose action failed."""

    name = "rules"
    version = "1"

    def distill(self, trajectory: Trajectory) -> list[LessonDraft]:
        t = trajectory
        ev = (f"episode:{t.episode_id}",)
        first = t.steps[0]
        acted = [(i, s) for i, s in enumerate(t.steps) if s.action.strip()]
        drafts: list[LessonDraft] = []
        if t.outcome.success and acted:
            plan = "; ".join(s.action.strip() for _, s in acted[:12])
            drafts.append(
                LessonDraft(
                    content=f"To {t.task.strip().rstrip('.')}: {plan}.",
                    state=State(first.observation, first.facts),
                    action=plan,
                    success=True,
                    step=0,
                    conditions=derived_conditions(first.facts, plan),
                    evidence=ev,
                )
            )
        for i, s in acted:
            if _FAIL_WORDS.search(s.result):
                drafts.append(
                    LessonDraft(
                        content=(
                            f"What went wrong: '{s.action.strip()}' did not work here "
                            f"({_clip(s.result)}); try something else."
                        ),
                        state=State(s.observation, s.facts),
                        action=s.action.strip(),
                        success=False,
                        step=i,
                        conditions=derived_conditions(s.facts, s.action),
                        failure_lesson=True,
                        evidence=(*ev, f"step:{i}"),
                    )
                )
        if not t.outcome.success and acted:
            i, last = acted[-1]
            drafts.append(
                LessonDraft(
                    content=(
                        f"What went wrong: trying to {t.task.strip().rstrip('.')}, the episode "
                        f"failed after '{last.action.strip()}' ({_clip(last.result)})."
                    ),
                    state=State(last.observation, last.facts),
                    action=last.action.strip(),
                    success=False,
                    step=i,
                    conditions=derived_conditions(last.facts, last.action),
                    failure_lesson=True,
                    evidence=(*ev, f"step:{i}"),
                )
            )
        return _unique(drafts)


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
