"""One tenant's resident rows (`Slice`): both vectors, the eligibility columns as numpy arrays
and a BM25 inverted index of the text FTS5 holds; the searches over them, exact, or through a
large tenant's approximate index (`situated.store.ann`). `situated.store.resident` keeps the
slices coherent with the ledger.

A search is one matrix-vector product per field (or a graph walk with the eligibility mask as
its allowed set), a boolean mask and a few posting lists. The mask mirrors `Eligibility.where`
to rank exactly the eligible rows; it only proposes row ids (the store reads the records back
through the SQL gates).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from situated.models import LifecycleState
from situated.store.ann import AnnConfig, Graph
from situated.store.scope import Eligibility

F32 = npt.NDArray[np.float32]
BOOL = npt.NDArray[np.bool_]

MASKS_PER_SLICE = 16
"""Time-independent eligibility masks kept per slice (one per distinct reader profile)."""
DELTA_MIN = 4096
DELTA_FRACTION = 0.05
"""Postings of appended rows are merged into the sorted arrays past this many (or share)."""
BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's own bm25 constants."""

_WORD = re.compile(r"[^\W_]+")
_STATE_CODES = {s.value: i for i, s in enumerate(LifecycleState)}


def _member(codes: npt.NDArray[Any], allowed: Sequence[int], size: int) -> BOOL:
    """`np.isin(codes, allowed)` for small non-negative codes, by table lookup."""
    table = np.zeros(max(size, 1), dtype=np.bool_)
    table[list(allowed)] = True
    out: BOOL = table[codes]
    return out


def grown(rows: int) -> int:
    """Capacity for `rows` rows with room to append: an eighth more (at least 64), so a large
    slice grows in small steps instead of doubling its memory on one append."""
    return rows + max(64, rows // 8)


def bm25_term(
    n: int, total_len: float, df: int, tf: npt.NDArray[np.float32],
    doc_len: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:
    """One query term's BM25 contribution to the rows holding it, FTS5's formula over a
    tenant's statistics: `n` rows, `total_len` tokens in all, `df` rows holding the term, its
    frequency `tf` and the length `doc_len` of each (float32, the precision of both search
    paths; `situated.store.lexical` calls this too, so the two compute the same floats)."""
    avg = max(total_len / n, 1e-9)
    idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * doc_len / avg)
    return np.asarray(np.float32(idf) * tf * (BM25_K1 + 1.0) / (tf + norm), dtype=np.float32)


def tokens(text: str) -> list[str]:
    """Word tokens as FTS5's default `unicode61` tokenizer makes them: runs of letters and
    digits (underscore and punctuation separate), case-folded, diacritics removed."""
    if not text.isascii():
        text = "".join(
            c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c)
        )
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Rankings:
    """What one search returns: three rankings of eligible row ids and the numbers behind them.

    `content` and `state` are (rid, cosine) best first; `state` counts only situation-bound
    memories (lessons with a known source state). `lexical` is (rid, bm25 score > 0).
    `situational` says, for every rid in any ranking, whether it is situation-bound;
    `similarity` holds (content cosine, state cosine) for every rid the search scored.
    """

    content: list[tuple[int, float]]
    state: list[tuple[int, float]]
    lexical: list[tuple[int, float]]
    situational: dict[int, bool]
    similarity: dict[int, tuple[float, float]] = field(default_factory=dict)


class Slice:
    """One tenant's rows: vectors, eligibility columns and a BM25 index, in row order."""

    def __init__(self, tenant: str, dim: int, seq: int, capacity: int = 64) -> None:
        self.tenant = tenant
        self.dim = dim
        self.seq = seq
        self.n = 0
        self.pos: dict[int, int] = {}
        self.role_keys: dict[str, int] = {}
        self.namespaces: dict[str, int] = {}
        self.vocab: dict[str, int] = {}
        """term -> term id. Postings are CSR arrays (term id -> rows, term frequencies) plus a
        small unsorted delta for rows appended since, merged when it grows: a handful of
        numpy arrays instead of an object per term, which the garbage collector would walk."""
        self.indptr = np.zeros(1, dtype=np.int64)
        self.post_rows = np.zeros(0, dtype=np.int32)
        self.post_tf = np.zeros(0, dtype=np.float32)
        self.delta = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))
        self.total_len = 0.0
        self.version = 0
        """Bumped on every change to the rows; keys the cached masks."""
        self._masks: dict[tuple[Any, ...], BOOL] = {}
        self.graphs: dict[str, Graph] = {}
        """Per vector field, the approximate index over the first rows (`situated.store.ann`),
        only for a large tenant."""
        self.ann: AnnConfig | None = None
        self._alloc(capacity)

    def _alloc(self, cap: int) -> None:
        old = self.n
        def grow(a: Any, shape: tuple[int, ...], dtype: Any) -> Any:
            new = np.zeros(shape, dtype=dtype)
            if old:
                new[:old] = a[:old]
            return new
        self.cap = cap
        self.content = grow(getattr(self, "content", None), (cap, self.dim), np.float32)
        self.state_vecs = grow(getattr(self, "state_vecs", None), (cap, self.dim), np.float32)
        self.rids = grow(getattr(self, "rids", None), (cap,), np.int64)
        self.state = grow(getattr(self, "state", None), (cap,), np.int8)
        self.classification = grow(getattr(self, "classification", None), (cap,), np.int8)
        self.role = grow(getattr(self, "role", None), (cap,), np.int32)
        self.ns = grow(getattr(self, "ns", None), (cap,), np.int32)
        self.valid_from = grow(getattr(self, "valid_from", None), (cap,), np.float64)
        self.valid_until = grow(getattr(self, "valid_until", None), (cap,), np.float64)
        self.recorded_at = grow(getattr(self, "recorded_at", None), (cap,), np.float64)
        self.situational = grow(getattr(self, "situational", None), (cap,), np.bool_)
        self.doc_len = grow(getattr(self, "doc_len", None), (cap,), np.float32)

    @property
    def nbytes(self) -> int:
        arrays = (self.content, self.state_vecs, self.rids, self.state, self.classification,
                  self.role, self.ns, self.valid_from, self.valid_until, self.recorded_at,
                  self.situational, self.doc_len)
        postings = (self.indptr, self.post_rows, self.post_tf, *self.delta)
        return (int(sum(a.nbytes for a in arrays + postings)) + 80 * len(self.vocab)
                + 80 * len(self.pos) + sum(g.nbytes for g in self.graphs.values()))

    def _code(self, table: dict[str, int], value: str) -> int:
        if value not in table:
            table[value] = len(table)
        return table[value]

    def set_meta(self, i: int, row: Sequence[Any]) -> None:
        """Columns as selected by `_META` (after rid)."""
        ns, state, cls, role, vf, vu, rec_at, situational = row
        self.version += 1
        self._masks.clear()
        self.ns[i] = self._code(self.namespaces, str(ns))
        self.state[i] = _STATE_CODES[str(state)]
        self.classification[i] = int(cls)
        self.role[i] = self._code(self.role_keys, str(role))
        self.valid_from[i] = float(vf)
        self.valid_until[i] = float(vu)
        self.recorded_at[i] = float(rec_at)
        self.situational[i] = bool(situational)

    def extend(self, rows: Sequence[Sequence[Any]]) -> None:
        """Append rows as selected by `ResidentIndex._rows`: rid, the eight `_META` columns,
        both vector blobs, the two indexed texts. Vectorised: a slice loads in one pass."""
        k = len(rows)
        if not k:
            return
        if self.n + k > self.cap:
            self._alloc(grown(self.n + k))
        lo, hi = self.n, self.n + k
        self.content[lo:hi] = np.frombuffer(b"".join(r[9] for r in rows), np.float32).reshape(
            k, self.dim)
        self.state_vecs[lo:hi] = np.frombuffer(
            b"".join(r[10] for r in rows), np.float32).reshape(k, self.dim)
        self.rids[lo:hi] = [int(r[0]) for r in rows]
        for j, r in enumerate(rows):
            self.set_meta(lo + j, r[1:9])
            self.pos[int(r[0])] = lo + j
        docs = [tokens(f"{r[11]} {r[12] or ''}") for r in rows]
        lens = np.fromiter((len(d) for d in docs), dtype=np.int64, count=k)
        self.doc_len[lo:hi] = lens
        self.total_len += float(lens.sum())
        self.n = hi
        vocab = self.vocab
        term_ids = np.fromiter(
            (vocab.setdefault(w, len(vocab)) for d in docs for w in d), dtype=np.int64,
            count=int(lens.sum()),
        )
        if not len(term_ids):
            return
        row_ids = np.repeat(np.arange(lo, hi, dtype=np.int64), lens)
        pairs, tf = np.unique(term_ids * hi + row_ids, return_counts=True)
        d_terms, d_rows, d_tf = self.delta
        self.delta = (np.concatenate([d_terms, pairs // hi]),
                      np.concatenate([d_rows, (pairs % hi).astype(np.int32)]),
                      np.concatenate([d_tf, tf.astype(np.float32)]))
        if len(self.delta[0]) > max(DELTA_MIN, DELTA_FRACTION * len(self.post_rows)):
            self._merge()

    def _merge(self) -> None:
        """Fold the delta into the CSR arrays (each term's rows stay in row order)."""
        counts = np.diff(self.indptr)
        terms = np.concatenate([np.repeat(np.arange(len(counts)), counts), self.delta[0]])
        rows = np.concatenate([self.post_rows, self.delta[1]])
        tf = np.concatenate([self.post_tf, self.delta[2]])
        order = np.lexsort((rows, terms))
        self.post_rows, self.post_tf = rows[order], tf[order]
        self.indptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocab)), out=self.indptr[1:])
        self.delta = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))

    def postings(self, term: str) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        """The rows holding `term` and its frequency in each (empty when none)."""
        t = self.vocab.get(term)
        rows, tf = self.post_rows[:0], self.post_tf[:0]
        if t is None:
            return rows, tf
        if t + 1 < len(self.indptr):
            lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
            rows, tf = self.post_rows[lo:hi], self.post_tf[lo:hi]
        if len(self.delta[0]):
            hit = self.delta[0] == t
            if hit.any():
                rows = np.concatenate([rows, self.delta[1][hit]])
                tf = np.concatenate([tf, self.delta[2][hit]])
        return rows, tf

    # -- searching ----------------------------------------------------------------------------

    def mask(self, elig: Eligibility, role_keys: Sequence[str]) -> BOOL:
        """The rows `elig` may read: the numpy mirror of `Eligibility.where` (same columns,
        same comparisons); `role_keys` are the stored role sets the principal holds.

        The time-independent part (clearance, roles, states, namespaces, `known_at`) is kept
        per slice version; only the validity window is compared on every call.
        """
        n = self.n
        key = (self.version, int(elig.principal.clearance), tuple(role_keys), elig.states,
               elig.namespaces, elig.known_at)
        m = self._masks.get(key)
        if m is None:
            m = self.classification[:n] <= int(elig.principal.clearance)
            m &= _member(self.role[:n], [self.role_keys[k] for k in role_keys
                                         if k in self.role_keys], len(self.role_keys))
            m &= _member(self.state[:n], [_STATE_CODES[s.value] for s in elig.states],
                         len(_STATE_CODES))
            if elig.namespaces is not None:
                m &= _member(self.ns[:n], [self.namespaces[x] for x in elig.namespaces
                                           if x in self.namespaces], len(self.namespaces))
            if elig.known_at is not None:
                m &= self.recorded_at[:n] <= elig.known_at
            if len(self._masks) >= MASKS_PER_SLICE:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = m
        if elig.as_of is None:
            return m.copy()
        out: BOOL = (self.valid_from[:n] <= elig.as_of) & (self.valid_until[:n] > elig.as_of)
        out &= m
        return out

    def matrix(self, field: str) -> F32:
        """The rows' vectors of one field (`content` or `state`), contiguous."""
        m: F32 = (self.content if field == "content" else self.state_vecs)[: self.n]
        return m

    def similarities(self, field: str, query: F32) -> npt.NDArray[np.float32]:
        """Cosine of every row's vector of `field` to `query` (vectors are unit length)."""
        sims: npt.NDArray[np.float32] = self.matrix(field) @ query
        return sims

    def bm25(self, terms: Sequence[str]) -> npt.NDArray[np.float32]:
        """BM25 of every row for the query terms (0 where none occurs)."""
        scores = np.zeros(self.n, dtype=np.float32)
        if not self.n:
            return scores
        for t in dict.fromkeys(terms):
            rows, tf = self.postings(t)
            if len(rows):
                scores[rows] += bm25_term(self.n, self.total_len, len(rows), tf,
                                          self.doc_len[rows])
        return scores

    # -- the searches the store delegates (rows `elig` may read, per `mask`) ------------------

    def search(
        self, query: F32, terms: Sequence[str], k: int, elig: Eligibility,
        role_keys: Sequence[str],
    ) -> Rankings:
        """Dense top k on both vectors and BM25 top k."""
        allowed = self.mask(elig, role_keys)
        rows = np.flatnonzero(allowed)
        if not len(rows) or k <= 0:
            return Rankings([], [], [], {})
        q = np.asarray(query, dtype=np.float32)
        content, c_sims = self._top("content", q, k, allowed, rows)
        bound = self.situational[rows]
        state, s_sims = self._top("state", q, k, allowed & self.situational[: self.n],
                                  rows[bound])
        lexical, bm = self._lexical(rows, terms, k)
        used = np.unique(np.concatenate([content, state, lexical]))
        cs = c_sims[used] if c_sims is not None else self.content[used] @ q
        ss = s_sims[used] if s_sims is not None else self.state_vecs[used] @ q
        sim = {int(i): (float(c), float(s)) for i, c, s in zip(used, cs, ss, strict=True)}
        rid = self.rids
        return Rankings(
            content=[(int(rid[i]), sim[int(i)][0]) for i in content],
            state=[(int(rid[i]), sim[int(i)][1]) for i in state],
            lexical=[(int(rid[i]), float(bm[i])) for i in lexical],
            situational={int(rid[i]): bool(self.situational[i]) for i in used},
            similarity={int(rid[i]): sim[int(i)] for i in used},
        )

    def _top(
        self, field: str, q: F32, k: int, allowed: BOOL, rows: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32] | None]:
        """The k best of `rows` (the rows `allowed` marks) on one field, best first, and the
        cosines of every row when the search was exact (None when approximate: the graph of
        a large tenant, exact cosines of its proposals; exact whenever it cannot promise k)."""
        g, cfg = self.graphs.get(field), self.ann
        if g is not None and cfg is not None and g.n == self.n and len(rows) >= max(
                cfg.exact_below, k):
            hit = g.search(self.matrix(field), q, k, allowed, len(rows), cfg.ef_search)
            if hit is not None:
                return hit, None
        sims = self.similarities(field, q)
        return top(sims, rows, k), sims

    def dense(
        self, field: str, query: F32, k: int, elig: Eligibility, role_keys: Sequence[str]
    ) -> list[tuple[int, float]]:
        """Top k on one vector field (`content` or `state`): (rid, cosine)."""
        allowed = self.mask(elig, role_keys)
        rows = np.flatnonzero(allowed)
        if not len(rows) or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        best, sims = self._top(field, q, k, allowed, rows)
        vals = sims[best] if sims is not None else self.matrix(field)[best] @ q
        return [(int(self.rids[i]), float(v)) for i, v in zip(best, vals, strict=True)]

    def dense_many(
        self, field: str, queries: F32, k: int, elig: Eligibility, role_keys: Sequence[str]
    ) -> list[list[tuple[int, float]]]:
        """`dense` for each row of `queries` (the write path's near-duplicate search): one
        graph walk call for a large tenant (exact for a query it cannot promise k for), else
        one matrix product."""
        allowed = self.mask(elig, role_keys)
        rows = np.flatnonzero(allowed)
        qs = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        if not len(rows) or k <= 0:
            return [[] for _ in qs]
        m = self.matrix(field)
        g, cfg = self.graphs.get(field), self.ann
        best: list[npt.NDArray[np.intp] | None] = [None] * len(qs)
        if g is not None and cfg is not None and g.n == self.n and len(rows) >= max(
                cfg.exact_below, k):
            best = g.search_many(m, qs, k, allowed, len(rows), cfg.ef_search)
        exact = [j for j, b in enumerate(best) if b is None]
        cosines: dict[int, npt.NDArray[np.float32]] = {}  # exact: the product's own values
        if exact:
            # every row's cosine when most rows are eligible (no copy of the matrix), else
            # the eligible rows' only
            sub = qs[exact].T
            sims = m @ sub if 2 * len(rows) > self.n else None
            part = m[rows] @ sub if sims is None else None
            full = np.zeros(self.n, dtype=np.float32)
            for col, j in enumerate(exact):
                if sims is not None:
                    full = sims[:, col]
                else:
                    assert part is not None
                    full[rows] = part[:, col]
                chosen = top(full, rows, k)
                best[j], cosines[j] = chosen, full[chosen]
        out = []
        for j, (q, hit) in enumerate(zip(qs, best, strict=True)):
            assert hit is not None
            vals = cosines[j] if j in cosines else m[hit] @ q
            out.append([(int(self.rids[i]), float(v)) for i, v in zip(hit, vals, strict=True)])
        return out

    def lexical(
        self, terms: Sequence[str], k: int, elig: Eligibility, role_keys: Sequence[str]
    ) -> list[tuple[int, float]]:
        """BM25 top k: (rid, score > 0), best first."""
        rows = np.flatnonzero(self.mask(elig, role_keys))
        if k <= 0:
            return []
        hits, bm = self._lexical(rows, terms, k)
        return [(int(self.rids[i]), float(bm[i])) for i in hits]

    def _lexical(
        self, rows: npt.NDArray[np.intp], terms: Sequence[str], k: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """Of `rows`, the k best with a BM25 score above zero, and the scores of every row."""
        bm = self.bm25(terms) if terms and len(rows) else np.zeros(self.n, dtype=np.float32)
        return top(bm, rows[bm[rows] > 0], k), bm

    def vectors(self, field: str, rids: Sequence[int]) -> dict[int, F32]:
        """Copies of the stored vectors of `field` for the rids this slice holds."""
        m = self.content if field == "content" else self.state_vecs
        out: dict[int, F32] = {}
        for r in rids:
            i = self.pos.get(int(r))
            if i is not None and i < self.n:
                out[int(r)] = m[i].copy()
        return out


def top(scores: npt.NDArray[Any], rows: npt.NDArray[np.intp], k: int) -> npt.NDArray[np.intp]:
    """Of `rows`, the k with the highest score, best first; ties by row order (rows tied at
    the k-th score are all considered, so the choice among them is deterministic)."""
    if len(rows) > k:
        kth = scores[rows[np.argpartition(-scores[rows], k - 1)[:k]]].min()
        rows = rows[scores[rows] >= kth]
    order = np.lexsort((rows, -scores[rows]))[:k]
    out: npt.NDArray[np.intp] = rows[order]
    return out
