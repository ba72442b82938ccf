"""The ground truth of the adversarial scope suite for the PostgreSQL store: every row of every
table, read with plain SQL past the store (never through the scope layer), laid out as
`scope_harness.snapshot` lays out SQLite's, so the same checks apply to both backends.

Rows keep the positions the checks read: a ledger row (seq, at, event, tenant, memory_id,
recall_id, ...), a recall row (seq, id, tenant, at, namespace, state_hash, mode, served,
payload, ...), a failure row ending with its tenant. PostgreSQL keeps vectors and the lexical
row in the memory's own row: they are listed as the `vectors` and `fts` tables too."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from scope_harness import Mem, Snap


def pg_snapshot(db: psycopg.Connection[Any]) -> Snap:
    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in db.execute(sql).fetchall()]

    cur = db.execute("SELECT * FROM memories LIMIT 0")
    cols = [d.name for d in cur.description or ()]
    mem_rows = rows("SELECT * FROM memories ORDER BY rid")
    mems = {}
    for r in mem_rows:
        d = dict(zip(cols, r, strict=True))
        mems[d["id"]] = Mem(
            d["rid"], d["id"], d["tenant"], d["namespace"], frozenset(json.loads(d["roles"])),
            int(d["classification"]), d["state"], d["consent"], d["valid_from"],
            d["valid_until"], d["recorded_at"], d["superseded_by"],
        )
    vec = "content_vec::text, state_vec::text" if "content_vec" in cols else "NULL, NULL"
    tables: dict[str, dict[Any, tuple[Any, ...]]] = {
        "memories": {r[cols.index("id")]: r for r in mem_rows},
        "ledger": {r[0]: r for r in rows(
            "SELECT seq, at, event, tenant, memory_id, recall_id, actor, reason, data, "
            "role_set, clearance FROM ledger ORDER BY seq")},
        "recalls": {r[1]: r for r in rows(
            "SELECT seq, id, tenant, at, namespace, state_hash, mode, served, payload, "
            "role_key, role_set, clearance, actor, rejected FROM recalls")},
        "feedback": {r[0]: r for r in rows(
            "SELECT recall_id, tenant, at, success, used, reward, digest, inferred "
            "FROM feedback")},
        "memory_utility": {(r[0], r[1]): r for r in rows(
            "SELECT memory_id, namespace, tenant, uses, successes, inferred_uses, "
            "inferred_successes FROM memory_utility")},
        "vectors": {r[0]: r for r in rows(
            f"SELECT rid, {vec} FROM memories WHERE state <> 'ERASED'")},
        "fts": {r[0]: r for r in rows(
            "SELECT rid, lex::text, lex_tf::text, lex_len FROM memories WHERE lex IS NOT NULL")},
        "failures": {r[0]: r for r in rows(
            "SELECT id, at, component, error, role_set, classification, tenant "
            "FROM maintenance_failures")},
        "lexicon_stats": {r[0]: r for r in rows("SELECT * FROM lexicon_stats")},
        "names": {r[:3]: r for r in rows("SELECT kind, scope, name, skeleton FROM names")},
    }
    recall_scope = {
        r[0]: (r[1], frozenset(r[2]), int(r[3]))
        for r in rows("SELECT id, tenant, role_set, clearance FROM recalls")
    }
    events = [
        (int(r[0]), str(r[1]), r[2], frozenset(r[3]), int(r[4]), float(r[5]))
        for r in rows(
            "SELECT seq, tenant, memory_id, role_set, clearance, at FROM ledger ORDER BY seq")
    ] + [
        (int(r[0]), str(r[1]), None, frozenset(r[2]), int(r[3]), float(r[4]))
        for r in rows("SELECT seq, tenant, role_set, clearance, at FROM recalls ORDER BY seq")
    ]
    return Snap(mems, tables, recall_scope, events, {m.rid: m.id for m in mems.values()})
