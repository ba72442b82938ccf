"""Scoped reads of the PostgreSQL store: records, ledger events, lookups on a write's behalf.
Every one takes an `Eligibility` (or, for maintenance, `SYSTEM`) and renders it with
`Eligibility.where_pg`: the same gates as the SQLite store, the same results."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from situated.errors import NotFound
from situated.models import MemoryRecord, Principal, from_epoch
from situated.store.ledger import INFERRED_WEIGHT, EventType, LedgerEvent
from situated.store.pg.writes import SELECT, Writes
from situated.store.scope import ALL_STATES, Eligibility, System
from situated.store.sqlite import _record

_EVENT = "seq, at, event, tenant, memory_id, recall_id, actor, reason, data"


class Reads(Writes):
    """Reads of memories and of the ledger."""

    def get(self, memory_id: str, elig: Eligibility) -> MemoryRecord:
        """One memory, if eligible; otherwise NotFound (never 'forbidden': that would leak)."""
        where, params = self._where(elig)
        row = self._one(
            f"SELECT {SELECT} FROM memories m WHERE m.id = %s AND {where}", (memory_id, *params)
        )
        if row is None:
            raise NotFound(f"no memory {memory_id} visible to this principal")
        return _record(row)

    def by_rids(self, rids: Sequence[int], elig: Eligibility) -> dict[int, MemoryRecord]:
        return {rid: rec for rid, (rec, _) in self.with_analyses(rids, elig, None).items()}

    def with_analyses(
        self, rids: Sequence[int], elig: Eligibility, version: int | None
    ) -> dict[int, tuple[MemoryRecord, bytes | None]]:
        """`by_rids`, each record with its stored analysis (None unless of `version`)."""
        if not rids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {SELECT}, CASE WHEN m.analysis_version = %s THEN m.analysis END "
            f"FROM memories m WHERE m.rid = ANY(%s::bigint[]) AND {where}",
            (version, list(rids), *params),
        )
        return {int(r[0]): (_record(r[:-1]), None if r[-1] is None else bytes(r[-1]))
                for r in rows}

    def situational(self, rids: Sequence[int], elig: Eligibility) -> dict[int, bool]:
        """For each eligible rid: is it a lesson with a known source state?"""
        if not rids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            "SELECT m.rid, m.kind = 'lesson' AND m.state_unknown = 0 FROM memories m "
            f"WHERE m.rid = ANY(%s::bigint[]) AND {where}",
            (list(rids), *params),
        )
        return {int(r): bool(flag) for r, flag in rows}

    def page(self, elig: Eligibility, limit: int = 100, offset: int = 0) -> list[MemoryRecord]:
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {SELECT} FROM memories m WHERE {where} ORDER BY m.rid LIMIT %s OFFSET %s",
            (*params, int(limit), int(offset)),
        )
        return [_record(r) for r in rows]

    def count(self, elig: Eligibility) -> dict[str, int]:
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT m.state, COUNT(*) FROM memories m WHERE {where} GROUP BY m.state", params
        )
        return {str(s): int(n) for s, n in rows}

    def count_pending(self, elig: Eligibility) -> int:
        where, params = self._where(elig)
        row = self._one(f"SELECT COUNT(*) FROM memories m WHERE m.state = 'PROPOSED' AND "
                        f"{where}", params)
        return int(row[0]) if row else 0

    def visible_ids(self, memory_ids: Iterable[str], elig: Eligibility) -> set[str]:
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return set()
        where, params = self._where(elig)
        return {
            str(r[0]) for r in self._all(
                f"SELECT m.id FROM memories m WHERE m.id = ANY(%s::text[]) AND {where}",
                (ids, *params),
            )
        }

    def by_fingerprint(self, fingerprint: str, elig: Eligibility) -> MemoryRecord | None:
        where, params = self._where(elig)
        row = self._one(
            f"SELECT {SELECT} FROM memories m WHERE m.fingerprint = %s AND {where} "
            "ORDER BY m.rid LIMIT 1",
            (fingerprint, *params),
        )
        return None if row is None else _record(row)

    def same_key(self, entity: str, attribute: str, elig: Eligibility) -> list[MemoryRecord]:
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {SELECT} FROM memories m WHERE m.entity = %s AND m.attribute = %s "
            f"AND {where} ORDER BY m.rid",
            (entity, attribute, *params),
        )
        return [_record(r) for r in rows]

    def namespace_counters(
        self, memory_ids: Sequence[str], namespace: str, elig: Eligibility
    ) -> dict[str, tuple[float, float]]:
        if not memory_ids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            "SELECT u.memory_id, u.uses, u.successes, u.inferred_uses, u.inferred_successes "
            "FROM memory_utility u JOIN memories m ON m.tenant = u.tenant AND m.id = u.memory_id "
            f"WHERE u.namespace = %s AND u.memory_id = ANY(%s::text[]) AND {where}",
            (namespace, list(memory_ids), *params),
        )
        w = INFERRED_WEIGHT
        return {str(m): (int(u) + w * int(iu), int(s) + w * int(is_))
                for m, u, s, iu, is_ in rows}

    def unanalysed(
        self, version: int, limit: int, scope: System
    ) -> list[tuple[int, MemoryRecord]]:
        rows = self._all(
            f"SELECT {SELECT} FROM memories m WHERE m.state <> 'ERASED' "
            "AND m.analysis_version < %s ORDER BY m.rid LIMIT %s",
            (version, int(limit)),
        )
        return [(int(r[0]), _record(r)) for r in rows]

    def count_unanalysed(self, version: int, scope: System) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM memories m WHERE m.state <> 'ERASED' "
            "AND m.analysis_version < %s", (version,),
        )
        return int(row[0]) if row else 0

    # -- the ledger ----------------------------------------------------------------------------

    def history(
        self, memory_id: str, elig: Eligibility, known_at: float | None = None
    ) -> list[LedgerEvent]:
        """The events of one eligible memory, oldest first (up to `known_at` when set), `seq`
        numbered from 1 within the memory."""
        self.get(memory_id, elig)  # eligibility check; raises NotFound
        tenant = elig.principal.tenant
        if known_at is None:
            events = self._events("tenant = %s AND memory_id = %s", (tenant, memory_id),
                                  elig.principal)
        else:
            events = self._events("tenant = %s AND memory_id = %s AND at <= %s",
                                  (tenant, memory_id, known_at), elig.principal)
        return [replace(ev, seq=n) for n, ev in enumerate(events, 1)]

    def _ledger_union(self, elig: Eligibility, columns: str) -> tuple[str, list[object]]:
        """The main ledger's rows the principal may see (events of eligible memories, events
        about no memory under the recall rule) and the `recalled` events of recalls it may see."""
        where, params = self._where(elig)
        lwhere, rparams = self._recall_where(elig.principal, "l")
        rwhere, _ = self._recall_where(elig.principal)
        recalled = (
            "1 AS src, seq, at, 'recalled' AS event, tenant, NULL::text AS memory_id, "
            "id AS recall_id, actor, '' AS reason, json_build_object('mode', mode, 'served', "
            "served::json, 'rejected', rejected)::text AS data"
        )
        return (
            f"SELECT {columns} FROM (SELECT 0 AS src, seq, at, event, tenant, memory_id, "
            f"recall_id, actor, reason, data FROM ledger l WHERE l.tenant = %s AND "
            f"(l.memory_id IN (SELECT m.id FROM memories m WHERE {where}) "
            f"OR (l.memory_id IS NULL AND {lwhere})) "
            f"UNION ALL SELECT {recalled} FROM recalls WHERE {rwhere}) u",
            [elig.principal.tenant, *params, *rparams, *rparams],
        )

    def ledger(self, elig: Eligibility, limit: int = 100, offset: int = 0) -> list[LedgerEvent]:
        """Recent events the principal may see, newest first; `seq` is the event's position
        among the events this principal may see."""
        sql, params = self._ledger_union(
            elig, "ROW_NUMBER() OVER (ORDER BY at, seq, src) AS n, at, event, tenant, memory_id, "
            "recall_id, actor, reason, data",
        )
        rows = self._all(
            f"SELECT * FROM ({sql}) v ORDER BY 1 DESC LIMIT %s OFFSET %s",
            (*params, int(limit), int(offset)),
        )
        return self._event_rows(rows, elig.principal)

    def count_events(self, elig: Eligibility) -> int:
        sql, params = self._ledger_union(elig, "1")
        row = self._one(f"SELECT COUNT(*) FROM ({sql}) v", params)
        return int(row[0]) if row else 0

    def _events(
        self, where: str, params: Sequence[object], reader: Principal | System
    ) -> list[LedgerEvent]:
        """Ledger rows matching `where` (which must carry the reader's scope), oldest first."""
        rows = self._all(f"SELECT {_EVENT} FROM ledger WHERE {where} ORDER BY seq", params)
        return self._event_rows(rows, reader)

    def _event_rows(
        self, rows: Sequence[tuple[Any, ...]], reader: Principal | System
    ) -> list[LedgerEvent]:
        """Events from rows; for a principal, recall ids and served ids it may not see cut
        (as `store.sqlite` does)."""
        events = [
            LedgerEvent(
                int(s), from_epoch(float(a)), EventType(e), str(t), m, r, str(ac), str(re_),
                json.loads(d),
            )
            for s, a, e, t, m, r, ac, re_, d in rows
        ]
        if isinstance(reader, System):
            return events
        cited = list({ev.recall_id for ev in events if ev.recall_id and ev.memory_id})
        if cited:
            rwhere, rparams = self._recall_where(reader)
            seen = {str(r[0]) for r in self._all(
                f"SELECT id FROM recalls WHERE id = ANY(%s::text[]) AND {rwhere}",
                (cited, *rparams),
            )}
            events = [
                ev if ev.recall_id is None or ev.memory_id is None or ev.recall_id in seen
                else replace(ev, recall_id=None) for ev in events
            ]
        listed = {i for ev in events for i in ev.data.get("served", ())}
        if not listed:
            return events
        visible = self.visible_ids(listed, Eligibility(reader, states=ALL_STATES))
        return [
            ev if "served" not in ev.data else replace(
                ev, data=ev.data | {"served": [i for i in ev.data["served"] if i in visible]}
            )
            for ev in events
        ]
