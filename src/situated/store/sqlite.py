"""The embedded store: one SQLite file (WAL) holding records, vectors, FTS, ledger and recalls.

Every read and every write into a memory takes an `Eligibility` (or, for maintenance across
tenants, `SYSTEM`) and applies it through `store.scope`, the one scope layer; every change goes
through `append_event`, which writes the ledger row and applies the same `fold` that `rebuild`
replays. Writes run in `BEGIN IMMEDIATE`
transactions with a busy timeout and bounded retries, so several processes may write at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import apsw
import msgspec
import numpy as np
from pydantic import BaseModel

from situated.embed.base import Vector
from situated.errors import EmbedderMismatch, InvalidInput, NotFound, StoreFailure
from situated.models import (
    OPEN_END,
    Authority,
    Classification,
    Counters,
    Kind,
    LifecycleState,
    MemoryRecord,
    Outcome,
    Principal,
    Scope,
    Source,
    State,
    Validity,
    from_epoch,
    utcnow,
)
from situated.store import attributes, recall_reads
from situated.store import lexical as lexicon
from situated.store.ann import DEFAULT_ROWS as DEFAULT_ANN_ROWS
from situated.store.ann import EXACT_BELOW, AnnConfig
from situated.store.bulk import NewRow, insert_rows
from situated.store.failures import Cursor as _Cursor
from situated.store.failures import begin_immediate
from situated.store.failures import stored as _stored
from situated.store.keys import Keys
from situated.store.ledger import (
    INFERRED_WEIGHT,
    EventType,
    Folded,
    LedgerEvent,
    fold,
    replay,
)
from situated.store.migrations import MIGRATIONS
from situated.store.names import claim_scope
from situated.store.recall_log import ALIAS as RECALLS
from situated.store.recall_log import COLUMNS as RECALL_COLUMNS
from situated.store.recall_log import RecallLog
from situated.store.resident import (
    DEFAULT_BUDGET_MB,
    Rankings,
    ResidentIndex,
    Slice,
    tokens,
)
from situated.store.rows import record_values
from situated.store.scope import (
    ALL_STATES,
    SYSTEM,
    VISIBLE_STATES,
    Eligibility,
    System,
    check_write,
    held_keys,
    marks,
    principal_key,
    recall_where,
)
from situated.store.secrets import check_name, checked, new_value
from situated.store.values import RebuildReport, RecallRow, StoredRecall
from situated.store.vectors import SqliteVecIndex, VectorMeta, load_extension

BUSY_TIMEOUT_MS = 10_000

_COLUMNS = (
    "rid id tenant namespace kind content state_text state_facts state_unknown action success "
    "reward episode_id step evidence conditions entity attribute value multi_valued roles "
    "role_key classification consent authority valid_from valid_until recorded_at state uses "
    "successes failures exposures policy_version supersedes superseded_by fingerprint proposed_by"
).split()
_SELECT = ", ".join(f"m.{c}" for c in _COLUMNS)


class Store:
    """The SQLite store. Not part of the public API; `Memory` is."""

    def __init__(
        self, path: str | Path, resident_mb: float = DEFAULT_BUDGET_MB,
        ann_rows: int = DEFAULT_ANN_ROWS,
    ) -> None:
        self.path = str(path)
        self._bound: tuple[str, int] | None = None
        self._writing = False
        self._fts_reset_due = False
        try:
            with _stored(self.path):
                self.db = apsw.Connection(self.path)
        except StoreFailure as exc:  # a directory, a missing directory, no permission
            if exc.__cause__ is None or not isinstance(exc.__cause__, apsw.CantOpenError):
                raise
            raise InvalidInput("path", f"cannot open {self.path!r:.80}: {exc}") from None
        self.db.cursor_factory = _Cursor
        try:
            self.db.setbusytimeout(BUSY_TIMEOUT_MS)
            load_extension(self.db)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA secure_delete = ON")  # freed pages hold no erased text
            self._migrate()
            with _stored(self.path):
                self.recall_log = RecallLog(self.path)  # translates its own failures
            self.db.execute(f"ATTACH DATABASE ? AS {RECALLS}", (self.recall_log.path,))
            self._move_legacy_recalls()
            self.vectors = SqliteVecIndex(self.db)
        except StoreFailure as exc:
            self.close()
            if isinstance(exc.__cause__, apsw.CantOpenError | apsw.NotADBError):
                raise InvalidInput("path", f"cannot open {self.path!r:.80}: {exc}") from None
            raise
        except BaseException:
            self.close()
            raise
        self._data_version: object = None
        self._role_key_cache: dict[str, list[str]] = {}
        self.resident = ResidentIndex(
            self.db, resident_mb,
            AnnConfig(rows=ann_rows, exact_below=min(EXACT_BELOW, ann_rows),
                      directory=Path(f"{self.path}-ann")),
        )
        self.keys = Keys(self)

    def close(self) -> None:
        """Close the connections (closed even when this raises: the last connection's
        checkpoint of the WAL failed, and the next open recovers it)."""
        log = getattr(self, "recall_log", None)
        try:
            with _stored(self.path):
                self.db.close()
        finally:
            if log is not None:
                log.close()

    @property
    def location(self) -> str:
        """What `store.contract.open_store` reopens this store from: its file."""
        return self.path

    def _move_legacy_recalls(self) -> None:
        """Recall records written into the main file before `m008` move to the recall file
        (their `recalled` events stay in the main ledger, shown to restricted admins only)."""
        rows = self._all(
            "SELECT id, tenant, at, namespace, state_hash, mode, served, payload, role_key, "
            "clearance FROM recalls_legacy"
        )
        if not rows:
            return
        with self.recall_log.transaction():
            for r in rows:
                self.recall_log.db.execute(
                    f"INSERT OR IGNORE INTO recalls ({', '.join(RECALL_COLUMNS)}) "
                    f"VALUES ({','.join('?' * len(RECALL_COLUMNS))})",
                    (*r, "", 0, 1),
                )
        with self.transaction():
            self.db.execute("DELETE FROM recalls_legacy")

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.db.execute(sql, tuple(params)).fetchall()
        return rows

    def _one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    # -- transactions and migrations -------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """An IMMEDIATE transaction: takes the write lock up front, retried while busy; commits
        durably (`synchronous = FULL`). Recall records are written elsewhere
        (`store.recall_log`), never under this lock."""
        with self._transaction():
            yield

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        begin_immediate(self.db, f"database {self.path}")
        self._writing = True
        try:
            if self._fts_reset_due:
                self._reset_fts()
            yield
            self.db.execute("COMMIT")
        except BaseException as exc:
            if self.db.in_transaction:  # an I/O error or a full disk may have ended it
                self.db.execute("ROLLBACK")
            if isinstance(exc, StoreFailure):
                self._fts_reset_due = True
                try:
                    self._reset_fts()
                except (StoreFailure, apsw.BusyError):
                    pass  # still due: the next write transaction does it first
                finally:
                    if self.db.in_transaction:
                        self.db.execute("ROLLBACK")
            raise
        finally:
            self._writing = False

    def _reset_fts(self) -> None:
        """Make FTS5 drop what this connection holds of a cancelled transaction.

        When a storage failure strikes inside FTS5's own write, SQLite cancels the whole
        transaction, but FTS5 (3.54) keeps its view of it: bm25() then returns NULL and its
        integrity check reports a malformed index, on this connection only. A rolled-back
        write to the table makes it discard that view."""
        if self._one("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'"):  # migrated
            self.db.execute("SAVEPOINT fts_reset")
            self.db.execute("DELETE FROM memories_fts WHERE rowid = -1")
            self.db.execute("ROLLBACK TO fts_reset")
            self.db.execute("RELEASE fts_reset")
        self._fts_reset_due = False

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: every read inside sees the same committed state (nests into an
        enclosing transaction)."""
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            if self.db.in_transaction:
                self.db.execute("COMMIT")

    def _migrate(self) -> None:
        with self.transaction():
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)"
            )
            done = {r[0] for r in self.db.execute("SELECT name FROM _migrations")}
            for name, fn in sorted(MIGRATIONS):
                if name not in done:
                    fn(self.db)
                    self.db.execute(
                        "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                        (name, utcnow()),
                    )

    def migrations(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM _migrations ORDER BY name")]

    # -- embedder identity -----------------------------------------------------------------

    def bind_embedder(self, model_ref: str, dim: int) -> None:
        """Record the store's embedding model on first use; refuse any other afterwards."""
        if self._bound == (model_ref, dim):
            return  # a binding never changes once made
        row = self._one("SELECT value FROM meta WHERE key = 'embedder'")
        if row is None:
            try:
                with self.transaction():
                    again = self._one("SELECT value FROM meta WHERE key = 'embedder'")
                    if again is None:
                        self.db.execute(
                            "INSERT INTO meta (key, value) VALUES ('embedder', ?)", (model_ref,)
                        )
                        self.vectors.ensure(dim)
                        return
                    row = again
            except BaseException:
                # the vector tables were rolled back with the binding: a remembered dimension
                # would make the next binding skip creating them (and commit without them)
                self.vectors.dim = None
                raise
        if row[0] != model_ref:
            raise EmbedderMismatch(
                f"this store holds vectors of {row[0]}; refusing to mix in {model_ref}"
            )
        if self.vectors.dim == dim:
            self._bound = (model_ref, dim)

    def embedder_ref(self) -> str | None:
        return self.meta("embedder").get("embedder")

    def secret(self, name: str) -> bytes:
        """A store-wide secret of the doors (`store.secrets`), made on first use, under the
        write lock (a process asking at the same moment reads the one stored)."""
        check_name(name)
        row = self._one("SELECT value FROM secrets WHERE name = ?", (name,))
        if row is None:
            with self.transaction():
                self.db.execute("INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)",
                                (name, new_value()))
                row = self._one("SELECT value FROM secrets WHERE name = ?", (name,))
        return checked(name, None if row is None else row[0])

    # -- writes (call inside `transaction()`) ----------------------------------------------

    def insert(
        self,
        rec: MemoryRecord,
        writer: Principal,
        vectors: dict[str, Vector],
        reason: str,
        extra: dict[str, Any] | None = None,
        analysis: tuple[int, bytes | None] | None = None,
    ) -> int:
        """Insert a new memory, its FTS row, its vectors and its `proposed` event.

        The writer must be allowed to write `rec.scope` (`scope.check_write`). `analysis` is
        (version, stored form) of `situated.recall.analysis`, kept with the row."""
        check_write(writer, rec.scope)
        src, sc = rec.source, rec.scope
        st = src.state
        claim_scope(self.db, sc.tenant, sc.namespace, sc.roles,  # a look-alike name: refused
                    self.sees(writer))
        self.db.execute(
            f"""INSERT INTO memories ({", ".join(_COLUMNS[1:])})
                VALUES ({",".join("?" * (len(_COLUMNS) - 1))})""",
            record_values(rec, LifecycleState.PROPOSED.value),
        )
        rid = int(self.db.last_insert_rowid())
        if analysis is not None:
            self.set_analysis(rid, *analysis)
        self._wrote_role_key(sc.tenant, sc.role_key)
        self.db.execute(
            "INSERT INTO memories_fts (rowid, content, state_text) VALUES (?, ?, ?)",
            (rid, rec.content, st.describe() if st else ""),
        )
        lexicon.index(self.db, rid, sc.tenant, rec.content, st.describe() if st else "")
        self.vectors.add(rid, vectors, self._vector_meta(rid))
        self._ledger(
            EventType.PROPOSED, sc.tenant, rec.id, None, writer.name, reason,
            {"kind": rec.kind.value, "namespace": sc.namespace} | (extra or {}),
        )
        return rid

    def sees(self, writer: Principal) -> Callable[[Sequence[str]], bool]:
        """Whether `writer` may read a memory (in any state but erased) of any of these
        namespaces of its tenant: a look-alike name it may not see is not refused to it."""
        def of(namespaces: Sequence[str]) -> bool:
            elig = Eligibility(writer, tuple(namespaces), VISIBLE_STATES)
            where, params = elig.where(elig.held_keys(self._role_keys(writer.tenant)))
            return self._one(f"SELECT 1 FROM memories WHERE {where} LIMIT 1", params) is not None
        return of

    def insert_many(self, rows: Sequence[NewRow]) -> list[int]:
        """`insert` and the events of each row, set-based (`store.bulk`); call inside
        `transaction()`. Every writer must be allowed to write its row's scope."""
        for r in rows:
            check_write(r.writer, r.record.scope)
        rids = insert_rows(self.db, rows, self.sees)
        for tenant, role_key in {(r.record.scope.tenant, r.record.scope.role_key)
                                 for r in rows}:
            self._wrote_role_key(tenant, role_key)
        return rids

    def append_event(
        self,
        memory_id: str,
        scope: Eligibility | System,
        event: EventType,
        actor: str,
        reason: str,
        data: dict[str, Any] | None = None,
        recall_id: str | None = None,
    ) -> Folded:
        """Write one ledger event for a memory within `scope` and apply its effect to the
        stored row (NotFound, and nothing written, when the memory is outside `scope`)."""
        data = dict(data or {})
        where, params = self._where(scope)
        row = self._one(
            "SELECT m.rid, m.tenant, m.state, m.uses, m.successes, m.failures, m.exposures "
            f"FROM memories m WHERE m.id = ? AND {where}",
            (memory_id, *params),
        )
        if row is None:
            raise NotFound(f"no memory {memory_id}")
        rid, tenant, state, *counts = row
        before = Folded(LifecycleState(state), Counters(*counts))
        after = fold(before, event, data)
        self._ledger(event, tenant, memory_id, recall_id, actor, reason, data)
        c = after.counters
        self.db.execute(
            "UPDATE memories SET state = ?, uses = ?, successes = ?, failures = ?, exposures = ? "
            "WHERE rid = ?",
            (after.state.value, c.uses, c.successes, c.failures, c.exposures, rid),
        )
        if after.state != before.state and after.state is not LifecycleState.ERASED:
            self.vectors.update_meta(rid, self._vector_meta(rid))
        if event is EventType.FEEDBACK and data.get("credit") in ("credited", "blamed"):
            u, s_, iu, is_ = _utility_delta(data)
            self.db.execute(
                "INSERT INTO memory_utility (memory_id, namespace, uses, successes, "
                "inferred_uses, inferred_successes) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (memory_id, namespace) DO UPDATE SET uses = uses + excluded.uses, "
                "successes = successes + excluded.successes, "
                "inferred_uses = inferred_uses + excluded.inferred_uses, "
                "inferred_successes = inferred_successes + excluded.inferred_successes",
                (memory_id, _utility_namespace(data), u, s_, iu, is_),
            )
        return after

    def supersede(
        self, old_id: str, new_id: str, valid_until: float, scope: Eligibility, actor: str,
        reason: str,
    ) -> None:
        """Close `old_id`'s validity at `valid_until`, link it to `new_id`, log `superseded`.
        Both must lie within `scope` (NotFound otherwise, nothing changed)."""
        where, params = self._where(scope)
        found = self._all(
            f"SELECT m.id FROM memories m WHERE m.id IN (?, ?) AND {where}",
            (old_id, new_id, *params),
        )
        if len({r[0] for r in found}) != len({old_id, new_id}):
            raise NotFound(f"no memories {old_id} and {new_id} in this scope")
        self.db.execute(
            "UPDATE memories SET valid_until = ?, superseded_by = ? WHERE id = ?",
            (valid_until, new_id, old_id),
        )
        self.db.execute("UPDATE memories SET supersedes = ? WHERE id = ?", (old_id, new_id))
        rid = self._rid(old_id)
        self.vectors.update_meta(rid, self._vector_meta(rid))
        self.append_event(
            old_id, scope, EventType.SUPERSEDED, actor, reason,
            {"by": new_id, "valid_until": valid_until},
        )

    def revoke(self, consent: str, elig: Eligibility, actor: str, reason: str) -> int:
        """Revoke every memory under `consent` that `elig` reaches; returns how many."""
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT m.id FROM memories m WHERE m.consent = ? AND {where} "
            "AND m.state NOT IN ('REVOKED', 'ERASED')",
            (consent, *params),
        )
        for (mid,) in rows:
            self.append_event(
                mid, elig, EventType.REVOKED, actor, reason, {"consent": consent}
            )
        return len(rows)

    def erase(
        self,
        memory_id: str,
        elig: Eligibility,
        actor: str,
        reason: str,
        scrub: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        """Right to erasure (call outside a transaction: it runs its own). Removes content,
        source, FTS row, vectors and analysis (the row stays as a tombstone holding only what
        the audit needs: id, scope, validity, counters), logs `erased`, passes every recall
        record of the tenant that mentions the memory through `scrub` (before the erasure
        commits, and again after it, for recalls made meanwhile), then checkpoints both files
        so no page that held the text stays in a WAL (freed pages are zeroed: secure_delete;
        FTS5 removes the terms from its index: its secure-delete option)."""
        with self.snapshot():
            where, params = self._where(elig)
            row = self._one(
                f"SELECT m.rid, m.tenant FROM memories m WHERE m.id = ? AND {where}",
                (memory_id, *params),
            )
        if row is None:
            raise NotFound(f"no memory {memory_id} visible to this principal")
        rid, tenant = int(row[0]), str(row[1])
        self.recall_log.scrub(tenant, memory_id, scrub, _payload_json)
        with self.transaction():
            self._erase_row(rid, memory_id, elig, actor, reason)
        self.recall_log.scrub(tenant, memory_id, scrub, _payload_json)
        self.resident.forget(tenant)  # nothing erased stays in this process
        for db in (self.db, self.recall_log.db):
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _erase_row(
        self, rid: int, memory_id: str, elig: Eligibility, actor: str, reason: str
    ) -> None:
        lexicon.unindex(self.db, rid)  # reads the FTS row's terms, so before it goes
        # a failure's message may quote the memory (a model error echoing its prompt)
        self.db.execute(
            "UPDATE maintenance_failures SET error = '[erased: quoted an erased memory]' "
            "WHERE instr(error, ?) > 0 OR EXISTS (SELECT 1 FROM memories m WHERE m.rid = ? "
            "AND length(m.content) > 3 AND (instr(error, m.content) > 0 OR "
            "instr(error, coalesce(m.state_text, char(0))) > 0))",
            (memory_id, rid),
        )
        self.db.execute(
            "UPDATE memories SET content = '', state_text = NULL, state_facts = NULL, "
            "action = NULL, success = NULL, reward = NULL, episode_id = NULL, step = NULL, "
            "evidence = '[]', conditions = '[]', value = 'null', entity = NULL, "
            "attribute = NULL, consent = NULL, policy_version = NULL, proposed_by = '', "
            "fingerprint = 'erased:' || id, analysis = NULL, analysis_version = 0 "
            "WHERE rid = ?",
            (rid,),
        )
        self.db.execute("DELETE FROM memories_fts WHERE rowid = ?", (rid,))
        self.vectors.remove(rid)
        self.append_event(memory_id, elig, EventType.ERASED, actor, reason, {"tombstone": True})
        self._count("erasures")  # other processes then empty their caches of memory text

    def _ledger(
        self,
        event: EventType,
        tenant: str,
        memory_id: str | None,
        recall_id: str | None,
        actor: str,
        reason: str,
        data: dict[str, Any],
    ) -> None:
        """One ledger row. Its own scope columns keep their defaults (restricted, `admin`):
        every row written here concerns a memory and is shown under that memory's scope; a
        `recalled` event is a row of the recall file (`store.recall_log`)."""
        self.db.execute(
            "INSERT INTO ledger (at, event, tenant, memory_id, recall_id, actor, reason, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), event.value, tenant, memory_id, recall_id, actor, reason,
             json.dumps(data, sort_keys=True, default=str)),
        )

    def _rid(self, memory_id: str) -> int:
        row = self._one("SELECT rid FROM memories WHERE id = ?", (memory_id,))
        if row is None:
            raise NotFound(f"no memory {memory_id}")
        return int(row[0])

    def _vector_meta(self, rid: int) -> VectorMeta:
        r = self._one(
            "SELECT tenant, namespace, state, classification, role_key, valid_from, valid_until, "
            "recorded_at FROM memories WHERE rid = ?",
            (rid,),
        )
        if r is None:
            raise NotFound(f"no memory row {rid}")
        return VectorMeta(r[0], r[1], r[2], int(r[3]), r[4], r[5], r[6], r[7])

    # -- scoped reads: every one takes an Eligibility (or, for maintenance, SYSTEM) ----------

    def _role_keys(self, tenant: str, table: str = "memories") -> list[str]:
        """The distinct role keys of a tenant's memories (or recalls), cached until any
        connection writes."""
        version = (self._one("PRAGMA main.data_version"),
                   self._one(f"PRAGMA {RECALLS}.data_version"))  # either file may change
        if version != self._data_version:
            self._data_version = version
            self._role_key_cache.clear()
        key = tenant if table == "memories" else f"{table}\x00{tenant}"
        if key not in self._role_key_cache:
            # DISTINCT as a walk of the (tenant, role_key) index from one key to the next: a
            # seek per distinct key, not a scan of every row of the tenant
            self._role_key_cache[key] = [
                str(r[0]) for r in self._all(
                    f"WITH RECURSIVE k(v) AS (SELECT MIN(role_key) FROM {table} WHERE tenant = ?1 "
                    f"UNION ALL SELECT (SELECT MIN(role_key) FROM {table} WHERE tenant = ?1 "
                    "AND role_key > k.v) FROM k WHERE k.v IS NOT NULL) "
                    "SELECT v FROM k WHERE v IS NOT NULL", (tenant,),
                )
            ]
        return self._role_key_cache[key]

    def _wrote_role_key(self, tenant: str, role_key: str) -> None:
        """This connection wrote a memory with `role_key`: a cached key list gains it (a key
        of a write that then rolls back stays listed: harmless, the gate only lists keys whose
        roles the reader holds, and no row has it)."""
        known = self._role_key_cache.get(tenant)
        if known is not None and role_key not in known:
            known.append(role_key)

    def _where(self, scope: Eligibility | System, alias: str = "m") -> tuple[str, list[object]]:
        """The scope layer's SQL for memory rows: the one place a memory query gets its gates."""
        if isinstance(scope, System):
            return "1", []
        keys = self._role_keys(scope.principal.tenant)
        return scope.where(scope.held_keys(keys), alias)

    def _recall_where(self, reader: Principal, alias: str = "") -> tuple[str, list[object]]:
        """The scope layer's SQL for recall-scoped rows (recalls, feedback, recall events, and
        ledger rows about no memory, such as API key changes, whose role key is `admin` by
        `m005`'s default: a candidate key like the stored ones, kept only if held)."""
        stored = self._role_keys(reader.tenant, f"{RECALLS}.recalls")
        keys = held_keys(reader, [*stored, "admin"] if "admin" not in stored else stored)
        return recall_where(reader, keys, alias)

    def get(self, memory_id: str, elig: Eligibility) -> MemoryRecord:
        """One memory, if eligible; otherwise NotFound (never 'forbidden': that would leak)."""
        where, params = self._where(elig)
        row = self._one(
            f"SELECT {_SELECT} FROM memories m WHERE m.id = ? AND {where}", (memory_id, *params)
        )
        if row is None:
            raise NotFound(f"no memory {memory_id} visible to this principal")
        return _record(row)

    def by_rids(self, rids: Sequence[int], elig: Eligibility) -> dict[int, MemoryRecord]:
        """The eligible ones of these rows, by rid."""
        return {rid: rec for rid, (rec, _) in self.with_analyses(rids, elig, None).items()}

    def with_analyses(
        self, rids: Sequence[int], elig: Eligibility, version: int | None
    ) -> dict[int, tuple[MemoryRecord, bytes | None]]:
        """`by_rids`, each record with its stored analysis (None unless of `version`; always
        None when `version` is None)."""
        if not rids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {_SELECT}, CASE WHEN m.analysis_version = ? THEN m.analysis END "
            f"FROM memories m WHERE m.rid IN ({','.join('?' * len(rids))}) AND {where}",
            (version, *rids, *params),
        )
        return {int(r[0]): (_record(r[:-1]), r[-1]) for r in rows}

    def recall_rows(
        self, rids: Sequence[int], elig: Eligibility, version: int
    ) -> dict[int, RecallRow]:
        """`with_analyses` with both stored vectors of each row, in one gated read: what the
        recall's later stages need of its candidates, without reading them again."""
        if not rids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {_SELECT}, CASE WHEN m.analysis_version = ? THEN m.analysis END, "
            f"v.content, v.state FROM memories m LEFT JOIN vectors v ON v.rid = m.rid "
            f"WHERE m.rid IN ({','.join('?' * len(rids))}) AND {where}",
            (version, *rids, *params),
        )
        return {
            int(r[0]): RecallRow(
                _record(r[:-3]), r[-3],
                None if r[-2] is None else np.frombuffer(r[-2], dtype=np.float32),
                None if r[-1] is None else np.frombuffer(r[-1], dtype=np.float32),
            )
            for r in rows
        }

    def set_analysis(self, rid: int, version: int, analysis: bytes | None) -> None:
        """Store a memory's analysis (derived data: no ledger event; call in a transaction).
        None records that it has none of `version`. An erased row is left alone: the analysis
        may have been read from its text before the erasure committed."""
        self.db.execute(
            "UPDATE memories SET analysis = ?, analysis_version = ? "
            "WHERE rid = ? AND state != 'ERASED'",
            (analysis, version, rid),
        )

    def unanalysed(
        self, version: int, limit: int, scope: System
    ) -> list[tuple[int, MemoryRecord]]:
        """Up to `limit` memories (not erased) whose analysis is missing or older than
        `version` (a maintenance read across tenants: it feeds `set_analysis`, never a
        caller)."""
        rows = self._all(
            f"SELECT {_SELECT} FROM memories m WHERE m.state != 'ERASED' "
            "AND m.analysis_version < ? ORDER BY m.rid LIMIT ?",
            (version, int(limit)),
        )
        return [(int(r[0]), _record(r)) for r in rows]

    def count_unanalysed(self, version: int, scope: System) -> int:
        """How many memories (not erased) have not been analysed by `version` or later."""
        row = self._one(
            "SELECT COUNT(*) FROM memories m WHERE m.state != 'ERASED' "
            "AND m.analysis_version < ?", (version,),
        )
        return int(row[0]) if row else 0

    def situational(self, rids: Sequence[int], elig: Eligibility) -> dict[int, bool]:
        """For each eligible rid: is it a lesson with a known source state (situation-bound)?"""
        if not rids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT m.rid, m.kind = 'lesson' AND NOT m.state_unknown FROM memories m "
            f"WHERE m.rid IN ({','.join('?' * len(rids))}) AND {where}",
            (*rids, *params),
        )
        return {int(r): bool(flag) for r, flag in rows}

    def page(self, elig: Eligibility, limit: int = 100, offset: int = 0) -> list[MemoryRecord]:
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {_SELECT} FROM memories m WHERE {where} ORDER BY m.rid LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [_record(r) for r in rows]

    def count(self, elig: Eligibility) -> dict[str, int]:
        """Eligible memories counted by lifecycle state."""
        where, params = self._where(elig)
        return {
            str(s): int(n)
            for s, n in self.db.execute(
                f"SELECT m.state, COUNT(*) FROM memories m WHERE {where} GROUP BY m.state", params
            )
        }

    def count_pending(self, elig: Eligibility) -> int:
        """Eligible proposals waiting for review (PROPOSED, if `elig` admits it): a count
        through the partial index `memories_pending`, whatever the tenant's size."""
        where, params = self._where(elig)
        row = self._one(f"SELECT COUNT(*) FROM memories m WHERE m.state = 'PROPOSED' AND "
                        f"{where}", params)
        return int(row[0]) if row else 0

    def utilities(self, elig: Eligibility, limit: int) -> list[float]:
        """The measured utility (`Counters.utility`) of up to `limit` eligible memories."""
        where, params = self._where(elig)
        return [float(r[0]) for r in self._all(
            f"SELECT (m.successes + 1.0) / (m.uses + 2.0) FROM memories m WHERE {where} "
            "ORDER BY m.rid LIMIT ?", (*params, int(limit)),
        )]

    def history(
        self, memory_id: str, elig: Eligibility, known_at: float | None = None
    ) -> list[LedgerEvent]:
        """The events of one eligible memory, oldest first (up to `known_at` when set); `seq`
        numbers them from 1 (the memory's own sequence: nothing about other events)."""
        self.get(memory_id, elig)  # eligibility check; raises NotFound
        if known_at is None:
            events = self._events("memory_id = ?", (memory_id,), elig.principal)
        else:
            events = self._events(
                "memory_id = ? AND at <= ?", (memory_id, known_at), elig.principal
            )
        return [replace(ev, seq=n) for n, ev in enumerate(events, 1)]

    def _visible_events(self, elig: Eligibility) -> tuple[str, list[object]]:
        """Ledger rows the principal may see: events of eligible memories, and events of
        recalls it may see (`scope.recall_where`)."""
        where, params = self._where(elig)
        rwhere, rparams = self._recall_where(elig.principal)
        return (
            f"""(memory_id IN (SELECT m.id FROM memories m WHERE {where})
                 OR (memory_id IS NULL AND {rwhere}))""",
            [*params, *rparams],
        )

    def ledger(
        self, elig: Eligibility, limit: int = 100, offset: int = 0
    ) -> list[LedgerEvent]:
        """Recent ledger events the principal may see, newest first: the main ledger's and
        the `recalled` events of the recall file (one per recall record), merged by time.
        An event's `seq` is its position among the events this principal may see (the
        file-wide sequence would count, by its gaps, the events of other scopes)."""
        sql, params = self._ledger_union(elig, "ROW_NUMBER() OVER (ORDER BY at, seq, src), at, "
                                         "event, tenant, memory_id, recall_id, actor, reason, "
                                         "data")
        rows = self._all(
            f"SELECT * FROM ({sql}) ORDER BY 1 DESC LIMIT ? OFFSET ?", (*params, limit, offset)
        )
        return self._event_rows(rows, elig.principal)

    def count_events(self, elig: Eligibility) -> int:
        """How many ledger events `ledger(elig)` could show."""
        sql, params = self._ledger_union(elig, "1")
        row = self._one(f"SELECT COUNT(*) FROM ({sql})", params)
        return int(row[0]) if row else 0

    def _ledger_union(self, elig: Eligibility, columns: str) -> tuple[str, list[object]]:
        where, params = self._visible_events(elig)
        rwhere, rparams = self._recall_where(elig.principal)
        recalled = (
            "1 AS src, seq, at, 'recalled' AS event, tenant, NULL AS memory_id, id AS recall_id, "
            "actor, '' AS reason, json_object('mode', mode, 'served', json(served), 'rejected', "
            "rejected) AS data"
        )
        return (
            f"SELECT {columns} FROM (SELECT 0 AS src, seq, at, event, tenant, memory_id, "
            f"recall_id, actor, reason, data FROM ledger WHERE tenant = ? AND {where} "
            f"UNION ALL SELECT {recalled} FROM {RECALLS}.recalls WHERE legacy = 0 AND {rwhere})",
            [elig.principal.tenant, *params, *rparams],
        )

    def _events(
        self,
        where: str,
        params: Sequence[object],
        reader: Principal | System,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[LedgerEvent]:
        """Ledger rows matching `where` (which must carry the reader's scope). The ids a
        `recalled` event lists are cut to the memories `reader` may inspect; an event about a
        memory the reader may read that came from a recall it may not see (feedback on
        another principal's recall) keeps its effect but not that recall's id."""
        order = "DESC" if newest_first else "ASC"
        lim = f" LIMIT {int(limit)} OFFSET {int(offset)}" if limit else ""
        rows = self._all(
            "SELECT seq, at, event, tenant, memory_id, recall_id, actor, reason, data "
            f"FROM ledger WHERE {where} ORDER BY seq {order}{lim}",
            tuple(params),
        )
        return self._event_rows(rows, reader)

    def _event_rows(
        self, rows: Sequence[tuple[Any, ...]], reader: Principal | System
    ) -> list[LedgerEvent]:
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
                f"SELECT id FROM {RECALLS}.recalls WHERE id IN ({marks(cited)}) AND {rwhere}",
                (*cited, *rparams),
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
            ev if "served" not in ev.data else LedgerEvent(
                ev.seq, ev.at, ev.event, ev.tenant, ev.memory_id, ev.recall_id, ev.actor,
                ev.reason, ev.data | {"served": [i for i in ev.data["served"] if i in visible]},
            )
            for ev in events
        ]

    def visible_ids(self, memory_ids: Iterable[str], elig: Eligibility) -> set[str]:
        """Which of these memory ids `elig` reaches."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return set()
        where, params = self._where(elig)
        return {
            str(r[0]) for r in self._all(
                f"SELECT m.id FROM memories m WHERE m.id IN ({marks(ids)}) AND {where}",
                (*ids, *params),
            )
        }

    def _slice(self, elig: Eligibility) -> Slice | None:
        """The resident slice of the reader's tenant, or None: no vectors yet, inside a write
        transaction (it may roll back), resident index off, or the tenant does not fit."""
        if self._writing or not self.vectors._ready() or self.vectors.dim is None:
            return None
        return self.resident.slice(elig.principal.tenant, self.vectors.dim)

    def _allowed_keys(self, elig: Eligibility) -> list[str]:
        return elig.held_keys(self._role_keys(elig.principal.tenant))

    def dense(
        self, field: str, query: Vector, k: int, elig: Eligibility
    ) -> list[tuple[int, float]]:
        """Exact KNN over eligible rows: (rid, cosine similarity)."""
        with self.snapshot():
            s = self._slice(elig)
            if s is not None:
                return s.dense(field, query, k, elig, self._allowed_keys(elig))
            where, params = self._where(elig, alias="")
            return self.vectors.search(field, query, k, where, params)

    def lexical(self, text: str, k: int, elig: Eligibility) -> list[tuple[int, float]]:
        """BM25 over eligible rows: (rid, score), best first; score > 0."""
        terms = lexical_terms(text)
        if not terms:
            return []
        with self.snapshot():
            s = self._slice(elig)
            if s is not None:
                return s.lexical(terms, k, elig, self._allowed_keys(elig))
            return self._fts(terms, k, elig)

    def _fts(self, terms: list[str], k: int, elig: Eligibility) -> list[tuple[int, float]]:
        """BM25 with the tenant's own statistics (`situated.store.lexical`, the resident
        slice's numbers) over the gated rows: the path without a slice."""
        where, params = self._where(elig)
        return lexicon.search(self.db, elig.principal.tenant, terms, int(k), where, params)

    def search(self, query: Vector, text: str, k: int, elig: Eligibility) -> Rankings:
        """Stage 2's three rankings over the eligible rows, from the resident index when the
        tenant's slice is available, else from sqlite-vec and FTS5 (same contract)."""
        terms = lexical_terms(text)
        with self.snapshot():
            s = self._slice(elig)
            if s is not None:
                return s.search(query, terms, k, elig, self._allowed_keys(elig))
            where, params = self._where(elig, alias="")
            content = self.vectors.search("content", query, k, where, params)
            state = self.vectors.search("state", query, k, where, params)
            lexical = self._fts(terms, k, elig) if terms else []
            union = list(dict.fromkeys(r for ranks in (content, state, lexical) for r, _ in ranks))
            situational = self.situational(union, elig)
            return Rankings(
                content=[(r, v) for r, v in content if r in situational],
                state=[(r, v) for r, v in state if situational.get(r)],
                lexical=[(r, v) for r, v in lexical if r in situational],
                situational=situational,
            )

    def vectors_of(
        self, field: str, rids: Sequence[int], elig: Eligibility
    ) -> dict[int, Vector]:
        """Stored vectors of `field` for the rows of these that `elig` reaches (the resident
        copy when loaded)."""
        reached = self.situational(rids, elig)
        rids = [r for r in rids if r in reached]
        s = None if self._writing else self.resident.slices.get(elig.principal.tenant)
        out: dict[int, Vector] = dict(s.vectors(field, rids)) if s else {}
        missing = [r for r in rids if r not in out]
        if missing:
            out.update(self.vectors.vectors(field, missing))
        return out

    def by_fingerprint(self, fingerprint: str, elig: Eligibility) -> MemoryRecord | None:
        """The oldest memory `elig` reaches with this exact-duplicate key."""
        where, params = self._where(elig)
        row = self._one(
            f"SELECT {_SELECT} FROM memories m INDEXED BY memories_fingerprint "
            f"WHERE m.fingerprint = ? AND {where} ORDER BY m.rid LIMIT 1",
            (fingerprint, *params),
        )
        return None if row is None else _record(row)

    def fingerprints_among(self, fingerprints: Sequence[str], elig: Eligibility) -> set[str]:
        """Which of these exact-duplicate keys `elig` reaches (`by_fingerprint` is not None)."""
        if not fingerprints:
            return set()
        where, params = self._where(elig)
        rows = self._all(
            # without the index named, the planner may walk the tenant's role-key index
            # (every row of a large tenant) for a single key
            f"SELECT DISTINCT m.fingerprint FROM memories m INDEXED BY memories_fingerprint "
            f"WHERE m.fingerprint IN "
            f"({','.join('?' * len(fingerprints))}) AND {where}",
            (*fingerprints, *params),
        )
        return {str(r[0]) for r in rows}

    def fact_keys_among(
        self, keys: Sequence[tuple[str, str]], elig: Eligibility
    ) -> set[tuple[str, str]]:
        """Which of these (entity, attribute) keys `elig` reaches (`same_key` is not empty)."""
        if not keys:
            return set()
        where, params = self._where(elig)
        entities = sorted({e for e, _ in keys})
        rows = self._all(
            f"SELECT DISTINCT m.entity, m.attribute FROM memories m WHERE m.entity IN "
            f"({','.join('?' * len(entities))}) AND {where}",
            (*entities, *params),
        )
        return {(str(e), str(a)) for e, a in rows} & set(keys)

    def dense_many(
        self, field: str, queries: Vector, k: int, elig: Eligibility
    ) -> list[list[tuple[int, float]]]:
        """`dense` for each row of `queries`, in one read snapshot (one matrix product over
        the resident slice when there is one)."""
        with self.snapshot():
            s = self._slice(elig)
            if s is None:
                return [self.dense(field, q, k, elig) for q in queries]
            return s.dense_many(field, queries, k, elig, self._allowed_keys(elig))

    def same_key(self, entity: str, attribute: str, elig: Eligibility) -> list[MemoryRecord]:
        """Facts `elig` reaches with this (entity, attribute), oldest first."""
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {_SELECT} FROM memories m WHERE m.entity = ? AND m.attribute = ? "
            f"AND {where} ORDER BY m.rid",
            (entity, attribute, *params),
        )
        return [_record(r) for r in rows]

    def attribute_counts(self, key: attributes.Key) -> tuple[int, int]:
        """(single-valued evidence, counter-evidence) of one attribute in one scope."""
        return attributes.counts(self, key)

    def save_attribute_counts(self, key: attributes.Key, single: int, multi: int) -> None:
        """Store one scope's counts of an attribute (inside the caller's transaction)."""
        attributes.save(self, key, single, multi)

    def visible_attributes(self, principal: Principal) -> list[tuple[str, str, int, int, int]]:
        """(attribute, role key, classification, single, multi) of the scopes `principal`
        may read, by attribute."""
        return attributes.visible(self, principal)

    def recall_records(
        self, reader: Principal, limit: int, offset: int = 0,
        recall_id: str | None = None, mentioning: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """(id, at, actor, namespace, mode, served, payload) of the recalls the reader may
        see, newest first (`store.recall_reads` cuts what they say about memories)."""
        return recall_reads.sqlite_records(self, reader, limit, offset, recall_id, mentioning)

    def recall_briefings(
        self, reader: Principal, limit: int
    ) -> list[tuple[float, str | None, str | None]]:
        """(time, served items JSON, rejections JSON) of the recalls the reader may see."""
        return recall_reads.sqlite_briefings(self, reader, limit)

    def same_attribute(self, attribute: str, elig: Eligibility) -> list[MemoryRecord]:
        """Memories `elig` reaches with this attribute (any entity), oldest first."""
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT {_SELECT} FROM memories m WHERE m.attribute = ? AND {where} ORDER BY m.rid",
            (attribute, *params),
        )
        return [_record(r) for r in rows]

    def namespace_counters(
        self, memory_ids: Sequence[str], namespace: str, elig: Eligibility
    ) -> dict[str, tuple[float, float]]:
        """(uses, successes) in recalls of `namespace` of each memory of these `elig` reaches,
        inferred outcomes counted at `INFERRED_WEIGHT`."""
        if not memory_ids:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT u.memory_id, u.uses, u.successes, u.inferred_uses, u.inferred_successes "
            f"FROM memory_utility u "
            f"JOIN memories m ON m.id = u.memory_id WHERE u.namespace = ? AND "
            f"u.memory_id IN ({marks(memory_ids)}) AND {where}",
            (namespace, *memory_ids, *params),
        )
        w = INFERRED_WEIGHT
        return {str(m): (int(u) + w * int(iu), int(s) + w * int(is_))
                for m, u, s, iu, is_ in rows}

    # -- recalls and feedback ---------------------------------------------------------------

    def save_recall(self, rec: StoredRecall, reader: Principal) -> None:
        """Persist a recall record (also its `recalled` event), scoped to the reader who made
        it, in the recall file: its own transaction, never waiting for memory writers."""
        self.recall_log.save((
            rec.id, rec.tenant, rec.at, rec.namespace, rec.state_hash, rec.mode,
            json.dumps(list(rec.served)), _payload_json(rec.payload), principal_key(reader),
            int(reader.clearance), reader.name,
            len(rec.payload.get("briefing", {}).get("rejected", [])), 0,
        ))
        self._role_key_cache.pop(f"{RECALLS}.recalls\x00{rec.tenant}", None)  # own writes

    def get_recall(self, recall_id: str, reader: Principal) -> StoredRecall:
        """A recall record the reader may see (`scope.recall_where`); NotFound otherwise."""
        where, params = self._recall_where(reader)
        row = self._one(
            "SELECT id, tenant, at, namespace, state_hash, mode, served, payload "
            f"FROM {RECALLS}.recalls WHERE id = ? AND {where}",
            (recall_id, *params),
        )
        if row is None:
            raise NotFound(f"no recall {recall_id} visible to this principal")
        i, t, at, ns, sh, mode, served, payload = row
        return StoredRecall(i, t, at, ns, sh, mode, tuple(json.loads(served)), json.loads(payload))

    def feedback_digest(self, recall: StoredRecall) -> str | None:
        """The digest of the feedback already given for a recall read by `get_recall`."""
        row = self._one(
            "SELECT digest FROM feedback WHERE recall_id = ? AND tenant = ?",
            (recall.id, recall.tenant),
        )
        return None if row is None else str(row[0])

    def save_feedback(
        self, recall: StoredRecall, success: bool, used: Sequence[str],
        reward: float | None, digest: str, inferred: bool = False,
    ) -> None:
        """The feedback row of a recall (`inferred`: an outcome inferred from the session,
        which explicit feedback later replaces)."""
        self.db.execute(
            "INSERT INTO feedback (recall_id, tenant, at, success, used, reward, digest, "
            "inferred) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (recall.id, recall.tenant, utcnow(), int(success), json.dumps(list(used)), reward,
             digest, int(inferred)),
        )

    def drop_inferred_feedback(self, recall: StoredRecall) -> None:
        """Remove an inferred feedback row of a recall (explicit feedback replaces it; the
        inferred events stay in the ledger)."""
        self.db.execute(
            "DELETE FROM feedback WHERE recall_id = ? AND tenant = ? AND inferred = 1",
            (recall.id, recall.tenant),
        )

    def count_recalls(self, reader: Principal) -> tuple[int, int]:
        """(recalls, recalls with feedback) the reader may see."""
        where, params = self._recall_where(reader, "r")
        row = self._one(
            f"SELECT COUNT(*), COUNT(f.recall_id) FROM {RECALLS}.recalls r "
            f"LEFT JOIN feedback f ON f.recall_id = r.id WHERE {where}",
            params,
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    # -- maintenance ------------------------------------------------------------------------

    def record_failure(self, component: str, error: str, memory_id: str | None = None) -> None:
        """Count a failure loudly: `health` shows every one; `stats` shows one about a memory
        to the principals who may read that memory (it carries the memory's scope)."""
        about = None if memory_id is None else self._one(
            "SELECT tenant, role_key, classification FROM memories WHERE id = ?", (memory_id,)
        )
        tenant, role, level = about if about is not None else (None, "", 3)
        self.db.execute(
            "INSERT INTO maintenance_failures (at, component, error, tenant, role_key, "
            "classification) VALUES (?, ?, ?, ?, ?, ?)",
            (utcnow(), component, error[:2000], tenant, role, level),
        )

    def failures(self, scope: Principal | System) -> dict[str, int]:
        """Failures by component: every one for `SYSTEM` (health), else those about memories
        the principal may read (the memory rule of `store.scope`: roles held, clearance)."""
        if isinstance(scope, System):
            where, params = "1", []
        else:
            keys = held_keys(scope, [
                str(r[0]) for r in self._all(
                    "SELECT DISTINCT role_key FROM maintenance_failures WHERE tenant = ?",
                    (scope.tenant,),
                )
            ])
            where = f"tenant = ? AND classification <= ? AND role_key IN ({marks(keys)})"
            params = [scope.tenant, int(scope.clearance), *keys]
        return {
            str(c): int(n)
            for c, n in self.db.execute(
                f"SELECT component, COUNT(*) FROM maintenance_failures WHERE {where} "
                "GROUP BY component", params,
            )
        }

    def recent_failures(self, since: float, scope: System) -> dict[str, tuple[int, float, str]]:
        """Failures since `since` by component: (how many, when the last one was, its error)
        (health; every tenant's, so `SYSTEM` only)."""
        return {
            str(c): (int(n), float(at), str(err)) for c, n, at, err in self.db.execute(
                "SELECT f.component, COUNT(*), MAX(f.at), (SELECT g.error FROM "
                "maintenance_failures g WHERE g.component = f.component ORDER BY g.id DESC "
                "LIMIT 1) FROM maintenance_failures f WHERE f.at >= ? GROUP BY f.component",
                (since,),
            )
        }

    def lifecycle_candidates(self, scope: System) -> list[tuple[str, str, str, Counters]]:
        """(id, tenant, state, counters) of every ACTIVE or LOW_VALUE memory (maintenance)."""
        return [
            (str(m), str(t), str(st), Counters(*c)) for m, t, st, *c in self._all(
                "SELECT id, tenant, state, uses, successes, failures, exposures FROM memories "
                "WHERE state IN ('ACTIVE', 'LOW_VALUE')"
            )
        ]

    def low_value_since(self, memory_id: str, scope: System) -> float | None:
        """When a memory last became LOW_VALUE (maintenance)."""
        row = self._one(
            "SELECT MAX(at) FROM ledger WHERE memory_id = ? AND event = 'transitioned' "
            "AND json_extract(data, '$.to') = 'LOW_VALUE'",
            (memory_id,),
        )
        return None if row is None or row[0] is None else float(row[0])

    def labelled_recalls(
        self, tenant: str, scope: System
    ) -> list[tuple[str, int, str]]:
        """(payload, success, used) of the tenant's recalls with feedback, oldest first: the
        `learned` reconstructor's training data (fitted per tenant; never shown to a caller)."""
        return [
            (str(p), int(s), str(u)) for p, s, u in self._all(
                f"SELECT r.payload, f.success, f.used FROM {RECALLS}.recalls r JOIN feedback f "
                "ON f.recall_id = r.id WHERE r.tenant = ? ORDER BY r.at",
                (tenant,),
            )
        ]

    def labelled_recalls_of(
        self, reader: Principal, namespace: str | None = None, inferred: bool = False
    ) -> list[tuple[str, dict[str, Any], bool, tuple[str, ...]]]:
        """(recall id, payload, success, used) of the recalls with feedback the reader may
        see (`scope.recall_where`: its tenant, principals it dominates), oldest first;
        inferred outcomes only when asked."""
        where, params = self._recall_where(reader, "r")
        extra, more = "", []
        if namespace is not None:
            extra, more = " AND r.namespace = ?", [namespace]
        if not inferred:
            extra += " AND f.inferred = 0"
        return [
            (str(i), json.loads(p), bool(s), tuple(json.loads(u)))
            for i, p, s, u in self._all(
                f"SELECT r.id, r.payload, f.success, f.used FROM {RECALLS}.recalls r "
                f"JOIN feedback f ON f.recall_id = r.id WHERE {where}{extra} ORDER BY r.at",
                (*params, *more),
            )
        ]

    def count_labelled_recalls(self, tenant: str, scope: System) -> int:
        """How many of the tenant's recalls have feedback (what `labelled_recalls` returns)."""
        row = self._one("SELECT COUNT(*) FROM feedback WHERE tenant = ?", (tenant,))
        return int(row[0]) if row else 0

    def feedback_tenants(self, scope: System) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT DISTINCT tenant FROM feedback")]

    def count_labelled(self, tenant: str, scope: System) -> int:
        """Credited or blamed uses recorded for a tenant."""
        row = self._one(
            "SELECT COUNT(*) FROM ledger WHERE event = 'feedback' AND tenant = ? "
            "AND json_extract(data, '$.credit') != 'exposed'",
            (tenant,),
        )
        return int(row[0]) if row else 0

    def build_graphs(self, scope: System, min_rows: int | None = None) -> list[str]:
        """Nothing to build in the file: the resident index gives a large tenant its graphs
        in process when it loads the tenant (`store.ann`). PostgreSQL builds them in the
        database (`store.pg.graphs`)."""
        return []

    def rebuild(self, repair: bool = False) -> RebuildReport:
        """Replay every memory's ledger events and compare with the stored state and counters."""
        stored = {
            r[0]: Folded(LifecycleState(r[1]), Counters(*r[2:]))
            for r in self.db.execute(
                "SELECT id, state, uses, successes, failures, exposures FROM memories"
            )
        }
        events: dict[str, list[LedgerEvent]] = {}
        for ev in self._events("memory_id IS NOT NULL", (), SYSTEM):
            assert ev.memory_id is not None
            events.setdefault(ev.memory_id, []).append(ev)
        bad = [mid for mid, have in stored.items() if replay(events.get(mid, [])) != have]
        per_ns_stored = {
            (str(m), str(n)): (int(u), int(s), int(iu), int(is_))
            for m, n, u, s, iu, is_ in self._all(
                "SELECT memory_id, namespace, uses, successes, inferred_uses, "
                "inferred_successes FROM memory_utility"
            )
        }
        per_ns_replayed: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        for mid, evs in events.items():
            for ev in evs:
                credit = ev.data.get("credit")
                if ev.event is EventType.FEEDBACK and credit in ("credited", "blamed"):
                    key = (mid, _utility_namespace(ev.data))
                    was = per_ns_replayed.get(key, (0, 0, 0, 0))
                    per_ns_replayed[key] = tuple(  # type: ignore[assignment]
                        a + b for a, b in zip(was, _utility_delta(ev.data), strict=True)
                    )
        ns_bad = {m for (m, _n) in set(per_ns_stored) ^ set(per_ns_replayed)}
        ns_bad |= {k[0] for k, v in per_ns_stored.items() if per_ns_replayed.get(k) != v}
        bad = sorted(set(bad) | ns_bad)
        if repair and bad:
            with self.transaction():
                self.bump_generation()
                for mid in bad:
                    f = replay(events.get(mid, []))
                    if f is None:
                        continue
                    c = f.counters
                    self.db.execute(
                        "UPDATE memories SET state = ?, uses = ?, successes = ?, failures = ?, "
                        "exposures = ? WHERE id = ?",
                        (f.state.value, c.uses, c.successes, c.failures, c.exposures, mid),
                    )
                self.db.execute(
                    f"DELETE FROM memory_utility WHERE memory_id IN ({','.join('?' * len(bad))})",
                    tuple(bad),
                )
                for (mid, ns), counts in per_ns_replayed.items():
                    if mid in bad:
                        self.db.execute(
                            "INSERT INTO memory_utility (memory_id, namespace, uses, successes, "
                            "inferred_uses, inferred_successes) VALUES (?, ?, ?, ?, ?, ?)",
                            (mid, ns, *counts),
                        )
        return RebuildReport(len(stored), tuple(bad), repair and bool(bad))

    def meta(self, *keys: str) -> dict[str, str]:
        """The `meta` values of these keys that are set."""
        rows = self._all(
            f"SELECT key, value FROM meta WHERE key IN ({','.join('?' * len(keys))})", keys
        )
        return {str(k): str(v) for k, v in rows}

    def erasures(self) -> int:
        """How many erasures this store has seen (a process compares it with the count it last
        saw, and empties its caches of memory text when it grew)."""
        return int(self.meta("erasures").get("erasures", 0))

    def bump_generation(self) -> None:
        """Mark a change made without ledger events: in-memory indexes reload everything."""
        self._count("generation")

    def _count(self, key: str) -> None:
        """Add one to a counter in `meta` (call in a transaction)."""
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (key,),
        )

    def integrity(self) -> str:
        with self.snapshot():
            # FTS5 checks its index against the structure it last read: after another
            # connection changed the index, a query must reload it first, or the check reports
            # a checksum mismatch that is not there (SQLite 3.54)
            self._all("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'x' LIMIT 1")
            row = self._one("PRAGMA quick_check")
        return "no result" if row is None else str(row[0])

    def orphans(self) -> int:
        """Memories whose vectors are missing or whose index metadata disagrees with the record
        (must be zero: the vector scan applies the gates from that metadata)."""
        if self.vectors.dim is None and not self._one(
            "SELECT 1 FROM meta WHERE key = 'vector_dim'"
        ):
            return 0
        missing = self._one(
            "SELECT COUNT(*) FROM memories m WHERE m.state != 'ERASED' "
            "AND m.rid NOT IN (SELECT rid FROM vec_content)"
        )
        stale = self._one(
            "SELECT COUNT(*) FROM memories m JOIN vec_content v ON v.rid = m.rid "
            "WHERE v.state != m.state OR v.valid_until != m.valid_until"
        )
        return sum(int(r[0]) for r in (missing, stale) if r is not None)


_STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from had has have he her his how i if in into "
    "is it its me my no not of on or our she so than that the their them then there these they "
    "this to too up us was we were what when where which who why will with would you your".split()
)
MAX_LEXICAL_TERMS = 4


def lexical_terms(text: str) -> list[str]:
    """The query words worth a full-text search: no stopwords, the longest few (longer words
    are rarer, and every extra OR term makes FTS5 score more documents). Split like the
    indexed text (`resident.tokens`)."""
    words = dict.fromkeys(w for w in tokens(text) if len(w) > 1 and w not in _STOPWORDS)
    return sorted(words, key=len, reverse=True)[:MAX_LEXICAL_TERMS]


def _utility_delta(data: dict[str, Any]) -> tuple[int, int, int, int]:
    """(uses, successes, inferred uses, inferred successes) one feedback event adds."""
    success = int(data.get("credit") == "credited")
    return (0, 0, 1, success) if data.get("inferred") else (1, success, 0, 0)


def _utility_namespace(data: dict[str, Any]) -> str:
    """Per-namespace utility is keyed by the namespace of the recall (`*` when it had none)."""
    return str(data.get("namespace") or "*")


_M = TypeVar("_M", bound=BaseModel)


def _trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """`cls.model_construct(**values)` for values naming every field (as each call below
    does; `tests/test_analysis.py` checks read-back records against validated ones), without
    its per-field alias and default handling."""
    m = cls.__new__(cls)
    _set(m, "__dict__", values)
    _set(m, "__pydantic_fields_set__", set(values))
    _set(m, "__pydantic_extra__", None)
    _set(m, "__pydantic_private__", None)
    return m


_set = object.__setattr__


def _json(text: str) -> Any:
    """`json.loads(text)` in a third of the time; msgspec refuses the escaped lone surrogates
    `json.dumps` writes for undecodable file names, which `json.loads` reads back."""
    try:
        return _decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def _unknown(obj: Any) -> Any:
    """numpy scalars as numbers, anything else msgspec cannot encode as its `str`."""
    item = getattr(obj, "item", None)
    return item() if callable(item) and getattr(obj, "shape", None) == () else str(obj)


def _payload_json(payload: dict[str, Any]) -> str:
    """A recall record (~25 kB) as JSON, 7x faster than `json.dumps`; NaN and infinities
    become null (standard JSON has none). Text msgspec cannot encode (a lone surrogate) goes
    through `json.dumps`, which escapes it."""
    try:
        return _encode(payload).decode()
    except UnicodeEncodeError:
        return json.dumps(payload, default=_unknown)


_decode = msgspec.json.decode
_encode = msgspec.json.Encoder(enc_hook=_unknown).encode
_KIND = {k.value: k for k in Kind}
_AUTHORITY = {int(a): a for a in Authority}
_CLASSIFICATION = {int(c): c for c in Classification}
_LIFECYCLE = {s.value: s for s in LifecycleState}
_NO_ROLES: frozenset[str] = frozenset()


def _record(row: Sequence[Any]) -> MemoryRecord:
    """A stored row as a record. Rows were validated when written, so the models are built
    without re-validation on the recall path (`_trusted`)."""
    d = dict(zip(_COLUMNS, row, strict=True))
    state = None
    if d["state_text"] is not None or d["state_facts"] is not None:
        facts = d["state_facts"]
        state = _trusted(State, {
            "text": d["state_text"] or "", "facts": _json(facts) if facts else {}
        })
    success = None if d["success"] is None else bool(d["success"])
    evidence = d["evidence"]
    conditions = d["conditions"]
    return _trusted(MemoryRecord, {
        "id": d["id"],
        "content": d["content"],
        "kind": _KIND[d["kind"]],
        "source": _trusted(Source, {
            "state": state,
            "state_unknown": bool(d["state_unknown"]),
            "action": d["action"],
            "outcome": _trusted(Outcome, {"success": success, "reward": d["reward"]}),
            "episode_id": d["episode_id"],
            "step": d["step"],
            "evidence": () if evidence == "[]" else tuple(_json(evidence)),
        }),
        "conditions": () if conditions == "[]" else tuple(_json(conditions)),
        "entity": d["entity"],
        "attribute": d["attribute"],
        "value": _json(d["value"]) if d["value"] is not None else None,
        "multi_valued": bool(d["multi_valued"]),
        "scope": _trusted(Scope, {
            "tenant": d["tenant"],
            "namespace": d["namespace"],
            "roles": _NO_ROLES if d["roles"] == "[]" else frozenset(_json(d["roles"])),
            "classification": _CLASSIFICATION[d["classification"]],
            "consent": d["consent"],
        }),
        "authority": _AUTHORITY[d["authority"]],
        "validity": _trusted(Validity, {
            "valid_from": from_epoch(d["valid_from"]),
            "valid_until": None if d["valid_until"] >= OPEN_END else from_epoch(d["valid_until"]),
            "recorded_at": from_epoch(d["recorded_at"]),
        }),
        "state": _LIFECYCLE[d["state"]],
        "counters": Counters(
            uses=d["uses"], successes=d["successes"], failures=d["failures"],
            exposures=d["exposures"],
        ),
        "policy_version": d["policy_version"],
        "supersedes": d["supersedes"],
        "superseded_by": d["superseded_by"],
        "fingerprint": d["fingerprint"],
        "proposed_by": d["proposed_by"],
    })
