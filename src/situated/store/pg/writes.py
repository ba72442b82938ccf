"""Writes of the PostgreSQL store: a memory with its vectors and lexical row, ledger events and
their fold, supersession, revocation and erasure. Each runs inside `transaction()` (joining
the caller's, or its own), so the ledger row and every record change commit together."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from situated.embed.base import Vector
from situated.errors import InvalidInput, NotFound
from situated.models import Counters, LifecycleState, MemoryRecord, Principal, utcnow
from situated.store.ledger import EventType, Folded, fold
from situated.store.lexical import doc_tokens
from situated.store.pg.base import PgBase
from situated.store.pg.names import claim_scope
from situated.store.pg.schema import POSTINGS_OF
from situated.store.rows import record_values
from situated.store.scope import VISIBLE_STATES, Eligibility, System, check_write
from situated.store.sqlite import _payload_json, _utility_delta, _utility_namespace

COLUMNS = (
    "rid id tenant namespace kind content state_text state_facts state_unknown action success "
    "reward episode_id step evidence conditions entity attribute value multi_valued roles "
    "role_key classification consent authority valid_from valid_until recorded_at state uses "
    "successes failures exposures policy_version supersedes superseded_by fingerprint proposed_by"
).split()
"""The record's columns, in the order `store.sqlite._record` reads them."""
SELECT = ", ".join(f"m.{c}" for c in COLUMNS)


def no_nul(field: str, value: str | None) -> None:
    """PostgreSQL text holds no NUL character: refuse one, naming the argument, before
    anything is written (SQLite stores it; JSON-encoded fields escape it)."""
    if value is not None and "\x00" in value:
        raise InvalidInput(field, "holds a NUL character, which PostgreSQL text cannot store")


MEMORY_COLUMNS = (*COLUMNS[1:], "role_set", "analysis", "analysis_version", "lex", "lex_tf",
                  "lex_len", "content_vec", "state_vec")
"""The columns a new memory is written with (`rid` is allotted by the table)."""


def memory_values(
    rec: MemoryRecord,
    vectors: dict[str, Vector],
    reason: str,
    analysis: tuple[int, bytes | None] | None,
    state: LifecycleState,
) -> tuple[tuple[object, ...], list[str]]:
    """A new memory's values for `MEMORY_COLUMNS` (`lex` as the text of its `tsvector`) and
    its lexical tokens; InvalidInput naming the argument for a NUL character, before anything
    is written. Counters start at 0."""
    src, sc = rec.source, rec.scope
    st = src.state
    for field, value in (("content", rec.content), ("source.state", st.text if st else None),
                         ("source.action", src.action), ("entity", rec.entity),
                         ("attribute", rec.attribute), ("namespace", sc.namespace),
                         ("consent", sc.consent), ("reason", reason),
                         ("source.episode_id", src.episode_id)):
        no_nul(field, value)
    words = doc_tokens(rec.content, st.describe() if st else "")
    tf = Counter(words)
    version, blob = analysis if analysis is not None else (0, None)
    values: tuple[object, ...] = (
        *record_values(rec, state.value),
        sorted(sc.roles), blob, version, tsvector_text(tf), Jsonb(dict(tf)), len(words),
        vectors["content"], vectors["state"],
    )
    return values, words


def tsvector_text(terms: Iterable[str]) -> str:
    """The input text of a `tsvector` holding exactly these lexemes (no positions): what
    `array_to_tsvector` makes of them, for COPY."""
    return " ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


class Writes(PgBase):
    """Every change to memories, in the transaction of its ledger event."""

    def sees(self, writer: Principal) -> Callable[[Sequence[str]], bool]:
        """Whether `writer` may read a memory (in any state but erased) of any of these
        namespaces of its tenant: a look-alike name it may not see is not refused to it."""
        def of(namespaces: Sequence[str]) -> bool:
            where, params = Eligibility(writer, tuple(namespaces), VISIBLE_STATES).where_pg()
            return self._one(f"SELECT 1 FROM memories WHERE {where} LIMIT 1",
                             params) is not None
        return of

    def insert(
        self,
        rec: MemoryRecord,
        writer: Principal,
        vectors: dict[str, Vector],
        reason: str,
        extra: dict[str, Any] | None = None,
        analysis: tuple[int, bytes | None] | None = None,
    ) -> int:
        """Insert a new memory with its vectors, its lexical row and its `proposed` event."""
        check_write(writer, rec.scope)
        sc = rec.scope
        values, words = memory_values(rec, vectors, reason, analysis, LifecycleState.PROPOSED)
        if self.dim is None:
            raise RuntimeError("bind_embedder() before the first insert")
        with self.transaction():
            self._lock(sc.tenant)
            claim_scope(self, sc.tenant, sc.namespace, sc.roles, self.sees(writer))
            cols = list(MEMORY_COLUMNS)
            marks = ["%s"] * len(cols)
            marks[cols.index("lex")] = "array_to_tsvector(%s::text[])"
            at = cols.index("lex")
            values = (*values[:at], list(dict.fromkeys(words)), *values[at + 1:])
            row = self._one(
                f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join(marks)}) "
                "RETURNING rid",
                values,
            )
            assert row is not None
            self._run(POSTINGS_OF + " AND m.tenant = %s AND m.rid = %s", (sc.tenant, row[0]))
            self._run(
                "INSERT INTO lexicon_stats (tenant, docs, length) VALUES (%s, 1, %s) "
                "ON CONFLICT (tenant) DO UPDATE SET docs = lexicon_stats.docs + 1, "
                "length = lexicon_stats.length + excluded.length",
                (sc.tenant, len(words)),
            )
            self._ledger(
                EventType.PROPOSED, sc.tenant, rec.id, None, writer.name, reason,
                {"kind": rec.kind.value, "namespace": sc.namespace} | (extra or {}),
            )
        return int(row[0])

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
        """Write one ledger event for a memory within `scope` and fold it into the row (locked
        for the fold); NotFound, and nothing written, when the memory is outside `scope`."""
        data = dict(data or {})
        no_nul("actor", actor)
        no_nul("reason", reason)
        with self.transaction():
            where, params = self._where(scope)
            row = self._one(
                "SELECT m.rid, m.tenant, m.state, m.uses, m.successes, m.failures, m.exposures "
                f"FROM memories m WHERE m.id = %s AND {where} FOR UPDATE",
                (memory_id, *params),
            )
            if row is None:
                raise NotFound(f"no memory {memory_id}")
            rid, tenant, state, *counts = row
            before = Folded(LifecycleState(state), Counters(*counts))
            after = fold(before, event, data)
            self._ledger(event, tenant, memory_id, recall_id, actor, reason, data)
            c = after.counters
            self._run(
                "UPDATE memories SET state = %s, uses = %s, successes = %s, failures = %s, "
                "exposures = %s WHERE tenant = %s AND rid = %s",
                (after.state.value, c.uses, c.successes, c.failures, c.exposures, tenant, rid),
            )
            if event is EventType.FEEDBACK and data.get("credit") in ("credited", "blamed"):
                u, s_, iu, is_ = _utility_delta(data)
                self._run(
                    "INSERT INTO memory_utility AS u (tenant, memory_id, namespace, uses, "
                    "successes, inferred_uses, inferred_successes) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (tenant, memory_id, namespace) DO UPDATE SET "
                    "uses = u.uses + excluded.uses, successes = u.successes + excluded.successes, "
                    "inferred_uses = u.inferred_uses + excluded.inferred_uses, "
                    "inferred_successes = u.inferred_successes + excluded.inferred_successes",
                    (tenant, memory_id, _utility_namespace(data), u, s_, iu, is_),
                )
        return after

    def supersede(
        self, old_id: str, new_id: str, valid_until: float, scope: Eligibility, actor: str,
        reason: str,
    ) -> None:
        """Close `old_id`'s validity at `valid_until`, link it to `new_id`, log `superseded`
        (both within `scope`, else NotFound and nothing changed)."""
        with self.transaction():
            where, params = self._where(scope)
            found = self._all(
                f"SELECT m.id FROM memories m WHERE m.id = ANY(%s::text[]) AND {where}",
                ([old_id, new_id], *params),
            )
            if len({r[0] for r in found}) != len({old_id, new_id}):
                raise NotFound(f"no memories {old_id} and {new_id} in this scope")
            tenant = scope.principal.tenant
            self._run(
                "UPDATE memories SET valid_until = %s, superseded_by = %s "
                "WHERE tenant = %s AND id = %s",
                (valid_until, new_id, tenant, old_id),
            )
            self._run("UPDATE memories SET supersedes = %s WHERE tenant = %s AND id = %s",
                      (old_id, tenant, new_id))
            self.append_event(
                old_id, scope, EventType.SUPERSEDED, actor, reason,
                {"by": new_id, "valid_until": valid_until},
            )

    def revoke(self, consent: str, elig: Eligibility, actor: str, reason: str) -> int:
        """Revoke every memory under `consent` that `elig` reaches; returns how many."""
        with self.transaction():
            where, params = self._where(elig)
            rows = self._all(
                f"SELECT m.id FROM memories m WHERE m.consent = %s AND {where} "
                "AND m.state NOT IN ('REVOKED', 'ERASED') ORDER BY m.rid",
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
        """Right to erasure (its own transactions). Removes content, source, vectors, the
        lexical row and analysis (the row stays as a tombstone: id, scope, validity,
        counters), logs `erased`, and passes every recall record of the tenant that mentions
        the memory through `scrub`, before the erasure commits and again after it. The old
        row versions stay in the table's pages until VACUUM reclaims them (autovacuum, or
        `VACUUM memories, recalls` for at once)."""
        where, params = self._where(elig)
        row = self._one(
            f"SELECT m.rid, m.tenant FROM memories m WHERE m.id = %s AND {where}",
            (memory_id, *params),
        )
        if row is None:
            raise NotFound(f"no memory {memory_id} visible to this principal")
        rid, tenant = int(row[0]), str(row[1])
        self._scrub_recalls(tenant, memory_id, scrub)
        with self.transaction():
            self._erase_row(rid, tenant, memory_id, elig, actor, reason)
        self._scrub_recalls(tenant, memory_id, scrub)

    def _erase_row(
        self, rid: int, tenant: str, memory_id: str, elig: Eligibility, actor: str, reason: str
    ) -> None:
        self._lock(tenant)
        # a failure's message may quote the memory (a model error echoing its prompt)
        self._run(
            "UPDATE maintenance_failures SET error = '[erased: quoted an erased memory]' "
            "WHERE strpos(error, %s) > 0 OR EXISTS (SELECT 1 FROM memories m "
            "WHERE m.tenant = %s AND m.rid = %s AND length(m.content) > 3 AND "
            "(strpos(error, m.content) > 0 OR strpos(error, m.state_text) > 0))",
            (memory_id, tenant, rid),
        )
        self._run(
            "UPDATE lexicon_stats s SET docs = s.docs - 1, length = s.length - m.lex_len "
            "FROM memories m WHERE s.tenant = m.tenant AND m.tenant = %s AND m.rid = %s "
            "AND m.lex_len IS NOT NULL",
            (tenant, rid),
        )
        self._run("DELETE FROM lexicon_postings WHERE tenant = %s AND rid = %s", (tenant, rid))
        self._run(
            "UPDATE memories SET content = '', state_text = NULL, state_facts = NULL, "
            "action = NULL, success = NULL, reward = NULL, episode_id = NULL, step = NULL, "
            "evidence = '[]', conditions = '[]', value = 'null', entity = NULL, "
            "attribute = NULL, consent = NULL, policy_version = NULL, proposed_by = '', "
            "fingerprint = 'erased:' || id, analysis = NULL, analysis_version = 0, "
            "lex = NULL, lex_tf = NULL, lex_len = NULL, content_vec = NULL, state_vec = NULL "
            "WHERE tenant = %s AND rid = %s",
            (tenant, rid),
        )
        self.append_event(memory_id, elig, EventType.ERASED, actor, reason, {"tombstone": True})
        self._count("erasures")  # other processes then empty their caches of memory text

    def _scrub_recalls(
        self, tenant: str, memory_id: str, scrub: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> int:
        """Pass each recall record of `tenant` mentioning `memory_id` through `scrub`."""
        with self.transaction():
            rows = self._all(
                "SELECT id, payload FROM recalls WHERE tenant = %s AND strpos(payload, %s) > 0 "
                "FOR UPDATE",
                (tenant, memory_id),
            )
            for recall_id, payload in rows:
                self._run(
                    "UPDATE recalls SET payload = %s WHERE tenant = %s AND id = %s",
                    (_payload_json(scrub(json.loads(str(payload)))), tenant, recall_id),
                )
        return len(rows)

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
        """One ledger row (its own scope columns keep their defaults, restricted `admin`: a
        row about a memory is shown under that memory's scope)."""
        self._run(
            "INSERT INTO ledger (at, event, tenant, memory_id, recall_id, actor, reason, data) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (utcnow(), event.value, tenant, memory_id, recall_id, actor, reason,
             json.dumps(data, sort_keys=True, default=str)),
        )

    def set_analysis(self, rid: int, version: int, analysis: bytes | None) -> None:
        """Store a memory's analysis (derived data: no ledger event); an erased row is left
        alone."""
        with self.transaction():
            self._run(
                "UPDATE memories SET analysis = %s, analysis_version = %s "
                "WHERE rid = %s AND state <> 'ERASED'",
                (analysis, version, rid),
            )

    def record_failure(self, component: str, error: str, memory_id: str | None = None) -> None:
        """Count a failure loudly, with the scope of the memory it is about."""
        error = error.replace("\x00", "\\0")[:2000]
        with self.transaction():
            about = None if memory_id is None else self._one(
                "SELECT tenant, role_set, classification FROM memories WHERE id = %s",
                (memory_id,),
            )
            tenant, roles, level = about if about is not None else ("", [], 3)
            self._run(
                "INSERT INTO maintenance_failures (at, component, error, tenant, role_set, "
                "classification) VALUES (%s, %s, %s, %s, %s, %s)",
                (utcnow(), component, error, tenant, list(roles), level),
            )
