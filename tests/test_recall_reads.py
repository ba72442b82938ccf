"""The recall reads the dashboard needs, on `Memory` and `Service`: recent recalls, one recall
opened with its stage trace, the recalls that touched a memory, and `Service.find`; each
scoped to the caller (tenant, dominance over the recalling principal, the memory rule)."""

from __future__ import annotations

import json

import pytest

from situated import Memory, Principal, State
from situated.errors import InvalidInput, NotFound
from situated.service import Pool, Service
from situated.service.models import FindQuery

NOW = State("Annual customer wants a refund 12 days after buying",
            facts={"plan": "annual", "days": 12})


def _two_lessons(mem: Memory, who: Principal) -> tuple[str, str]:
    fits = mem.add("Annual plans within 14 days get a full refund.", principal=who,
                   namespace="refunds", state=State("Annual refund after 10 days",
                                                    facts={"plan": "annual", "days": 10}),
                   conditions=["plan == 'annual'", "days <= 14"])
    stale = mem.add("Annual plans past 30 days get a prorated refund.", principal=who,
                    namespace="refunds", state=State("Annual refund after 60 days",
                                                     facts={"plan": "annual", "days": 60}),
                    conditions=["plan == 'annual'", "days > 30"])
    return fits.id, stale.id


def test_recent_recalls_are_scoped_to_tenant_and_dominance(
    mem: Memory, acme: Principal, globex: Principal
) -> None:
    fits, stale = _two_lessons(mem, acme)
    mine = mem.recall(NOW, principal=acme, namespace="refunds")
    senior = Principal("acme", roles={"support", "billing"}, clearance="confidential")
    theirs = mem.recall(NOW, principal=senior, namespace="refunds")
    mem.add("globex lesson", principal=globex, namespace="refunds", kind="note")
    other = mem.recall(NOW, principal=globex, namespace="refunds")
    assert [v.id for v in mem.recalls(principal=acme)] == [mine.recall_id]
    assert [v.id for v in mem.recalls(principal=senior)] == [theirs.recall_id, mine.recall_id]
    assert [v.id for v in mem.recalls(principal=globex)] == [other.recall_id]
    assert [v.id for v in mem.recalls(principal=senior, limit=1, offset=1)] == [mine.recall_id]
    with pytest.raises(NotFound):
        mem.recall_record(theirs.recall_id, principal=acme)  # a senior's recall: not acme's
    with pytest.raises(NotFound):
        mem.recall_record(mine.recall_id, principal=globex)
    assert [d for _, d in mem.recall_outcomes(principal=acme)] == [["APPLICABLE",
                                                                     "CONDITION_FAILED"]]
    assert len(mem.recall_outcomes(principal=senior)) == 2
    assert len(mem.recall_outcomes(principal=globex)) == 1
    view = mem.recall_record(mine.recall_id, principal=acme)
    assert view.served == (fits,) and view.mode == "GUIDED" and view.hidden == 0
    assert view.rendered is not None and fits in view.rendered
    stages = {(t["memory_id"], t["stage"]) for t in view.payload["trace"]}
    assert {(fits, "retrieve"), (fits, "compile"), (stale, "retrieve")} <= stages
    assert [r["memory_id"] for r in view.payload["briefing"]["rejected"]] == [stale]
    for bad, field in (({"limit": 0}, "limit"), ({"offset": -1}, "offset")):
        with pytest.raises(InvalidInput) as e:
            mem.recalls(principal=acme, **bad)
        assert e.value.field == field
    with pytest.raises(InvalidInput) as e:
        mem.recall_record("", principal=acme)
    assert e.value.field == "recall_id"


def test_recalls_of_a_memory_need_the_memory_and_list_served_and_rejected(
    mem: Memory, acme: Principal, globex: Principal
) -> None:
    fits, stale = _two_lessons(mem, acme)
    first = mem.recall(NOW, principal=acme, namespace="refunds")
    second = mem.recall(NOW, principal=acme, namespace="refunds")
    unrelated = mem.recall(State("printer is jammed"), principal=acme, namespace="printers")
    for mid in (fits, stale):
        ids = [v.id for v in mem.recalls_of(mid, principal=acme)]
        assert ids == [second.recall_id, first.recall_id] and unrelated.recall_id not in ids
    with pytest.raises(NotFound):
        mem.recalls_of(fits, principal=globex)  # another tenant's memory: not found
    assert mem.recalls_of(fits, principal=acme, limit=1)[0].id == second.recall_id


def test_erasure_leaves_no_trace_of_the_memory_in_recall_reads(
    mem: Memory, acme: Principal
) -> None:
    fits, stale = _two_lessons(mem, acme)
    made = mem.recall(NOW, principal=acme, namespace="refunds")
    admin = Principal("acme", roles={"support", "admin"}, clearance="internal")
    mem.erase(stale, principal=admin, reason="customer asked")
    view = mem.recall_record(made.recall_id, principal=acme)
    text = json.dumps(view.payload)
    assert "prorated" not in text and all(t["memory_id"] != stale for t in
                                          view.payload["trace"])
    assert any(t["memory_id"] == fits for t in view.payload["trace"])


def test_service_find_filters_through_the_callers_listing(
    mem: Memory, acme: Principal, globex: Principal
) -> None:
    fits, stale = _two_lessons(mem, acme)
    note = mem.add("Refund notes go in the CRM", principal=acme, namespace="refunds",
                   kind="note", authority="user_declared").id
    mem.add("Refund notes for globex", principal=globex, namespace="refunds", kind="note")
    service = Service(Pool.of(mem))

    def ids(**q: object) -> list[str]:
        return [d.id for d in service.find(acme, FindQuery.model_validate(q))]

    assert ids() == [fits, stale, note]
    assert ids(text="PRORATED") == [stale]
    assert ids(text="after 10 days") == [fits]  # the source state is searched too
    assert ids(kinds=["note"]) == [note] and ids(authorities=["user_declared"]) == [note]
    assert ids(text="refund notes") == [note]  # never globex's
    assert ids(states=["PROPOSED"]) == [] and ids(limit=1, offset=1) == [stale]
    with pytest.raises(InvalidInput) as e:
        service.find(acme, FindQuery(text="x" * 201))
    assert e.value.field == "text"
    assert service.recalls(acme) == [] and service.recall_outcomes(acme) == []
    assert sorted(service.utilities(acme)) == [0.5, 0.5, 0.5] and service.utilities(acme, 1)
    assert len(service.utilities(globex)) == 1
    made = mem.recall(NOW, principal=acme, namespace="refunds")
    doc = service.recall_record(acme, made.recall_id)
    assert doc.versions["reconstructor"].startswith("rules@") and doc.trace
    assert [d.recall_id for d in service.recalls_of(acme, fits)] == [made.recall_id]
