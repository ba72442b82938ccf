"""Which ScienceWorld tasks an evaluation runs: the named seven, the quick two, or all 30.

`TASKS_ALL` is the task list of ScienceWorld 1.2.3 (`scienceworld.constants.ID2TASK`), written
out so choosing tasks needs neither the package nor Java; a test checks it against the
installed package when there is one.
"""

from __future__ import annotations

from collections.abc import Sequence

from situated.errors import InvalidInput

TASKS_ALL: tuple[str, ...] = (
    "boil", "melt", "freeze", "change-the-state-of-matter-of", "use-thermometer",
    "measure-melting-point-known-substance", "measure-melting-point-unknown-substance",
    "power-component", "power-component-renewable-vs-nonrenewable-energy",
    "test-conductivity", "test-conductivity-of-unknown-substances", "find-living-thing",
    "find-non-living-thing", "find-plant", "find-animal", "grow-plant", "grow-fruit",
    "chemistry-mix", "chemistry-mix-paint-secondary-color",
    "chemistry-mix-paint-tertiary-color", "lifespan-longest-lived", "lifespan-shortest-lived",
    "lifespan-longest-lived-then-shortest-lived", "identify-life-stages-1",
    "identify-life-stages-2", "inclined-plane-determine-angle",
    "inclined-plane-friction-named-surfaces", "inclined-plane-friction-unnamed-surfaces",
    "mendelian-genetics-known-plant", "mendelian-genetics-unknown-plant",
)
"""All 30 ScienceWorld tasks, in the simulator's order."""
ALL = "all"


def resolve_tasks(names: Sequence[str] | None) -> tuple[str, ...] | None:
    """Task names as given, with `all` standing for `TASKS_ALL`; None stays None (the
    configuration's default). An unknown name is an `InvalidInput` naming `tasks`."""
    if names is None:
        return None
    out: list[str] = []
    for raw in names:
        name = raw.strip()
        chosen = TASKS_ALL if name == ALL else (name,)
        for task in chosen:
            if task not in TASKS_ALL:
                raise InvalidInput("tasks", f"unknown ScienceWorld task {name!r:.60} "
                                            f"(one of {', '.join(TASKS_ALL)}, or '{ALL}')")
            if task not in out:
                out.append(task)
    if not out:
        raise InvalidInput("tasks", "no task named")
    return tuple(out)
