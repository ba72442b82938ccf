"""The attribute schema: kinds carry their meaning; single-valuedness is learned from outcome
evidence and replacement wording, supersedes retroactively, and counter-evidence blocks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from situated import Memory, Principal
from situated.learning.schema import THRESHOLD, decide, p_single
from situated.models import LifecycleState, MemoryRecord
from situated.store.ledger import EventType


def _pref(mem: Memory, who: Principal, entity: str, value: str, text: str = "",
          namespace: str = "travel", **kw: object) -> MemoryRecord:
    return mem.add(text or f"{entity.title()} prefers the {value} seat.", principal=who,
                   kind="preference", namespace=namespace, entity=entity, attribute="seat",
                   value=value, **kw)  # type: ignore[arg-type]


def _state(mem: Memory, who: Principal, rec: MemoryRecord) -> LifecycleState:
    return mem.inspect(rec.id, principal=who).state


def _use(mem: Memory, who: Principal, rec: MemoryRecord, success: bool) -> None:
    """A recall that serves `rec`, then feedback that used it."""
    b = mem.recall(rec.content, principal=who, namespace="travel", k=10)
    assert rec.id in {i.memory_id for i in b.items}, b
    mem.feedback(b.recall_id, principal=who, success=success, used=[rec.id])


def test_posterior() -> None:
    assert p_single(0, 0) == pytest.approx(0.5)
    assert p_single(3, 0) == pytest.approx(15 / 16)
    assert p_single(3, 0) >= THRESHOLD
    assert p_single(2, 0) < THRESHOLD
    assert decide(3, 1) == "blocked" and decide(0, 0) == "undecided"
    assert decide(5, 1) == "single"


def test_preferences_keep_every_value_by_default_facts_do_not(
    mem: Memory, acme: Principal
) -> None:
    a = _pref(mem, acme, "dana", "aisle")
    b = _pref(mem, acme, "dana", "window")
    assert {_state(mem, acme, r) for r in (a, b)} == {LifecycleState.ACTIVE}
    f1 = mem.add("Dana lives in Oslo.", principal=acme, kind="fact", entity="dana",
                 attribute="city", value="Oslo")
    mem.add("Dana lives in Rome.", principal=acme, kind="fact", entity="dana",
            attribute="city", value="Rome")
    assert _state(mem, acme, f1) is LifecycleState.INVALIDATED


def test_single_valued_learned_from_failures_supersedes_retroactively(
    mem: Memory, acme: Principal
) -> None:
    old = _pref(mem, acme, "dana", "aisle")
    new = _pref(mem, acme, "dana", "window")
    erin_old = _pref(mem, acme, "erin", "front")  # a conflict no outcome ever touched
    erin_new = _pref(mem, acme, "erin", "back")
    fay_old = _pref(mem, acme, "fay", "aisle", namespace="trains")  # another namespace
    fay_new = _pref(mem, acme, "fay", "window", namespace="trains")
    dana_train = _pref(mem, acme, "dana", "aisle", namespace="trains")  # one value there
    for n in range(2):
        _use(mem, acme, old, success=False)
        assert _state(mem, acme, old) is LifecycleState.ACTIVE, n  # not yet: below threshold
    assert [e["decision"] for e in mem.stats(principal=acme).attribute_schema] == ["undecided"]
    _use(mem, acme, old, success=False)  # the third piece of evidence
    assert _state(mem, acme, old) is LifecycleState.INVALIDATED
    assert _state(mem, acme, erin_old) is LifecycleState.INVALIDATED  # retroactively
    assert _state(mem, acme, fay_old) is LifecycleState.INVALIDATED
    assert {_state(mem, acme, r) for r in (new, erin_new, fay_new, dana_train)} == {
        LifecycleState.ACTIVE}  # the newest per namespace and entity stays
    assert mem.inspect(erin_old.id, principal=acme).superseded_by == erin_new.id
    [entry] = mem.stats(principal=acme).attribute_schema
    assert entry["attribute"] == "seat" and entry["decision"] == "single"
    assert entry["single_evidence"] == 3 and entry["multi_evidence"] == 0
    # every decision is a ledger event on the memory that gave the evidence
    events = [e for e in mem.history(old.id, principal=acme) if e.event is EventType.SCHEMA]
    assert [e.data["decision"] for e in events] == ["undecided", "undecided", "single"]
    assert events[-1].data["changed"] is True and "undecided -> single" in events[-1].reason
    # from now on a newer value supersedes at once
    third = _pref(mem, acme, "dana", "middle")
    assert _state(mem, acme, new) is LifecycleState.INVALIDATED
    assert _state(mem, acme, third) is LifecycleState.ACTIVE
    # a rebuild replays the ledger to the same states
    assert mem.health().ledger_mismatches == 0


def test_counter_evidence_blocks_and_multi_valued_never_loses_a_value(
    mem: Memory, acme: Principal
) -> None:
    tea = _pref(mem, acme, "dana", "tea", "Dana likes tea.")
    jazz = _pref(mem, acme, "dana", "jazz", "Dana likes jazz.")
    _use(mem, acme, tea, success=True)  # the older value still right after the newer one
    for _ in range(3):
        _use(mem, acme, tea, success=False)
    [entry] = mem.stats(principal=acme).attribute_schema
    assert (entry["single_evidence"], entry["multi_evidence"]) == (3, 1)
    assert entry["decision"] == "blocked" and entry["p_single"] < THRESHOLD
    assert _state(mem, acme, jazz) is LifecycleState.ACTIVE
    assert _state(mem, acme, tea) is not LifecycleState.INVALIDATED  # blamed, never replaced
    assert mem.inspect(tea.id, principal=acme).superseded_by is None
    # written as multi-valued: never evidence, never superseded
    x = _pref(mem, acme, "finn", "aisle", multi_valued=True)
    y = _pref(mem, acme, "finn", "window", multi_valued=True)
    for _ in range(4):
        _use(mem, acme, x, success=False)
    assert _state(mem, acme, y) is LifecycleState.ACTIVE
    assert mem.inspect(x.id, principal=acme).superseded_by is None  # demoted, never replaced
    assert _state(mem, acme, x) is not LifecycleState.INVALIDATED
    assert [e for e in mem.history(x.id, principal=acme) if e.event is EventType.SCHEMA] == []


def test_replacement_wording_is_evidence_and_stays_in_its_scope(
    mem: Memory, acme: Principal, globex: Principal
) -> None:
    olds = []
    for who in ("gail", "hugo"):
        olds.append(_pref(mem, acme, who, "aisle"))
        _pref(mem, acme, who, "window", f"{who.title()} now prefers the window seat instead.")
    assert {_state(mem, acme, r) for r in olds} == {LifecycleState.ACTIVE}
    other = _pref(mem, globex, "ivy", "aisle")
    _pref(mem, globex, "ivy", "window")
    olds.append(_pref(mem, acme, "ivan", "aisle"))
    _pref(mem, acme, "ivan", "window", "Ivan no longer wants the aisle seat: window now.")
    assert {_state(mem, acme, r) for r in olds} == {LifecycleState.INVALIDATED}
    assert _state(mem, globex, other) is LifecycleState.ACTIVE  # another tenant's schema
    assert mem.stats(principal=globex).attribute_schema == []
    # a narrower scope's schema is not shown to a principal without its role
    secret = Principal("acme", {"support", "vip"}, "internal")
    for who in ("jo", "kim", "lee"):
        mem.add(f"{who} prefers aisle.", principal=secret, kind="preference", entity=who,
                attribute="lounge", value="a", roles=["vip"], namespace="travel")
        mem.add(f"{who} now prefers lounge B instead.", principal=secret, kind="preference",
                entity=who, attribute="lounge", value="b", roles=["vip"], namespace="travel")
    assert {e["attribute"] for e in mem.stats(principal=secret).attribute_schema} == {
        "seat", "lounge"}
    assert {e["attribute"] for e in mem.stats(principal=acme).attribute_schema} == {"seat"}


def test_the_example_runs(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, str(root / "examples" / "attribute_schema.py"),
                          str(tmp_path / "ex.db")], capture_output=True, text=True,
                         timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "erin front: INVALIDATED" in run.stdout and "decision undecided -> single" in (
        run.stdout)
