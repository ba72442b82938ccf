"""TextWorld games of other shapes: the generic agent, states as text only, and (slow) a tiny
real run on `tw-make custom` games generated once from fixed seeds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from situated.cli import app
from situated.eval.envs.swagent import NO_ADVICE, Advice, Plan
from situated.eval.envs.twarms import ARMS
from situated.eval.envs.twcustom import (
    SHAPES,
    flavour_failures,
    make_config,
    make_games,
    play_for,
    run_textworld_custom,
)
from situated.eval.envs.twexplore import ExploreAgent, objects
from situated.eval.envs.twgame import run_episode, unavailable_reason
from situated.memory import Memory
from situated.models import Principal, State
from situated.write.distill import Trajectory

ROOM = ("-= Studio =-\nYou are in a studio. You can see a closed locker.\n\n"
        "There is an exit to the north.")
INV = "You are carrying: a latchkey."
ADM = ["close locker", "drop latchkey", "examine locker", "go north", "go west", "inventory",
       "look", "open locker", "put latchkey on rack"]


def _obs(objective: str, room: str = ROOM) -> str:
    return f"Objective: {objective}\n\n{room}\n\n{INV}"


def _walk(agent: ExploreAgent, objective: str, n: int = 6) -> list[str]:
    """The agent's own choices in a world whose text never changes (every command a no-op)."""
    actions = []
    for _ in range(n):
        agent.see(_obs(objective))
        action, _ = agent.next_action("studio", ADM, ("latchkey",))
        agent.result(action, None, "studio", "")
        actions.append(action)
    return actions


def test_objects_are_what_a_command_names() -> None:
    assert objects("take keycard from type D locker") == ("keycard", "type d locker")
    assert objects("go north") == ("north",)
    assert objects("look") == ()


def test_the_generic_agent_explores_without_reading_the_task() -> None:
    a = _walk(ExploreAgent("0|g"), "First, open the locker. Then take the keyboard.")
    b = _walk(ExploreAgent("0|g"), "Go west, then drop the latchkey on the floor.")
    assert a == b  # the objective does not change what it does on its own
    assert not {"look", "inventory"} & set(a)
    # first what is new (an exit not taken, an object not yet changed), never giving up things
    assert a[0] in ("go north", "go west", "open locker")
    assert set(a[:3]) == {"go north", "go west", "open locker"}
    assert len(set(a)) == len(a)  # a command that changed nothing is never repeated here
    assert "drop latchkey" in a and a.index("drop latchkey") > 2
    assert _walk(ExploreAgent("1|g"), "x") != a or _walk(ExploreAgent("2|g"), "x") != a


def test_a_command_that_changed_the_world_can_be_tried_again_elsewhere() -> None:
    agent = ExploreAgent("0|g")
    agent.see(_obs("x"))
    agent.result("open locker", None, "studio", "You open the locker.")
    opened = ROOM.replace("closed locker", "open locker")
    agent.see(_obs("x", opened))
    assert ("locker" in agent.touched) and not agent.noop
    agent.result("go north", None, "studio", "")
    agent.see(_obs("x", opened))  # nothing changed: a no-op in this state
    assert (_obs("x", opened), "go north") in agent.noop


def test_the_generic_agent_follows_plans_as_the_cooking_agent_does() -> None:
    agent = ExploreAgent("0|g")
    agent.see(_obs("x"))
    plan = Plan("m1", ("go east", "open locker", "take keyboard from locker", "go north"))
    agent.advise(Advice("GUIDED", plans=(plan,), avoid=(("go north", "m2"),)))
    # `go east` is not admissible: skipped; `go north` is advised against: skipped
    assert agent.next_action("studio", ADM, ()) == ("open locker", "m1")
    agent.result("open locker", "m1", "studio", "You open the locker.")
    agent.see(_obs("x"))  # the world did not change: `open locker` is a no-op here
    action, pid = agent.next_action("studio", ADM, ())
    assert pid is None and action not in ("go north", "open locker")
    assert {"m1", "m2"} <= agent.used
    agent.advise(Advice("GUIDED", plans=(plan,)))  # a plan is never taken twice
    assert agent.next_action("studio", ADM, ())[1] is None
    agent.advise(NO_ADVICE)
    assert agent.pending == []


def test_flavour_failure_words_are_counted_only_in_steps_that_worked() -> None:
    trajs = [{"steps": [
        {"result": "You can't help but smile at the wrong-way sign.", "reward": 0.0},
        {"result": "You take the key.", "reward": 0.5},
        {"result": "That failed.", "reward": 0.0},  # the reward fell: a real failure
    ]}]
    assert flavour_failures(trajs) == 1


def test_unknown_shapes_and_states_are_usage_errors() -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["eval", "textworld", "--games", "custom", "--shapes", "huge"])
    assert bad.exit_code != 0 and "shapes" in bad.output and "huge" in bad.output
    bad = runner.invoke(app, ["eval", "textworld", "--games", "custom", "--agent-seeds", "a"])
    assert bad.exit_code != 0 and "agent-seeds" in bad.output
    bad = runner.invoke(app, ["eval", "textworld", "--shapes", "tiny"])
    assert bad.exit_code != 0 and "custom only" in bad.output
    bad = runner.invoke(app, ["eval", "textworld", "--games", "custom", "--states", "json"])
    assert bad.exit_code != 0
    assert [s.name for s in make_config(False).shapes] == [s.name for s in SHAPES]
    assert len(SHAPES) >= 5 and make_config(False).agent_seeds == (0, 1, 2)


needs_textworld = pytest.mark.skipif(unavailable_reason() is not None,
                                     reason=str(unavailable_reason()))


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One train and one test game of the smallest shape, generated once by `tw-make custom`
    (fixed seeds)."""
    cache = tmp_path_factory.mktemp("tw-custom")
    make_games(make_config(True, shapes=["tiny"], train_games=1, test_games=1), cache)
    return cache


@pytest.mark.slow
@needs_textworld
def test_states_are_the_games_text_alone_unless_parsed_is_asked(games: Path) -> None:
    cfg = make_config(True, shapes=["tiny"], train_games=1, test_games=1)
    path = sorted(games.glob("*-test-*.z8"))[0]
    seen: list[State] = []

    def consult(state: State, exclude: frozenset[str]) -> Advice:
        seen.append(state)
        return NO_ADVICE

    ep = run_episode(path, "test", "no_memory", consult, cfg, play=play_for("text"))
    assert seen and all(s.facts == {} for s in seen)
    assert all(s.facts == {} and s.observed == {} for s in ep.steps)
    assert seen[0].text.startswith("Objective: ") and "-= " in seen[0].text
    assert all(s.reward is not None and 0 <= s.reward <= 1 for s in ep.steps)
    assert ep.trajectory().outcome.terminated is ep.won  # these games are only ever won
    seen.clear()
    parsed = run_episode(path, "test", "no_memory", consult, cfg, play=play_for("parsed"))
    assert set(seen[0].facts) == {"location"}
    assert [s.action for s in parsed.steps] == [s.action for s in ep.steps]  # same agent
    capped = run_episode(path, "test", "no_memory", consult, replace(cfg, step_cap=1),
                         play=play_for("text"))
    assert capped.trajectory().outcome.terminated is capped.won


@pytest.mark.slow
@needs_textworld
def test_tiny_real_run_pools_agent_seeds_and_learns_no_failure_from_words(
    tmp_path: Path, games: Path
) -> None:
    result = run_textworld_custom(False, tmp_path / "out", shapes=["tiny"], train_games=1,
                                  test_games=1, agent_seeds=[0, 1], step_cap=25,
                                  embedder="hash", cache_dir=games)
    assert sorted(p.name for p in games.glob("*.z8")) == sorted(
        result["games"]["train"] + result["games"]["test"])  # nothing else generated
    train_seeds = {g.rsplit("-", 1)[1] for g in result["games"]["train"]}
    assert not train_seeds & {g.rsplit("-", 1)[1] for g in result["games"]["test"]}
    rows = result["episodes"]
    assert len(rows) == 1 * 2 * len(ARMS)
    assert {(r["agent_seed"], r["arm"]) for r in rows} == {
        (s, a) for s in (0, 1) for a in ARMS}
    assert result["arms"]["compiled"]["lift"]["n"] == 2  # paired by (game, agent seed)
    rec = result["compiled_recall"]
    assert rec["consults"] == sum(r["consults"] for r in rows if r["arm"] == "compiled")
    assert rec["other_world_plans_applicable"] == rec["served"].get("plan APPLICABLE", 0)
    assert rec["other_world_plans_served"] >= rec["other_world_plans_applicable"]
    assert set(result["per_shape"]) == {"tiny"}
    trajs = [Trajectory.model_validate(json.loads(line)) for line in (
        tmp_path / "out" / "textworld-custom-train-trajectories.jsonl").read_text().splitlines()]
    assert trajs and all(s.facts == {} for t in trajs for s in t.steps)
    assert any(t.outcome.success for t in trajs)
    mem = Memory(tmp_path / "out" / "textworld-custom-memory-s1.db", embedder="hash")
    try:
        records = mem.list(principal=Principal(tenant="textworld", clearance="restricted"))
        assert any(r.content.startswith("To ") for r in records)
        # no reward ever falls in these games and no game is lost: no failure lesson at all,
        # whatever the flavour text says
        assert not any(r.content.startswith("What went wrong") for r in records)
    finally:
        mem.close()
