"""Reading TextWorld cooking-game text into situated facts. Pure string parsing, no game needed.

What becomes a fact (flat scalars, as `State.facts` requires), extracted by situated from the
game's own text and nothing else:

- `location`: the room in the last `-= Kitchen =-` header ("kitchen").
- once the cookbook has been read in the episode: `ingredients` (how many), and for each
  ingredient in the cookbook's order `ingredient_<n>` ("red potato"), `cook_<n>` (fry,
  roast, grill or none) and `cut_<n>` (slice, dice, chop or none), from its directions.

The inventory and the visible objects stay in the observation text, not in facts: they change
at every step and would make every plan lesson's conditions fail anywhere else.
"""

from __future__ import annotations

import re

from situated.models import FactValue

_ROOM = re.compile(r"-= (.+?) =-")
_CARRYING = re.compile(r"You are carrying:?\s*(.*)", re.S)
_PROMPT = re.compile(r"\n>\s.*$", re.S)
_ARTICLE = re.compile(
    r"^(?:a|an|the|some)\s+(?:(?:raw|sliced|diced|chopped|fried|roasted|grilled|burned)\s+)*"
)
_DIRECTIONS = re.compile(r"Directions:\s*\n(.*?)(?:\n\s*\n|$)", re.S)
_INGREDIENTS = re.compile(r"Ingredients:\s*\n(.*?)(?:\n\s*\n|Directions:)", re.S)
_PREP_VERBS = ("slice", "dice", "chop", "fry", "roast", "grill")


def clean(text: str) -> str:
    """The game's text without its trailing prompt/status line and banner art."""
    text = _PROMPT.sub("", text)
    lines = [ln.rstrip() for ln in text.splitlines()]
    lines = [ln for ln in lines if not re.fullmatch(r"[\s$\\|_/<>()]*", ln) or not ln.strip()]
    out = "\n".join(lines).strip()
    return re.sub(r"\n{3,}", "\n\n", out)


def location(text: str) -> str | None:
    rooms = _ROOM.findall(text)
    return rooms[-1].strip().lower() if rooms else None


def inventory(text: str) -> tuple[str, ...]:
    """Item names in the answer to `inventory` ("a raw red potato and a knife")."""
    m = _CARRYING.search(text)
    if not m or "carrying nothing" in text:
        return ()
    body = clean(m.group(1)).rstrip(".")
    parts = re.split(r",\s*|\s+and\s+", body)
    return tuple(_ARTICLE.sub("", p.strip()) for p in parts if p.strip())


def parse_recipe(text: str) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """[(ingredient, (verbs...)), ...] from the cookbook's text; None when it is not one."""
    ing = _INGREDIENTS.search(text)
    dirs = _DIRECTIONS.search(text + "\n\n")
    if not ing:
        return None
    names = [ln.strip() for ln in ing.group(1).splitlines() if ln.strip()]
    steps = [ln.strip() for ln in dirs.group(1).splitlines() if ln.strip()] if dirs else []
    out = []
    for name in names:
        verbs = sorted({s.split()[0] for s in steps
                        if s.split() and s.split()[0] in _PREP_VERBS and s.endswith(name)})
        out.append((name, tuple(verbs)))
    return tuple(out)


_CUTS = ("slice", "dice", "chop")
_COOKS = ("fry", "roast", "grill")


def recipe_facts(recipe: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, FactValue]:
    facts: dict[str, FactValue] = {"ingredients": len(recipe)}
    for n, (name, verbs) in enumerate(recipe, start=1):
        facts[f"ingredient_{n}"] = name
        facts[f"cook_{n}"] = next((v for v in verbs if v in _COOKS), "none")
        facts[f"cut_{n}"] = next((v for v in verbs if v in _CUTS), "none")
    return facts


def state_facts(
    room: str | None, recipe: tuple[tuple[str, tuple[str, ...]], ...] | None
) -> dict[str, FactValue]:
    facts: dict[str, FactValue] = {}
    if room:
        facts["location"] = room
    if recipe is not None:
        facts.update(recipe_facts(recipe))
    return facts


def direction_verb(step: str) -> str | None:
    """'fry the red potato' -> 'fry'."""
    word = step.split()[0] if step.split() else ""
    return word if word in _PREP_VERBS else None


COOK_RESULT = {"fried": "fry", "roasted": "roast", "grilled": "grill"}
CUT_RESULT = {"slice": "slice", "dice": "dice", "chop": "chop"}


def preparation_done(feedback: str) -> tuple[str, str] | None:
    """('fry', 'red potato') from "You fried the red potato."; ('slice', ...) likewise."""
    m = re.search(r"You (fried|roasted|grilled) the ([\w -]+?)\.", feedback)
    if m:
        return COOK_RESULT[m.group(1)], m.group(2).strip()
    m = re.search(r"You (slice|dice|chop) the ([\w -]+?)\.", feedback)
    if m:
        return CUT_RESULT[m.group(1)], m.group(2).strip()
    return None
