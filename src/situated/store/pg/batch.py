"""The batch writer's and the recall's bulk calls on PostgreSQL (`write.writer`,
`recall.retrieve`): lookups of many keys at once, many searches, candidate rows with their
vectors. Each read takes an `Eligibility` and renders it with `Eligibility.where_pg`, the same
gates as SQLite's. `insert_many` is set-based (`pg.bulk`); `insert_each` is the one-row
reference it is tested against."""

from __future__ import annotations

from collections.abc import Sequence

from situated.embed.base import Vector
from situated.models import MemoryRecord
from situated.store.bulk import NewRow
from situated.store.pg.bulk import Bulk
from situated.store.pg.writes import SELECT
from situated.store.scope import SYSTEM, Eligibility, check_write
from situated.store.sqlite import _record
from situated.store.values import RecallRow


class Batch(Bulk):
    """Many rows in one call."""

    def insert_each(self, rows: Sequence[NewRow]) -> list[int]:
        """`insert_many` row by row through `insert` and `append_event` (the reference the
        set-based path is tested against), in one transaction (the caller's)."""
        for r in rows:
            check_write(r.writer, r.record.scope)
        rids: list[int] = []
        with self.transaction():
            for r in rows:
                (_, _, reason, data), *later = r.events
                rids.append(self.insert(r.record, r.writer, r.vectors, reason, data, r.analysis))
                for event, actor, why, more in later:  # the row was just written, in scope
                    self.append_event(r.record.id, SYSTEM, event, actor, why, more)
        return rids

    def dense_many(
        self, field: str, queries: Vector, k: int, elig: Eligibility
    ) -> list[list[tuple[int, float]]]:
        """`dense` for each row of `queries`, in one read snapshot."""
        with self.snapshot():
            return [self.dense(field, q, k, elig) for q in queries]

    def fingerprints_among(self, fingerprints: Sequence[str], elig: Eligibility) -> set[str]:
        """Which of these exact-duplicate keys `elig` reaches (`by_fingerprint` is not None)."""
        if not fingerprints:
            return set()
        where, params = self._where(elig)
        rows = self._all(
            "SELECT DISTINCT m.fingerprint FROM memories m "
            f"WHERE m.fingerprint = ANY(%s::text[]) AND {where}",
            (list(fingerprints), *params),
        )
        return {str(r[0]) for r in rows}

    def fact_keys_among(
        self, keys: Sequence[tuple[str, str]], elig: Eligibility
    ) -> set[tuple[str, str]]:
        """Which of these (entity, attribute) keys `elig` reaches (`same_key` is not empty)."""
        if not keys:
            return set()
        where, params = self._where(elig)
        rows = self._all(
            "SELECT DISTINCT m.entity, m.attribute FROM memories m "
            f"WHERE m.entity = ANY(%s::text[]) AND {where}",
            (sorted({e for e, _ in keys}), *params),
        )
        return {(str(e), str(a)) for e, a in rows} & set(keys)

    def same_attribute(self, attribute: str, elig: Eligibility) -> list[MemoryRecord]:
        """Memories `elig` reaches with this attribute (any entity), oldest first."""
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {SELECT} FROM memories m WHERE m.attribute = %s AND {where} "
            "ORDER BY m.rid",
            (attribute, *params),
        )
        return [_record(r) for r in rows]

    def utilities(self, elig: Eligibility, limit: int) -> list[float]:
        """The measured utility (`Counters.utility`) of up to `limit` eligible memories."""
        where, params = self._where(elig)
        return [float(r[0]) for r in self._all(
            f"SELECT (m.successes + 1.0) / (m.uses + 2.0) FROM memories m WHERE {where} "
            "ORDER BY m.rid LIMIT %s", (*params, int(limit)),
        )]

    def recall_rows(
        self, rids: Sequence[int], elig: Eligibility, version: int
    ) -> dict[int, RecallRow]:
        """`with_analyses` with both stored vectors of each row, in one gated read."""
        if not rids:
            return {}
        self._read_dim()  # another process may have bound the embedder since this one opened
        where, params = self._where(elig)
        vectors = ", m.content_vec, m.state_vec" if self.dim is not None else ", NULL, NULL"
        rows = self._all(
            f"SELECT {SELECT}, CASE WHEN m.analysis_version = %s THEN m.analysis END{vectors} "
            f"FROM memories m WHERE m.rid = ANY(%s::bigint[]) AND {where}",
            (version, list(rids), *params), binary=True,
        )
        return {
            int(r[0]): RecallRow(
                _record(r[:-3]), None if r[-3] is None else bytes(r[-3]),
                None if r[-2] is None else r[-2].to_numpy(),
                None if r[-1] is None else r[-1].to_numpy(),
            )
            for r in rows
        }
