"""The scorecard's arithmetic on hand-built rows with known answers, and the simulated agent."""

from __future__ import annotations

import math
from typing import Any

import pytest

from situated.eval.agents import Guidance, ServedItem, SimulatedAgent, common_random_number
from situated.eval.metrics import Row, interval, scorecard, summarize_arm, t_quantile
from situated.eval.scenarios import parse_scenarios


def row(seed: int, sid: str, arm: str, success: bool, **kw: Any) -> Row:
    base: dict[str, Any] = dict(
        seed=seed, scenario_id=sid, domain="d", slice=kw.pop("slice", "s"), arm=arm,
        success=success, probability=None, served=(), applicable_held=1, applicable_served=0,
        inapplicable_held=1, inapplicable_served=0, poisoned_held=0, poisoned_served=0, leaks=0,
        stale_served=0, revoked_served=0, tokens=0, latency_ms=1.0,
    )
    base.update(kw)
    return Row(**base)


def test_lift_negative_transfer_and_error_rates_on_known_rows() -> None:
    # seed 1: no memory succeeds on a, b; the arm succeeds on a, c (b: negative transfer)
    # seed 2: no memory succeeds on a; the arm succeeds on a, b, c
    none = [row(1, "a", "no_memory", True), row(1, "b", "no_memory", True),
            row(1, "c", "no_memory", False),
            row(2, "a", "no_memory", True), row(2, "b", "no_memory", False),
            row(2, "c", "no_memory", False)]
    arm = [
        row(1, "a", "x", True, served=("m",), applicable_served=1),
        row(1, "b", "x", False, served=("t",), inapplicable_served=1),
        row(1, "c", "x", True, served=("m", "t"), applicable_served=1, inapplicable_served=1,
            leaks=1, stale_served=1, poisoned_held=1, poisoned_served=1, tokens=30),
        row(2, "a", "x", True),
        row(2, "b", "x", True, served=("m",), applicable_served=1),
        row(2, "c", "x", True, served=("m",), applicable_served=1, tokens=10),
    ]
    s = summarize_arm("x", arm, none)
    # per-seed lift: seed 1 (0 - 1 + 1)/3 = 0, seed 2 (0 + 1 + 1)/3 = 2/3
    assert s.lift.mean == pytest.approx(1 / 3)
    assert s.lift.method == "t over seeds"
    half = t_quantile(1) * math.sqrt(2 * (1 / 3) ** 2) / math.sqrt(2)
    assert s.lift.low == pytest.approx(max(-1.0, 1 / 3 - half))
    assert s.lift.high == pytest.approx(min(1.0, 1 / 3 + half))
    # negative transfer: seed 1 one of three (b), seed 2 none
    assert s.negative_transfer.mean == pytest.approx(1 / 6)
    assert s.negative_transfer.low == 0.0  # clipped: a rate cannot be negative
    assert (s.false_acceptance.num, s.false_acceptance.den) == (2, 6)
    assert (s.false_rejection.num, s.false_rejection.den) == (2, 6)  # 6 held, 4 served
    assert (s.poisoned_served.num, s.poisoned_served.den) == (1, 1)
    assert s.leaks == 1 and s.stale_served == 1
    assert s.tokens_per_task == pytest.approx(40 / 6)
    assert s.success.mean == pytest.approx((2 / 3 + 1) / 2)
    # accepted-only lift: tasks with something served: (1,a) 0, (1,b) -1, (1,c) +1,
    # (2,b) +1, (2,c) +1 -> per seed 0 and +1 -> mean 0.5
    assert s.accepted_tasks == 5
    assert s.accepted_only_lift.mean == pytest.approx(0.5)


def test_paired_differences_and_slices_in_the_scorecard() -> None:
    rows = []
    for seed in (1, 2):
        for sid, sl in (("p", "one"), ("q", "two")):
            rows.append(row(seed, sid, "no_memory", False, slice=sl))
            rows.append(row(seed, sid, "raw_replay", sl == "one", slice=sl))
            rows.append(row(seed, sid, "compiled", True, slice=sl))
    card = scorecard(rows, ["no_memory", "raw_replay", "compiled"], ["two", "one"])
    assert list(card.slices) == ["two", "one"]
    comp = card.overall["compiled"]
    assert comp.lift.mean == pytest.approx(1.0)
    assert comp.vs["raw_replay"].mean == pytest.approx(0.5)
    assert card.slices["one"]["compiled"].vs["raw_replay"].mean == pytest.approx(0.0)
    assert card.slices["two"]["compiled"].vs["raw_replay"].mean == pytest.approx(1.0)
    assert card.overall["raw_replay"].vs == {}
    d = card.to_dict()
    assert d["overall"]["compiled"]["false_acceptance"]["rate"] == 0.0


def test_one_seed_falls_back_to_a_bootstrap_over_tasks() -> None:
    iv = interval([0.5], [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    assert iv.method == "bootstrap over tasks"
    assert iv.mean == 0.5
    assert 0.0 <= iv.low < 0.5 < iv.high <= 1.0
    assert interval([0.5], [0.5]).method == "single task"
    assert interval([], []).n == 0


SCENARIO = {
    "scenarios": [{
        "id": "a", "domain": "d", "slice": "s", "principal": {"tenant": "t"},
        "present": {"text": "now"},
        "memories": [
            {"key": "good", "content": "g", "applies": True},
            {"key": "bad", "content": "b", "applies": False},
            {"key": "noise", "content": "n", "applies": False, "effect": "neutral"},
        ],
    }]
}


def test_the_simulated_agent_follows_its_documented_formula() -> None:
    [sc] = parse_scenarios(SCENARIO)
    agent = SimulatedAgent()

    def p(*items: tuple[str, int]) -> float:
        return agent.probability(sc, Guidance(tuple(ServedItem(k, t) for k, t in items)))

    assert p() == pytest.approx(0.5)  # the documented base rate
    assert p(("good", 0)) == pytest.approx(0.1 * 0.5 + 0.9 * 0.9)
    assert p(("bad", 0)) == pytest.approx(0.1 * 0.5 + 0.9 * 0.1)
    assert p(("bad", 0)) < p() < p(("good", 0))  # negative transfer below the base rate
    # helpful first weighs 1, misleading second 1/2 (and the other way round)
    assert p(("good", 0), ("bad", 0)) == pytest.approx(0.05 + 0.9 * (0.9 + 0.05) / 1.5)
    assert p(("bad", 0), ("good", 0)) == pytest.approx(0.05 + 0.9 * (0.1 + 0.45) / 1.5)
    # distraction: 100 useless tokens cost 0.03; helpful tokens cost nothing
    assert p(("noise", 100)) == pytest.approx(0.47)
    assert p(("good", 100)) == pytest.approx(0.86)
    assert p(("noise", 100_000)) == agent.floor
    # the context's own text (header, labels) is charged like useless memory text
    framed = Guidance((ServedItem("good", 100),), context="...", tokens=200)
    assert agent.probability(sc, framed) == pytest.approx(0.83)
    scenario_rate = parse_scenarios(
        {"scenarios": [SCENARIO["scenarios"][0] | {"base_rate": 0.2}]})[0]
    assert agent.probability(scenario_rate, Guidance()) == pytest.approx(0.2)


def test_common_random_numbers_pair_the_arms() -> None:
    [sc] = parse_scenarios(SCENARIO)
    u = common_random_number(3, "a")
    assert u == common_random_number(3, "a")
    assert u != common_random_number(4, "a")
    agent = SimulatedAgent()
    good = agent.attempt(sc, Guidance((ServedItem("good", 5),)), u)
    none = agent.attempt(sc, Guidance(), u)
    bad = agent.attempt(sc, Guidance((ServedItem("bad", 5),)), u)
    # with one shared draw, a higher probability can never fail where a lower one succeeds
    assert good.success >= none.success >= bad.success
