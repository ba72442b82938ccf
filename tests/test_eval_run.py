"""`run_eval` end to end on the hash embedder: the quick set, determinism, leaks, agents."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import situated.eval.runner as runner
from openai_server import OpenAIStub, chat_reply, error_reply
from situated.eval import CallableAgent, EvalResult, LLMAgent, ScenarioError, Task, run_eval
from situated.eval.agents import Guidance, task_for
from situated.eval.arms import revoke_available
from situated.eval.scenarios import SLICES, parse_scenarios

TINY: dict[str, Any] = {
    "format": "situated-eval/1",
    "scenarios": [
        {
            "id": "leak-1",
            "domain": "ops",
            "slice": "foreign_scope",
            "principal": {"tenant": "globex", "roles": ["oncall"]},
            "intent": "reduce load on the primary database",
            "present": {"text": "Primary of orders-db at 91 percent CPU; the replica lags 4 "
                                "seconds.",
                        "facts": {"replica_lag_s": 4, "db_cluster": "orders-db"}},
            "options": ["route reads to the replica", "keep reads on the primary"],
            "answer": "route reads to the replica",
            "memories": [
                {"key": "mine", "content": "Shift reads to the replica to relieve the primary.",
                 "state": {"text": "Primary of orders-db hot; the replica lags 2 seconds.",
                           "facts": {"replica_lag_s": 2, "db_cluster": "orders-db"}},
                 "conditions": ["replica_lag_s < 60"], "applies": True},
                {"key": "theirs", "tenant": "umbrella",
                 "content": "Keep reads on the primary of orders-db; the replica lags.",
                 "state": {"text": "Primary of orders-db at 91 percent CPU; the replica lags 4 "
                                   "seconds.",
                           "facts": {"replica_lag_s": 4, "db_cluster": "orders-db"}},
                 "applies": False, "tags": ["foreign"]},
            ],
        },
        {
            "id": "twin-1",
            "domain": "household",
            "slice": "in_distribution",
            "principal": {"tenant": "home"},
            "intent": "warm up the coffee",
            "present": {"text": "The microwave is broken.", "facts": {"microwave_working": False}},
            "options": ["heat the mug in the microwave", "warm the coffee in a pan"],
            "answer": "warm the coffee in a pan",
            "memories": [
                {"key": "pan", "content": "Warm the coffee in a pan on the stove.",
                 "state": {"text": "The microwave was broken.",
                           "facts": {"microwave_working": False}},
                 "conditions": ["microwave_working == false"], "applies": True},
                {"key": "micro", "content": "Heat the mug in the microwave for a minute.",
                 "state": {"text": "The microwave worked.",
                           "facts": {"microwave_working": True}},
                 "applies": False, "tags": ["twin"]},
            ],
        },
    ],
}


def _tiny(tmp_path: Path, data: dict[str, Any] | None = None) -> Path:
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(data or TINY), encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalResult, str]:
    out = tmp_path_factory.mktemp("quick")
    console = Console(record=True, width=220)
    result = run_eval(None, [1, 2], True, out, console, embedder="hash")
    return result, console.export_text()


def test_quick_prints_the_scorecard_for_every_arm_and_slice(
    quick: tuple[EvalResult, str],
) -> None:
    result, text = quick
    assert "Memory Decision Scorecard" in text
    assert "accepted-only lift" in text and "Diagnostic only" in text
    card = result.scorecard
    assert card.arms == ("no_memory", "raw_replay", "utility_replay", "compiled")
    expected = set(SLICES) - set(result.unsupported)
    assert expected <= set(card.slices)
    for arm in card.arms:
        assert arm in text
    assert result.config["embedder"].startswith("hash@")
    assert result.config["tasks"] == len(result.rows) // 4


def test_compiled_recall_never_leaks_and_transfers_less_negatively(
    quick: tuple[EvalResult, str],
) -> None:
    result, _ = quick
    comp = result.scorecard.overall["compiled"]
    raw = result.scorecard.overall["raw_replay"]
    assert comp.leaks == 0
    assert raw.leaks > 0  # raw replay serves same-tenant memories above the principal's scope
    assert comp.negative_transfer.mean < raw.negative_transfer.mean
    assert comp.false_acceptance.value < raw.false_acceptance.value
    assert comp.poisoned_served.num < raw.poisoned_served.num
    assert comp.stale_served < raw.stale_served
    if revoke_available() is None:
        assert comp.revoked_served == 0
        assert raw.revoked_served > 0


def test_results_json_and_plots_are_written(quick: tuple[EvalResult, str]) -> None:
    result, _ = quick
    data = json.loads(result.files["results"].read_text(encoding="utf-8"))
    assert data["format"] == "situated-eval-results/1"
    assert data["config"]["seeds"] == [1, 2]
    assert len(data["rows"]) == len(result.rows)
    overall = data["scorecard"]["overall"]
    assert set(overall) == {"no_memory", "raw_replay", "utility_replay", "compiled"}
    assert overall["compiled"]["lift"]["method"] == "t over seeds"
    assert overall["compiled"]["leaks"] == 0
    for name in ("lift_by_slice", "tokens_vs_success"):
        png = result.files[name]
        assert png.suffix == ".png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 5000


def _without_timing(result: EvalResult) -> list[dict[str, Any]]:
    return [asdict(r) | {"latency_ms": None} for r in result.rows]


def test_the_same_seed_gives_identical_results(tmp_path: Path) -> None:
    path = _tiny(tmp_path)
    a = run_eval([path], [3, 4], False, tmp_path / "a", embedder="hash", plots=False)
    b = run_eval([path], [3, 4], False, tmp_path / "b", embedder="hash", plots=False)
    assert _without_timing(a) == _without_timing(b)
    ja = json.loads(a.files["results"].read_text())
    jb = json.loads(b.files["results"].read_text())
    for j in (ja, jb):
        j.pop("elapsed_s")
        for r in j["rows"]:
            r["latency_ms"] = None
        for group in ("slices", "domains"):
            for by_arm in j["scorecard"][group].values():
                for s in by_arm.values():
                    s["latency_p50_ms"] = s["latency_p95_ms"] = None
        for s in j["scorecard"]["overall"].values():
            s["latency_p50_ms"] = s["latency_p95_ms"] = None
    assert ja == jb
    c = run_eval([path], [5, 6], False, tmp_path / "c", embedder="hash", plots=False)
    assert [r.probability for r in c.rows] == [r.probability for r in a.rows]
    assert {r.seed for r in c.rows} == {5, 6}


def test_an_unscoped_baseline_leaks_and_compiled_recall_does_not(tmp_path: Path) -> None:
    result = run_eval(
        [_tiny(tmp_path)], [1], False, tmp_path / "out", embedder="hash", plots=False,
        arms=["no_memory", "unscoped_replay", "raw_replay", "compiled"],
    )
    leak = result.scorecard.slices["foreign_scope"]
    assert leak["unscoped_replay"].leaks == 1  # the metric sees a leak when there is one
    assert leak["raw_replay"].leaks == 0  # tenant-scoped like mem0's user filter
    assert leak["compiled"].leaks == 0
    served = {r.arm: r.served for r in result.rows if r.scenario_id == "leak-1"}
    assert "theirs" in served["unscoped_replay"]
    assert "theirs" not in served["compiled"]
    twin = {r.arm: r for r in result.rows if r.scenario_id == "twin-1"}
    assert twin["compiled"].served == ("pan",)
    assert twin["raw_replay"].inapplicable_served == 1


def test_revoked_consent_is_reported_as_unsupported_without_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = copy.deepcopy(TINY)
    sc = data["scenarios"][1]
    sc["id"], sc["slice"] = "revoked-1", "revoked_consent"
    sc["memories"][0].update(consent="consent-9", consent_revoked=True, applies=False,
                             effect="helps", tags=["revoked"])
    monkeypatch.setattr(runner, "revoke_available", lambda: "Memory.revoke_consent is missing")
    console = Console(record=True, width=200)
    result = run_eval([_tiny(tmp_path, data)], [1], False, tmp_path / "out", console,
                      embedder="hash", plots=False)
    assert result.unsupported == {"revoked_consent": "Memory.revoke_consent is missing"}
    assert result.skipped == {"revoked_consent": 1}
    assert {r.scenario_id for r in result.rows} == {"leak-1"}
    assert "not yet supported" in console.export_text()


@pytest.mark.skipif(revoke_available() is not None, reason="Memory.revoke_consent is missing")
def test_a_revoked_memory_is_never_served_by_compiled_recall(tmp_path: Path) -> None:
    data = copy.deepcopy(TINY)
    sc = data["scenarios"][1]
    sc["id"], sc["slice"] = "revoked-1", "revoked_consent"
    sc["memories"][0].update(consent="consent-9", consent_revoked=True, applies=False,
                             effect="helps", tags=["revoked"])
    result = run_eval([_tiny(tmp_path, data)], [1], False, tmp_path / "out", embedder="hash",
                      plots=False)
    rows = {r.arm: r for r in result.rows if r.scenario_id == "revoked-1"}
    assert rows["compiled"].revoked_served == 0
    assert rows["raw_replay"].revoked_served == 1


def test_a_bad_user_file_fails_before_anything_runs(tmp_path: Path) -> None:
    data = copy.deepcopy(TINY)
    del data["scenarios"][0]["memories"][0]["applies"]
    with pytest.raises(ScenarioError) as info:
        run_eval([_tiny(tmp_path, data)], [1], False, tmp_path / "out", embedder="hash")
    assert info.value.field == "tiny.json: scenarios[0].memories[0].applies"
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_callable_agent_sees_the_guidance_but_not_the_ground_truth(tmp_path: Path) -> None:
    seen: list[Task] = []

    def agent(task: Task) -> str:
        seen.append(task)
        for option in task.options:  # follow whatever the memory text suggests
            if option.split()[0] in task.context.lower():
                return option
        return task.options[-1]

    result = run_eval([_tiny(tmp_path)], [1], False, tmp_path / "out", embedder="hash",
                      plots=False, agent=CallableAgent(agent))
    assert result.config["agent"] == {"name": "callable"}
    assert len(seen) == 2 * 4
    assert all(not hasattr(t, "memories") for t in seen)
    rows = {(r.scenario_id, r.arm): r for r in result.rows}
    assert rows[("twin-1", "compiled")].success  # only the pan lesson is in its context
    assert rows[("twin-1", "no_memory")].probability is None


def test_the_llm_agent_chooses_an_option_over_a_real_http_endpoint(tmp_path: Path) -> None:
    [sc] = parse_scenarios({"scenarios": [TINY["scenarios"][1]]})
    guidance = Guidance(context="* Warm the coffee in a pan on the stove. [mem_1]")
    with OpenAIStub() as srv:
        srv.chat.push(chat_reply({"action": "warm the coffee in a pan"}),
                      chat_reply("I would heat the mug in the microwave"))
        agent = LLMAgent(srv.url, "stub-model")
        first = agent.attempt(sc, guidance, 0.5)
        second = agent.attempt(sc, guidance, 0.5)
        agent.close()
        sent = srv.chat_requests[0]
    assert first.success and first.choice == "warm the coffee in a pan"
    assert not second.success and second.choice == "heat the mug in the microwave"
    assert "Warm the coffee in a pan on the stove" in sent.prompt
    assert "- heat the mug in the microwave" in sent.prompt
    assert task_for(sc, guidance).options == tuple(sc.options)


def test_the_llm_agent_is_held_to_the_options_and_a_failed_answer_is_a_counted_failure(
    tmp_path: Path,
) -> None:
    [sc] = parse_scenarios({"scenarios": [TINY["scenarios"][1]]})
    guidance = Guidance(context="* Warm the coffee in a pan on the stove. [mem_1]")
    with OpenAIStub() as srv:
        srv.chat.push(
            chat_reply({"action": "warm the coffee in a pan"},
                       usage={"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129}),
            chat_reply({"action": "pour it into the sink"}),  # not an option
            error_reply(500),
            chat_reply('{"action": "warm', finish_reason="length"),
        )
        agent = LLMAgent(srv.url, "stub-model", timeout=5.0, max_retries=0)
        attempts = [agent.attempt(sc, guidance, 0.5) for _ in range(4)]
        agent.close()
        sent = srv.chat_requests
    assert [a.success for a in attempts] == [True, False, False, False]
    assert [a.choice for a in attempts] == ["warm the coffee in a pan", None, None, None]
    schema = sent[0].response_format["json_schema"]["schema"]
    assert sent[0].response_format["type"] == "json_schema"
    assert schema["properties"]["action"]["enum"] == list(sc.options)
    assert schema["required"] == ["action"] and schema["additionalProperties"] is False
    described = agent.describe()
    assert described["requests"] == 4 and described["failures"] == 3
    assert described["prompt_tokens"] == 120 + 10 + 10  # the 500 carries no usage
    assert described["completion_tokens"] == 9 + 5 + 5
    assert described["model"] == "stub-model"


def test_cli_helpers_parse_seeds_and_arms(tmp_path: Path) -> None:
    from situated.errors import InvalidInput
    from situated.eval import parse_arms, parse_seeds

    assert parse_seeds(" 1, 2,3 ") == [1, 2, 3]
    assert parse_seeds(None) is None and parse_seeds("  ") is None
    with pytest.raises(InvalidInput, match="comma-separated integers"):
        parse_seeds("1,x")
    assert parse_arms("no_memory, compiled") == ["no_memory", "compiled"]
    with pytest.raises(InvalidInput, match="seeds must be distinct"):
        run_eval([_tiny(tmp_path)], [1, 1], False, tmp_path / "o", embedder="hash")
    with pytest.raises(InvalidInput, match="unknown arm 'magic'"):
        run_eval([_tiny(tmp_path)], [1], False, tmp_path / "o", embedder="hash",
                 arms=["no_memory", "magic"])


def test_a_proposal_folded_into_an_earlier_memory_is_not_counted_as_served(
    tmp_path: Path,
) -> None:
    from situated.embed import get_embedder
    from situated.eval.arms import Compiled, build_world

    data = copy.deepcopy(TINY["scenarios"][1])
    again = copy.deepcopy(data["memories"][0]) | {"key": "pan_again", "applies": False,
                                                    "effect": "neutral"}
    data["memories"].append(again)
    [sc] = parse_scenarios({"scenarios": [data]})
    world = build_world(sc, tmp_path / "w.db", get_embedder("hash"))
    try:
        assert world.merged == {"pan_again": "pan"}
        guidance = Compiled().serve(world)
    finally:
        world.close()
    assert guidance.keys == ("pan",)
