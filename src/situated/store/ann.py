"""Approximate nearest neighbours for large tenants: one HNSW graph per tenant and vector field,
over the rows of its resident slice (`situated.store.resident`), with eligibility applied inside
the graph walk.

Why: an exact scan costs the tenant's whole matrix per query (1M rows at 256 dimensions is 1 GB
per field, 23 ms or more at memory bandwidth). Below `DEFAULT_ROWS` rows exact search stays the
default, and it stays the authority: an approximate search never widens what is eligible.

How (faiss `IndexHNSWSQ`, chosen over usearch: faiss searches with an `IDSelectorBitmap`, so
the eligibility mask is applied during the walk; usearch's Python API can only post-filter, and
was slower here, `benchmarks/ann.py`):

* a graph's labels are the slice's row positions, so the slice's eligibility mask is the
  search's allowed set, packed into a bitmap;
* vectors in the graph are 8-bit scalar quantised (a quarter of float32); the graph proposes
  `RERANK * k` rows and the slice's own float32 vectors re-rank them exactly, so the cosines a
  search returns are the exact ones;
* `search` returns None when the graph found fewer rows than it should (fewer than k while at
  least k are eligible): the caller then searches exactly over the eligible rows. It also
  returns None when few rows are eligible (`exact_below`), where the exact scan is cheaper.

Persistence: `<database>-ann/<tenant digest>.<field>.faiss` with a JSON sidecar naming the
ledger generation, the row count, a digest of the rids in row order and a sample of the
vectors. A slice that loads finds its graph there, checks the sidecar against its own rows and
adds the rows appended since (a prefix that matches); anything else (another generation, a
changed row order after an erasure, other vectors, another dimension) is stale and rebuilt.
An erasure in this process deletes the tenant's files (`discard`): no erased vector outlives it.

faiss is the optional `ann` extra: without it every search is exact (`available()` says so and
`health` reports it).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
BOOL = npt.NDArray[np.bool_]
POS = npt.NDArray[np.intp]

FORMAT = 1
DEFAULT_ROWS = 50_000
"""A tenant's slice with at least this many rows gets its graphs."""
EXACT_BELOW = 10_000
"""With fewer eligible rows than this a search is exact over them (cheaper than the walk)."""
M = 16
EF_CONSTRUCTION = 64
EF_SEARCH = 128
RERANK = 4
"""The graph proposes this many times k rows; exact float32 cosines re-rank them."""
TRAIN_ROWS = 50_000
SAMPLE = 64
"""Vectors hashed into the sidecar to tell a re-embedded store from the one indexed."""
GRAPH_ROW_BYTES = 160
"""A graph's bytes per row besides its 8-bit codes (neighbour lists at M=16, levels, offsets;
an estimate for the resident budget)."""
SAVE_TAIL = 0.1
"""Re-save a graph when the rows added since it was saved exceed this share of it."""


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def available() -> bool:
    """Whether the `ann` extra (faiss) is installed."""
    return _faiss() is not None


@dataclass(frozen=True)
class AnnConfig:
    """When graphs are built and used: `rows` per tenant slice (0: never), exact below
    `exact_below` eligible rows, `directory` to persist them in (None: not persisted)."""

    rows: int = DEFAULT_ROWS
    exact_below: int = EXACT_BELOW
    directory: Path | None = None
    ef_search: int = EF_SEARCH

    @property
    def enabled(self) -> bool:
        return self.rows > 0 and available()


def digest(rids: npt.NDArray[np.int64], vectors: F32) -> tuple[str, str]:
    """(rids in row order, a sample of the rows' vectors) as hex digests."""
    n = len(rids)
    pick = np.unique(np.linspace(0, max(n - 1, 0), num=min(SAMPLE, n)).astype(np.int64))
    return (hashlib.sha256(np.ascontiguousarray(rids, dtype=np.int64).tobytes()).hexdigest(),
            hashlib.sha256(np.ascontiguousarray(vectors[pick]).tobytes()).hexdigest())


class Graph:
    """One field's HNSW graph over a slice's first `n` rows (label = row position)."""

    def __init__(self, index: Any, field: str, saved: int = 0) -> None:
        self.index = index
        self.field = field
        self.saved = saved
        """Rows the graph on disk holds (0: not saved)."""
        self.served = 0
        self.short = 0
        """Searches answered by the graph, and those it could not promise k for (the caller
        searched exactly)."""

    @classmethod
    def build(cls, field: str, vectors: F32) -> Graph:
        faiss = _faiss()
        n, dim = vectors.shape
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, M,
                                  faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        step = max(1, n // TRAIN_ROWS)
        index.train(np.ascontiguousarray(vectors[::step]))
        g = cls(index, field)
        g.add(vectors)
        return g

    @property
    def n(self) -> int:
        return int(self.index.ntotal)

    @property
    def nbytes(self) -> int:
        """Codes, neighbour lists and per-node bookkeeping (what faiss allocates)."""
        h = self.index.hnsw
        return int(self.n * self.index.d + h.neighbors.size() * 4 + h.offsets.size() * 8
                   + h.levels.size() * 4)

    def add(self, vectors: F32) -> None:
        """Append rows (the slice's next positions, in order)."""
        if len(vectors):
            self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def search(
        self, matrix: F32, query: F32, k: int, allowed: BOOL, eligible: int, ef: int
    ) -> POS | None:
        """The k best allowed rows by exact cosine among the graph's proposals, best first;
        None when the caller must search exactly (see the module docstring). `ef` is the
        walk's width with every row allowed; it widens as the allowed share shrinks."""
        return self.search_many(matrix, query[None, :], k, allowed, eligible, ef)[0]

    def search_many(
        self, matrix: F32, queries: F32, k: int, allowed: BOOL, eligible: int, ef: int
    ) -> list[POS | None]:
        """`search` for each row of `queries`, in one walk call (one allowed set for all)."""
        faiss = _faiss()
        n = self.n
        want = min(k * RERANK, eligible)
        bits = np.packbits(allowed[:n], bitorder="little")
        params = faiss.SearchParametersHNSW()
        # a selective allowed set leaves fewer allowed rows on the walk: widen it in proportion
        # (up to 4x), so recall holds when few rows are eligible
        params.efSearch = max(int(min(4 * ef, ef * n / max(eligible, 1))), want)
        params.sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
        qs = np.ascontiguousarray(queries, dtype=np.float32)
        _, labels = self.index.search(qs, want, params=params)
        out: list[POS | None] = []
        for query, row in zip(qs, labels, strict=True):
            found = row[row >= 0]
            if len(found) < min(k, eligible):
                self.short += 1
                out.append(None)
                continue
            self.served += 1
            found = found[allowed[found]]  # the selector's promise, kept by construction
            sims = matrix[found] @ query
            order = np.lexsort((found, -sims))[:k]
            out.append(found[order].astype(np.intp))
        return out


class GraphFiles:
    """Where a tenant's graphs are persisted, and the checks that make one usable."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _paths(self, tenant: str, field: str) -> tuple[Path, Path]:
        stem = hashlib.sha256(tenant.encode()).hexdigest()[:24]
        return (self.directory / f"{stem}.{field}.faiss",
                self.directory / f"{stem}.{field}.json")

    def load(
        self, tenant: str, field: str, generation: object, rids: npt.NDArray[np.int64],
        vectors: F32,
    ) -> Graph | None:
        """The saved graph if it indexes a prefix of these rows (same generation, rids and
        vectors, dimension); None when missing or stale."""
        faiss = _faiss()
        index_path, meta_path = self._paths(tenant, field)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        rows = meta.get("rows")
        if (meta.get("format") != FORMAT or meta.get("generation") != _jsonable(generation)
                or meta.get("tenant") != tenant or meta.get("dim") != vectors.shape[1]
                or not isinstance(rows, int) or not 0 < rows <= len(rids)
                or list(digest(rids[:rows], vectors[:rows])) != meta.get("digest")):
            return None
        try:
            index = faiss.read_index(str(index_path))
        except (OSError, RuntimeError):
            return None
        if int(index.ntotal) != rows or int(index.d) != vectors.shape[1]:
            return None
        return Graph(index, field, saved=rows)

    def save(
        self, tenant: str, graph: Graph, generation: object, rids: npt.NDArray[np.int64],
        vectors: F32,
    ) -> None:
        """Write the graph and its sidecar (each replaced atomically; the sidecar last, so a
        crash between the two leaves a sidecar that no longer matches: rebuilt)."""
        faiss = _faiss()
        self.directory.mkdir(parents=True, exist_ok=True)
        index_path, meta_path = self._paths(tenant, graph.field)
        n = graph.n
        meta = {"format": FORMAT, "tenant": tenant, "field": graph.field, "rows": n,
                "dim": int(vectors.shape[1]), "generation": _jsonable(generation),
                "digest": list(digest(rids[:n], vectors[:n]))}
        meta_path.unlink(missing_ok=True)
        tmp = Path(f"{index_path}.tmp")
        faiss.write_index(graph.index, str(tmp))
        os.replace(tmp, index_path)
        tmp = Path(f"{meta_path}.tmp")
        tmp.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp, meta_path)
        graph.saved = n

    def discard(self, tenant: str) -> None:
        """Delete the tenant's saved graphs (after an erasure)."""
        for field in ("content", "state"):
            for p in self._paths(tenant, field):
                p.unlink(missing_ok=True)


def _jsonable(generation: object) -> object:
    return generation if generation is None or isinstance(generation, int | str) else str(
        generation)
