"""The resident index: recently read tenants' search data held in memory, kept coherent with
the ledger.

Why: the SQLite indexes are the durable truth, but they are slow to *search* at scale. The
PyPI sqlite-vec build has no SIMD (about 10x an exact numpy scan of the same rows), and the
lexical search reads one SQL row per matching memory (`situated.store.lexical`). A tenant's
slice (`situated.store.slice`) holds, for each of its memories, both vectors (lesson and source
state), the eligibility columns as numpy arrays and a BM25 inverted index of the same text FTS5
holds. A search is then a matrix-vector product per field, a boolean mask and a few posting
lists. A tenant with at least `ann_rows` rows also gets an approximate index per vector field
(`situated.store.ann`), patched with its slice, saved next to the database and checked
against the ledger's generation and the slice's rows when loaded.

Coherence: every change to a memory is a ledger event written in the same transaction as the
change (`Store.append_event`, `Store.insert`), so the ledger is a change feed. A slice
remembers the ledger position it reflects; before each use it re-reads the rows named by newer
events of its tenant. Changes made without an event (`Store.rebuild(repair=True)`) bump the
store's `generation`, which drops every slice. An erasure rebuilds its tenant's slice, so no
erased text or vector outlives it here. The store never consults the index while it holds a
write transaction (the transaction may roll back); it uses its SQL path instead.

Safety: a slice only *proposes* row ids. The records a recall uses are read back through
`Store.recall_rows`, which applies the eligibility gates again in SQL; the numpy mask mirrors
`Eligibility.where` to rank exactly the eligible rows, but it is not the authority.

BM25 statistics are per tenant (FTS5's are global): one tenant's writes never move another
tenant's ranking. The SQLite path computes the same numbers (`situated.store.lexical`, through
`bm25_term` and `tokens` here).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import apsw

from situated.store.ann import GRAPH_ROW_BYTES, SAVE_TAIL, AnnConfig, Graph, GraphFiles
from situated.store.ann import available as ann_available
from situated.store.slice import Rankings, Slice, bm25_term, grown, tokens, top

__all__ = ["DEFAULT_BUDGET_MB", "Rankings", "ResidentIndex", "Slice", "bm25_term", "tokens",
           "top"]

DEFAULT_BUDGET_MB = 512
"""Memory the resident index may hold, all tenants together (least recently used go first)."""
MAX_BACKOFF = 1024
LOAD_AFTER = 2
"""A tenant's slice is loaded at its second search in a process: a one-shot process (a CLI
call) searches in SQLite and never pays for a load it would not use again."""
ROW_OVERHEAD = 600
"""Bytes per row besides its vectors: eligibility columns, postings, position and vocabulary
entries (an estimate used to refuse a load that cannot fit)."""
MAX_PATCH_ROWS = 5000
"""Above this many changed memories a slice is re-read whole (bounded SQL parameter lists)."""
RELOAD_FRACTION = 0.25
"""Re-read a whole slice instead of patching it when more of its rows than this changed."""

_META = (
    "m.rid, m.namespace, m.state, m.classification, m.role_key, m.valid_from, m.valid_until, "
    "m.recorded_at, m.kind = 'lesson' AND NOT m.state_unknown"
)


class ResidentIndex:
    """Per-tenant slices, loaded at a tenant's second search, patched from the ledger, evicted
    least recently used first (an evicted tenant waits longer for its next load)."""

    def __init__(
        self, db: apsw.Connection, budget_mb: float = DEFAULT_BUDGET_MB,
        ann: AnnConfig | None = None,
    ) -> None:
        self.db = db
        self.ann = ann if ann is not None else AnnConfig(rows=0)
        self.files = GraphFiles(self.ann.directory) if self.ann.directory else None
        self.graph_builds = 0
        self.graph_loads = 0
        self.budget = int(budget_mb * 1e6)
        self.slices: OrderedDict[str, Slice] = OrderedDict()
        self.too_big: dict[str, int] = {}
        """Tenants whose slice exceeded the budget, with the row count at the time."""
        self.generation: object = None
        self.load_after = LOAD_AFTER
        self.searches: dict[str, int] = {}
        """Searches per tenant not yet served by a slice."""
        self.backoff: dict[str, int] = {}
        """Per tenant, how many times `load_after` searches its next load waits for (doubled
        on each eviction)."""
        self.evictions = 0
        self.loads = 0
        self.patches = 0

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.slices.values())

    def slice(self, tenant: str, dim: int) -> Slice | None:
        """The tenant's slice, current with the ledger; None when it does not fit the budget.

        Call inside a read transaction (the store's `snapshot`), never a write transaction.
        """
        if not self.enabled:
            return None
        seq, gen = self._position()
        if gen != self.generation:
            self.slices.clear()
            self.too_big.clear()
            self.generation = gen
        s = self.slices.get(tenant)
        if s is not None and s.dim != dim:
            s = None
        grew = False
        if s is None:
            seen = self.searches[tenant] = self.searches.get(tenant, 0) + 1
            if seen < self.load_after * self.backoff.get(tenant, 1):
                return None
            s, grew = self._load(tenant, dim, seq), True
        elif s.seq != seq:
            before = s.n
            s = self._patch(s, seq)
            grew = s is None or s.n != before
        if s is None:
            self.slices.pop(tenant, None)  # a refused reload must not leave the old slice
            return None
        self.slices[tenant] = s
        self.slices.move_to_end(tenant)
        if grew:
            self._evict(keep=tenant)
        return s if tenant in self.slices else None

    def _position(self) -> tuple[int, object]:
        row: Any = self.db.execute(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM ledger), "
            "(SELECT value FROM meta WHERE key = 'generation')"
        ).fetchone()
        return int(row[0]), row[1]

    def _rows(self, where: str, params: Sequence[object]) -> list[Any]:
        rows: list[Any] = self.db.execute(
            f"""SELECT {_META}, v.content, v.state, f.content, f.state_text
                FROM memories m JOIN vectors v ON v.rid = m.rid
                JOIN memories_fts f ON f.rowid = m.rid
                WHERE {where} ORDER BY m.rid""",
            tuple(params),
        ).fetchall()
        return rows

    def _load(self, tenant: str, dim: int, seq: int) -> Slice | None:
        count: Any = self.db.execute(
            "SELECT COUNT(*) FROM memories WHERE tenant = ? AND state != 'ERASED'", (tenant,)
        ).fetchone()
        n = int(count[0])
        if tenant in self.too_big and n >= self.too_big[tenant]:
            return None  # did not fit with as many rows: do not re-read it on every search
        graphs = 2 * (dim + GRAPH_ROW_BYTES) if self.ann.enabled and n >= self.ann.rows else 0
        if grown(n) * (2 * dim * 4 + ROW_OVERHEAD + graphs) > self.budget:
            self.too_big[tenant] = n
            return None
        s = Slice(tenant, dim, seq, capacity=grown(n))
        s.extend(self._rows("m.tenant = ? AND m.state != 'ERASED'", (tenant,)))
        self.loads += 1
        self._graphs(s)
        return s

    def _graphs(self, s: Slice) -> None:
        """Give a large slice its approximate indexes, or bring them up to its rows: the saved
        ones when they match (the rows appended since are added), else built."""
        cfg = self.ann
        if not cfg.enabled or s.n < cfg.rows:
            return
        s.ann = cfg
        rids = s.rids[: s.n]
        for name in ("content", "state"):
            g = s.graphs.get(name)
            vecs = s.matrix(name)
            if g is None and self.files is not None:
                g = self.files.load(s.tenant, name, self.generation, rids, vecs)
                self.graph_loads += g is not None
            if g is None:
                g = Graph.build(name, vecs)
                self.graph_builds += 1
            elif g.n < s.n:
                g.add(vecs[g.n:])
            s.graphs[name] = g
            if self.files is not None and s.n - g.saved > SAVE_TAIL * max(g.saved, 1):
                self.files.save(s.tenant, g, self.generation, rids, vecs)

    def _patch(self, s: Slice, seq: int) -> Slice | None:
        changed: list[Any] = self.db.execute(
            "SELECT DISTINCT l.memory_id, l.event = 'erased' FROM ledger l "
            "WHERE l.seq > ? AND l.tenant = ? AND l.memory_id IS NOT NULL",
            (s.seq, s.tenant),
        ).fetchall()
        if not changed:
            s.seq = seq
            return s
        erased = any(e for _, e in changed)
        if erased or len(changed) > min(RELOAD_FRACTION * max(s.n, 64), MAX_PATCH_ROWS):
            return self._load(s.tenant, s.dim, seq)
        ids = [str(m) for m, _ in changed]
        marks = ",".join("?" * len(ids))
        metas: list[Any] = self.db.execute(
            f"SELECT {_META} FROM memories m WHERE m.id IN ({marks})", tuple(ids)
        ).fetchall()
        new = []
        for row in metas:
            rid = int(row[0])
            i = s.pos.get(rid)
            if i is None:
                new.append(rid)
            else:
                s.set_meta(i, row[1:9])
        if new:
            marks = ",".join("?" * len(new))
            s.extend(self._rows(f"m.rid IN ({marks}) AND m.state != 'ERASED'", new))
            self._graphs(s)
        s.seq = seq
        self.patches += 1
        return s

    def forget(self, tenant: str) -> None:
        """Drop a tenant's slice (after an erasure in this process: it reloads when next used,
        without the erased row); its saved approximate indexes are deleted."""
        self.slices.pop(tenant, None)
        if self.files is not None:
            self.files.discard(tenant)

    def _evict(self, keep: str) -> None:
        mine = self.slices[keep].nbytes if keep in self.slices else 0
        if mine > self.budget:  # alone over budget: drop it, keep the others
            self.too_big[keep] = self.slices.pop(keep).n
            return
        total = self.nbytes()
        while total > self.budget and self.slices:
            tenant = next(iter(self.slices))
            if tenant == keep and len(self.slices) == 1:
                self.too_big[tenant] = self.slices[tenant].n
                del self.slices[tenant]
                return
            if tenant == keep:
                self.slices.move_to_end(tenant)
                continue
            total -= self.slices.pop(tenant).nbytes
            # evicted: it must earn its next load with more searches than the last time, so a
            # working set larger than the budget searches in SQLite instead of reloading
            self.searches[tenant] = 0
            self.backoff[tenant] = min(self.backoff.get(tenant, 1) * 2, MAX_BACKOFF)
            self.evictions += 1

    def verify(self) -> int:
        """Rows of the loaded slices that disagree with the tables (must be zero): missing or
        extra rows, or different eligibility columns. Slices are brought current first."""
        bad = 0
        for tenant in list(self.slices):
            held = self.slices.get(tenant)
            s = self.slice(tenant, held.dim) if held is not None else None
            if s is None:
                continue
            rows: list[Any] = self.db.execute(
                f"SELECT {_META} FROM memories m JOIN vectors v ON v.rid = m.rid "
                "WHERE m.tenant = ? AND m.state != 'ERASED'",
                (tenant,),
            ).fetchall()
            probe = Slice(tenant, s.dim, s.seq, capacity=max(1, len(rows)))
            probe.namespaces, probe.role_keys = dict(s.namespaces), dict(s.role_keys)
            for j, row in enumerate(rows):
                probe.set_meta(j, row[1:9])
                i = s.pos.get(int(row[0]))
                if i is None or i >= s.n:
                    bad += 1
                    continue
                bad += any(
                    getattr(s, col)[i] != getattr(probe, col)[j]
                    for col in ("ns", "state", "classification", "role", "valid_from",
                                "valid_until", "recorded_at", "situational")
                )
            bad += max(0, len(s.pos) - len(rows))
            bad += sum(g.n != s.n for g in s.graphs.values())
            if s.n >= self.ann.rows and self.ann.enabled and len(s.graphs) != 2:
                bad += 1  # a large slice without its graphs
        return bad

    def describe(self) -> dict[str, Any]:
        """What the index holds, for `health`."""
        return {
            "enabled": self.enabled,
            "budget_mb": round(self.budget / 1e6, 1),
            "tenants": len(self.slices),
            "rows": sum(s.n for s in self.slices.values()),
            "mb": round(self.nbytes() / 1e6, 1),
            "loads": self.loads,
            "patches": self.patches,
            "evictions": self.evictions,
            "over_budget_tenants": len(self.too_big),
            "ann": {
                "available": ann_available(),
                "rows": self.ann.rows,
                "tenants": sum(bool(s.graphs) for s in self.slices.values()),
                "graph_mb": round(sum(g.nbytes for s in self.slices.values()
                                      for g in s.graphs.values()) / 1e6, 1),
                "builds": self.graph_builds,
                "loaded": self.graph_loads,
                "directory": str(self.ann.directory) if self.ann.directory else None,
            },
        }

