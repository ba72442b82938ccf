"""TextWorld agents without an environment's task built in: how they follow advice, and a
generic explorer.

`PlanFollower` is how every TextWorld agent here acts on advice (the same for every arm):
it executes the steps of the first plan it has not used yet, in order, skipping a step that
is not admissible now, that the latest advice says to avoid, or that its own policy rules out
(`_skip`); `take X from Y` is read as taking X from wherever it is admissible. A plan is never
taken twice. When no plan step is left it acts on its own (`own`).

`ExploreAgent` is the generic agent of the custom-games benchmark: its own policy knows
nothing of the quest (it never reads the objective), only how to explore a text world through
its admissible commands, seeded per (seed, game) so every arm draws the same numbers:

1. never a command that changed nothing in the same state (the room's description and the
   inventory unchanged after it: the game's answer is not read), nor `look` / `inventory`
   (it sees both after every step);
2. first, drawn at random: an exit not yet taken from this room, or a command not yet tried in
   this state that names an object no earlier command changed anything with, unless it gives
   something up or hides it (drop, put, insert, close, lock: those wait);
3. else any command not yet tried in this state (examining last);
4. else an exit at random, else any command, else `look`.
"""

from __future__ import annotations

import random
import re
from collections import deque

from situated.eval.envs.swagent import Advice, Plan
from situated.eval.envs.swparse import normalise_action

_META = frozenset({"look", "inventory"})
_OBSERVE = frozenset({"examine", "look", "inventory"})
_GIVE_UP = frozenset({"drop", "put", "insert", "close", "lock"})
_LINK = re.compile(r"\s+(?:from|on|in|into|with|to)\s+")


class PlanFollower:
    """Executes advised steps that are admissible now, in order; otherwise `own`."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)
        self.queue: deque[tuple[str, str]] = deque()
        self.pending: list[Plan] = []
        self.avoid: dict[str, str] = {}
        self.started: set[str] = set()
        self.used: set[str] = set()

    def see(self, observation: str) -> None:
        """The game's text after each step (and at the start)."""
        return None

    def advise(self, advice: Advice) -> None:
        self.avoid = dict(advice.avoid)
        self.pending = [p for p in advice.plans if p.id not in self.started]

    @property
    def in_plan(self) -> bool:
        return bool(self.queue)

    def next_action(self, room: str, admissible: list[str],
                    inventory: tuple[str, ...]) -> tuple[str, str | None]:
        allowed = {normalise_action(a): a for a in admissible}
        while True:
            while self.queue:
                step, pid = self.queue.popleft()
                key = normalise_action(step)
                if key in self.avoid:
                    self.used.add(self.avoid[key])
                    continue
                if self._skip(key):
                    continue
                if key in allowed:
                    return allowed[key], pid
                near = self._same_take(key, allowed)
                if near is not None:
                    return near, pid
            if not self.pending:
                return self.own(room, admissible, inventory), None
            plan = self.pending.pop(0)
            self.started.add(plan.id)
            self.queue.extend((s, plan.id) for s in plan.steps)

    def _skip(self, key: str) -> bool:
        """A plan step the agent's own knowledge rules out now."""
        return False

    @staticmethod
    def _same_take(key: str, allowed: dict[str, str]) -> str | None:
        """`take knife from table` read as `take knife from counter` when the knife is there."""
        if not key.startswith("take "):
            return None
        thing = key.removeprefix("take ").split(" from ")[0]
        for k, command in sorted(allowed.items()):
            if k == f"take {thing}" or k.startswith(f"take {thing} from "):
                return command
        return None

    def _ok(self, command: str) -> bool:
        """Not advised against (an advised-against command counts as acting on that advice)."""
        key = normalise_action(command)
        if key in self.avoid:
            self.used.add(self.avoid[key])
            return False
        return True

    def result(self, action: str, plan_id: str | None, room: str, feedback: str) -> None:
        if plan_id is not None:
            self.used.add(plan_id)

    def own(self, room: str, admissible: list[str], inventory: tuple[str, ...]) -> str:
        raise NotImplementedError


def objects(command: str) -> tuple[str, ...]:
    """The things a command names: 'take keycard from suitcase' -> ('keycard', 'suitcase')."""
    _, _, rest = normalise_action(command).partition(" ")
    return tuple(p.strip() for p in _LINK.split(rest) if p.strip())


class ExploreAgent(PlanFollower):
    """The generic explorer (see the module docstring): no task knowledge of its own."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed)
        self.here = ""
        self.tried: set[tuple[str, str]] = set()
        self.noop: set[tuple[str, str]] = set()
        self.touched: set[str] = set()
        self.exits_taken: set[tuple[str, str]] = set()
        self._last: tuple[str, str] | None = None

    def see(self, observation: str) -> None:
        if self._last is not None:
            before, key = self._last
            if observation == before:
                self.noop.add(self._last)
            else:
                self.touched.update(objects(key))
            self._last = None
        self.here = observation

    def _skip(self, key: str) -> bool:
        return (self.here, key) in self.noop

    def result(self, action: str, plan_id: str | None, room: str, feedback: str) -> None:
        super().result(action, plan_id, room, feedback)
        key = normalise_action(action)
        self.tried.add((self.here, key))
        if key.startswith("go "):
            self.exits_taken.add((room or self.here, key))
        self._last = (self.here, key)

    def own(self, room: str, admissible: list[str], inventory: tuple[str, ...]) -> str:
        here, where = self.here, room or self.here
        cands = sorted(a for a in dict.fromkeys(admissible) if self._ok(a)
                       and normalise_action(a) not in _META
                       and (here, normalise_action(a)) not in self.noop)
        exits = [a for a in cands if normalise_action(a).startswith("go ")]
        untried = [a for a in cands if a not in exits and (here, normalise_action(a))
                   not in self.tried]
        fresh = [a for a in exits if (where, normalise_action(a)) not in self.exits_taken]
        fresh += [a for a in untried if _verb(a) not in _OBSERVE | _GIVE_UP
                  and any(o not in self.touched for o in objects(a))]
        for tier in (fresh, [a for a in untried if _verb(a) not in _OBSERVE], untried, exits,
                     cands):
            if tier:
                return self.rng.choice(tier)
        return "look"


def _verb(command: str) -> str:
    return normalise_action(command).partition(" ")[0]
