"""Reading ScienceWorld text into situated facts. Pure string parsing: no simulator needed.

What becomes a fact (all flat scalars, as `State.facts` requires):

- `location`: the room the agent is in ("This room is called the kitchen." -> "kitchen").
- `inventory`: the inventory items, sorted, comma-joined ("orange, thermometer"); "nothing"
  when empty.
- `visible`: the top-level objects of the room, sorted, then its doors ("door to kitchen"),
  comma-joined (the agent and the air left out): what the agent sees without opening anything.

What the agent sees of its surroundings (`observed_facts`, a step's `observed` in a trajectory:
kept by a lesson only where its outcome turned on them):

- `state_<object>`: the observed state of each object the room's text gives one for
  ("a red light bulb, which is on" -> `state_red_light_bulb = "on"`; "a sink, which is turned
  off" -> `state_sink = "turned off"`), top-level objects and what lies on or in them; what
  an action changed (a light that came on) is what the next action may depend on.
- from the task description (`task_facts`), when the description says so:
  `target` (the object or substance the task is about: "red light bulb", "aluminum foil",
  "green paint", "animal with the longest life span"), `target_room` ("located around the
  living room"), `box_room` ("The boxes are located around the bathroom"), one `box_if_<case>`
  per conditional answer ("If it is electrically conductive, place it in the red box" ->
  `box_if_conductive = "red box"`), and `threshold` (a number, "above 100.0 degrees").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from situated.models import FactValue

INVALID = "No known action matches that input."
AMBIGUOUS = "Ambiguous request"

_ROOM = re.compile(r"called the ([^.\n]+)\.")
_DOOR = re.compile(r"A door to the (.+?) \(that is (open|closed)\)")
_CLOSED = re.compile(r"The ([\w ]+?) door is closed")
_ARTICLE = re.compile(r"^(?:a|an|the|some|A|An|The)\s+")
_SUBSTANCE = re.compile(r"^(?:a |an |some )?substance called ")
_CONTAINING = re.compile(r"\(containing (.*)\)")
_HIDDEN_OBJECTS = frozenset({"agent", "air"})
_WHICH_IS = re.compile(r", which is ([a-z][a-z ]{0,30}?)(?=[.,;(]|$)")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
STATE_PREFIX = "state_"
MAX_STATE_FACTS = 40


@dataclass(frozen=True)
class Room:
    """What the `look around` text says about the agent's surroundings."""

    name: str
    objects: tuple[str, ...]
    """Top-level object names in the room, in the order listed."""
    contents: tuple[str, ...]
    """Names of objects listed inside or on top-level objects (one level deep)."""
    doors: dict[str, bool] = field(default_factory=dict)
    """Adjacent room -> whether its door is open."""
    closed: tuple[str, ...] = ()
    """Containers whose door is closed ("cupboard", "freezer")."""
    states: dict[str, str] = field(default_factory=dict)
    """Object -> its observed state, as the text gives it ("red light bulb" -> "on")."""

    def names(self) -> set[str]:
        return set(self.objects) | set(self.contents)


def object_name(text: str) -> str:
    """'a substance called air' -> 'air'; 'a blue light bulb, which is off' -> 'blue light bulb'."""
    text = text.strip()
    text = _SUBSTANCE.sub("", text)
    for stop in (". ", " (", ", which", ", currently"):
        cut = text.find(stop)
        if cut > 0:
            text = text[:cut]
    text = text.rstrip(". ")
    return _ARTICLE.sub("", text).strip()


def split_top(text: str) -> list[str]:
    """Split a comma list, ignoring commas inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def object_state(text: str) -> str | None:
    """'a red light bulb, which is on' -> 'on'; None when the text gives no state."""
    m = _WHICH_IS.search(text.strip().rstrip("."))
    return m.group(1).strip() if m else None


def state_key(name: str) -> str:
    """The fact name of an object's state: 'red light bulb' -> 'state_red_light_bulb'."""
    return STATE_PREFIX + _NOT_KEY.sub("_", name.lower()).strip("_")[:60]


def _listed(line: str) -> str | None:
    """The comma list of what is on or in an object, if the line gives one."""
    on = line.find(" is: ")
    if on >= 0:
        return line[on + 5 :].rstrip(". ")
    m = _CONTAINING.search(line)
    return m.group(1) if m else None


def parse_look(text: str) -> Room:
    """Parse the text of `look around`."""
    m = _ROOM.search(text)
    name = m.group(1).strip() if m else "unknown"
    objects: list[str] = []
    contents: list[str] = []
    closed: list[str] = []
    states: dict[str, str] = {}
    doors = {room.strip(): state == "open" for room, state in _DOOR.findall(text)}
    body = text.split("You also see:")[0]
    for line in body.splitlines()[1:]:
        if not line.startswith("\t"):
            continue
        line = line.strip()
        obj = object_name(line)
        if obj and obj not in objects:
            objects.append(obj)
        inner = _listed(line)
        own = line[: line.find(" is: ")] if " is: " in line else line.split(" (")[0]
        if obj and (state := object_state(own)):
            states.setdefault(obj, state)
        closed.extend(c for c in _CLOSED.findall(line) if c not in closed)
        if inner:
            prev = ""
            for item in split_top(inner):
                if item.startswith("which is ") and prev:
                    # "a green light bulb, which is off": the list's commas split the state off
                    if state := object_state(", " + item):
                        states.setdefault(prev, state)
                    continue
                sub = object_name(item)
                if sub and sub != "nothing" and sub not in contents:
                    contents.append(sub)
                if sub and (state := object_state(item)):
                    states.setdefault(sub, state)
                prev = sub
    return Room(name, tuple(objects), tuple(contents), doors, tuple(closed), states)


def parse_inventory(text: str) -> tuple[str, ...]:
    """Item names in the text of `inventory`, as listed."""
    items = []
    for line in text.splitlines()[1:]:
        if line.startswith("\t") and line.strip():
            name = object_name(line)
            if name:
                items.append(name)
    return tuple(items)


def short_task(description: str) -> str:
    """'Your task is to boil water. ...' -> 'boil water' (the first sentence, without preamble)."""
    text = description.replace("Task Description:", "").strip()
    first = re.split(r"(?<=[a-z0-9)'])\.\s", text + " ", maxsplit=1)[0].strip().rstrip(".")
    first = re.sub(r"^Your task is to\s+", "", first)
    first = re.sub(r",\s*which is located around .*$", "", first)
    return first.strip()


_TARGETS = [
    re.compile(r"^turn on the (.+?)(?: by .*)?$"),
    re.compile(r"^determine if (.+?) is electrically conductive$"),
    re.compile(r"^use chemistry to create (?:the substance )?'?(.+?)'?$"),
    re.compile(r"^measure the (?:temperature|melting point) of (.+)$"),
    re.compile(r"^find a\(n\) (.+)$"),
    re.compile(r"^find the (animal with the .+?)(?:, then .*)?$"),
    re.compile(r"^focus on the life stages of the (.+?)(?:,.*)?$"),
    re.compile(r"^focus on the (\d+ life stages of the .+?)(?:,.*)?$"),
    re.compile(r"^(?:boil|melt|freeze|change the state of matter of) (.+)$"),
    re.compile(r"^grow an? (.+?)(?: plant)?(?: from seed)?$"),
]
_CASE = re.compile(
    r"If (?:it|the .+?|.+?) is (?:electrically )?(conductive|nonconductive|above|below)"
    r"[^,]*, (?:place it in|focus on) the (\w+ box)",
)
_THRESHOLD = re.compile(r"(?:above|below) (-?\d+(?:\.\d+)?) degrees")
_TARGET_ROOM = re.compile(r"(?<!boxes are )located around the ([\w ]+?)[.,]")
_BOX_ROOM = re.compile(r"boxes are located around the ([\w ]+?)\.")
_FOCUS_STEP = re.compile(r"\b(?:First|Next), focus on the ([^.]+?)\.")


def task_facts(description: str) -> dict[str, FactValue]:
    """Facts about the task itself, parsed from its description (see the module docstring)."""
    facts: dict[str, FactValue] = {}
    short = short_task(description)
    for rx in _TARGETS:
        m = rx.match(short)
        if m:
            facts["target"] = m.group(1).strip()
            break
    room = _TARGET_ROOM.search(description)
    if room:
        facts["target_room"] = room.group(1).strip()
    box_room = _BOX_ROOM.search(description)
    if box_room:
        facts["box_room"] = box_room.group(1).strip()
    for case, box in _CASE.findall(description):
        facts[f"box_if_{case}"] = box
    th = _THRESHOLD.search(description)
    if th:
        facts["threshold"] = float(th.group(1))
    return facts


def focus_steps(description: str) -> tuple[str, ...]:
    """Objects the description says to focus on first/next ("First, focus on the thermometer.")."""
    return tuple(s.strip() for s in _FOCUS_STEP.findall(description))


def state_facts(
    room: Room, inventory: tuple[str, ...], task: dict[str, FactValue]
) -> dict[str, FactValue]:
    """The facts of one step: location, inventory, visible objects and the task's facts."""
    visible = sorted(o for o in room.objects if o not in _HIDDEN_OBJECTS)
    visible += [f"door to {r}" for r in sorted(room.doors)]
    facts: dict[str, FactValue] = {
        "location": room.name,
        "inventory": ", ".join(sorted(inventory)) or "nothing",
        "visible": ", ".join(visible)[:300] or "nothing",
    }
    facts.update(task)
    return facts


def observed_facts(room: Room) -> dict[str, FactValue]:
    """The observed states of the objects in view (`state_<object>`; at most 40)."""
    return {state_key(obj): state for obj, state in sorted(room.states.items())[:MAX_STATE_FACTS]
            if obj not in _HIDDEN_OBJECTS and "'" not in state}


def is_invalid(response: str) -> bool:
    """The simulator's parser did not recognise the action in the present state."""
    return response.strip().startswith(INVALID)


def normalise_action(action: str) -> str:
    return " ".join(action.lower().split())
