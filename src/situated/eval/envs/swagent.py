"""The non-LLM ScienceWorld agent: it acts on the advice it is given, else explores.

The same agent runs every arm, so the memory is the only difference between arms.

Acting on advice. An arm's advice holds plans (ordered action lists) and actions to avoid.
Compiled recall's guidance items are parsed from their (adapted) text: a plan lesson reads
"To <task>: a1; a2; ...", a failure lesson "What went wrong: '<action>' did not work here ..."
or "... the episode failed after '<action>' ...". The agent executes the steps of the first
plan it has not used yet, in order; a step the simulator's parser does not accept in the
present state (the fast validity check: "No known action matches that input.", which costs
no move) is skipped, and so is a step the latest advice says to avoid, and a `focus on` an
object the agent has already focused on (in ScienceWorld a focus is a commitment; a repeated
one can fail the task). A plan is never taken twice in one episode.

Exploration (when the advice is NO_APPLICABLE_MEMORY, or every plan is used up), seeded per
(seed, task, variation) so every arm draws the same random numbers:

1. If the task description says "First, focus on the X." / "Next, focus on the X." and X is
   visible (an object in the room, on or in one, or in the inventory), focus on it, once: a
   focus already made on X (also as "X in inventory", by advice or otherwise) counts.
2. Else, if a door leads to a room not visited yet: go through an open one, else open a
   closed one (drawn at random among the unvisited rooms).
3. Else one of: look around, go through an open door, open a closed door, open a closed
   container, drawn at random.

Actions the simulator rejected in a room are not drawn again there. Actions the latest advice
says to avoid are not drawn while another move (a door or container to go through or open)
remains; when every move is advised against, the advice is overruled rather than leaving the
agent stuck in the room. In a plan, an advised-against step is always skipped.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from situated.eval.envs.swparse import Room, focus_steps, normalise_action
from situated.eval.reader import parse_context
from situated.recall.compile import token_counter

if TYPE_CHECKING:
    from situated.recall.briefing import Briefing

_PLAN = re.compile(r"\bTo (?P<task>[^:]{1,300}): (?P<steps>.+)$", re.S)
_WENT_WRONG = re.compile(r"What went wrong: '(.+?)' did not work here")
_FAILED_AFTER = re.compile(r"the episode failed after '(.+?)'")
_GENERIC_FOCUS = frozenset({"thing", "substance", "object"})


@dataclass(frozen=True)
class Plan:
    """An ordered list of actions, from one memory (or one replayed episode)."""

    id: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Advice:
    """What an arm put in the agent's context for one consultation."""

    mode: str
    plans: tuple[Plan, ...] = ()
    avoid: tuple[tuple[str, str], ...] = ()
    """(action, memory id) pairs the agent should not take in this state."""
    text: str = ""
    tokens: int = 0
    latency_ms: float = 0.0
    ref: str | None = None
    """The recall id, for feedback."""
    served: tuple[str, ...] = field(default_factory=tuple)


NO_ADVICE = Advice(mode="NO_APPLICABLE_MEMORY")


def parse_guidance(memory_id: str, text: str) -> tuple[Plan | None, list[tuple[str, str]]]:
    """A plan and/or actions to avoid from one guidance item's text."""
    avoid = [(normalise_action(a), memory_id) for a in _WENT_WRONG.findall(text)]
    avoid += [(normalise_action(a), memory_id) for a in _FAILED_AFTER.findall(text)]
    if avoid:
        return None, avoid
    m = _PLAN.search(text)
    if not m:
        return None, []
    steps = tuple(
        s.strip().rstrip(".").strip() for s in m.group("steps").split(";") if s.strip(" .")
    )
    return (Plan(memory_id, steps) if steps else None), []


def read_briefing(
    b: Briefing, latency_ms: float, exclude: frozenset[str]
) -> tuple[Advice, list[str]]:
    """What the agent reads of a briefing: the plans (those not in `exclude`) and the actions
    to avoid in its rendered text, items the rendering labels as rejected left out, as
    `Advice`; and the kind of each item read (`plan`, `failure` or `other`)."""
    plans: list[Plan] = []
    avoid: list[tuple[str, str]] = []
    kinds: list[str] = []
    text = b.render()
    for item in parse_context(text):  # what the agent reads: the rendered briefing
        if item.ref is None or item.labelled_rejected:
            continue
        plan, bad = parse_guidance(item.ref, item.text)
        if plan is not None and plan.id not in exclude:
            plans.append(plan)
        avoid += bad
        kinds.append("plan" if plan else "failure" if bad else "other")
    advice = Advice(b.mode.value, plans=tuple(plans), avoid=tuple(avoid), text=text,
                    tokens=token_counter().count(text), latency_ms=latency_ms,
                    ref=b.recall_id, served=tuple(i.memory_id for i in b.items))
    return advice, kinds


def _focus_key(action: str) -> str | None:
    """'focus on thermometer in inventory' -> 'thermometer'; None for other actions."""
    if not action.startswith("focus on "):
        return None
    return action.removeprefix("focus on ").removesuffix(" in inventory").strip()


class BriefedAgent:
    """Executes advised steps that are valid now, in order; explores otherwise."""

    def __init__(self, description: str, seed: str) -> None:
        self.rng = random.Random(seed)
        self.focus_targets = [
            t for t in focus_steps(description) if t.lower() not in _GENERIC_FOCUS
        ]
        self.queue: deque[tuple[str, str]] = deque()
        self.pending: list[Plan] = []
        self.avoid: dict[str, str] = {}
        self.started: set[str] = set()
        self.used: set[str] = set()
        """Ids of memories the agent acted on: a plan step it executed, or an avoidance."""
        self.visited: set[str] = set()
        self.focused: set[str] = set()
        self.rejected: set[tuple[str, str]] = set()
        self.last_action = ""

    # -- advice -----------------------------------------------------------------------------

    def advise(self, advice: Advice) -> None:
        """Take the latest advice: its avoid list replaces the previous one; its unused plans
        wait behind the plan in progress."""
        self.avoid = dict(advice.avoid)
        self.pending = [p for p in advice.plans if p.id not in self.started]

    @property
    def in_plan(self) -> bool:
        return bool(self.queue)

    # -- acting -----------------------------------------------------------------------------

    def next_action(self, room: Room, inventory: tuple[str, ...]) -> tuple[str, str | None]:
        """The next action and the plan it comes from (None when exploring)."""
        self.visited.add(room.name)
        while True:
            while self.queue:
                action, pid = self.queue.popleft()
                key = normalise_action(action)
                if key in self.avoid:
                    self.used.add(self.avoid[key])
                    continue
                if (room.name, key) in self.rejected:
                    continue
                if _focus_key(key) in self.focused:
                    continue  # a focus is a commitment: never made twice
                return action, pid
            if not self.pending:
                return self.explore(room, inventory), None
            plan = self.pending.pop(0)
            self.started.add(plan.id)
            self.queue.extend((s, plan.id) for s in plan.steps)

    def result(self, action: str, plan_id: str | None, valid: bool, room: Room) -> None:
        """What happened to the action: rejected by the parser, or taken."""
        key = normalise_action(action)
        if not valid:
            self.rejected.add((room.name, key))
            return
        self.last_action = key
        if plan_id is not None:
            self.used.add(plan_id)
        focus = _focus_key(key)
        if focus is not None:
            self.focused.add(focus)

    def explore(self, room: Room, inventory: tuple[str, ...]) -> str:
        """The documented, seeded exploration policy (see the module docstring)."""
        names = {n.lower() for n in room.names() | set(inventory)}
        for target in self.focus_targets:
            t = target.lower()
            if any(f == t or f.startswith(t + " ") or f.endswith(" " + t) for f in self.focused):
                continue  # already focused, perhaps as "focus on <t> in inventory"
            if any(n == t or n.endswith(" " + t) for n in names):
                action = f"focus on {target}"
                if self._allowed(room, action):
                    return action
            break  # focus steps are sequential: never skip ahead to the next one
        unvisited = sorted(r for r in room.doors if r not in self.visited)
        for wanted in (True, False):  # through an open door first, else open a closed one
            verb = "go to" if wanted else "open door to"
            choices = [f"{verb} {r}" for r in unvisited if room.doors[r] is wanted]
            choices = [c for c in choices if self._allowed(room, c)]
            if choices:
                return self.rng.choice(choices)
        moves = [f"go to {r}" for r, is_open in sorted(room.doors.items()) if is_open]
        moves += [f"open door to {r}" for r, is_open in sorted(room.doors.items())
                  if not is_open]
        moves += [f"open {c}" for c in room.closed]
        moves = [m for m in moves if (room.name, normalise_action(m)) not in self.rejected]
        allowed = [m for m in moves if self._allowed(room, m)]
        if not allowed:
            allowed = moves  # advice to avoid never traps the agent in a room
        look = ["look around"] if self.last_action != "look around" else []
        return self.rng.choice(look + allowed or ["look around"])

    def _allowed(self, room: Room, action: str) -> bool:
        key = normalise_action(action)
        if key in self.avoid:
            self.used.add(self.avoid[key])
            return False
        return (room.name, key) not in self.rejected
