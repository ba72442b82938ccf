"""Copy a SQLite store into an empty PostgreSQL store (`situated migrate`), then verify it.

Everything is copied in one target transaction, or nothing: memories (row ids kept, so the
order of every listing is the same), both vectors, the lexical rows (built from each memory's
FTS5 text, as SQLite indexed it), analyses, the whole ledger (sequence numbers kept), recall
records, feedback, per-namespace utility, maintenance failures, the name registry, API keys,
the learned attribute schema's evidence and the store's counters. The target must be empty
(no memory, event, recall or key, no embedder bound): refused otherwise, nothing written.

After the commit the loaded tables are analyzed and vacuumed (`settle`: the planner's
statistics and the visibility maps index-only scans need). Verified then: the row count of every
copied table equal on both sides, the target's ledger replay (`rebuild`) without a mismatch, and
every memory's replayed state and counters equal to the source's stored ones.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from situated.errors import InvalidInput, StoreBusy, StoreFailure
from situated.models import Counters, LifecycleState
from situated.store.ledger import Folded, replay
from situated.store.lexical import doc_tokens
from situated.store.pg.schema import MIGRATION_LOCK, POSTINGS_OF
from situated.store.pg.store import PostgresStore
from situated.store.pg.writes import COLUMNS
from situated.store.scope import SYSTEM
from situated.store.sqlite import Store

TABLES = ("memories", "ledger", "recalls", "feedback", "memory_utility",
          "maintenance_failures", "names", "api_keys", "attribute_schema")
"""What is counted on both sides."""
_KEEP_META = ("erasures", "generation", "name_skeletons")


@dataclass(frozen=True)
class MigrationReport:
    """What was copied, and what the verification found (empty `mismatched`: none)."""

    counts: dict[str, int]
    replayed: int
    mismatched: tuple[str, ...]
    notes: tuple[str, ...] = ()
    """What did not stop the copy but should be known (a `settle` that failed)."""

    @property
    def ok(self) -> bool:
        return not self.mismatched


def _roles(key: str) -> list[str]:
    return sorted(key.split("\x1f")) if key else []


def source_counts(src: Store) -> dict[str, int]:
    out = {}
    for t in TABLES:
        name = "recall_log.recalls WHERE legacy = 0" if t == "recalls" else t
        row = src._one(f"SELECT COUNT(*) FROM {name}")
        out[t] = int(row[0]) if row else 0
    out["ledger"] -= _legacy_recalled(src)
    return out


def _legacy_recalled(src: Store) -> int:
    row = src._one("SELECT COUNT(*) FROM ledger WHERE event = 'recalled'")
    return int(row[0]) if row else 0


def target_counts(dst: PostgresStore) -> dict[str, int]:
    out = {}
    for t in TABLES:
        row = dst._one(f"SELECT COUNT(*) FROM {t}")
        out[t] = int(row[0]) if row else 0
    return out


def refuse_nonempty(dst: PostgresStore) -> None:
    """InvalidInput naming `to` when the target holds anything."""
    held = {t: n for t, n in target_counts(dst).items() if n and t != "names"}
    if dst.embedder_ref() is not None:
        held["embedder"] = 1
    if held:
        what = ", ".join(f"{n} {t}" for t, n in sorted(held.items()))
        raise InvalidInput("to", f"is not an empty store ({what}); migrate only into a new "
                                 "database")


def copy_store(src: Store, dst: PostgresStore) -> MigrationReport:
    """Copy `src` into the empty `dst` in one transaction, then verify (see the module)."""
    refuse_nonempty(dst)
    ref, dim = src.embedder_ref(), src.vectors.dim
    with dst.transaction():
        dst._all("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        refuse_nonempty(dst)  # again, under the lock: two migrations cannot both copy
        if ref is not None and dim is not None:
            dst.bind_embedder(ref, dim)
        with src.snapshot():
            if dst.dim is not None:
                with dst.indexes_deferred():  # one HNSW build each, not a graph grown per row
                    _copy_memories(src, dst)
            else:
                _copy_memories(src, dst)
            _copy_rest(src, dst)
    notes: tuple[str, ...] = ()
    try:
        dst.settle()
    except (StoreFailure, StoreBusy) as exc:  # the copy is committed: verify it all the same
        notes = (f"not analyzed and vacuumed after the copy (autovacuum will; or run "
                 f"ANALYZE then VACUUM on the loaded tables): {exc}",)
    return replace(verify(src, dst), notes=notes)


def _copy_memories(src: Store, dst: PostgresStore) -> None:
    cols = ", ".join(f"m.{c}" for c in COLUMNS)
    rows = src._all(
        f"SELECT {cols}, m.analysis, m.analysis_version, f.content, f.state_text, "
        "v.content, v.state FROM memories m LEFT JOIN memories_fts f ON f.rowid = m.rid "
        "LEFT JOIN vectors v ON v.rid = m.rid ORDER BY m.rid"
    )
    names = [*COLUMNS, "analysis", "analysis_version", "role_set", "lex", "lex_tf", "lex_len"]
    vec = dst.dim is not None
    if vec:
        names += ["content_vec", "state_vec"]
    marks = ["%s"] * len(names)
    marks[names.index("lex")] = "array_to_tsvector(%s::text[])"
    sql = (f"INSERT INTO memories ({', '.join(names)}) OVERRIDING SYSTEM VALUE "
           f"VALUES ({', '.join(marks)})")
    batch: list[tuple[Any, ...]] = []
    for r in rows:
        base, (analysis, version, fts_content, fts_state, vc, vs) = r[:len(COLUMNS)], r[-6:]
        d = dict(zip(COLUMNS, base, strict=True))
        if fts_content is not None and d["state"] != LifecycleState.ERASED.value:
            words = doc_tokens(str(fts_content), fts_state)
            tf: Counter[str] | None = Counter(words)
        else:
            words, tf = [], None
        values: list[Any] = [*base, analysis, version, sorted(json.loads(d["roles"])),
                             list(tf) if tf is not None else None,
                             Jsonb(dict(tf)) if tf is not None else None,
                             len(words) if tf is not None else None]
        if vec:
            values += [None if vc is None else np.frombuffer(vc, dtype=np.float32),
                       None if vs is None else np.frombuffer(vs, dtype=np.float32)]
        batch.append(tuple(values))
    if batch:
        dst._many(sql, batch)
    dst._run("SELECT setval(pg_get_serial_sequence('memories', 'rid'), "
             "coalesce((SELECT max(rid) FROM memories), 0) + 1, false)")
    dst._run(POSTINGS_OF)
    dst._run("INSERT INTO lexicon_stats (tenant, docs, length) SELECT tenant, COUNT(*), "
             "SUM(lex_len) FROM memories WHERE lex IS NOT NULL GROUP BY tenant")


def _copy_rest(src: Store, dst: PostgresStore) -> None:
    ledger = src._all(
        "SELECT seq, at, event, tenant, memory_id, recall_id, actor, reason, data, role_key, "
        "clearance FROM ledger WHERE event != 'recalled' ORDER BY seq"
    )
    if ledger:
        dst._many(
            "INSERT INTO ledger (seq, at, event, tenant, memory_id, recall_id, actor, reason, "
            "data, role_set, clearance) OVERRIDING SYSTEM VALUE VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(*r[:9], _roles(str(r[9])), r[10]) for r in ledger],
        )
    dst._run("SELECT setval(pg_get_serial_sequence('ledger', 'seq'), "
             "coalesce((SELECT max(seq) FROM ledger), 0) + 1, false)")
    recalls = src._all(
        "SELECT id, tenant, at, namespace, state_hash, mode, served, payload, role_key, "
        "clearance, actor, rejected FROM recall_log.recalls WHERE legacy = 0 ORDER BY seq"
    )
    if recalls:
        dst._many(
            "INSERT INTO recalls (id, tenant, at, namespace, state_hash, mode, served, payload, "
            "role_key, role_set, clearance, actor, rejected) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [(*r[:9], _roles(str(r[8])), *r[9:]) for r in recalls],
        )
    copies = [
        ("SELECT tenant, recall_id, at, success, used, reward, digest, inferred FROM feedback",
         "feedback (tenant, recall_id, at, success, used, reward, digest, inferred)", None),
        ("SELECT m.tenant, u.memory_id, u.namespace, u.uses, u.successes, u.inferred_uses, "
         "u.inferred_successes FROM memory_utility u JOIN memories m ON m.id = u.memory_id",
         "memory_utility (tenant, memory_id, namespace, uses, successes, inferred_uses, "
         "inferred_successes)", None),
        ("SELECT coalesce(tenant, ''), at, component, error, role_key, classification "
         "FROM maintenance_failures ORDER BY id",
         "maintenance_failures (tenant, at, component, error, role_set, classification)", 4),
        ("SELECT kind, scope, skeleton, name FROM names",
         "names (kind, scope, skeleton, name)", None),
        ("SELECT tenant, id, secret_hash, roles, clearance, actor, label, created_at, "
         "created_by, revoked_at FROM api_keys",
         "api_keys (tenant, id, secret_hash, roles, clearance, actor, label, created_at, "
         "created_by, revoked_at)", None),
        ("SELECT tenant, role_key, role_key, classification, attribute, single, multi, "
         "updated_at FROM attribute_schema",
         "attribute_schema (tenant, role_key, role_set, classification, attribute, single, "
         "multi, updated_at)", 2),
    ]
    for select, into, roles_at in copies:
        rows = src._all(select)
        if not rows:
            continue
        if roles_at is not None:
            rows = [(*r[:roles_at], _roles(str(r[roles_at])), *r[roles_at + 1:]) for r in rows]
        n = len(rows[0])
        dst._many(f"INSERT INTO {into} VALUES ({', '.join(['%s'] * n)}) ON CONFLICT DO NOTHING",
                  rows)
    for key, value in src.meta(*_KEEP_META).items():
        dst._run("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) "
                 "DO UPDATE SET value = excluded.value", (key, value))


def verify(src: Store, dst: PostgresStore) -> MigrationReport:
    """Counts on both sides, the target's ledger replay, and each memory's replayed state
    against the source's stored one."""
    have, want = target_counts(dst), source_counts(src)
    bad = [f"{t}: {want[t]} in the source, {have[t]} in the target"
           for t in TABLES if have[t] != want[t] and t != "names"]
    report = dst.rebuild()
    bad += [f"ledger replay: {mid}" for mid in report.mismatched]
    stored = {
        str(r[0]): Folded(LifecycleState(r[1]), Counters(*r[2:]))
        for r in src._all("SELECT id, state, uses, successes, failures, exposures FROM memories")
    }
    events: dict[str, list[Any]] = {}
    for ev in dst._events("memory_id IS NOT NULL", (), SYSTEM):
        events.setdefault(str(ev.memory_id), []).append(ev)
    bad += [f"replayed {mid} differs from the source" for mid, f in stored.items()
            if replay(events.get(mid, [])) != f]
    return MigrationReport(have, report.checked, tuple(bad))
