"""Set-based inserts of new memories: the rows `Store.insert` writes one by one, for many.

A batch writer (`situated.write.writer`) hands over memories that need nothing but to be
stored: they passed every gate, have no twin to reinforce, supersede nothing, and the promotion
policy has decided. Each becomes exactly what `Store.insert` followed by `Store.append_event`
would leave: its row (already in the state the ledger's fold gives its events), its FTS5 row,
its postings, its two vectors and, in the same order, its ledger events. One `executemany` per
table, inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from situated.embed.base import Vector
from situated.models import Counters, LifecycleState, MemoryRecord, Principal, utcnow
from situated.store.ledger import EventType, Folded, fold
from situated.store.lexical import doc_tokens
from situated.store.names import Sees, claim_scope
from situated.store.rows import record_values
from situated.store.vectors import FIELDS, VectorMeta
from situated.store.vectors import _blob as blob
from situated.store.vectors import _meta_tuple as meta_tuple

INSERT_COLUMNS = (
    "id tenant namespace kind content state_text state_facts state_unknown action success "
    "reward episode_id step evidence conditions entity attribute value multi_valued roles "
    "role_key classification consent authority valid_from valid_until recorded_at state uses "
    "successes failures exposures policy_version supersedes superseded_by fingerprint "
    "proposed_by analysis analysis_version"
).split()


@dataclass(frozen=True)
class NewRow:
    """One memory to insert with its events: (event, actor, reason, data), the first of them
    `proposed`."""

    record: MemoryRecord
    writer: Principal
    vectors: dict[str, Vector]
    events: tuple[tuple[EventType, str, str, dict[str, Any]], ...]
    analysis: tuple[int, bytes | None]


def final_state(events: Sequence[tuple[EventType, str, str, dict[str, Any]]]) -> LifecycleState:
    """The state the ledger's fold gives a new memory after `events` (what `rebuild` checks)."""
    folded = Folded(LifecycleState.PROPOSED, Counters())
    for event, _, _, data in events[1:]:  # `proposed` is the insert itself
        folded = fold(folded, event, data)
    return folded.state


def insert_rows(db: apsw.Connection, rows: Sequence[NewRow],
                sees: Callable[[Principal], Sees] | None = None) -> list[int]:
    """Insert `rows` (call inside a write transaction); returns their rids, in order; `sees`:
    which namespaces a writer may see (`store.names`).

    Rids are allotted as SQLite allots them to a table without AUTOINCREMENT (one past the
    largest), under the write lock the transaction holds."""
    if not rows:
        return []
    for tenant, namespace, roles, writer in dict.fromkeys(
        (r.record.scope.tenant, r.record.scope.namespace, tuple(sorted(r.record.scope.roles)),
         r.writer) for r in rows
    ):  # a look-alike name: refused, and the batch rolls back
        claim_scope(db, tenant, namespace, roles, None if sees is None else sees(writer))
    top: Any = db.execute("SELECT COALESCE(MAX(rid), 0) + 1 FROM memories").fetchone()
    first = int(top[0])
    rids = list(range(first, first + len(rows)))
    states = [final_state(r.events).value for r in rows]
    db.executemany(
        f"INSERT INTO memories (rid, {', '.join(INSERT_COLUMNS)}) "
        f"VALUES ({','.join('?' * (len(INSERT_COLUMNS) + 1))})",
        [(rid, *_columns(r, state)) for rid, r, state in zip(rids, rows, states, strict=True)],
    )
    texts = [(r.record.content, _state_text(r.record)) for r in rows]
    db.executemany(
        "INSERT INTO memories_fts (rowid, content, state_text) VALUES (?, ?, ?)",
        [(rid, c, s) for rid, (c, s) in zip(rids, texts, strict=True)],
    )
    _index_lexicon(db, rids, rows, texts)
    metas = [
        meta_tuple(VectorMeta(
            r.record.scope.tenant, r.record.scope.namespace, state,
            int(r.record.scope.classification), r.record.scope.role_key,
            r.record.validity.valid_from_ts, r.record.validity.valid_until_ts,
            r.record.validity.recorded_at_ts,
        ))
        for r, state in zip(rows, states, strict=True)
    ]
    for f in FIELDS:
        db.executemany(
            f"""INSERT INTO vec_{f} (rid, tenant, namespace, state, classification, role_key,
                valid_from, valid_until, recorded_at, embedding) VALUES (?,?,?,?,?,?,?,?,?,?)""",
            [(rid, *m, blob(r.vectors[f])) for rid, r, m in zip(rids, rows, metas, strict=True)],
        )
    db.executemany(
        "INSERT INTO vectors (rid, content, state) VALUES (?, ?, ?)",
        [(rid, blob(r.vectors["content"]), blob(r.vectors["state"]))
         for rid, r in zip(rids, rows, strict=True)],
    )
    db.executemany(
        "INSERT INTO ledger (at, event, tenant, memory_id, recall_id, actor, reason, data) "
        "VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
        [
            (utcnow(), event.value, r.record.scope.tenant, r.record.id, actor, reason,
             json.dumps(data, sort_keys=True, default=str))
            for r in rows for event, actor, reason, data in r.events
        ],
    )
    return rids


def _state_text(rec: MemoryRecord) -> str:
    st = rec.source.state
    return st.describe() if st else ""


def _columns(r: NewRow, state: str) -> tuple[object, ...]:
    """The `memories` values of `Store.insert`, with the final state and the analysis."""
    return (*record_values(r.record, state), r.analysis[1], r.analysis[0])


def _index_lexicon(
    db: apsw.Connection, rids: Sequence[int], rows: Sequence[NewRow],
    texts: Sequence[tuple[str, str]],
) -> None:
    """`lexical.index` of every row: postings, documents, and each tenant's statistics."""
    postings: list[tuple[str, str, int, int, int]] = []
    docs: list[tuple[int, str, int, int]] = []
    stats: dict[str, list[int]] = {}
    for rid, r, (content, state_text) in zip(rids, rows, texts, strict=True):
        tenant = r.record.scope.tenant
        words = doc_tokens(content, state_text)
        tf = Counter(words)
        postings.extend((tenant, term, rid, n, len(words)) for term, n in tf.items())
        docs.append((rid, tenant, len(words), len(tf)))
        agg = stats.setdefault(tenant, [0, 0])
        agg[0] += 1
        agg[1] += len(words)
    db.executemany(
        "INSERT INTO lexicon_postings (tenant, term, rid, tf, length) VALUES (?, ?, ?, ?, ?)",
        postings,
    )
    db.executemany(
        "INSERT INTO lexicon_docs (rid, tenant, length, terms) VALUES (?, ?, ?, ?)", docs
    )
    db.executemany(
        "INSERT INTO lexicon_stats (tenant, docs, length) VALUES (?, ?, ?) ON CONFLICT (tenant) "
        "DO UPDATE SET docs = docs + excluded.docs, length = length + excluded.length",
        [(t, n, length) for t, (n, length) in stats.items()],
    )
