"""Stage 2 of recall on PostgreSQL: dense search with pgvector, lexical search with a GIN-indexed
`tsvector` scored by per-tenant BM25, both over the eligible rows only.

Dense: `ORDER BY vec <=> query LIMIT k` with the eligibility gates in the same WHERE clause.
The HNSW index scan is iterative (`hnsw.iterative_scan = strict_order`, set on every pooled
connection): when the gates reject candidates the scan goes on until k rows pass or
`MAX_SCAN_TUPLES` are visited, so a selective scope does not get fewer than k results from
a post-filtered top k. The planner may prefer the `(tenant, namespace, state)` index and an
exact sort when few rows are eligible; both give the k nearest eligible rows.

Lexical: the GIN index on `lex` finds the tenant's rows holding each query term; each term is
scored with `resident.bm25_term` from the tenant's own statistics (`lexicon_stats`) and the
row's term count (`lex_tf`) and length, as `store.lexical` does for SQLite, so both backends
rank and score alike (PostgreSQL's `ts_rank` is not BM25, and counting every tenant's rows
together would be a side channel across tenants). The ranked rows then pass the gates in one
query that keeps their order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from situated.embed.base import Vector
from situated.store.lexical import MAX_TERM_POSTINGS
from situated.store.pg.reads import Reads
from situated.store.resident import Rankings, bm25_term
from situated.store.scope import Eligibility
from situated.store.sqlite import lexical_terms

COLUMN = {"content": "content_vec", "state": "state_vec"}
"""The vector column of each field."""
MAX_K = 4096


def lexeme_query(term: str) -> str:
    """A `tsquery` matching exactly the lexeme `term` (quoted: no parsing, no stemming)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


class Search(Reads):
    """Dense and lexical rankings of eligible rows."""

    def dense(
        self, field: str, query: Vector, k: int, elig: Eligibility
    ) -> list[tuple[int, float]]:
        """KNN over eligible rows: (rid, cosine similarity), best first."""
        col = COLUMN.get(field)
        if col is None:
            return []
        self._read_dim()
        if self.dim is None:
            return []
        where, params = self._where(elig)
        q = np.ascontiguousarray(query, dtype=np.float32)
        rows = self._all(
            f"SELECT m.rid, m.{col} <=> %s FROM memories m WHERE {where} "
            f"AND m.{col} IS NOT NULL ORDER BY m.{col} <=> %s LIMIT %s",
            (q, *params, q, max(1, min(int(k), MAX_K))),
        )
        # a zero vector has no cosine distance (NaN): similarity 0, as the resident index has it
        return [(int(rid), 0.0 if d is None or math.isnan(d) else 1.0 - float(d))
                for rid, d in rows]

    def lexical(self, text: str, k: int, elig: Eligibility) -> list[tuple[int, float]]:
        """BM25 over eligible rows: (rid, score), best first; score > 0."""
        terms = lexical_terms(text)
        return self._bm25(terms, k, elig) if terms else []

    def _bm25(self, terms: Sequence[str], k: int, elig: Eligibility) -> list[tuple[int, float]]:
        tenant = elig.principal.tenant
        stats = self._one("SELECT docs, length FROM lexicon_stats WHERE tenant = %s", (tenant,))
        if k <= 0 or stats is None or int(stats[0]) <= 0:
            return []
        n, total_len = int(stats[0]), float(stats[1])
        hits: list[tuple[Any, Any]] = []
        for term in dict.fromkeys(terms):
            q = lexeme_query(term)
            rows = self._all(
                "SELECT rid, (lex_tf ->> %s)::int, lex_len FROM memories "
                "WHERE tenant = %s AND lex @@ %s::tsquery ORDER BY rid DESC LIMIT %s",
                (term, tenant, q, MAX_TERM_POSTINGS),
            )
            if not rows:
                continue
            df = len(rows)
            if df == MAX_TERM_POSTINGS:
                counted = self._one(
                    "SELECT COUNT(*) FROM memories WHERE tenant = %s AND lex @@ %s::tsquery",
                    (tenant, q),
                )
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
        ranked, ranked_scores = rids[order].tolist(), scores[order].tolist()
        where, params = self._where(elig)
        passed = {int(r[0]) for r in self._all(
            f"SELECT m.rid FROM memories m WHERE m.rid = ANY(%s::bigint[]) AND {where}",
            (ranked, *params),
        )}
        out = [(r, s) for r, s in zip(ranked, ranked_scores, strict=True) if r in passed]
        return out[:k]

    def search(self, query: Vector, text: str, k: int, elig: Eligibility) -> Rankings:
        """Stage 2's three rankings over the eligible rows, in one snapshot."""
        terms = lexical_terms(text)
        with self.snapshot():
            content = self.dense("content", query, k, elig)
            state = self.dense("state", query, k, elig)
            lexical = self._bm25(terms, k, elig) if terms else []
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
        """Stored vectors of `field` for the rows of these that `elig` reaches."""
        col = COLUMN.get(field)
        if col is None or not rids or self.dim is None:
            return {}
        where, params = self._where(elig)
        rows = self._all(
            f"SELECT m.rid, m.{col} FROM memories m WHERE m.rid = ANY(%s::bigint[]) "
            f"AND m.{col} IS NOT NULL AND {where}",
            (list(rids), *params),
        )
        return {int(r): v.to_numpy() for r, v in rows}
