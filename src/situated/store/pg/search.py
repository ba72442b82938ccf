"""Stage 2 of recall on PostgreSQL: dense search with pgvector, lexical search over per-tenant
postings scored by BM25, both over the eligible rows only; `search` runs both in one snapshot,
in three statements.

Dense: `ORDER BY vec <=> query LIMIT k` with the eligibility gates in the same WHERE clause,
for both vector fields in one statement. The HNSW index scan is iterative
(`hnsw.iterative_scan = strict_order`, set on every pooled connection): when the gates reject
candidates the scan goes on until k rows pass or `MAX_SCAN_TUPLES` are visited, so a selective
scope does not get fewer than k results from a post-filtered top k. The planner may prefer the
`(tenant, namespace, state)` index and an exact sort when few rows are eligible; both give the
k nearest eligible rows.

Lexical: `lexicon_postings` (tenant, term, rid, count, length; an index-only read) gives the
tenant's rows holding each query term; each term is scored with `bm25_term` from the tenant's
own statistics (`lexicon_stats`), as `store.lexical` does for SQLite, so both backends rank and
score alike (PostgreSQL's `ts_rank` is not BM25, and counting every tenant's rows together
would be a side channel across tenants). The ranked rows then pass the gates, best first, in
chunks, until k have passed (`lex`, the GIN-indexed `tsvector`, stays for ad-hoc queries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from situated.embed.base import Vector
from situated.store.lexical import MAX_TERM_POSTINGS
from situated.store.pg.graphs import predicate
from situated.store.pg.reads import Reads
from situated.store.resident import Rankings, bm25_term
from situated.store.scope import Eligibility
from situated.store.sqlite import lexical_terms

COLUMN = {"content": "content_vec", "state": "state_vec"}
"""The vector column of each field."""
MAX_K = 4096
ANN_FIRST = True
"""Dense searches go through the HNSW indexes (the planner may not sort: `enable_sort` off for
the statement's transaction), exactly (index scans off) only for a field that got fewer than k
rows. Without it the planner served a tenant of 10,000 eligible rows (100k memories, 10
tenants) by an exact scan through the tenant's index: 60 ms per field here."""
GATE_CHUNK = 8
"""Ranked lexical rows passed through the gates at first, per result wanted (then 8 times
more each time)."""
SITUATIONAL = "(m.kind = 'lesson' AND m.state_unknown = 0)"
"""A row of a situation-bound memory: a lesson with a known source state."""


class Search(Reads):
    """Dense and lexical rankings of eligible rows."""

    def dense(
        self, field: str, query: Vector, k: int, elig: Eligibility
    ) -> list[tuple[int, float]]:
        """KNN over eligible rows: (rid, cosine similarity), best first."""
        if field not in COLUMN:
            return []
        ranked, _ = self._nearest((field,), query, k, elig)
        return ranked[0]

    def lexical(self, text: str, k: int, elig: Eligibility) -> list[tuple[int, float]]:
        """BM25 over eligible rows: (rid, score), best first; score > 0."""
        terms = lexical_terms(text)
        if not terms or k <= 0:
            return []
        return [(r, v) for r, v, _ in self._bm25(terms, elig, k)][:k]

    def _bm25(
        self, terms: Sequence[str], elig: Eligibility, k: int
    ) -> list[tuple[int, float, bool]]:
        """The eligible rows holding any of `terms`: (rid, BM25 score > 0, situation-bound)
        best first. One statement reads the tenant's statistics and every term's postings
        (newest `MAX_TERM_POSTINGS` per term, an index-only read), scored as `Slice.bm25`
        scores them over every row of the tenant; then the ranked rows pass the gates, best
        first, a chunk at a time, until `k` have passed."""
        unique = list(dict.fromkeys(terms))
        tenant = elig.principal.tenant
        rows = self._all(  # a term's postings as three arrays: parsed in C, not row by row
            "SELECT t.n, p.rids, p.tfs, p.lens, s.docs, s.length FROM lexicon_stats s "
            "CROSS JOIN unnest(%s::text[]) WITH ORDINALITY AS t(term, n) "
            "CROSS JOIN LATERAL (SELECT array_agg(q.rid) AS rids, array_agg(q.tf) AS tfs, "
            "array_agg(q.length) AS lens FROM (SELECT p.rid, p.tf, p.length "
            "FROM lexicon_postings p WHERE p.tenant = s.tenant AND p.term = t.term "
            "ORDER BY p.rid DESC LIMIT %s) q) p "
            "WHERE s.tenant = %s AND s.docs > 0 ORDER BY t.n",
            (unique, MAX_TERM_POSTINGS, tenant), binary=True,
        )
        hits: list[tuple[Any, Any]] = []
        for t, rids_, tfs, lens, docs, total in rows:  # in query order, as `Slice.bm25` adds
            if not rids_:  # a term no row of the tenant holds
                continue
            n, total_len = int(docs), float(total)
            df = len(rids_)
            if df == MAX_TERM_POSTINGS:
                counted = self._one(
                    "SELECT COUNT(*) FROM lexicon_postings WHERE tenant = %s AND term = %s",
                    (tenant, unique[int(t) - 1]),
                )
                df = int(counted[0]) if counted else df
            tf = np.asarray(tfs, dtype=np.float32)
            length = np.asarray(lens, dtype=np.float32)
            hits.append((np.asarray(rids_, dtype=np.int64),
                         bm25_term(n, total_len, df, tf, length)))
        if not hits:
            return []
        rids = np.unique(np.concatenate([r for r, _ in hits]))
        scores = np.zeros(len(rids), dtype=np.float32)
        for r, sc in hits:
            scores[np.searchsorted(rids, r)] += sc
        order = np.lexsort((rids, -scores))
        order = order[scores[order] > 0]
        ranked_rids, ranked_scores = rids[order], scores[order]
        out: list[tuple[int, float, bool]] = []
        at, chunk = 0, max(64, GATE_CHUNK * k)
        while at < len(order) and len(out) < k:  # only the chunks read become Python lists
            part_ = list(zip(ranked_rids[at:at + chunk].tolist(),
                             ranked_scores[at:at + chunk].tolist(), strict=True))
            flags = self.situational([r for r, _ in part_], elig)
            out += [(r, v, flags[r]) for r, v in part_ if r in flags]
            at, chunk = at + chunk, chunk * 8
        return out

    def _nearest(
        self, fields: Sequence[str], query: Vector, k: int, elig: Eligibility
    ) -> tuple[list[list[tuple[int, float]]], dict[int, bool]]:
        """The k nearest eligible rows of each field, with whether each row found is
        situation-bound, in one snapshot: first through the HNSW indexes (the planner kept
        from sorting, `ANN_FIRST`), then exactly for a field that got fewer than k rows (a
        scope too selective for the iterative scan's `MAX_SCAN_TUPLES`, or a small store)."""
        self._read_dim()
        if self.dim is None:
            return [[] for _ in fields], {}
        outer = self._local.conn is not None
        with self.snapshot():
            if not ANN_FIRST:
                return self._knn(fields, query, k, elig, "")
            self._plan("off", "on")
            ranked, flags = self._knn(fields, query, k, elig, "ann")
            short = [n for n, got in enumerate(ranked) if len(got) < k]
            if short:
                self._plan("on", "off")
                again, more = self._knn([fields[n] for n in short], query, k, elig, "exact")
                for n, got in zip(short, again, strict=True):
                    ranked[n] = got
                flags |= more
            if outer and self._local.writing:  # the caller's writes go on: as they were
                self._plan("on", "on")
        return ranked, flags

    def _plan(self, sort: str, indexscan: str) -> None:
        """The planner settings of the rest of this transaction: `ann` statements run with
        sorting off (only the HNSW index gives the order), `exact` ones with index scans off
        (the tenant's rows, sorted)."""
        if self._local.plan != (sort, indexscan):  # set already: no round trip
            self._all("SELECT set_config('enable_sort', %s, true), "
                      "set_config('enable_indexscan', %s, true)", (sort, indexscan))
            self._local.plan = (sort, indexscan)

    def _knn(
        self, fields: Sequence[str], query: Vector, k: int, elig: Eligibility, mode: str
    ) -> tuple[list[list[tuple[int, float]]], dict[int, bool]]:
        """One statement, one ordered, gated scan per field (`UNION ALL`). Each `mode` has
        its own statement text, so its own prepared statement and cached plan (a cached plan
        keeps the planner settings it was made under); so has each tenant with its own graphs
        (`store.pg.graphs`: its name as a literal, which the partial indexes' predicate
        matches)."""
        where, params = self._where(elig)
        tenant = elig.principal.tenant
        if mode == "ann" and self._graphs.has(self, tenant):  # its own graphs: name it
            where += predicate(tenant)
        q = np.ascontiguousarray(query, dtype=np.float32)
        limit = max(1, min(int(k), MAX_K))
        branch = ("(SELECT {n} AS f, m.rid, m.{c} <=> %s, " + SITUATIONAL + " FROM memories m "
                  "WHERE {w} AND m.{c} IS NOT NULL ORDER BY m.{c} <=> %s LIMIT %s)")
        rows = self._all(
            (f"/* {mode} */ " if mode else "") + " UNION ALL ".join(
                branch.format(n=n, c=COLUMN[f], w=where) for n, f in enumerate(fields)),
            [x for _ in fields for x in (q, *params, q, limit)],
        )
        out: list[list[tuple[int, float]]] = [[] for _ in fields]
        flags = {}
        for f, rid, d, sit in sorted(rows, key=lambda r: int(r[0])):  # stable: branch order
            # a zero vector has no cosine distance (NaN): similarity 0, as the resident index
            out[int(f)].append((int(rid), 0.0 if d is None or math.isnan(d) else 1.0 - float(d)))
            flags[int(rid)] = bool(sit)
        return out, flags

    def search(self, query: Vector, text: str, k: int, elig: Eligibility) -> Rankings:
        """Stage 2's three rankings over the eligible rows, in one snapshot: both dense scans
        in one statement, every lexical term in one, the gates of the ranked lexical rows in
        one (`_nearest` may add an exact pass), each row with its kind."""
        terms = lexical_terms(text)
        with self.snapshot():
            (content, state), flags = self._nearest(("content", "state"), query, k, elig)
            lexical = self._bm25(terms, elig, k)[:k] if terms and k > 0 else []
        flags |= {r: sit for r, _, sit in lexical}
        situational = {r: flags[r] for ranks in (content, state, lexical) for r, *_ in ranks}
        return Rankings(
            content=content,
            state=[(r, v) for r, v in state if situational[r]],
            lexical=[(r, v) for r, v, _ in lexical],
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
