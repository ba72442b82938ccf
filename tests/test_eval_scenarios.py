"""Scenario files: loading, validation errors that name the field, and the generator."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from situated.eval.generator import DOMAINS, generate
from situated.eval.scenarios import (
    SLICES,
    ScenarioError,
    load_many,
    load_scenarios,
    parse_scenarios,
    shipped_paths,
)

GOOD: dict[str, Any] = {
    "format": "situated-eval/1",
    "scenarios": [
        {
            "id": "t-1",
            "domain": "household",
            "slice": "in_distribution",
            "principal": {"tenant": "home"},
            "intent": "heat the coffee",
            "present": {"text": "The microwave is broken.", "facts": {"microwave_working": False}},
            "options": ["microwave", "stove"],
            "answer": "stove",
            "memories": [
                {"key": "stove", "content": "Use a pan on the stove.",
                 "state": {"text": "Broken microwave.", "facts": {"microwave_working": False}},
                 "conditions": ["microwave_working == false"], "applies": True},
                {"key": "micro", "content": "Microwave it for a minute.",
                 "state": {"text": "Working microwave.", "facts": {"microwave_working": True}},
                 "applies": False, "tags": ["twin"]},
            ],
        }
    ],
}


def _write(tmp_path: Path, data: Any, name: str = "s.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _error(tmp_path: Path, data: Any) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenarios(_write(tmp_path, data))
    return info.value


def test_a_valid_file_loads_with_its_ground_truth(tmp_path: Path) -> None:
    [sc] = load_scenarios(_write(tmp_path, GOOD))
    assert sc.ns == "household"
    assert [m.key for m in sc.memories if m.applies] == ["stove"]
    assert sc.memory("micro").effect_on_task == "misleads"
    assert sc.memory("stove").effect_on_task == "helps"


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d["scenarios"][0]["memories"][1].pop("applies"),
         "s.json: scenarios[0].memories[1].applies", "required"),
        (lambda d: d["scenarios"][0]["principal"].update(clearance="top-secret"),
         "s.json: scenarios[0].principal.clearance", "not one of"),
        (lambda d: d["scenarios"][0]["memories"][0].update(colour="red"),
         "s.json: scenarios[0].memories[0].colour", "not permitted"),
        (lambda d: d["scenarios"][0]["present"]["facts"].update(bad={"nested": 1}),
         "s.json: scenarios[0].present.facts.bad", ""),
        (lambda d: d["scenarios"][0]["memories"][1].update(key="stove"),
         "s.json: scenarios[0]", "repeated: stove"),
        (lambda d: d["scenarios"][0].update(answer="oven"),
         "s.json: scenarios[0]", "answer must be one of the options"),
        (lambda d: d["scenarios"][0]["memories"][0].update(consent_revoked=True),
         "s.json: scenarios[0].memories[0]", "needs a consent reference"),
        (lambda d: d["scenarios"][0]["memories"][0].update(
            track_record={"uses": 1, "successes": 2}),
         "s.json: scenarios[0].memories[0].track_record", "cannot exceed"),
        (lambda d: d.update(format="other/9"), "s.json: format", ""),
        (lambda d: d.update(scenarios=[]), "s.json: scenarios", "at least 1"),
    ],
)
def test_validation_errors_name_the_file_and_field(
    tmp_path: Path, mutate: Any, field: str, words: str
) -> None:
    data = copy.deepcopy(GOOD)
    mutate(data)
    err = _error(tmp_path, data)
    assert err.field == field, str(err)
    assert words in err.message


def test_repeated_ids_unreadable_and_malformed_files(tmp_path: Path) -> None:
    data = copy.deepcopy(GOOD)
    data["scenarios"].append(copy.deepcopy(data["scenarios"][0]))
    err = _error(tmp_path, data)
    assert err.field == "s.json: scenarios[1].id"
    assert "repeats scenarios[0]" in err.message

    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"bad.json: not valid JSON: line 1"):
        load_scenarios(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenarios(tmp_path / "missing.json")
    with pytest.raises(ScenarioError, match="an object with a 'scenarios' list"):
        parse_scenarios([1, 2], "list.json")

    a = _write(tmp_path, GOOD, "a.json")
    b = _write(tmp_path, GOOD, "b.json")
    with pytest.raises(ScenarioError, match=r"also used in a\.json"):
        load_many([a, b])


def test_yaml_files_load_like_json(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(GOOD), encoding="utf-8")
    assert load_scenarios(p) == load_scenarios(_write(tmp_path, GOOD))


def test_scope_and_staleness_come_from_the_data() -> None:
    data = copy.deepcopy(GOOD)
    mems = data["scenarios"][0]["memories"]
    mems += [
        {"key": "other", "content": "x", "tenant": "elsewhere", "applies": False},
        {"key": "secret", "content": "y", "classification": "restricted", "applies": False},
        {"key": "admin", "content": "z", "roles": ["admin"], "applies": False},
        {"key": "old", "content": "k1", "kind": "fact", "entity": "k", "attribute": "a",
         "value": 1, "valid_from": -100, "applies": False},
        {"key": "new", "content": "k2", "kind": "fact", "entity": "k", "attribute": "a",
         "value": 2, "valid_from": -1, "applies": True},
        {"key": "expired", "content": "e", "valid_from": -10, "valid_until": -5,
         "applies": False},
        {"key": "v1", "content": "p", "policy_version": "v1", "applies": False},
    ]
    data["scenarios"][0]["policy"] = {"version": "v2"}
    [sc] = parse_scenarios(data)
    assert [m.key for m in sc.memories if not sc.in_scope(m)] == ["other", "secret", "admin"]
    assert [m.key for m in sc.memories if sc.is_stale(m)] == ["old", "expired", "v1"]


def test_shipped_files_cover_every_slice_in_three_domains() -> None:
    scenarios = load_many(shipped_paths())
    names = {p.name for p in shipped_paths()}
    assert {"quick.json", "handbuilt.json"} <= names
    cells = {(s.domain, s.slice) for s in scenarios}
    for domain in ("household", "shopping", "ops"):
        for s in SLICES:
            assert (domain, s) in cells, (domain, s)


def test_the_shipped_quick_set_is_the_generator_output() -> None:
    """quick.json is `generate(0, 1, prefix="quick")`; regenerate it if the generator changed:
    python -c 'from situated.eval.generator import write_quick_set; write_quick_set()'"""
    quick = next(p for p in shipped_paths() if p.name == "quick.json")
    assert load_scenarios(quick) == generate(0, 1, prefix="quick")


def test_the_generator_is_deterministic_and_builds_matched_triples() -> None:
    a = generate(7, 2)
    assert a == generate(7, 2)
    assert a != generate(8, 2)
    assert len(a) == len(DOMAINS) * len(SLICES) * 2
    assert len({s.id for s in a}) == len(a)
    triples = [s for s in a if s.slice in ("in_distribution", "ood_state")]
    assert triples
    for sc in triples:
        app, twin = sc.memory("applicable"), sc.memory("twin")
        assert app.applies and not twin.applies
        assert app.content != twin.content
        assert sc.answer in sc.options
        assert app.state is not None and twin.state is not None
        if not app.state.facts:
            continue
        fam = next(f for d in DOMAINS for f in d.families if f.intent == sc.intent)
        material = set(fam.material(random.Random(0), 0, False))
        if "twin:fact_flip" in twin.tags:  # the same state with the material fact(s) changed
            changed = {k for k in app.state.facts if app.state.facts[k] != twin.state.facts[k]}
            assert changed and changed <= material, (sc.id, changed, material)
        else:  # the material fact was not recorded (or never observed); the rest is the same
            assert not material & set(twin.state.facts)
            assert twin.state.facts == {
                k: v for k, v in app.state.facts.items() if k not in material}
