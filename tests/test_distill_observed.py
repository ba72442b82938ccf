"""A plan lesson keeps what its outcome depended on: facts first observed along its piece."""

from __future__ import annotations

from pathlib import Path

from situated import Memory, Principal, State
from situated.write.distill import RulesDistiller, Trajectory, observed_along

KITCHEN = "-= Kitchen =- A cookbook lies on the counter."
RECIPE = {"ingredient_1": "red potato", "cook_1": "fry", "cut_1": "slice"}


def _traj(episode: str, cook: str, appliance: str) -> Trajectory:
    recipe = {**RECIPE, "cook_1": cook}
    return Trajectory.model_validate({
        "episode_id": episode, "task": "cook the meal", "namespace": "tw",
        "steps": [
            {"observation": KITCHEN, "facts": {"location": "kitchen"},
             "action": "examine cookbook", "result": "Directions: ..."},
            {"observation": KITCHEN, "facts": {"location": "kitchen", **recipe},
             "action": "take red potato from counter", "result": "You take it."},
            {"observation": KITCHEN, "facts": {"location": "kitchen", **recipe},
             "action": f"cook red potato with {appliance}", "result": "Done."},
        ],
        "outcome": {"success": True},
    })


def test_facts_read_along_the_piece_join_its_state_and_conditions() -> None:
    t = _traj("e1", "fry", "stove")
    assert observed_along([(i, s) for i, s in enumerate(t.steps)]) == {
        "location": "kitchen", **RECIPE}
    # two lessons: the kitchen piece, and its last action (what the success turned on), cut off
    # because the recipe was read in between
    head, tail = RulesDistiller().distill(t)
    assert tail.content.endswith(": cook red potato with stove.")
    for plan in (head, tail):
        assert plan.state.facts == {"location": "kitchen", **RECIPE}
        assert "cook_1 == 'fry'" in plan.conditions
        assert "location == 'kitchen'" in plan.conditions
        # a value the plan names is a binding to adapt, not a precondition
        assert not any(c.startswith("ingredient_1") for c in plan.conditions)
    # a fact the first state already had keeps its first value
    steps = [(0, t.steps[0].model_copy(update={"facts": {"location": "kitchen", "cook_1": "x"}})),
             (1, t.steps[1])]
    assert observed_along(steps)["cook_1"] == "x"


def test_recall_waits_for_the_recipe_then_serves_only_the_matching_lesson(
    tmp_path: Path,
) -> None:
    me = Principal(tenant="tw")
    with Memory(tmp_path / "m.db", embedder="hash") as mem:
        mem.learn(_traj("fried", "fry", "stove"), principal=me)
        mem.learn(_traj("roasted", "roast", "oven"), principal=me)
        before = mem.recall(State(KITCHEN, {"location": "kitchen"}), principal=me,
                            namespace="tw", intent="cook the meal")
        assert before.mode.value == "INSUFFICIENT_EVIDENCE"
        assert "cook_1" in before.missing_facts
        now = {"location": "kitchen", "ingredient_1": "yellow onion", "cook_1": "roast",
               "cut_1": "slice"}
        after = mem.recall(State(KITCHEN, now), principal=me, namespace="tw",
                           intent="cook the meal")
    assert after.mode.value == "GUIDED"
    texts = " ".join(i.text for i in after.items)
    assert "with oven" in texts and "with stove" not in texts
    assert "yellow onion" in texts  # the ingredient is adapted to the present recipe
