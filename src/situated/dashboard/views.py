"""What each dashboard page shows, gathered through `Service` as the session's principal.

Nothing here reads the store: every value comes from a `Service` operation made as the
logged-in key's principal, so a page shows what that key may read and nothing else.
"""

from __future__ import annotations

from typing import Any

from situated.dashboard import charts
from situated.errors import NotFound, PermissionDenied
from situated.models import Principal
from situated.service import Service
from situated.service.models import FindQuery, MemoryDoc
from situated.service.operations import OPERATOR_ROLE

CHAIN_MAX = 20
"""Versions followed either way along a supersession chain."""
CHART_MEMORIES = 10_000
CHART_RECALLS = 500
CHART_EVENTS = 2000
"""How far back the charts of the health page read (memories, recalls, ledger events)."""
LIFECYCLE_EVENTS = ("promoted", "rejected", "superseded", "transitioned", "revoked", "erased")


def last_outcome(service: Service, who: Principal, memory_id: str) -> dict[str, Any] | None:
    """The memory's latest feedback event: credited, blamed or exposed, and when."""
    for ev in reversed(service.history(who, memory_id)):
        if ev.event == "feedback":
            return {"credit": ev.data.get("credit", ""), "at": ev.at}
    return None


def memories(service: Service, who: Principal, q: FindQuery) -> list[dict[str, Any]]:
    return [{"doc": d, "last": last_outcome(service, who, d.id)} for d in service.find(who, q)]


def _version(service: Service, who: Principal, memory_id: str) -> MemoryDoc | None:
    try:
        return service.inspect(who, memory_id)
    except NotFound:
        return None


def chain(service: Service, who: Principal, doc: MemoryDoc) -> dict[str, Any]:
    """The versions this memory superseded (older) and that superseded it (newer), as far as
    the principal may read them; a link to one it may not read ends the chain unnamed."""
    older: list[MemoryDoc] = []
    newer: list[MemoryDoc] = []
    cut = {"older": False, "newer": False}
    cur = doc
    while cur.supersedes and len(older) < CHAIN_MAX:
        prev = _version(service, who, cur.supersedes)
        if prev is None:
            cut["older"] = True
            break
        older.append(prev)
        cur = prev
    cur = doc
    while cur.superseded_by and len(newer) < CHAIN_MAX:
        nxt = _version(service, who, cur.superseded_by)
        if nxt is None:
            cut["newer"] = True
            break
        newer.append(nxt)
        cur = nxt
    return {"older": older, "newer": list(reversed(newer)), "cut": cut}


def memory(service: Service, who: Principal, memory_id: str) -> dict[str, Any]:
    doc = service.inspect(who, memory_id)
    return {
        "doc": doc, "chain": chain(service, who, doc),
        "history": service.history(who, memory_id),
        "recalls": service.recalls_of(who, memory_id, 50),
    }


def recall(service: Service, who: Principal, recall_id: str) -> dict[str, Any]:
    """One recall opened: every candidate with its stage decisions and its present state."""
    doc = service.recall_record(who, recall_id)
    order = list(dict.fromkeys([*doc.candidates, *(t.memory_id for t in doc.trace)]))
    served = {i.memory_id: i for i in doc.items}
    rejected = {r.memory_id: r for r in doc.rejected}
    candidates = []
    for mid in order:
        now = _version(service, who, mid)
        candidates.append({
            "id": mid, "now": now, "item": served.get(mid), "rejected": rejected.get(mid),
            "trace": [t for t in doc.trace if t.memory_id == mid],
            "reconstruction": doc.reconstructions.get(mid),
        })
    return {"doc": doc, "candidates": candidates}


def health(service: Service, who: Principal, check: bool) -> dict[str, Any]:
    """Counts by state, failures, charts; with `check` (operator keys) the file's health,
    which reads the whole file (integrity check, ledger replay, resident index)."""
    stats = service.stats(who)
    file_health = None
    if check and OPERATOR_ROLE in who.roles:
        file_health = service.health(who)
    utilities = service.utilities(who, CHART_MEMORIES)
    recalls = service.recall_outcomes(who, CHART_RECALLS)
    verdicts = [(at.timestamp(), d) for at, decisions in recalls for d in decisions]
    series_v = sorted({s for _, s in verdicts})
    events = [e for e in service.ledger(who, CHART_EVENTS, 0) if e.event in LIFECYCLE_EVENTS]
    moves = [(e.at.timestamp(), _move(e.event, e.data)) for e in events]
    series_m = sorted({s for _, s in moves})
    return {
        "stats": stats, "health": file_health, "operator": OPERATOR_ROLE,
        "may_check": OPERATOR_ROLE in who.roles,
        "utility_chart": charts.histogram(utilities, label="utility of the memories you read"),
        "verdict_chart": charts.stacked(charts.buckets(verdicts), series_v,
                                        "verdicts and rejection reasons per time bucket"),
        "lifecycle_chart": charts.stacked(charts.buckets(moves), series_m,
                                          "lifecycle events per time bucket"),
        "n_utilities": len(utilities), "n_recalls": len(recalls), "n_moves": len(moves),
    }


def _move(event: str, data: dict[str, Any]) -> str:
    return f"-> {data['to']}" if event == "transitioned" and data.get("to") else event


def review(service: Service, who: Principal) -> list[Any]:
    """Pending proposals with their gate results (PermissionDenied without the reviewer role)."""
    if "reviewer" not in who.roles:
        raise PermissionDenied("the review queue needs the 'reviewer' role")
    return service.pending(who)
