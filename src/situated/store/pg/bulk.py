"""Set-based inserts of new memories on PostgreSQL: what `insert` followed by `append_event`
writes row by row, for a batch, with COPY (`store.bulk` is SQLite's); and loading many
(`indexes_deferred`: the HNSW indexes built once after the rows; `settle`: statistics and
visibility maps after the load), as `situated migrate` and the benchmarks load.

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from situated.errors import InvalidInput, StoreFailure
from situated.models import utcnow
from situated.store.bulk import NewRow, final_state
from situated.store.pg import graphs
from situated.store.pg.base import translated
from situated.store.pg.names import claim_scope
from situated.store.pg.schema import POSTINGS_OF, VECTOR_INDEX_NAMES, VECTOR_INDEXES
from situated.store.pg.upkeep import Upkeep
from situated.store.pg.writes import MEMORY_COLUMNS, memory_values, no_nul
from situated.store.scope import SYSTEM, System, check_write

_LEDGER = "at, event, tenant, memory_id, recall_id, actor, reason, data"
LOADED_TABLES = ("memories", "lexicon_postings", "lexicon_stats", "ledger")
"""What a bulk load fills (`settle`)."""


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
            for tenant, namespace, roles, writer in dict.fromkeys(
                (r.record.scope.tenant, r.record.scope.namespace,
                 tuple(sorted(r.record.scope.roles)), r.writer) for r in rows
            ):  # a look-alike name: refused, the batch rolls back
                claim_scope(self, tenant, namespace, roles, self.sees(writer))
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

    @contextmanager
    def indexes_deferred(self) -> Iterator[None]:
        """A write transaction for loading many memories (or a savepoint of the caller's):
        the vector fields' HNSW indexes are dropped at its start and built again over every
        row at its end, before the commit. Building a graph once is several times faster
        than growing it one insert at a time (2.5x here at 100k memories). DDL is
        transactional: an error, or a crash, undoes the load and leaves the indexes as they
        were. The table is locked exclusively until the commit (readers wait), so this is
        for loading a new store (`situated migrate`), not a live one."""
        if self.dim is None:
            raise RuntimeError("bind_embedder() before indexes_deferred()")
        with self.transaction():
            conn = self._local.conn
            assert conn is not None
            with translated(self.path), conn.transaction():
                self._run(f"DROP INDEX {', '.join(VECTOR_INDEX_NAMES)}")
                yield
                self._build_vector_indexes()

    def _build_vector_indexes(self) -> None:
        """Both HNSW indexes over every row, with enough `maintenance_work_mem` for the
        graphs (`graphs.build_memory_kb`: never less than the server's setting; kept for
        the rest of the transaction). pgvector's parallel build reserves all of it as one
        shared memory segment: where the server cannot (a container's small /dev/shm), the
        build is redone with the server's own settings in one process."""
        conn = self._local.conn
        assert conn is not None
        row = self._one(
            f"SELECT COUNT(*), ({graphs.BUILD_MEMORY_NOW}) FROM memories "
            "WHERE content_vec IS NOT NULL OR state_vec IS NOT NULL"
        )
        rows, have_kb = (int(row[0]), int(row[1])) if row else (0, 0)
        want_kb = graphs.build_memory_kb(rows, int(self.dim or 0), have_kb)
        try:
            with translated(self.path), conn.transaction():  # a failed build keeps the rows
                if want_kb is not None:
                    self._run(f"SET LOCAL maintenance_work_mem = '{want_kb}kB'")
                self._run(VECTOR_INDEXES)
        except StoreFailure as exc:
            short = exc.code in ("53200", "53000") or (
                exc.code == "53100" and "shared memory" in str(exc))
            if not short:
                raise
            self._run("SET LOCAL max_parallel_maintenance_workers = 0")
            self._run(VECTOR_INDEXES)

    def settle(self) -> None:
        """After a bulk load: the loaded tables' planner statistics (ANALYZE) and visibility
        maps (VACUUM, one table at a time), as autovacuum would make them later, then the
        large tenants' own graphs (`build_graphs`). Analyzed
        first: an autovacuum ANALYZE running meanwhile holds a snapshot that keeps VACUUM from
        marking the new rows all-visible, and index-only scans of the postings then read the
        heap (the lexical search took 30 ms instead of 5 at 100k memories here)."""
        if self._local.conn is not None:
            raise RuntimeError("settle() runs outside a transaction")
        with translated(self.path), self.pool.connection() as conn:
            conn.execute(f"ANALYZE {', '.join(LOADED_TABLES)}")
            for table in LOADED_TABLES:
                conn.execute(f"VACUUM {table}")
        self.build_graphs(SYSTEM)

    def build_graphs(self, scope: System, min_rows: int | None = None) -> list[str]:
        """Each tenant of at least `min_rows` rows (`graphs.MIN_ROWS`) its own HNSW graphs
        (`store.pg.graphs`), concurrently: writes go on meanwhile. Returns the tenants given
        graphs: store-wide upkeep (`SYSTEM` only), never handed to a caller."""
        if self._local.conn is not None:
            raise RuntimeError("build_graphs() runs outside a transaction")
        if self.dim is None:
            return []
        with translated(self.path), self.pool.connection() as conn:
            done = graphs.build(conn, self.dim, min_rows)
        self._graphs.refresh(self)
        return done
