"""The non-LLM TextWorld cooking agent: it acts on the advice it reads, else on its own policy.

The same agent runs every arm of the cooking benchmark, so memory is the only difference between
arms. It sees what a text agent sees in TextWorld: the game's text and its list of admissible
commands. Its own policy is written for the cooking task (the generic agent of the
custom-games benchmark is `twexplore.ExploreAgent`).

Acting on advice (`swagent.Advice`, plans and actions to avoid parsed from the guidance text)
is `twexplore.PlanFollower`'s, with one more skip: a step the game already answered (the
recipe read, an ingredient cooked or cut: cooking twice burns it).

Its own policy (no advice, or every plan used up), seeded per (seed, game) so every arm draws
the same numbers, in order:

1. read the cookbook when it can and has not (its objective says to);
2. take a recipe ingredient it sees and does not carry; take the knife when the recipe needs
   cutting;
3. for a carried ingredient, do a pending direction whose verb is a command ("slice the red
   potato" -> `slice red potato with knife`); for a pending cooking direction (fry, roast,
   grill) it does not know which appliance does what, so it draws one of the admissible
   `cook <ingredient> with <appliance>` commands at random (once per ingredient);
4. when every direction is done: `prepare meal`, then `eat meal`;
5. open a closed container or door it has not opened; go through an exit it has not taken
   from this room (at random), else any exit, else `look`.
"""

from __future__ import annotations

from situated.eval.envs.swparse import normalise_action
from situated.eval.envs.twexplore import PlanFollower
from situated.eval.envs.twparse import parse_recipe, preparation_done

_CUT = ("slice", "dice", "chop")
_COOK = ("fry", "roast", "grill")


class CookAgent(PlanFollower):
    """Executes advised steps that are admissible now, in order; otherwise its own policy."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed)
        self.recipe: tuple[tuple[str, tuple[str, ...]], ...] | None = None
        self.done: set[tuple[str, str]] = set()
        self.cooked: set[str] = set()
        self.opened: set[str] = set()
        self.exits_taken: set[tuple[str, str]] = set()

    def _skip(self, key: str) -> bool:
        """A step the game already answered: the recipe read, an ingredient cooked (cooking
        twice burns it) or cut the same way."""
        if key == "examine cookbook":
            return self.recipe is not None
        if key.startswith("cook "):
            return key.removeprefix("cook ").split(" with ")[0] in self.cooked
        verb, _, rest = key.partition(" ")
        return verb in _CUT and (verb, rest.split(" with ")[0]) in self.done

    def result(self, action: str, plan_id: str | None, room: str, feedback: str) -> None:
        super().result(action, plan_id, room, feedback)
        key = normalise_action(action)
        if key.startswith("open "):
            self.opened.add(key)
        if key.startswith("go "):
            self.exits_taken.add((room, key))
        if key.startswith("cook "):
            self.cooked.add(key.removeprefix("cook ").split(" with ")[0])
        done = preparation_done(feedback)
        if done:
            self.done.add(done)
        recipe = parse_recipe(feedback)
        if recipe is not None:
            self.recipe = recipe

    # -- its own policy ------------------------------------------------------------------------

    def own(self, room: str, admissible: list[str], inventory: tuple[str, ...]) -> str:
        adm = [a for a in admissible if self._ok(a)]
        if self.recipe is None and "examine cookbook" in adm:
            return "examine cookbook"
        carried = set(inventory)
        if self.recipe is not None:
            needs_cut = any(v in _CUT for _, verbs in self.recipe for v in verbs)
            for name, _ in self.recipe:
                if name not in carried:
                    take = [a for a in adm if a == f"take {name}" or a.startswith(f"take {name} ")]
                    if take:
                        return take[0]
            if needs_cut and "knife" not in carried:
                take = [a for a in adm if a.startswith("take knife")]
                if take:
                    return take[0]
            all_done = True
            for name, verbs in self.recipe:
                for verb in verbs:
                    if (verb, name) in self.done:
                        continue
                    all_done = False
                    if name not in carried:
                        continue
                    if verb in _CUT and f"{verb} {name} with knife" in adm:
                        return f"{verb} {name} with knife"
                    if verb in _COOK and name not in self.cooked:
                        cook = sorted(a for a in adm if a.startswith(f"cook {name} with "))
                        if cook:
                            return self.rng.choice(cook)
            if all_done and all(n in carried for n, _ in self.recipe):
                for final in ("prepare meal", "eat meal"):
                    if final in adm:
                        return final
            if "meal" in carried and "eat meal" in adm:
                return "eat meal"
        opens = [a for a in adm if a.startswith("open ") and normalise_action(a) not in self.opened]
        if opens:
            return opens[0]
        exits = sorted(a for a in adm if a.startswith("go "))
        fresh = [a for a in exits if (room, normalise_action(a)) not in self.exits_taken]
        if fresh:
            return self.rng.choice(fresh)
        if exits:
            return self.rng.choice(exits)
        return "look"

