"""ScienceWorld observations, harvested once and cached as JSON (later runs need no JVM).

The text applicability set (`benchmarks/text_applicability.py`) builds its pairs from what
ScienceWorld (allenai/ScienceWorld, Apache-2.0; the `scienceworld` package) prints: the
`look around` text of each room the gold path visits, the inventory, each action's answer
(object descriptions from `look at` / `examine`, thermometer readings, state changes).

Run from the repository root to (re)build the cache (about 10 minutes on 2 cores):

    python benchmarks/sw_observations.py                 # every task, variations 0-2
    python benchmarks/sw_observations.py --variations 1  # quicker
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

CACHE = Path.home() / ".cache" / "situated" / "textbench" / "scienceworld-observations.json"
FORMAT = 1
MAX_STEPS = 80
LOOK_AT = 4
"""Objects of the first and last room looked at (`look at X`) per episode."""


def _objects(look: str) -> list[str]:
    """The names of the objects a `look around` text lists (one per tab-indented line)."""
    names = []
    for line in look.split("\n"):
        if not line.startswith("\t") or line.startswith("\tA door") or "the agent" in line:
            continue
        head = line.strip().split(",")[0].split(".")[0].split("(")[0].strip()
        words = head.split(" ", 1)
        if len(words) == 2 and words[0] in ("a", "an", "the"):
            names.append(words[1].strip())
    return names


def harvest(variations: int, max_steps: int = MAX_STEPS) -> dict[str, Any]:
    from scienceworld import ScienceWorldEnv

    env = ScienceWorldEnv("", envStepLimit=100_000)
    episodes = []
    try:
        for task in env.get_task_names():
            env.load(task, 0, "")
            train = sorted(int(v) for v in env.get_variations_train())
            for variation in train[:variations]:
                t0 = time.perf_counter()
                env.load(task, variation, "", generateGoldPath=True)
                gold = list(env.get_gold_action_sequence())
                obs: list[dict[str, Any]] = []
                looks: set[str] = set()

                def note(kind: str, action: str, text: str, step: int,
                         obs: list[dict[str, Any]] = obs, looks: set[str] = looks) -> None:
                    text = str(text).strip()
                    if kind == "look":
                        if text in looks:
                            return
                        looks.add(text)
                    obs.append({"kind": kind, "action": action, "text": text, "step": step})

                def look_at(step: int) -> None:
                    for name in _objects(str(env.look()))[:LOOK_AT]:
                        text, *_ = env.step(f"look at {name}")
                        if not str(text).startswith(("No known action", "Ambiguous")):
                            note("describe", f"look at {name}", text, step)

                note("look", "look around", env.look(), 0)
                note("inventory", "inventory", env.inventory(), 0)
                look_at(0)
                for i, action in enumerate(gold[:max_steps], 1):
                    text, _, done, _ = env.step(action)
                    note("step", action, text, i)
                    note("look", "look around", env.look(), i)
                    if any(w in action for w in ("pick up", "move", "pour", "put")):
                        note("inventory", "inventory", env.inventory(), i)
                    if done:
                        break
                look_at(len(gold))
                episodes.append({"task": task, "variation": variation, "observations": obs})
                print(f"{task} v{variation}: {len(obs)} observations, "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        env.close()
    import scienceworld

    return {"format": FORMAT, "source": "scienceworld",
            "version": getattr(scienceworld, "__version__", ""), "variations": variations,
            "max_steps": max_steps, "episodes": episodes}


def load(path: Path = CACHE) -> dict[str, Any]:
    """The cached observations (build them with this script first)."""
    if not path.exists():
        raise SystemExit(f"no ScienceWorld observations at {path}: run "
                         "`python benchmarks/sw_observations.py` once (needs Java 17)")
    data: dict[str, Any] = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise SystemExit(f"{path} is of another format; rebuild it")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--variations", type=int, default=3, help="train variations per task")
    ap.add_argument("--max-steps", type=int, default=MAX_STEPS)
    ap.add_argument("--out", type=Path, default=CACHE)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    data = harvest(args.variations, args.max_steps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=0))
    n = sum(len(e["observations"]) for e in data["episodes"])
    print(f"{n} observations of {len(data['episodes'])} episodes -> {args.out} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
