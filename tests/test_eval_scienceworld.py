"""The ScienceWorld adapter: parsing, the agent, the metrics, and (slow) a tiny real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from situated import Memory, Principal
from situated.eval.envs.scienceworld import (
    ARMS,
    Episode,
    ScienceWorldMissing,
    annotate,
    run_scienceworld,
    summarise,
    unavailable_reason,
)
from situated.eval.envs.stats import bootstrap_mean, wilson
from situated.eval.envs.swagent import Advice, BriefedAgent, Plan, parse_guidance
from situated.eval.envs.swparse import (
    observed_facts,
    parse_inventory,
    parse_look,
    short_task,
    state_facts,
    task_facts,
)
from situated.write.distill import RulesDistiller, Trajectory

KITCHEN = "\n".join([
    "This room is called the kitchen. In it, you see: ",
    "\tthe agent",
    "\ta substance called air",
    "\ta counter. On the counter is: a bowl (containing a red apple, a banana), a drawer.",
    "\ta cupboard. The cupboard door is closed. ",
    "\ta glass jar (containing a substance called sodium chloride)",
    "\ta thermometer, currently reading a temperature of 10 degrees celsius",
    "\tunknown substance B",
    "You also see:",
    "\tA door to the bathroom (that is closed)",
    "\tA door to the hallway (that is open)",
    "",
])
THERMO = (
    "Your task is to measure the temperature of unknown substance B, which is located around "
    "the living room. First, focus on the thermometer. Next, focus on the unknown substance B. "
    "If the unknown substance B temperature is above 100.0 degrees celsius, place it in the red "
    "box. If the unknown substance B temperature is below 100.0 degrees celsius, place it in the "
    "green box. The boxes are located around the bathroom."
)


def test_look_and_inventory_become_flat_facts() -> None:
    room = parse_look(KITCHEN)
    assert room.name == "kitchen"
    assert room.objects[:2] == ("agent", "air")
    assert {"counter", "cupboard", "glass jar", "thermometer", "unknown substance B"} <= set(
        room.objects
    )
    assert {"bowl", "drawer", "sodium chloride"} <= set(room.contents)
    assert room.doors == {"bathroom": False, "hallway": True}
    assert room.closed == ("cupboard",)
    inv = parse_inventory("In your inventory, you see:\n\tan orange\n\ta thermometer, currently "
                          "reading a temperature of 18 degrees celsius\n")
    assert inv == ("orange", "thermometer")
    facts = state_facts(room, inv, task_facts(THERMO))
    assert facts["location"] == "kitchen"
    assert facts["inventory"] == "orange, thermometer"
    assert "agent" not in str(facts["visible"]) and "door to hallway" in str(facts["visible"])
    assert facts["target"] == "unknown substance B"
    assert facts["target_room"] == "living room" and facts["box_room"] == "bathroom"
    assert facts["box_if_above"] == "red box" and facts["box_if_below"] == "green box"
    assert facts["threshold"] == 100.0


@pytest.mark.parametrize(
    ("description", "short", "target"),
    [
        ("Your task is to turn on the red light bulb. First, focus on the red light bulb.",
         "turn on the red light bulb", "red light bulb"),
        ("Your task is to find the animal with the longest life span.  The animals are in the "
         "'outside' location.", "find the animal with the longest life span",
         "animal with the longest life span"),
        ("Your task is to determine if aluminum foil is electrically conductive. The aluminum "
         "foil is located around the workshop.", "determine if aluminum foil is electrically "
         "conductive", "aluminum foil"),
        ("Your task is to use chemistry to create green paint. When you are done, focus on the "
         "green paint.", "use chemistry to create green paint", "green paint"),
        (THERMO, "measure the temperature of unknown substance B", "unknown substance B"),
    ],
)
def test_task_descriptions_give_a_short_task_and_its_target(
    description: str, short: str, target: str
) -> None:
    assert short_task(description) == short
    assert task_facts(description)["target"] == target


def test_plan_and_failure_lessons_parse_from_the_rules_distillers_wording() -> None:
    traj = Trajectory.model_validate({
        "episode_id": "e1", "task": "turn on the red light bulb", "namespace": "sw",
        "steps": [
            {"observation": "hall", "facts": {"location": "hallway"},
             "action": "open door to workshop", "result": "The door is now open.",
             "reward": 0.5},
            {"observation": "hall", "facts": {"location": "hallway"},
             "action": "focus on red light bulb",
             "result": "You focus on it. [score 50 -> -100: the task failed]", "reward": -1.0},
        ],
        "outcome": {"success": True, "reward": 1.0},
    })
    drafts = RulesDistiller().distill(traj)
    plans = [parse_guidance("m1", d.content) for d in drafts if not d.failure_lesson]
    assert plans[0][0] == Plan("m1", ("open door to workshop", "focus on red light bulb"))
    fails = [parse_guidance("m2", d.content) for d in drafts if d.failure_lesson]
    assert fails and fails[0] == (None, [("focus on red light bulb", "m2")])


def test_agent_follows_advice_in_order_skips_avoided_and_never_retakes_a_plan() -> None:
    room = parse_look(KITCHEN)
    agent = BriefedAgent("Your task is to boil water.", "0|t|1")
    plan = Plan("m1", ("open cupboard", "focus on banana", "pick up thermometer"))
    agent.advise(Advice("GUIDED", plans=(plan,), avoid=(("focus on banana", "m9"),)))
    assert agent.next_action(room, ()) == ("open cupboard", "m1")
    agent.result("open cupboard", "m1", True, room)
    assert agent.next_action(room, ()) == ("pick up thermometer", "m1")
    assert "m9" in agent.used and "m1" in agent.used
    agent.advise(Advice("GUIDED", plans=(plan,)))  # the same plan again is not retaken
    _action, source = agent.next_action(room, ())
    assert source is None  # exploring


def test_exploration_is_seeded_and_focuses_on_the_named_target_first() -> None:
    room = parse_look(KITCHEN)

    def walk(seed: str) -> list[str]:
        agent = BriefedAgent(THERMO, seed)
        out = []
        for _ in range(6):
            action, _src = agent.next_action(room, ())
            agent.result(action, None, True, room)
            out.append(action)
        return out

    first = walk("0|use-thermometer|7")
    assert first[0] == "focus on thermometer"
    assert first[1] == "focus on unknown substance B"
    assert first[2] == "go to hallway"  # the only open door to an unvisited room
    assert walk("0|use-thermometer|7") == first


def test_a_focus_made_by_advice_counts_for_exploration() -> None:
    room = parse_look(KITCHEN)
    agent = BriefedAgent(THERMO, "s")
    agent.advise(Advice("GUIDED", plans=(Plan("m1", ("focus on thermometer in inventory",)),)))
    action, pid = agent.next_action(room, ("orange", "thermometer"))
    agent.result(action, pid, True, room)
    # focusing on the thermometer again would fail the task: the next focus target comes next
    assert agent.next_action(room, ("orange", "thermometer"))[0] == "focus on unknown substance B"


def test_a_plan_never_makes_the_agent_focus_twice_on_the_same_object() -> None:
    room = parse_look(KITCHEN)
    agent = BriefedAgent(THERMO, "s")
    action, pid = agent.next_action(room, ())
    assert action == "focus on thermometer"  # exploring first
    agent.result(action, pid, True, room)
    agent.advise(Advice("GUIDED", plans=(Plan("m1", (
        "pick up thermometer", "focus on thermometer in inventory", "look around")),)))
    steps = []
    for _ in range(2):
        action, pid = agent.next_action(room, ())
        agent.result(action, pid, True, room)
        steps.append(action)
    assert steps == ["pick up thermometer", "look around"]


def test_advice_to_avoid_never_traps_the_agent_in_a_room() -> None:
    studio = parse_look(
        "This room is called the art studio. In it, you see: \n\tthe agent\n\ta picture\n"
        "You also see:\n\tA door to the hallway (that is open)\n"
    )
    agent = BriefedAgent("Your task is to find the animal with the longest life span.", "s")
    agent.advise(Advice("GUIDED", avoid=(("go to hallway", "m7"),)))
    agent.visited.add("hallway")
    seen = set()
    for _ in range(10):
        action, _src = agent.next_action(studio, ())
        agent.result(action, None, True, studio)
        seen.add(action)
    assert "go to hallway" in seen  # the only way out, taken although advised against
    assert "m7" in agent.used


def test_rejected_action_is_not_drawn_again_in_the_same_room() -> None:
    room = parse_look(KITCHEN)
    agent = BriefedAgent(THERMO, "s")
    action, _ = agent.next_action(room, ())
    agent.result(action, None, False, room)
    assert agent.next_action(room, ())[0] != action


def test_annotate_marks_score_changes_and_failure() -> None:
    assert annotate("The door is now open.", 0, 0) == "The door is now open."
    assert annotate("You focus on the wolf.", 50, -100).endswith(
        "[score 50 -> -100: the task failed]")
    assert annotate("ok", 0, 13) == "ok [score 0 -> 13]"


def _ep(arm: str, variation: int, score: int, tokens: int = 0) -> Episode:
    ep = Episode("t", variation, "test", arm, "Your task is to do it.")
    ep.score = score
    ep.advices = [Advice("GUIDED" if tokens else "NO_APPLICABLE_MEMORY", tokens=tokens,
                         latency_ms=1.0)]
    return ep


def test_negative_transfer_is_paired_with_no_memory_by_variation() -> None:
    eps = [_ep("no_memory", 1, 50), _ep("no_memory", 2, 0),
           _ep("raw_replay", 1, -100, 10), _ep("raw_replay", 2, 100, 10),
           _ep("compiled", 1, 50, 5), _ep("compiled", 2, 0, 5)]
    s = summarise(eps)
    assert s["raw_replay"].negative_transfer.value == 0.5
    assert s["raw_replay"].wrong_focus.value == 0.5
    assert s["raw_replay"].lift.value == pytest.approx((-150 + 100) / 2)
    assert s["compiled"].negative_transfer.value == 0.0
    assert s["compiled"].success.value == 0.0
    assert s["compiled"].tokens == 5


def test_intervals() -> None:
    w = wilson(3, 10)
    assert w.low < 0.3 < w.high
    assert w.low >= 0 and w.high <= 1
    assert wilson(0, 0).n == 0
    b = bootstrap_mean([1.0, 2.0, 3.0, 4.0])
    assert b.low <= 2.5 <= b.high


def test_missing_java_is_a_clean_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import situated.eval.envs.scienceworld as sw

    monkeypatch.setattr(sw.shutil, "which", lambda name: None)
    reason = unavailable_reason()
    assert reason is not None
    assert "Java" in reason or "scienceworld" in reason
    with pytest.raises(ScienceWorldMissing):
        run_scienceworld(True, tmp_path / "out", None)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_tiny_real_run(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "sw"
    result = run_scienceworld(
        True, out, None, tasks=["power-component"], variations=1, seed=0,
        train_variations=2, step_cap=12, embedder="hash",
    )
    split = result["splits"]["power-component"]
    assert not set(split["train"]) & set(split["test"])
    # trajectories validate, and only train variations were learned from
    lines = (out / "scienceworld-train-trajectories.jsonl").read_text().splitlines()
    trajs = [Trajectory.model_validate(json.loads(line)) for line in lines]
    assert trajs and len(trajs) == result["memory"]["totals"]["episodes"]
    train_ids = {f"power-component:train:{v}" for v in split["train"]}
    assert all(t.episode_id.rsplit(":", 1)[0] in train_ids for t in trajs)
    assert any(t.outcome.success for t in trajs) and any(not t.outcome.success for t in trajs)
    assert all(s.facts.get("location") and s.facts.get("target") for t in trajs for s in t.steps)
    mem = Memory(out / "scienceworld-memory.db", embedder="hash")
    try:
        who = Principal(tenant="scienceworld", clearance="restricted")
        records = mem.list(principal=who)
        assert records
        assert {r.source.episode_id for r in records} <= {t.episode_id for t in trajs}
        assert any(r.content.startswith("To ") for r in records)
        # running out of steps blames no action: failure lessons only name visible failures
        assert not any("failed after 'look around'" in r.content for r in records)
    finally:
        mem.close()
    # every arm ran the test variation; the compiled arm recalled
    assert set(result["arms"]) == set(ARMS)
    assert all(a["episodes"] == 1 for a in result["arms"].values())
    rows = result["episodes"]
    assert {r["variation"] for r in rows} == set(split["test"])
    assert sum(result["compiled_recall"]["modes"].values()) == next(
        r["consults"] for r in rows if r["arm"] == "compiled")
    assert next(r for r in rows if r["arm"] == "no_memory")["tokens"] == 0
    assert json.loads((out / "scienceworld.json").read_text())["config"]["step_cap"] == 12


def test_the_step_cap_is_raised_to_fit_long_gold_paths() -> None:
    from situated.eval.envs.scienceworld import make_config

    cfg = make_config(False)
    assert cfg.step_cap == 50
    assert cfg.fitted([144, 20]).step_cap == 216  # 1.5 x the longest gold path
    assert cfg.fitted([12]).step_cap == 50  # never lowered
    assert cfg.fitted([]).step_cap == 50
    off = make_config(False)
    off = type(off)(**{**off.__dict__, "gold_factor": 0.0})
    assert off.fitted([144]).step_cap == 50


def test_plans_of_long_tasks_are_not_cut_at_forty_actions() -> None:
    steps = [{"observation": f"This room is called the room{i // 30}.",
              "facts": {"location": f"room{i // 30}"}, "action": f"act {i}", "result": "ok"}
             for i in range(150)]
    traj = Trajectory.model_validate({"episode_id": "long", "task": "grow a plant",
                                      "steps": steps, "outcome": {"success": True}})
    plans = [d for d in RulesDistiller().distill(traj) if not d.failure_lesson]
    assert len(plans) == 5
    assert "act 149" in plans[-1].content


WORKSHOP = "\n".join([
    "This room is called the workshop. In it, you see: ",
    "\tthe agent",
    "\tA aluminum foil",
    "\ta red light bulb, which is on",
    "\ta sink, which is turned off. In the sink is: nothing.",
    "\ta table. On the table is: a battery, a green light bulb, which is off, a orange wire, "
    "a switch, which is off.",
    "You also see:",
    "\tA door to the hallway (that is open)",
    "",
])


def test_observed_states_of_objects_become_facts() -> None:
    room = parse_look(WORKSHOP)
    assert room.states == {"red light bulb": "on", "sink": "turned off",
                           "green light bulb": "off", "switch": "off"}
    assert "green light bulb" in room.contents and "which is off" not in room.contents
    seen = observed_facts(room)
    assert seen["state_red_light_bulb"] == "on"
    assert seen["state_green_light_bulb"] == "off" and seen["state_sink"] == "turned off"
    assert not any(k.startswith("state_") for k in state_facts(room, (), {}))
    assert observed_facts(parse_look(KITCHEN)) == {}


@pytest.mark.slow
def test_text_states_carry_the_simulators_text_and_no_parsed_facts() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    from situated.errors import InvalidInput
    from situated.eval.envs.scienceworld import SWEnv, gold_episode, make_config

    with pytest.raises(InvalidInput, match="states"):
        make_config(True, states="json")
    env = SWEnv()
    try:
        v = env.variations("power-component", "train")[0]
        text, _ = gold_episode(env, "power-component", v, make_config(True, states="text"))
        parsed, _ = gold_episode(env, "power-component", v, make_config(True))
    finally:
        env.close()
    assert text.success and text.trajectory().outcome.terminated
    assert all(s.facts == {} and s.observed == {} for s in text.steps)
    first = text.steps[0].observation
    assert first.startswith(text.description[:40]) and "In your inventory" in first
    # the simulator sometimes reports the circuit's task complete one tick early (before the
    # gold path's final `wait1`), so the two runs are compared over the steps both took
    shared = min(len(parsed.steps), len(text.steps))
    assert shared >= len(text.steps) - 1 and shared >= len(parsed.steps) - 1 and shared >= 5
    assert [s.action for s in parsed.steps[:shared]] == [s.action for s in text.steps[:shared]]
    assert ([s.observation for s in parsed.steps[:shared]]
            == [s.observation for s in text.steps[:shared]])
    assert all(s.facts.get("location") and s.facts.get("target") for s in parsed.steps)
