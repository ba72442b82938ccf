"""Bad input raises a precise error naming the field and leaves the database untouched."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conftest import snapshot
from situated import FeedbackConflict, InvalidInput, Memory, NotFound, Principal, State
from situated.errors import ConditionSyntaxError, EmbedderMismatch


def _setup(mem: Memory, who: Principal) -> str:
    mem.add("tip", principal=who, state=State("s", facts={"x": 1}))
    b = mem.recall(State("s", facts={"x": 1}), principal=who)
    assert b.items
    return b.recall_id


BAD_ADDS: list[tuple[dict[str, Any], str]] = [
    ({"content": ""}, "content"),
    ({"content": "x" * 9000}, "content"),
    ({"kind": "rumour"}, "kind"),
    ({"conditions": ["price <"]}, "conditions"),
    ({"conditions": "price < 3"}, "conditions"),
    ({"classification": "top-secret"}, "classification"),
    ({"authority": "god"}, "authority"),
    ({"namespace": ""}, "namespace"),
    ({"roles": ["ok", ""]}, "roles"),
    ({"valid_from": "yesterday"}, "valid_from"),
    ({"valid_from": 100.0, "valid_until": 50.0}, "valid_until"),
    ({"kind": "fact"}, "entity"),
    ({"entity": "x"}, "attribute"),
    ({"step": -1}, "step"),
    ({"reward": float("nan")}, "reward"),
    ({"value": {"nested": 1}}, "value"),
    ({"evidence": "ref"}, "evidence"),
    ({"content": "check caf\udce9.txt"}, "content"),  # not valid Unicode: cannot be hashed
]


@pytest.mark.parametrize(("override", "field"), BAD_ADDS)
def test_add_rejects_bad_input_untouched(
    mem: Memory, acme: Principal, override: dict[str, Any], field: str
) -> None:
    _setup(mem, acme)
    before = snapshot(mem)
    kw: dict[str, Any] = {"content": "a lesson", "principal": acme}
    kw.update(override)
    with pytest.raises(InvalidInput) as err:
        mem.add(**kw)
    assert err.value.field == field
    assert snapshot(mem) == before


def test_bad_state_facts_name_the_field() -> None:
    with pytest.raises(InvalidInput) as err:
        State("s", facts={"a b": 1})
    assert "fact name" in str(err.value) and err.value.field == "state.facts"
    with pytest.raises(InvalidInput) as bad:
        State("s", facts={"x": [1, 2]})
    assert bad.value.field == "state.facts"
    for text, facts, field in (("caf\udce9", {}, "state.text"),
                               ("s", {"file": "caf\udce9"}, "state.facts")):
        with pytest.raises(InvalidInput) as odd:
            State(text, facts=facts)
        assert odd.value.field == field and "surrogate" in str(odd.value)
    with pytest.raises(InvalidInput) as who:
        Principal(tenant="acme", clearance="cosmic")
    assert who.value.field == "principal.clearance"


RECALL_BAD: list[tuple[dict[str, Any], str]] = [
    ({"k": 0}, "k"),
    ({"k": "5"}, "k"),
    ({"budget_tokens": -3}, "budget_tokens"),
    ({"as_of": "not a time"}, "as_of"),
    ({"namespace": ""}, "namespace"),
    ({"state": 42}, "state"),
]


@pytest.mark.parametrize(("override", "field"), RECALL_BAD)
def test_recall_rejects_bad_input_untouched(
    mem: Memory, acme: Principal, override: dict[str, Any], field: str
) -> None:
    _setup(mem, acme)
    before = snapshot(mem)
    kw: dict[str, Any] = {"state": State("s"), "principal": acme}
    kw.update(override)
    with pytest.raises(InvalidInput) as err:
        mem.recall(**kw)
    assert err.value.field == field
    assert snapshot(mem) == before


def test_feedback_errors_change_nothing(mem: Memory, acme: Principal) -> None:
    rid = _setup(mem, acme)
    before = snapshot(mem)
    cases: list[tuple[Callable[[], object], type[Exception]]] = [
        (lambda: mem.feedback("rc_nope", principal=acme, success=True), NotFound),
        (lambda: mem.feedback(rid, principal=acme, success="yes"), InvalidInput),  # type: ignore[arg-type]
        (lambda: mem.feedback(rid, principal=acme, success=True, used=["mem_x"]), InvalidInput),
        (lambda: mem.feedback(rid, principal=acme, success=True, used="mem_x"), InvalidInput),
        (lambda: mem.feedback(rid, principal=acme, success=True, reward=float("nan")),
         InvalidInput),
    ]
    for call, exc in cases:
        with pytest.raises(exc):
            call()
        assert snapshot(mem) == before


def test_feedback_is_idempotent_and_conflicts_are_refused(mem: Memory, acme: Principal) -> None:
    rid = _setup(mem, acme)
    mid = mem.store.get_recall(rid, acme).served[0]
    first = mem.feedback(rid, principal=acme, success=True, used=[mid])
    again = mem.feedback(rid, principal=acme, success=True, used=[mid])
    assert not first.duplicate and again.duplicate
    assert mem.inspect(mid, principal=acme).counters.successes == 1
    before = snapshot(mem)
    with pytest.raises(FeedbackConflict):
        mem.feedback(rid, principal=acme, success=False, used=[mid])
    assert snapshot(mem) == before


def test_condition_error_is_a_condition_syntax_error(mem: Memory, acme: Principal) -> None:
    with pytest.raises(ConditionSyntaxError):
        mem.add("x", principal=acme, conditions=["import os"])


def test_store_refuses_to_mix_embedders(tmp_path: Any, acme: Principal) -> None:
    m = Memory(tmp_path / "m.db", embedder="hash")
    m.add("tip", principal=acme)
    m.close()
    from situated.embed import HashEmbedder

    with pytest.raises(EmbedderMismatch):
        Memory(tmp_path / "m.db", embedder=HashEmbedder(dim=64))


# -- every entry point: the fuzz findings, one regression each (tests/test_fuzz.py finds them) --


def test_memory_path_must_be_a_path_and_nothing_is_created(tmp_path: Any) -> None:
    import os

    before = sorted(os.listdir("."))
    for bad in (5, None, b"m.db", ["m.db"], "", "caf\udce9.db", "nul\x00.db"):
        with pytest.raises(InvalidInput) as err:
            Memory(bad, embedder="hash")  # type: ignore[arg-type]
        assert err.value.field == "path"
    with pytest.raises(InvalidInput) as late:  # a bad later argument: still no file
        Memory("fresh.db", embedder="hash", resident_mb=float("nan"))
    assert late.value.field == "resident_mb"
    for unopenable in (str(tmp_path), str(tmp_path / "no" / "such" / "dir.db")):
        with pytest.raises(InvalidInput) as dir_err:
            Memory(unopenable, embedder="hash")
        assert dir_err.value.field == "path"
    assert sorted(os.listdir(".")) == before


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.history("mem_x", principal=None), "principal"),
        (lambda m: m.inspect(["mem_x"], principal=ACME), "memory_id"),
        (lambda m: m.inspect(2**63, principal=ACME), "memory_id"),
        (lambda m: m.inspect("mem_\udce9", principal=ACME), "memory_id"),
        (lambda m: m.ledger(principal=ACME, limit=0), "limit"),
        (lambda m: m.list(principal=ACME, offset=-1), "offset"),
        (lambda m: m.pending(reviewer="me"), "reviewer"),
        (lambda m: m.promote("mem_x", reviewer=5), "reviewer"),
        (lambda m: m.erase("mem_x", principal=ADMIN, reason="caf\udce9"), "reason"),
        (lambda m: m.revoke_consent(["c"], principal=ADMIN, reason="r"), "consent"),
        (lambda m: m.export(principal=None), "principal"),  # at the call, not at iteration
        (lambda m: m.rebuild(repair="yes"), "repair"),
        (lambda m: m.maintain(actor=None), "actor"),
        (lambda m: m.recall("s", principal=ACME, namespace=b"default"), "namespace"),
        (lambda m: m.list(principal=ACME, states=["bogus"]), "states"),
        (lambda m: m.learn("{", principal=ACME), "trajectory"),
        (lambda m: m.feedback(["rc_x"], principal=ACME, success=True), "recall_id"),
    ],
)
def test_every_entry_point_names_the_bad_argument(
    mem: Memory, call: Callable[[Memory], object], field: str
) -> None:
    before = snapshot(mem)
    with pytest.raises(InvalidInput) as err:
        call(mem)
    assert err.value.field == field
    assert snapshot(mem) == before


ACME = Principal(tenant="acme", roles={"support"}, clearance="internal")
ADMIN = Principal(tenant="acme", roles={"support", "admin"}, clearance="restricted")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"evidence": ["caf\udce9.txt"]}, "evidence[0]"),
        ({"value": "caf\udce9", "entity": "e", "attribute": "a"}, "value"),
        ({"value": 2**63, "entity": "e", "attribute": "a"}, "value"),
        ({"episode_id": "ep\n1"}, "episode_id"),
        ({"consent": "c" * 201}, "consent"),
        ({"action": "x" * 8001}, "action"),
        ({"policy_version": 1}, "policy_version"),
        ({"step": 10**12}, "step"),
        ({"reward": 10**400}, "reward"),
        ({"roles": ["support", 5]}, "roles"),
        ({"valid_from": 1e300}, "valid_from"),
        ({"conditions": ["caf\udce9 == 1"]}, "conditions"),
        ({"source_classification": "cosmic"}, "source_classification"),
    ],
)
def test_values_that_used_to_break_reads_are_refused(
    mem: Memory, override: dict[str, Any], field: str
) -> None:
    before = snapshot(mem)
    with pytest.raises(InvalidInput) as err:
        mem.add("a lesson", principal=ACME, **override)
    assert err.value.field == field
    assert snapshot(mem) == before


def test_a_text_without_tokens_is_recalled_on_the_sqlite_path(tmp_path: Any) -> None:
    """A zero vector has no cosine distance (sqlite-vec returns NULL): similarity 0."""
    m = Memory(tmp_path / "z.db", embedder="hash", resident_mb=0)
    m.add("Offer the prorated refund.", principal=ACME)
    m.add("!!!", principal=ACME)
    assert m.recall("???", principal=ACME).recall_id
    assert m.recall("refund", principal=ACME).recall_id
    m.close()
