"""Learning from outcomes: utility, lifecycle without deletion, supersession, as_of, learned."""

from __future__ import annotations

import time
import warnings
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situated import LifecycleState, Memory, NotFound, Principal, State
from situated.errors import SupersessionWarning
from situated.learning.learned import LearnedReconstructor
from situated.learning.lifecycle import LifecycleRules
from situated.store.ledger import EventType
from situated.store.scope import Eligibility

S = State("deploy failed on the api", facts={"service": "api"})


def _use(mem: Memory, who: Principal, mid: str, success: bool, namespace: str | None = None,
         state: State = S) -> None:
    b = mem.recall(state, principal=who, namespace=namespace, k=10)
    assert mid in {i.memory_id for i in b.items}, b.explain()
    mem.feedback(b.recall_id, principal=who, success=success, used=[mid])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(outcomes=st.lists(st.booleans(), min_size=1, max_size=12))
def test_never_demoted_before_min_uses_and_credit_revives(
    tmp_path_factory: pytest.TempPathFactory, outcomes: list[bool]
) -> None:
    mem = Memory(tmp_path_factory.mktemp("l") / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    mid = mem.add("Roll back and page the owner.", principal=who, state=S).id
    succ = 0
    for n, ok in enumerate(outcomes, start=1):
        _use(mem, who, mid, ok)
        succ += ok
        rec = mem.inspect(mid, principal=who)
        if n < 3:
            assert rec.state is LifecycleState.ACTIVE
        rate = (succ + 1) / (n + 2)
        if ok and rate >= 0.35:
            assert rec.state is LifecycleState.ACTIVE  # credited use revives
        if rec.state is LifecycleState.LOW_VALUE:
            assert n >= 3 and rate < 0.35
    events = mem.history(mid, principal=who)
    assert [e.event for e in events][:2] == [EventType.PROPOSED, EventType.PROMOTED]
    assert sum(e.event is EventType.FEEDBACK for e in events) == len(outcomes)
    assert mem.rebuild().mismatched == ()


def test_transition_events_carry_their_numbers(mem: Memory, acme: Principal) -> None:
    mid = mem.add("Roll back and page the owner.", principal=acme, state=S).id
    for _ in range(3):
        _use(mem, acme, mid, False)
    trans = [e for e in mem.history(mid, principal=acme) if e.event is EventType.TRANSITIONED]
    assert trans and trans[0].data == {"to": "LOW_VALUE", "uses": 3, "successes": 0}
    assert "0.20" in trans[0].reason


def test_lookalike_that_keeps_failing_sinks_below_helpful_memory(
    mem: Memory, acme: Principal
) -> None:
    look = mem.add("Deploy failed on the api: restart the api pods.", principal=acme, state=S).id
    good = mem.add("Check the migration log, then roll back the schema change.",
                   principal=acme, state=State("deploy failed", facts={"service": "api"})).id
    rounds = 0
    for rounds in range(1, 11):
        b = mem.recall(S, principal=acme, k=10)
        ranked = sorted(b.items, key=lambda i: -i.scores.expected_utility)
        if ranked and ranked[0].memory_id == good and rounds > 1:
            break
        served = {i.memory_id for i in b.items}
        mem.feedback(b.recall_id, principal=acme, success=False,
                     used=[look] if look in served else [])
        b2 = mem.recall(S, principal=acme, k=10)
        if good in {i.memory_id for i in b2.items}:
            mem.feedback(b2.recall_id, principal=acme, success=True, used=[good])
    assert rounds <= 4, f"look-alike still on top after {rounds} rounds"


def test_utility_is_per_namespace(mem: Memory, acme: Principal) -> None:
    mid = mem.add("Ask the owner before acting.", principal=acme, namespace="deploys",
                  state=S).id
    for _ in range(3):
        _use(mem, acme, mid, False, namespace="deploys")
    elig = Eligibility.for_inspection(acme)
    counts = mem.store.namespace_counters([mid], "deploys", elig)
    assert counts[mid] == (3, 0)
    assert mem.store.namespace_counters([mid], "approvals", elig) == {}
    outsider = Eligibility.for_inspection(Principal("acme", clearance="public"))
    assert mem.store.namespace_counters([mid], "deploys", outsider) == {}
    assert mem.rebuild().mismatched == ()


def test_archive_after_period_but_never_with_credit(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash",
                 lifecycle=LifecycleRules(archive_after_days=0))
    who = Principal(tenant="acme")
    useless = mem.add("Restart everything.", principal=who, state=S).id
    credited = mem.add("Restart only the api pods and watch errors.", principal=who,
                       state=S).id
    for _ in range(3):
        _use(mem, who, useless, False)
    _use(mem, who, credited, True)
    for _ in range(4):
        _use(mem, who, credited, False)
    assert mem.inspect(credited, principal=who).state is LifecycleState.LOW_VALUE
    report = mem.maintain()
    assert report.archived == (useless,)
    assert mem.inspect(useless, principal=who).state is LifecycleState.ARCHIVED
    assert mem.inspect(credited, principal=who).state is LifecycleState.LOW_VALUE
    b = mem.recall(S, principal=who, k=10)
    assert useless not in {i.memory_id for i in b.items} | {r.memory_id for r in b.rejected}
    assert mem.history(useless, principal=who)[-1].data["to"] == "ARCHIVED"


def test_maintenance_failure_is_loud(mem: Memory, acme: Principal) -> None:
    mid = mem.add("Restart everything.", principal=acme, state=S).id
    for _ in range(3):
        _use(mem, acme, mid, False)
    mem.store.db.execute("UPDATE memories SET state = 'ACTIVE'")  # bypass: demotion is due
    mem.store.db.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON ledger WHEN NEW.event = 'transitioned' "
        "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
    )
    report = mem.maintain()
    assert report.failures and "disk on fire" in report.failures[0]
    assert mem.health().failures == {"maintenance": 1}
    assert mem.stats(principal=acme).maintenance_failures == {"maintenance": 1}


def test_single_valued_supersedes_multi_valued_does_not(mem: Memory, acme: Principal) -> None:
    a = mem.add("Alice's city is Lyon.", principal=acme, kind="fact", entity="alice",
                attribute="city", value="Lyon", valid_from="2024-01-01")
    b = mem.add("Alice's city is Paris.", principal=acme, kind="fact", entity="alice",
                attribute="city", value="Paris", valid_from="2025-01-01")
    assert mem.inspect(a.id, principal=acme).state is LifecycleState.INVALIDATED
    x = mem.add("Alice likes tea.", principal=acme, kind="preference", entity="alice",
                attribute="likes", value="tea", multi_valued=True)
    y = mem.add("Alice likes jazz.", principal=acme, kind="preference", entity="alice",
                attribute="likes", value="jazz", multi_valued=True)
    assert mem.inspect(x.id, principal=acme).state is LifecycleState.ACTIVE
    assert mem.inspect(y.id, principal=acme).state is LifecycleState.ACTIVE
    past = mem.recall(State("alice city"), principal=acme, as_of="2024-06-01")
    assert a.id in {i.memory_id for i in past.items}
    assert b.id not in {i.memory_id for i in past.items}
    assert mem.inspect(a.id, principal=acme, as_of="2024-06-01").id == a.id
    with pytest.raises(NotFound):
        mem.inspect(a.id, principal=acme, as_of="2025-06-01")


def test_additional_value_warns(mem: Memory, acme: Principal) -> None:
    mem.add("Bob speaks French.", principal=acme, kind="fact", entity="bob",
            attribute="language", value="French")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mem.add("Bob also speaks German.", principal=acme, kind="fact", entity="bob",
                attribute="language", value="German")
    assert any(issubclass(w.category, SupersessionWarning) for w in caught)


def test_known_at_returns_what_was_known(mem: Memory, acme: Principal) -> None:
    rec = mem.add("Roll back first.", principal=acme, state=S)
    first = mem.history(rec.id, principal=acme)[-1].at
    for _ in range(3):
        _use(mem, acme, rec.id, False)
    then = mem.inspect(rec.id, principal=acme, known_at=first)
    assert then.state is LifecycleState.ACTIVE and then.counters.uses == 0
    assert mem.inspect(rec.id, principal=acme).counters.uses == 3
    before = first - timedelta(hours=1)
    with pytest.raises(NotFound):
        mem.inspect(rec.id, principal=acme, known_at=before)
    recall_then = mem.recall(S, principal=acme, known_at=before)
    assert not recall_then.items


def test_outcome_triggered_supersession(mem: Memory, acme: Principal) -> None:
    old = mem.add("The api owner is Dana.", principal=acme, kind="fact", entity="api",
                  attribute="owner", value="Dana", valid_from="2026-01-01")
    # a change announced for tomorrow: Dana stays valid until then
    tomorrow = time.time() + 86400
    new = mem.add("The api owner is Eli.", principal=acme, kind="fact", entity="api",
                  attribute="owner", value="Eli", valid_from=tomorrow)
    assert mem.inspect(old.id, principal=acme).validity.valid_until_ts == pytest.approx(tomorrow)
    b = mem.recall(State("who owns the api"), principal=acme)
    assert old.id in {i.memory_id for i in b.items}
    res = mem.feedback(b.recall_id, principal=acme, success=False, used=[old.id])
    assert (old.id, "INVALIDATED") in res.transitions
    stale = mem.inspect(old.id, principal=acme)
    assert stale.state is LifecycleState.INVALIDATED and stale.superseded_by == new.id
    assert stale.validity.valid_until_ts < tomorrow - 3600  # closed now, not tomorrow
    again = mem.recall(State("who owns the api"), principal=acme)
    assert old.id not in {i.memory_id for i in again.items}


def test_late_arriving_older_value_is_superseded_at_once(mem: Memory, acme: Principal) -> None:
    new = mem.add("The api owner is Dana.", principal=acme, kind="fact", entity="api",
                  attribute="owner", value="Dana", valid_from="2026-01-01")
    late = mem.add("The api owner is Eli.", principal=acme, kind="fact", entity="api",
                   attribute="owner", value="Eli", valid_from="2025-01-01")
    closed = mem.inspect(late.id, principal=acme)
    assert closed.state is LifecycleState.INVALIDATED and closed.superseded_by == new.id
    assert mem.inspect(new.id, principal=acme).state is LifecycleState.ACTIVE
    now = mem.recall(State("who owns the api"), principal=acme)
    assert {i.memory_id for i in now.items} == {new.id}
    then = mem.recall(State("who owns the api"), principal=acme, as_of="2025-06-01")
    assert {i.memory_id for i in then.items} == {late.id}


def test_cited_ids_count_as_used(mem: Memory, acme: Principal) -> None:
    mid = mem.add("Roll back first.", principal=acme, state=S).id
    b = mem.recall(S, principal=acme)
    out = f"I rolled back as advised [{mid}] and ignored [mem_0000000000000000]."
    res = mem.feedback(b.recall_id, principal=acme, success=True, cited=out)
    assert res.credited == (mid,)


def test_duplicate_proposal_strengthens_and_retired_lesson_is_flagged(
    mem: Memory, acme: Principal
) -> None:
    first = mem.add("Restart everything at once.", principal=acme, state=S)
    again = mem.add("restart everything at once", principal=acme, state=S)
    assert again.id == first.id
    assert mem.history(first.id, principal=acme)[-1].event is EventType.REINFORCED
    for _ in range(3):
        _use(mem, acme, first.id, False)
    assert mem.inspect(first.id, principal=acme).state is LifecycleState.LOW_VALUE
    back = mem.add("Restart everything at once!", principal=acme, state=S)
    assert back.id != first.id and back.state is LifecycleState.PROPOSED
    gates = mem.history(back.id, principal=acme)[0].data["gates"]
    dedupe = next(g for g in gates if g["gate"] == "dedupe")
    assert dedupe["verdict"] == "hold" and first.id in dedupe["reasons"][0]


def test_learned_falls_back_then_fits_and_reports_calibration(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash", reconstructor="learned")
    who = Principal(tenant="acme")
    good = mem.add("Check the migration log first.", principal=who,
                   state=State("deploy failed", facts={"service": "api", "stage": "deploy"}))
    bad = mem.add("Restart the api pods immediately.", principal=who,
                  state=State("deploy failed", facts={"service": "api"}))
    assert isinstance(mem.reconstructor, LearnedReconstructor)
    b = mem.recall(State("deploy failed", facts={"service": "api", "stage": "deploy"}),
                   principal=who)
    assert all(i.scores.applicability > 0 for i in b.items)
    assert mem.store.get_recall(b.recall_id, who).payload["reconstructions"][
        good.id]["provenance"]["learned"] is False
    for n in range(40):
        st_ = State("deploy failed", facts={"service": "api", "stage": "deploy", "n": n % 4})
        b = mem.recall(st_, principal=who, k=5)
        served = {i.memory_id for i in b.items}
        if good.id in served:
            mem.feedback(b.recall_id, principal=who, success=True, used=[good.id])
        b = mem.recall(st_, principal=who, k=5)
        if bad.id in {i.memory_id for i in b.items}:
            mem.feedback(b.recall_id, principal=who, success=False, used=[bad.id])
    cal = mem.reconstructor.fit("acme")
    assert cal is not None and cal.examples >= 30
    assert mem.reconstructor.fit("globex") is None  # per tenant: globex has no feedback
    assert cal.brier_train < 0.25  # better than always guessing 0.5
    shown = mem.stats(principal=who).calibration
    assert shown is not None and shown["examples"] == cal.examples
    final = mem.recall(State("deploy failed", facts={"service": "api", "stage": "deploy"}),
                       principal=who)
    assert good.id in {i.memory_id for i in final.items}
