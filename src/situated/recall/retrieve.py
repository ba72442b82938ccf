"""Stage 2, retrieval: candidates by dense similarity (lesson and source state) plus lexical
(BM25 with the tenant's own statistics), fused by reciprocal rank, over-fetched for the stages
that follow.

Retrieval only proposes; nothing here decides what is served.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from situated.embed.base import Vector
from situated.models import MemoryRecord
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.store.contract import StoreContract as Store
from situated.store.resident import Rankings
from situated.store.scope import Eligibility
from situated.store.values import RecallRow

RRF_K = 60
"""The usual reciprocal-rank-fusion constant (Cormack et al., 2009)."""


@dataclass(frozen=True)
class Candidate:
    """A retrieved memory with the raw numbers retrieval saw."""

    rid: int
    record: MemoryRecord
    relevance: float
    content_similarity: float
    state_similarity: float | None
    lexical: float
    ranks: dict[str, int]
    analysis: bytes | None = None
    """The stored `situated.recall.analysis` of the record (None: not stored, or stale)."""
    content_vector: Vector | None = None
    state_vector: Vector | None = None
    """The stored vectors, read with the record (dedupe and then/now similarity use them)."""


def retrieve(
    store: Store, query: Vector, query_text: str, elig: Eligibility, k: int
) -> list[Candidate]:
    """Fuse dense (content and state) and lexical rankings over the eligible rows."""
    with store.snapshot():  # rankings and records from one committed state
        found = store.search(query, query_text, k, elig)
        rankings: dict[str, list[tuple[int, float]]] = {
            "content": found.content, "state": found.state, "lexical": found.lexical
        }
        bound = found.situational
        fused: dict[int, float] = {}
        ranks: dict[int, dict[str, int]] = {}
        for name, ranked in rankings.items():
            pos = 0
            for rid, _ in ranked:
                if rid not in bound or (name == "state" and not bound[rid]):
                    continue  # a fact's or note's source state is provenance, not the situation
                fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + pos + 1)
                ranks.setdefault(rid, {})[name] = pos + 1
                pos += 1
        top = sorted(fused, key=lambda r: -fused[r])[:k]
        # eligibility applied again on the record table; records and vectors in one read
        rows = store.recall_rows(top, elig, ANALYSIS_VERSION)
    lex: dict[int, float] = dict(found.lexical)
    best = max(fused.values(), default=1.0)
    sims = _similarities(query, top, found, rows)
    out = []
    for rid in top:
        row = rows.get(rid)
        if row is None:
            continue
        rec = row.record
        c_sim, s_sim = sims[rid]
        has_state = rec.source.state is not None and not rec.source.state.is_empty
        out.append(
            Candidate(
                rid=rid,
                record=rec,
                relevance=fused[rid] / best,
                content_similarity=c_sim,
                state_similarity=s_sim if has_state else None,
                lexical=lex.get(rid, 0.0),
                ranks=ranks[rid],
                analysis=row.analysis,
                content_vector=row.content,
                state_vector=row.state,
            )
        )
    return out


def _similarities(
    query: Vector, rids: list[int], found: Rankings, rows: dict[int, RecallRow]
) -> dict[int, tuple[float, float]]:
    """Cosine to lesson and to source state for every candidate: the search's numbers, else
    from the vectors read with the record (one product for all that need it)."""
    known = found.similarity
    content = dict(found.content)
    state = dict(found.state)
    for rid, (c, s) in known.items():
        content.setdefault(rid, c)
        state.setdefault(rid, s)
    for name, into in (("content", content), ("state", state)):
        need = [r for r in rids if r not in into and r in rows
                and getattr(rows[r], name) is not None]
        if need:
            sims = np.stack([getattr(rows[r], name) for r in need]) @ query
            into.update(zip(need, sims.tolist(), strict=True))
    return {r: (content.get(r, 0.0), state.get(r, 0.0)) for r in rids}
