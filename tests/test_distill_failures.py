"""The rules distiller reads failure from the environment's reward and the episode's end, not from
words in the text (a room's flavour text saying "can't" or "wrong" is no failure)."""

from __future__ import annotations

from typing import Any

from situated.write.distill import RulesDistiller, Trajectory

STUDIO = ("-= Studio =-\nYou arrive in a studio. You can't help but notice the wrong way "
          "the furniture is set, which is a failure of taste.\n\nThere is an exit to the north.")


def _traj(steps: list[dict[str, Any]], success: bool, terminated: bool | None = None,
          ) -> Trajectory:
    outcome: dict[str, Any] = {"success": success}
    if terminated is not None:
        outcome["terminated"] = terminated
    return Trajectory.model_validate({"episode_id": "e", "task": "take the keyboard",
                                      "steps": steps, "outcome": outcome})


def _failures(t: Trajectory) -> list[str]:
    return [d.content for d in RulesDistiller().distill(t) if d.failure_lesson]


def test_flavour_text_in_a_step_that_worked_is_no_failure() -> None:
    rewarded = _traj([
        {"observation": "spare room", "action": "go south", "result": STUDIO, "reward": 0.0},
        {"observation": "studio", "action": "take keyboard",
         "result": "You take the keyboard. Your score has just gone up by one point.",
         "reward": 1.0},
    ], success=True)
    assert _failures(rewarded) == []
    # without any reward, only the answer to the action (its first sentence) is read
    unrewarded = _traj([
        {"observation": "spare room", "action": "go south", "result": STUDIO},
        {"observation": "studio", "action": "take keyboard", "result": "You take the keyboard."},
    ], success=True)
    assert _failures(unrewarded) == []


def test_a_fall_in_reward_is_a_failure_whatever_the_words() -> None:
    from situated.write.distill import failed_steps

    t = _traj([
        {"observation": "lab", "action": "open door", "result": "The door is open.",
         "reward": 0.5},
        {"observation": "lab", "action": "focus on the rock", "result": "You focus on the rock.",
         "reward": -1.0},
    ], success=False, terminated=True)
    assert failed_steps(t) == [1]
    fails = _failures(t)
    assert any("'focus on the rock' did not work here" in f for f in fails)
    assert any("the episode failed after 'focus on the rock'" in f for f in fails)


def test_the_end_of_an_episode_decides_whether_its_last_action_is_blamed() -> None:
    from situated.write.distill import failed_steps

    steps = [{"observation": "kitchen", "action": "cook potato with oven",
              "result": "You roasted the potato. *** You lost! ***", "reward": 0.4}]
    lost = _traj(steps, success=False, terminated=True)
    assert failed_steps(lost) == [0]
    assert any("the episode failed after 'cook potato with oven'" in f for f in _failures(lost))
    out_of_steps = _traj([{"observation": "hall", "action": "go north",
                           "result": "You can't go that way.", "reward": 0.0}],
                         success=False, terminated=False)
    assert _failures(out_of_steps) == []  # rewards exist: the words are not read
    unknown = _traj(steps, success=False)
    assert _failures(unknown) == []  # the reward did not fall and the end is unknown


def test_without_rewards_the_games_own_error_answer_still_counts() -> None:
    from situated.write.distill import says_failed

    assert says_failed("You can't go that way.\n\n-= Hall =-")
    assert not says_failed(STUDIO)
    t = _traj([{"observation": "hall", "action": "go north", "result": "You can't go that way."},
               {"observation": "hall", "action": "go south", "result": STUDIO}], success=False)
    fails = _failures(t)
    assert len(fails) == 1 and "'go north' did not work here" in fails[0]
