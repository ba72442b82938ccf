"""Set-based inserts of new memories on PostgreSQL: what `insert` followed by `append_event`
writes row by row, for a batch, with COPY (`store.bulk` is SQLite's).

The batch writer (`write.writer`) hands over memories that need nothing but to be stored (every
gate passed, no twin to reinforce, nothing to supersede, the promotion policy has decided).
Each becomes exactly what the one-row path leaves: its row in the state the ledger's fold gives
its events, with its vectors and lexical row, and its ledger events in the same order. Inside
the caller's transaction: each tenant's advisory write lock (in sorted order), each scope's
names claimed, the rids allotted from the table's identity sequence (in input order), then one
COPY into `memories`, one insert of the rows' lexical postings, one upsert of each tenant's
lexical statistics and one COPY into the ledger. Nothing is written unless every row is valid
(checked first: writers' scopes, NUL characters, vectors of the bound dimension).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from situated.errors import InvalidInput
from situated.models import utcnow
from situated.store.bulk import NewRow, final_state
from situated.store.pg.names import claim_scope
from situated.store.pg.schema import POSTINGS_OF
from situated.store.pg.upkeep import Upkeep
from situated.store.pg.writes import MEMORY_COLUMNS, memory_values, no_nul
from situated.store.scope import check_write

_LEDGER = "at, event, tenant, memory_id, recall_id, actor, reason, data"


def vector_text(v: object) -> str:
    """A vector's input text for COPY: every float32 component exactly (its float64 value's
    shortest repr parses back to the same float32), without pgvector's per-element dumper."""
    return str(np.asarray(v, dtype=np.float32).tolist())


class Bulk(Upkeep):
    """`insert_many`: many new memories in one COPY."""

    def insert_many(self, rows: Sequence[NewRow]) -> list[int]:
        """`insert` and the events of each row, set-based, in one transaction (the caller's);
        returns the rids, in order. Every writer must be allowed to write its row's scope."""
        if not rows:
            return []
        for r in rows:
            check_write(r.writer, r.record.scope)
        if self.dim is None:
            raise RuntimeError("bind_embedder() before the first insert")
        prepared = []
        for r in rows:
            (_, _, reason, _), *_ = r.events
            for _, actor, why, _ in r.events:
                no_nul("actor", actor)
                no_nul("reason", why)
            for field in ("content", "state"):
                if len(r.vectors[field]) != self.dim:
                    raise InvalidInput("vectors", f"{field}: {len(r.vectors[field])} "
                                       f"dimensions, the store's embedder has {self.dim}")
            prepared.append(memory_values(r.record, r.vectors, reason, r.analysis,
                                          final_state(r.events)))
        with self.transaction():
            for tenant in sorted({r.record.scope.tenant for r in rows}):
                self._lock(tenant)
            for scope in dict.fromkeys((r.record.scope.tenant, r.record.scope.namespace,
                                        tuple(sorted(r.record.scope.roles))) for r in rows):
                claim_scope(self, *scope)  # a look-alike name: refused, the batch rolls back
            rids = sorted(int(x[0]) for x in self._all(
                "SELECT nextval(pg_get_serial_sequence('memories', 'rid')) "
                "FROM generate_series(1, %s)", (len(rows),),
            ))
            # COPY writes the given rid into the identity column (as OVERRIDING SYSTEM VALUE)
            self._copy(
                f"COPY memories (rid, {', '.join(MEMORY_COLUMNS)}) FROM STDIN",
                [(rid, *values[:-2], *map(vector_text, values[-2:]))
                 for rid, (values, _) in zip(rids, prepared, strict=True)],
            )
            self._run(POSTINGS_OF + " AND m.rid = ANY(%s::bigint[])", (rids,))
            stats: dict[str, list[int]] = {}
            for r, (_, words) in zip(rows, prepared, strict=True):
                agg = stats.setdefault(r.record.scope.tenant, [0, 0])
                agg[0] += 1
                agg[1] += len(words)
            for tenant, (docs, length) in sorted(stats.items()):
                self._run(
                    "INSERT INTO lexicon_stats (tenant, docs, length) VALUES (%s, %s, %s) "
                    "ON CONFLICT (tenant) DO UPDATE SET docs = lexicon_stats.docs + "
                    "excluded.docs, length = lexicon_stats.length + excluded.length",
                    (tenant, docs, length),
                )
            self._copy(
                f"COPY ledger ({_LEDGER}) FROM STDIN",
                [(utcnow(), event.value, r.record.scope.tenant, r.record.id, None, actor, why,
                  json.dumps(data, sort_keys=True, default=str))
                 for r in rows for event, actor, why, data in r.events],
            )
        return rids
