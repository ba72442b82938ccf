"""A success's plan keeps what its outcome turned on: the decisive step starts its own lesson,
whose state (and so its conditions) is the observation that step was taken on."""

from __future__ import annotations

from pathlib import Path

import pytest

from situated import Memory, Principal, State
from situated.models import MAX_CONTENT_CHARS
from situated.write.distill import (
    RulesDistiller,
    Step,
    Trajectory,
    decisive_step,
    fit_pieces,
)

LAB = "You are in the lab. A battery, wires, a bulb and two boxes."
TASK = "sort the object by whether it conducts"


def _traj(episode: str, thing: str, lit: bool, box: str, rewards: bool = True) -> Trajectory:
    bulb = "on" if lit else "off"
    facts = {"location": "lab", "inventory": thing}
    steps = [
        {"observation": LAB, "facts": {**facts, "bulb": "off"},
         "action": f"connect {thing} to battery", "result": "Connected.", "reward": 0.3},
        {"observation": LAB, "facts": {**facts, "bulb": "off"},
         "action": "wait", "result": "You wait.", "reward": 0.5},
        {"observation": f"{LAB} The bulb is {bulb}.", "facts": {**facts, "bulb": bulb},
         "action": f"move {thing} to {box}", "result": "Done.", "reward": 1.0},
    ]
    if not rewards:
        steps = [{k: v for k, v in s.items() if k != "reward"} for s in steps]
    return Trajectory.model_validate({"episode_id": episode, "task": TASK, "namespace": "lab",
                                      "steps": steps, "outcome": {"success": True}})


def test_the_decisive_step_is_where_the_reward_last_changed_else_the_last_action() -> None:
    assert decisive_step(_traj("a", "foil", True, "red box").steps) == 2
    assert decisive_step(_traj("a", "foil", True, "red box", rewards=False).steps) == 2
    flat = [Step(action="a", reward=0.0), Step(action="b", reward=1.0),
            Step(action="look", reward=1.0), Step(observation="end")]
    assert decisive_step(flat) == 1  # steps after the last change decided nothing
    assert decisive_step([Step(observation="only looked")]) is None
    with pytest.raises(ValueError):
        Step(action="a", reward=float("nan"))


def test_the_decisive_action_is_a_lesson_of_its_own_conditioned_on_what_was_observed() -> None:
    plans = [d for d in RulesDistiller().distill(_traj("a", "foil", True, "red box"))
             if not d.failure_lesson]
    assert [p.content for p in plans] == [
        f"To {TASK} (part 1 of 2, from lab): connect foil to battery; wait.",
        f"To {TASK} (part 2 of 2, from lab): move foil to red box.",
    ]
    head, tail = plans
    assert "bulb == 'off'" in head.conditions
    assert tail.state.facts["bulb"] == "on" and "bulb == 'on'" in tail.conditions
    assert tail.state.text.endswith("The bulb is on.") and tail.step == 2
    assert "location == 'lab'" in tail.conditions
    # a decisive step that already starts its piece is not cut again
    one = Trajectory.model_validate({"episode_id": "b", "task": TASK, "steps": [
        {"facts": {"location": "lab"}, "action": "move foil to red box", "reward": 1.0}],
        "outcome": {"success": True}})
    assert len(RulesDistiller().distill(one)) == 1


def test_recall_checks_the_deciding_observation_against_the_present(tmp_path: Path) -> None:
    me = Principal(tenant="lab")
    with Memory(tmp_path / "m.db", embedder="hash") as mem:
        mem.learn(_traj("conductive", "foil", True, "red box"), principal=me)
        mem.learn(_traj("insulator", "wood", False, "green box"), principal=me)

        def recall(**facts: str) -> tuple[str, str, list[str], list[str]]:
            b = mem.recall(State(LAB, {"location": "lab", "inventory": "nail", **facts}),
                           principal=me, namespace="lab", intent=TASK)
            return (b.mode.value, " ".join(i.text for i in b.items),
                    list(b.missing_facts), [r.reason.value for r in b.rejected])

        # the deciding fact unknown now: gather evidence, and say which fact
        mode, _, missing, _ = recall()
        assert mode == "INSUFFICIENT_EVIDENCE" and "bulb" in missing
        # the light came on: only the conductive lesson's decisive action is served
        mode, text, _, rejected = recall(bulb="on")
        assert mode == "GUIDED"
        assert "red box" in text and "green box" not in text
        assert "CONDITION_FAILED" in rejected
        # it stayed off: the other box
        mode, text, _, _ = recall(bulb="off")
        assert "green box" in text and "red box" not in text


def test_long_pieces_are_cut_to_fit_a_lessons_size() -> None:
    steps = [{"facts": {"location": "field"}, "action": f"plant seed {i} " + "x" * 150,
              "result": "ok"} for i in range(120)]
    traj = Trajectory.model_validate({"episode_id": "long", "task": "grow", "steps": steps,
                                      "outcome": {"success": True}})
    plans = RulesDistiller().distill(traj)
    assert len(plans) > 2
    assert all(len(p.content) <= MAX_CONTENT_CHARS for p in plans)
    assert "plant seed 119" in plans[-1].content
    pieces = [[(i, Step(action="a" * 10)) for i in range(5)]]
    assert [len(p) for p in fit_pieces(pieces, 30)] == [2, 2, 1]
    assert [len(p) for p in fit_pieces([[(0, Step(action="a" * 99))]], 30)] == [1]


def test_learning_a_long_success_stays_within_the_content_limit(tmp_path: Path) -> None:
    steps = [{"facts": {"location": "field"}, "action": f"water pot {i} " + "y" * 120}
             for i in range(150)]
    traj = Trajectory.model_validate({"episode_id": "long", "task": "grow", "steps": steps,
                                      "outcome": {"success": True}})
    me = Principal(tenant="t")
    with Memory(tmp_path / "m.db", embedder="hash") as mem:
        assert len(mem.learn(traj, principal=me)) > 2


def _lab(episode: str, thing: str, lit: bool, box: str) -> Trajectory:
    """The same episode with the lamp seen in view (`observed`), among incidental things."""
    seen = {"state_generator": "off", "state_red_lamp": "off", "state_blue_lamp": "off"}
    after = {**seen, "state_red_lamp": "on" if lit else "off"}
    facts = {"location": "lab", "inventory": thing}
    return Trajectory.model_validate({"episode_id": episode, "task": TASK, "namespace": "lab",
                                      "outcome": {"success": True}, "steps": [
        {"facts": facts, "observed": seen, "action": f"connect {thing} to red lamp",
         "reward": 0.3},
        {"facts": facts, "observed": seen, "action": "wait", "reward": 0.5},
        {"facts": facts, "observed": after, "action": f"move {thing} to {box}", "reward": 1.0},
    ]})


def test_only_observations_the_outcome_turned_on_are_kept() -> None:
    lit_head, lit_tail = RulesDistiller().distill(_lab("a", "foil", True, "red box"))
    # the lamp came on: kept; the generator and the other lamp are incidental
    assert "state_red_lamp == 'on'" in lit_tail.conditions
    assert not any("generator" in c or "blue_lamp" in c for c in lit_tail.conditions)
    assert lit_tail.state.facts["state_red_lamp"] == "on"
    assert not any(k.startswith("state_") for k in lit_head.state.facts)
    # the lamp stayed off: nothing new to see before the last step, so it is not cut off (it
    # would be served at the start, before the circuit is built), and the lamp is kept all the
    # same, because the plan built the circuit with it
    [dark] = RulesDistiller().distill(_lab("b", "wood", False, "green box"))
    assert dark.content.endswith("connect wood to red lamp; wait; move wood to green box.")
    assert "state_red_lamp == 'off'" in dark.conditions
    assert not any("generator" in c for c in dark.conditions)


def test_recall_serves_the_box_the_observed_lamp_points_to(tmp_path: Path) -> None:
    me = Principal(tenant="lab")
    with Memory(tmp_path / "m.db", embedder="hash") as mem:
        mem.learn(_lab("a", "foil", True, "red box"), principal=me)
        mem.learn(_lab("b", "wood", False, "green box"), principal=me)

        def served(**seen: str) -> tuple[str, str]:
            b = mem.recall(State("lab", {"location": "lab", "inventory": "nail", **seen}),
                           principal=me, namespace="lab", intent=TASK)
            return b.mode.value, " ".join(i.text for i in b.items if "move" in i.text)

        assert served(state_red_lamp="on")[0] == "GUIDED"
        assert "red box" in served(state_red_lamp="on")[1]
        assert "green box" not in served(state_red_lamp="on")[1]
        assert "green box" in served(state_red_lamp="off")[1]
        # a generator of another kind in view changes nothing
        assert "red box" in served(state_red_lamp="on", state_wind_turbine="off")[1]
