"""Recall records and their feedback on PostgreSQL. A recall record commits in its own short
transaction and takes no tenant lock, so a recall never waits for the memory writers (the
reason SQLite keeps them in a file of their own, `store.recall_log`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from situated.errors import NotFound
from situated.models import Principal, utcnow
from situated.store.pg.search import Search
from situated.store.pg.writes import no_nul
from situated.store.scope import System, principal_key
from situated.store.sqlite import _payload_json
from situated.store.values import StoredRecall


class Recalls(Search):
    """Recall records, feedback, and the learned reconstructor's training reads."""

    def save_recall(self, rec: StoredRecall, reader: Principal) -> None:
        """Persist a recall record (also its `recalled` event), scoped to the reader."""
        no_nul("state", rec.state_hash)
        with self.transaction():
            self._run(
                "INSERT INTO recalls (id, tenant, at, namespace, state_hash, mode, served, "
                "payload, role_key, role_set, clearance, actor, rejected) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (rec.id, rec.tenant, rec.at, rec.namespace, rec.state_hash, rec.mode,
                 json.dumps(list(rec.served)), _payload_json(rec.payload), principal_key(reader),
                 sorted(reader.roles), int(reader.clearance), reader.name.replace("\x00", ""),
                 len(rec.payload.get("briefing", {}).get("rejected", []))),
            )

    def get_recall(self, recall_id: str, reader: Principal) -> StoredRecall:
        where, params = self._recall_where(reader)
        row = self._one(
            "SELECT id, tenant, at, namespace, state_hash, mode, served, payload "
            f"FROM recalls WHERE id = %s AND {where}",
            (recall_id, *params),
        )
        if row is None:
            raise NotFound(f"no recall {recall_id} visible to this principal")
        i, t, at, ns, sh, mode, served, payload = row
        return StoredRecall(i, t, at, ns, sh, mode, tuple(json.loads(served)), json.loads(payload))

    def feedback_digest(self, recall: StoredRecall) -> str | None:
        """The digest of the feedback already given (in a write transaction: under the
        tenant's lock, so two feedbacks on one recall are serialized)."""
        self._lock(recall.tenant)
        row = self._one(
            "SELECT digest FROM feedback WHERE tenant = %s AND recall_id = %s",
            (recall.tenant, recall.id),
        )
        return None if row is None else str(row[0])

    def save_feedback(
        self, recall: StoredRecall, success: bool, used: Sequence[str],
        reward: float | None, digest: str, inferred: bool = False,
    ) -> None:
        with self.transaction():
            self._lock(recall.tenant)
            self._run(
                "INSERT INTO feedback (tenant, recall_id, at, success, used, reward, digest, "
                "inferred) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (recall.tenant, recall.id, utcnow(), int(success), json.dumps(list(used)),
                 reward, digest, int(inferred)),
            )

    def drop_inferred_feedback(self, recall: StoredRecall) -> None:
        with self.transaction():
            self._run(
                "DELETE FROM feedback WHERE tenant = %s AND recall_id = %s AND inferred = 1",
                (recall.tenant, recall.id),
            )

    def count_recalls(self, reader: Principal) -> tuple[int, int]:
        """(recalls, recalls with feedback) the reader may see."""
        where, params = self._recall_where(reader, "r")
        row = self._one(
            "SELECT COUNT(*), COUNT(f.recall_id) FROM recalls r LEFT JOIN feedback f "
            f"ON f.tenant = r.tenant AND f.recall_id = r.id WHERE {where}",
            params,
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def recall_records(
        self, reader: Principal, limit: int, offset: int = 0,
        recall_id: str | None = None, mentioning: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """(id, at, actor, namespace, mode, served, payload) of the recalls the reader may
        see, newest first (`store.recall_reads` cuts what they say about memories)."""
        where, params = self._recall_where(reader)
        extra, more = "", []
        if recall_id is not None:
            extra, more = " AND id = %s", [recall_id]
        if mentioning is not None:
            extra, more = extra + " AND strpos(payload, %s) > 0", [*more, mentioning]
        return self._all(
            f"SELECT id, at, actor, namespace, mode, served, payload FROM recalls "
            f"WHERE {where}{extra} ORDER BY at DESC, seq DESC LIMIT %s OFFSET %s",
            (*params, *more, int(limit), int(offset)),
        )

    def recall_briefings(
        self, reader: Principal, limit: int
    ) -> list[tuple[float, str | None, str | None]]:
        """(time, served items JSON, rejections JSON) of the recalls the reader may see."""
        where, params = self._recall_where(reader)
        rows = self._all(
            "SELECT at, (payload::jsonb #> '{briefing,items}')::text, "
            "(payload::jsonb #> '{briefing,rejected}')::text FROM recalls "
            f"WHERE {where} ORDER BY at DESC, seq DESC LIMIT %s",
            (*params, int(limit)),
        )
        return [(float(at), items, rejected) for at, items, rejected in rows]

    def labelled_recalls_of(
        self, reader: Principal, namespace: str | None = None, inferred: bool = False
    ) -> list[tuple[str, dict[str, Any], bool, tuple[str, ...]]]:
        """(recall id, payload, success, used) of the recalls with feedback the reader may
        see (`scope.recall_where_pg`), oldest first; inferred outcomes only when asked."""
        where, params = self._recall_where(reader, "r")
        extra, more = "", []
        if namespace is not None:
            extra, more = " AND r.namespace = %s", [namespace]
        if not inferred:
            extra += " AND f.inferred = 0"
        return [
            (str(i), json.loads(p), bool(s), tuple(json.loads(u)))
            for i, p, s, u in self._all(
                "SELECT r.id, r.payload, f.success, f.used FROM recalls r JOIN feedback f "
                f"ON f.tenant = r.tenant AND f.recall_id = r.id WHERE {where}{extra} "
                "ORDER BY r.at, r.seq",
                (*params, *more),
            )
        ]

    def labelled_recalls(self, tenant: str, scope: System) -> list[tuple[str, int, str]]:
        return [
            (str(p), int(s), str(u)) for p, s, u in self._all(
                "SELECT r.payload, f.success, f.used FROM recalls r JOIN feedback f "
                "ON f.tenant = r.tenant AND f.recall_id = r.id WHERE r.tenant = %s "
                "ORDER BY r.at, r.seq",
                (tenant,),
            )
        ]

    def count_labelled_recalls(self, tenant: str, scope: System) -> int:
        row = self._one("SELECT COUNT(*) FROM feedback WHERE tenant = %s", (tenant,))
        return int(row[0]) if row else 0

    def feedback_tenants(self, scope: System) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT DISTINCT tenant FROM feedback")]

    def count_labelled(self, tenant: str, scope: System) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM ledger WHERE event = 'feedback' AND tenant = %s "
            "AND (data::jsonb ->> 'credit') <> 'exposed'",
            (tenant,),
        )
        return int(row[0]) if row else 0
