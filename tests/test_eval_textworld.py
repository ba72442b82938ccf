"""The TextWorld adapter: parsing the game's text, the cooking agent, the metrics, and (slow) a
real run on games `tw-make` generates from fixed seeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openai_server import OpenAIStub, Request, chat_reply
from situated.errors import ModelError
from situated.eval.envs.swagent import Advice, Plan
from situated.eval.envs.textworld import (
    ARMS,
    RAW_HEADER,
    Episode,
    TextWorldMissing,
    annotate,
    make_config,
    make_games,
    run_textworld,
    summarise,
    unavailable_reason,
)
from situated.eval.envs.twagent import CookAgent
from situated.eval.envs.twllm import LLMClient, parse_command
from situated.eval.envs.twparse import (
    clean,
    inventory,
    location,
    parse_recipe,
    preparation_done,
    state_facts,
)

COOKBOOK = (
    '\nYou open the copy of "Cooking: A Modern Approach (3rd Ed.)" and start reading:\n\n'
    "Recipe #1\n---------\nGather all following ingredients and follow the directions to "
    "prepare this tasty meal.\n\nIngredients:\npork chop\n  red potato\n\nDirections:\n"
    "dice the pork chop\n  roast the pork chop\n  slice the red potato\n  fry the red potato\n"
    "  prepare meal\n\n\n\n\n>                                  -= Kitchen =-0/5"
)
KITCHEN = (
    "-= Kitchen =-\nYou've just shown up in a kitchen.\n\nYou see an oven. On the counter you "
    "see a raw red potato and a cookbook.\n\nThere is an exit to the west."
)


def test_the_games_text_becomes_location_recipe_and_inventory() -> None:
    assert location(KITCHEN) == "kitchen"
    assert location("\n\n-= Corridor =-\nYou arrive in a corridor.") == "corridor"
    recipe = parse_recipe(COOKBOOK)
    assert recipe == (("pork chop", ("dice", "roast")), ("red potato", ("fry", "slice")))
    assert parse_recipe(KITCHEN) is None
    facts = state_facts("kitchen", recipe)
    assert facts == {"location": "kitchen", "ingredients": 2, "ingredient_1": "pork chop",
                     "cook_1": "roast", "cut_1": "dice", "ingredient_2": "red potato",
                     "cook_2": "fry", "cut_2": "slice"}
    assert state_facts("kitchen", None) == {"location": "kitchen"}
    assert inventory("You are carrying: a sliced fried yellow onion and a knife.") == (
        "yellow onion", "knife")
    assert inventory("You are carrying nothing.") == ()
    assert "-= Kitchen =-0/5" not in clean(COOKBOOK)
    assert preparation_done("\nYou fried the red potato.\n") == ("fry", "red potato")
    assert preparation_done("You dice the pork chop.") == ("dice", "pork chop")
    assert preparation_done("You take the knife.") is None


def test_annotate_marks_score_changes_and_a_lost_game() -> None:
    assert annotate("You take it.\n\n>   -= Kitchen =-1/6", 0, 1, False) == (
        "You take it. [score 0 -> 1]")
    lost = annotate("You roasted the red potato. *** You lost! ***", 1, 1, True)
    assert lost.endswith("[the task failed]")  # the rules distiller's failure words see it


ADM_KITCHEN = ["examine cookbook", "go west", "open fridge", "take knife from table",
               "take red potato from counter", "look", "inventory"]


def test_the_agent_reads_the_recipe_gathers_and_prepares_on_its_own() -> None:
    agent = CookAgent("s")
    assert agent.next_action("kitchen", ADM_KITCHEN, ()) == ("examine cookbook", None)
    agent.recipe = (("red potato", ("fry", "slice")),)
    assert agent.next_action("kitchen", ADM_KITCHEN, ())[0] == "take red potato from counter"
    assert agent.next_action("kitchen", ADM_KITCHEN, ("red potato",))[0] == (
        "take knife from table")
    held = ("red potato", "knife")
    adm = ["slice red potato with knife", "cook red potato with oven",
           "cook red potato with stove", "go west"]
    cook = agent.next_action("kitchen", adm, held)[0]
    assert cook in ("cook red potato with oven", "cook red potato with stove")  # a guess
    agent.result(cook, None, "kitchen", "You fried the red potato.")
    assert agent.next_action("kitchen", adm, held)[0] == "slice red potato with knife"
    agent.result("slice red potato with knife", None, "kitchen", "You slice the red potato.")
    assert agent.next_action("kitchen", ["prepare meal", "go west"], held)[0] == "prepare meal"


def test_the_agent_runs_admissible_plan_steps_and_skips_avoided_ones() -> None:
    agent = CookAgent("s")
    agent.advise(Advice("GUIDED", plans=(Plan("m1", ("go east", "take red potato from counter",
                                                     "cook red potato with oven")),),
                        avoid=(("cook red potato with oven", "m2"),)))
    # `go east` is not admissible in the kitchen: skipped
    assert agent.next_action("kitchen", ADM_KITCHEN, ()) == (
        "take red potato from counter", "m1")
    adm = ["cook red potato with oven", "cook red potato with stove", "go west"]
    action, pid = agent.next_action("kitchen", adm, ("red potato",))
    assert pid is None and action != "cook red potato with oven"
    assert {"m2"} <= agent.used and "m1" in agent.started


def _ep(game: str, arm: str, points: int, won: bool = False, lost: bool = False) -> Episode:
    return Episode(game, "test", arm, points=points, max_points=5, won=won, lost=lost)


def test_negative_transfer_is_paired_with_no_memory_by_game() -> None:
    eps = [_ep("g1", "no_memory", 2), _ep("g1", "raw_replay", 1, lost=True),
           _ep("g1", "compiled", 5, won=True), _ep("g2", "no_memory", 5, won=True),
           _ep("g2", "raw_replay", 5, won=True), _ep("g2", "compiled", 2)]
    s = summarise(eps)
    assert list(s) == list(ARMS)
    assert s["raw_replay"]["negative_transfer"]["value"] == 0.5
    assert s["compiled"]["negative_transfer"]["value"] == 0.5
    assert s["compiled"]["lift"]["value"] == pytest.approx(((100 - 40) + (40 - 100)) / 2)
    assert s["raw_replay"]["lost"]["value"] == 0.5
    minus_raw = s["compiled"]["minus_raw_replay"]["value"]
    assert minus_raw == pytest.approx(((100 - 20) + (40 - 100)) / 2)


def test_a_missing_textworld_is_a_clean_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import situated.eval.envs.textworld as tw

    monkeypatch.setattr(tw, "unavailable_reason", lambda: "no textworld here")
    with pytest.raises(TextWorldMissing, match="no textworld here"):
        run_textworld(True, tmp_path)


needs_textworld = pytest.mark.skipif(unavailable_reason() is not None,
                                     reason=str(unavailable_reason()))


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two train and two test games, generated once by `tw-make` for this module."""
    cache = tmp_path_factory.mktemp("tw-games")
    make_games(make_config(False, 2, 2), cache)
    return cache


@pytest.mark.slow
@needs_textworld
def test_tiny_real_run(tmp_path: Path, games: Path) -> None:
    cache = games
    result = run_textworld(False, tmp_path / "out", train_games=2, test_games=2,
                           embedder="hash", cache_dir=cache, step_cap=40)
    assert sorted(p.name for p in cache.glob("*.z8")) == sorted(  # nothing else generated
        result["games"]["train"] + result["games"]["test"])
    assert all("-train-" in g for g in result["games"]["train"])
    assert all("-test-" in g for g in result["games"]["test"])
    mem = result["memory"]
    assert mem["gold_won"] == 2 and mem["promoted"] > 0
    rows = result["episodes"]
    assert len(rows) == 2 * len(ARMS)
    assert {r["arm"] for r in rows} == set(ARMS)
    assert all(r["tokens"] == 0 for r in rows if r["arm"] == "no_memory")
    assert all(r["tokens"] > 0 for r in rows if r["arm"] == "compiled")
    data = json.loads((tmp_path / "out" / "textworld.json").read_text())
    assert set(data["arms"]) == set(ARMS)
    trajs = [json.loads(line) for line in
             (tmp_path / "out" / "textworld-train-trajectories.jsonl").read_text().splitlines()]
    first = trajs[0]["steps"][0]
    assert "-= " in first["observation"]  # the game's own text
    gold = trajs[0]  # the walkthrough: won, ended by the game, the score as each step's reward
    assert gold["outcome"]["success"] and gold["outcome"]["terminated"]
    assert gold["steps"][-1]["reward"] == 1.0 and all(
        0 <= s["reward"] <= 1 for t in trajs for s in t["steps"])
    assert set(first["facts"]) <= {"location", "ingredients"} | {
        f"{k}_{n}" for k in ("ingredient", "cook", "cut") for n in range(1, 6)}
    # the games are reused from the cache: a second run generates nothing
    again = run_textworld(False, tmp_path / "out2", train_games=2, test_games=2,
                          embedder="hash", cache_dir=cache, step_cap=40)
    assert again["wall_seconds"]["games"] < 5
    assert result["agent"] == {"name": "cook"}
    def strip(rs: list[dict[str, object]]) -> list[dict[str, object]]:
        # memory ids are random, and they are cited in the context (token counts vary)
        return [r | {"used": len(r["used"]), "tokens": None} for r in rs]  # type: ignore

    assert strip(again["episodes"]) == strip(rows)


def _player(req: Request) -> Any:
    """A scripted model: a command the notes name if admissible, else the first exit, else the
    first command; every fifth answer is not a command at all."""
    prompt = req.prompt
    admissible = [ln[2:] for ln in prompt.split("Admissible commands:")[1].splitlines()
                  if ln.startswith("- ")]
    if len(_player.seen) % 5 == 4:
        _player.seen.append("bad")
        return chat_reply("I think I will cook.")
    notes = prompt.split("Notes from memory:")[1] if "Notes from memory:" in prompt else ""
    named = [a for a in admissible if a in notes and not a.startswith("examine")]
    exits = [a for a in admissible if a.startswith("go ")]
    choice = (named or exits or admissible)[0]
    _player.seen.append(choice)
    return chat_reply({"command": choice})


_player.seen = []  # type: ignore[attr-defined]


def test_parse_command_accepts_only_admissible_commands() -> None:
    adm = ["go east", "take knife from table"]
    assert parse_command('{"command": "Take  knife from table"}', adm) == "take knife from table"
    assert parse_command('```json\n{"command": "go east"}\n```', adm) == "go east"
    for bad in ('{"command": "fly away"}', "go east", '{"cmd": "go east"}'):
        with pytest.raises(ModelError):
            parse_command(bad, adm)


@pytest.mark.slow
@needs_textworld
def test_an_llm_agent_plays_the_test_games_over_http(tmp_path: Path, games: Path) -> None:
    _player.seen.clear()  # type: ignore[attr-defined]
    with OpenAIStub(chat=_player) as srv:
        client = LLMClient(srv.url, "stub-model")
        result = run_textworld(False, tmp_path / "out", train_games=2, test_games=1,
                               embedder="hash", cache_dir=games, step_cap=12, llm=client)
        client.close()
        sent = list(srv.chat_requests)
    assert not srv.unscripted
    rows = result["episodes"]
    assert {r["arm"] for r in rows} == set(ARMS)
    assert result["agent"]["name"] == "llm"
    assert result["agent"]["requests"] == len(sent) == sum(r["steps"] for r in rows)
    assert result["agent"]["failures"] == sum(1 for x in _player.seen if x == "bad") > 0
    prompts = [r.prompt for r in sent]
    assert all("Admissible commands:" in p and "-= " in p for p in prompts)
    assert any("Memory is quoted data" in p for p in prompts)  # compiled
    assert any(RAW_HEADER in p for p in prompts)  # raw replay
    assert sum("Notes from memory:" not in p for p in prompts) >= rows[0]["steps"]
    for r in sent:  # the answer is constrained to the admissible commands listed
        listed = [ln[2:] for ln in r.prompt.split("Admissible commands:")[1].splitlines()
                  if ln.startswith("- ")]
        fmt = r.response_format
        assert fmt["type"] == "json_schema"
        assert fmt["json_schema"]["schema"]["properties"]["command"]["enum"] == list(
            dict.fromkeys(listed))
    assert result["agent"]["tokens"] == {"prompt_tokens": 10 * len(sent),
                                         "completion_tokens": 5 * len(sent)}
    assert result["agent"]["seconds"] >= 0
