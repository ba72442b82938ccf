"""Per-tenant BM25 for the SQLite search path: the resident index's ranking and scores.

Why: FTS5's `bm25()` takes its statistics (row count, average length, document frequency) from
the whole file, every tenant's rows together, so one tenant's lexical scores, and its ranking,
would move when another tenant writes: a side channel across tenants. The resident index
(`Slice.bm25`) counts per tenant; this module gives the SQLite path the same numbers.

What is stored, written in the transaction of the change (`index` at insert, `unindex` at
erasure), next to the FTS5 row and from the same text:

- `lexicon_postings (tenant, term, rid, tf, length)`: one row per distinct term of a memory,
  with its frequency and the memory's length in tokens (`resident.tokens`, so the same words
  as the resident index: unicode61-like, diacritics removed, no stemming);
- `lexicon_docs (rid, tenant, length, terms)`: which memories are indexed (and how many
  distinct terms each has, to check an erasure removed them all);
- `lexicon_stats (tenant, docs, length)`: per tenant, memories indexed and their tokens.

The rows counted are those a resident slice holds: every memory of the tenant that is not
erased, whatever its lifecycle state, namespace, roles, classification or validity window (the
eligibility gates choose which rows are *ranked*, not the statistics, on both paths). So,
within a tenant, a score still depends on rows the reader may not see, as the resident
index's does; across tenants, on nothing.

A search reads each query term's postings in the tenant (newest first, at most
`MAX_TERM_POSTINGS`), scores them with `resident.bm25_term` (the resident's own function, so the
same float32 operations in the same order), orders them as `resident.top` does (score, then row
id) and walks that order through the eligibility gates, in batches, until k rows pass (or,
when few pass, reads the reader's eligible rows once). The result equals `Slice.lexical` float
for float, except when a query term occurs in more than `MAX_TERM_POSTINGS` of the tenant's
memories: its document frequency is still exact, but the older rows holding it are scored
without it (or, holding no other query term, not at all).

A change to `resident.tokens` changes what both paths index: it needs a migration that empties
the three tables and calls `reindex` (as `m006_tenant_lexicon` does for existing stores).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import apsw
import numpy as np

from situated.store.resident import bm25_term, tokens

MAX_TERM_POSTINGS = 20_000
"""Postings read per query term (a tenant's newest memories holding it): bounds a search to
about 4 x 20,000 index rows (4 = `sqlite.MAX_LEXICAL_TERMS`) whatever the tenant's size."""
FIRST_BATCH = 32
MAX_BATCH = 4096
"""Ranked rows checked against the eligibility gates per query: the first batch holds
max(`FIRST_BATCH`, 2k) rows, each next one twice as many (a gate check reads the memory's
row, about 5 us)."""


def doc_tokens(content: str, state_text: str | None) -> list[str]:
    """The tokens of a memory as both search paths index them: its FTS5 row's two columns."""
    return tokens(f"{content} {state_text or ''}")


def index(
    db: apsw.Connection, rid: int, tenant: str, content: str, state_text: str | None
) -> None:
    """Add one memory (the text of its FTS5 row) to its tenant's postings and statistics.
    Call in the inserting transaction."""
    words = doc_tokens(content, state_text)
    tf = Counter(words)
    db.executemany(
        "INSERT INTO lexicon_postings (tenant, term, rid, tf, length) VALUES (?, ?, ?, ?, ?)",
        [(tenant, term, rid, n, len(words)) for term, n in tf.items()],
    )
    db.execute(
        "INSERT INTO lexicon_docs (rid, tenant, length, terms) VALUES (?, ?, ?, ?)",
        (rid, tenant, len(words), len(tf)),
    )
    db.execute(
        "INSERT INTO lexicon_stats (tenant, docs, length) VALUES (?, 1, ?) ON CONFLICT (tenant) "
        "DO UPDATE SET docs = docs + 1, length = length + excluded.length",
        (tenant, len(words)),
    )


def unindex(db: apsw.Connection, rid: int) -> None:
    """Remove one memory from the postings and its tenant's statistics (nothing if it is not
    indexed). Call in the erasing transaction, before its FTS5 row is deleted: the terms to
    remove are read from it."""
    doc = db.execute(
        "DELETE FROM lexicon_docs WHERE rid = ? RETURNING tenant, length, terms", (rid,)
    ).fetchone()
    if doc is None:
        return
    tenant, length, terms = str(doc[0]), int(doc[1]), int(doc[2])
    fts = db.execute(
        "SELECT content, state_text FROM memories_fts WHERE rowid = ?", (rid,)
    ).fetchone()
    words = set(doc_tokens(str(fts[0]), fts[1])) if fts is not None else set()
    before = db.totalchanges()
    db.executemany(
        "DELETE FROM lexicon_postings WHERE tenant = ? AND term = ? AND rid = ?",
        [(tenant, term, rid) for term in words],
    )
    if db.totalchanges() - before != terms:  # text or tokenizer changed since: scan the tenant
        db.execute("DELETE FROM lexicon_postings WHERE tenant = ? AND rid = ?", (tenant, rid))
    db.execute(
        "UPDATE lexicon_stats SET docs = docs - 1, length = length - ? WHERE tenant = ?",
        (length, tenant),
    )


def reindex(db: apsw.Connection) -> int:
    """Index every memory that has an FTS5 row and is not erased (the rows a resident slice
    loads) into empty lexicon tables; how many. For migrations: existing stores, or a change
    to `resident.tokens`."""
    rows: list[tuple[Any, ...]] = db.execute(
        "SELECT m.rid, m.tenant, f.content, f.state_text FROM memories m "
        "JOIN memories_fts f ON f.rowid = m.rid WHERE m.state != 'ERASED' ORDER BY m.rid"
    ).fetchall()
    for rid, tenant, content, state_text in rows:
        index(db, int(rid), str(tenant), str(content), state_text)
    return len(rows)


def search(
    db: apsw.Connection, tenant: str, terms: Sequence[str], k: int, where: str,
    params: Sequence[object],
) -> list[tuple[int, float]]:
    """BM25 top k of the tenant's rows that pass `where` (the eligibility gates over
    `memories m`, with their `params`): (rid, score > 0), best first, ties by row id."""
    stats = db.execute(
        "SELECT docs, length FROM lexicon_stats WHERE tenant = ?", (tenant,)
    ).fetchone()
    if k <= 0 or stats is None or int(stats[0]) <= 0:
        return []
    n, total_len = int(stats[0]), float(stats[1])
    hits: list[tuple[np.ndarray, np.ndarray]] = []
    for term in dict.fromkeys(terms):
        rows = db.execute(
            "SELECT rid, tf, length FROM lexicon_postings WHERE tenant = ? AND term = ? "
            "ORDER BY rid DESC LIMIT ?",
            (tenant, term, MAX_TERM_POSTINGS),
        ).fetchall()
        if not rows:
            continue
        df = len(rows)
        if df == MAX_TERM_POSTINGS:
            counted = db.execute(
                "SELECT COUNT(*) FROM lexicon_postings WHERE tenant = ? AND term = ?",
                (tenant, term),
            ).fetchone()
            df = int(counted[0]) if counted else df
        a = np.array(rows, dtype=np.int64)
        tf, length = a[:, 1].astype(np.float32), a[:, 2].astype(np.float32)
        hits.append((a[:, 0], bm25_term(n, total_len, df, tf, length)))
    if not hits:
        return []
    rids = np.unique(np.concatenate([r for r, _ in hits]))
    scores = np.zeros(len(rids), dtype=np.float32)
    for r, s in hits:  # term by term, as `Slice.bm25` adds them
        scores[np.searchsorted(rids, r)] += s
    order = np.lexsort((rids, -scores))
    order = order[scores[order] > 0]
    return _eligible_top(db, rids[order].tolist(), scores[order].tolist(), k, n, where, params)


def _eligible_top(
    db: apsw.Connection, ranked: list[int], scores: list[float], k: int, n: int, where: str,
    params: Sequence[object],
) -> list[tuple[int, float]]:
    """The first k of `ranked` that pass the gates (`n`: the tenant's rows).

    Checked by row id in growing batches while that looks cheaper than reading all the
    reader's eligible rows in one query, which costs at most about n / 2 checks (a row read by
    an index scan costs about half a lookup by id); then that query, intersected. It uses the
    `(tenant, namespace, state)` index: SQLite's planner (without ANALYZE statistics) picks
    `(tenant, role_key)`, scanning the whole tenant for one namespace's rows.
    """
    out: list[tuple[int, float]] = []
    start, size = 0, min(max(FIRST_BATCH, 2 * k), MAX_BATCH)
    while start < len(ranked) and len(out) < k:
        left = len(ranked) - start
        if start and min(left, (k - len(out)) * start // max(len(out), 1)) > n // 2:
            eligible = {int(r) for (r,) in db.execute(
                f"SELECT m.rid FROM memories m INDEXED BY memories_scope WHERE {where}",
                tuple(params))}
            out = [(r, s) for r, s in zip(ranked, scores, strict=True) if r in eligible]
            break
        batch = ranked[start : start + size]
        passed = {
            int(r) for (r,) in db.execute(
                f"SELECT m.rid FROM memories m WHERE m.rid IN ({','.join('?' * len(batch))}) "
                f"AND {where}",
                (*batch, *params),
            )
        }
        out.extend((r, s) for r, s in zip(batch, scores[start : start + size], strict=True)
                   if r in passed)
        start, size = start + size, min(2 * size, MAX_BATCH)
    return out[:k]
