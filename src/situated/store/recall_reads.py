"""Reads of recall records for people: recent recalls, one recall opened, the recalls that
touched a memory. Every read takes the reader and goes through the scope layer: the recall
rule (`scope.recall_where`: recalls made by principals the reader dominates) for the rows,
and the memory rule for what a row says about memories (a candidate the reader may not read
is cut from the record, and a rendered briefing that quoted one is withheld).

The rows come from the store (`recall_records`, `recall_briefings`: SQLite's are `sqlite_records`
and `sqlite_briefings` below, PostgreSQL's in `store.pg.recalls`), always under the recall rule;
what a row says about memories is cut here, the same for both backends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from situated.errors import NotFound
from situated.models import Principal, from_epoch
from situated.store.recall_log import ALIAS as RECALLS
from situated.store.scope import ALL_STATES, Eligibility

if TYPE_CHECKING:
    from situated.store.contract import StoreContract
    from situated.store.sqlite import Store

_COLUMNS = "id, at, actor, namespace, mode, served, payload"


@dataclass(frozen=True)
class RecallView:
    """A recall record as a reader may see it.

    Args:
        payload: the stored record (inputs, versions, reconstructions, briefing, stage
            trace), cut to the memories the reader may read.
        rendered: the briefing text the agent received; None when it quoted a memory the
            reader may not read.
        hidden: how many candidates were cut (a count of the reader's own recall's
            candidates it no longer reads, e.g. erased ones; never another scope's ids).
    """

    id: str
    at: datetime
    """When it was made (aware, UTC)."""
    actor: str
    namespace: str | None
    mode: str
    served: tuple[str, ...]
    payload: dict[str, Any]
    rendered: str | None
    hidden: int


def sqlite_records(
    store: Store, reader: Principal, limit: int, offset: int = 0,
    recall_id: str | None = None, mentioning: str | None = None,
) -> list[tuple[Any, ...]]:
    """`Store.recall_records` on SQLite: (id, at, actor, namespace, mode, served JSON,
    payload JSON) of the recalls the reader may see, newest first; one id, or those whose
    payload mentions a memory id, when asked."""
    where, params = store._recall_where(reader)
    extra, more = "", []
    if recall_id is not None:
        extra, more = " AND id = ?", [recall_id]
    if mentioning is not None:
        extra, more = extra + " AND instr(payload, ?) > 0", [*more, mentioning]
    return store._all(
        f"SELECT {_COLUMNS} FROM {RECALLS}.recalls WHERE {where}{extra} "
        "ORDER BY at DESC, seq DESC LIMIT ? OFFSET ?",
        (*params, *more, int(limit), int(offset)),
    )


def sqlite_briefings(
    store: Store, reader: Principal, limit: int
) -> list[tuple[float, str | None, str | None]]:
    """`Store.recall_briefings` on SQLite: (time, served items JSON, rejections JSON) of the
    recalls the reader may see, newest first (the briefing only, read inside SQLite)."""
    where, params = store._recall_where(reader)
    rows = store._all(
        "SELECT at, json_extract(payload, '$.briefing.items'), "
        f"json_extract(payload, '$.briefing.rejected') FROM {RECALLS}.recalls WHERE {where} "
        "ORDER BY at DESC, seq DESC LIMIT ?",
        (*params, int(limit)),
    )
    return [(float(at), items, rejected) for at, items, rejected in rows]


def recent(
    store: StoreContract, reader: Principal, limit: int, offset: int
) -> list[RecallView]:
    """Recalls the reader may see, newest first."""
    return _views(store, reader, store.recall_records(reader, limit, offset))


def one(store: StoreContract, recall_id: str, reader: Principal) -> RecallView:
    """One recall the reader may see; NotFound otherwise (never 'forbidden')."""
    rows = store.recall_records(reader, 1, recall_id=recall_id)
    if not rows:
        raise NotFound(f"no recall {recall_id} visible to this principal")
    return _views(store, reader, rows)[0]


def touching(
    store: StoreContract, memory_id: str, elig: Eligibility, limit: int
) -> list[RecallView]:
    """Recalls the reader may see in which this memory (one it may read: NotFound
    otherwise) was a candidate, newest first."""
    store.get(memory_id, elig)
    reader = elig.principal
    rows = store.recall_records(reader, int(limit) * 2, mentioning=memory_id)
    views = [v for v in _views(store, reader, rows) if memory_id in _candidates(v.payload)]
    return views[:limit]


def outcomes(
    store: StoreContract, reader: Principal, limit: int
) -> list[tuple[datetime, list[str]]]:
    """(time, the served items' verdicts and the rejections' reasons) of the recalls the
    reader may see, newest first: the briefing only (no reconstructions, no trace), cut to
    the memories the reader may read, as `one` cuts it."""
    rows = store.recall_briefings(reader, limit)
    decoded = [(from_epoch(float(at)), json.loads(items or "[]"), json.loads(rejected or "[]"))
               for at, items, rejected in rows]
    mentioned = {e.get("memory_id") for _, i, r in decoded for e in (*i, *r)}
    visible = store.visible_ids({m for m in mentioned if m},
                                Eligibility(reader, states=ALL_STATES))
    return [
        (at, [str(e.get("verdict")) for e in items if e.get("memory_id") in visible]
         + [str(e.get("reason")) for e in rejected if e.get("memory_id") in visible])
        for at, items, rejected in decoded
    ]


def _candidates(payload: dict[str, Any]) -> set[str]:
    briefing = payload.get("briefing") or {}
    return {
        *payload.get("candidates", []), *payload.get("reconstructions", {}),
        *(e.get("memory_id") for e in briefing.get("items", [])),
        *(e.get("memory_id") for e in briefing.get("rejected", [])),
    }


def _views(
    store: StoreContract, reader: Principal, rows: list[tuple[Any, ...]]
) -> list[RecallView]:
    decoded = [(row, json.loads(str(row[6]))) for row in rows]
    mentioned = {m for _, p in decoded for m in _candidates(p) if m}
    mentioned |= {m for row, _ in decoded for m in json.loads(str(row[5]))}
    visible = store.visible_ids(mentioned, Eligibility(reader, states=ALL_STATES))
    return [_cut(row, payload, visible) for row, payload in decoded]


def _cut(row: tuple[Any, ...], payload: dict[str, Any], visible: set[str]) -> RecallView:
    rid, at, actor, namespace, mode, served_json, _ = row
    served = tuple(json.loads(str(served_json)))
    everyone = _candidates(payload) | set(served)
    hidden = len({m for m in everyone if m and m not in visible})
    briefing = dict(payload.get("briefing") or {})
    for key in ("items", "rejected"):
        briefing[key] = [e for e in briefing.get(key, []) if e.get("memory_id") in visible]
    cut = payload | {
        "candidates": [m for m in payload.get("candidates", []) if m in visible],
        "reconstructions": {
            m: r for m, r in payload.get("reconstructions", {}).items() if m in visible
        },
        "trace": [t for t in payload.get("trace", []) if t.get("memory_id") in visible],
        "briefing": briefing,
    }
    cut.pop("rendered", None)
    quoted_hidden = any(m not in visible for m in served)
    rendered = None if quoted_hidden else payload.get("rendered")
    return RecallView(
        str(rid), from_epoch(float(at)), str(actor), namespace, str(mode),
        tuple(m for m in served if m in visible), cut, rendered, hidden,
    )
