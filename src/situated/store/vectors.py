"""The vector index behind a small interface: exact filtered KNN with sqlite-vec.

Why sqlite-vec: vectors live in the same SQLite file and the same transactions as records and
ledger events (a crash never leaves a record without its vector), and `vec0` applies the
eligibility filter *inside* the KNN scan: tenant is the partition key, the other gates are
metadata columns, so results are exact for the eligible rows rather than post-filtered. An
approximate index can be added later by implementing `VectorIndex`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import apsw
import numpy as np
import sqlite_vec

from situated.embed.base import Vector

FIELDS = ("content", "state")
"""Each memory has two vectors: its lesson text and its source state."""

MAX_K = 4096  # vec0's own limit on k


@dataclass(frozen=True)
class VectorMeta:
    """The eligibility columns mirrored into the index."""

    tenant: str
    namespace: str
    state: str
    classification: int
    role_key: str
    valid_from: float
    valid_until: float
    recorded_at: float


class VectorIndex(Protocol):
    """What the store needs from a vector index."""

    def ensure(self, dim: int) -> None: ...
    def add(self, rid: int, vectors: dict[str, Vector], meta: VectorMeta) -> None: ...
    def update_meta(self, rid: int, meta: VectorMeta) -> None: ...
    def remove(self, rid: int) -> None: ...
    def search(
        self, field: str, query: Vector, k: int, where: str, params: Sequence[object]
    ) -> list[tuple[int, float]]: ...
    def vectors(self, field: str, rids: Sequence[int]) -> dict[int, Vector]: ...


def load_extension(db: apsw.Connection) -> None:
    """Load sqlite-vec into an apsw connection."""
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    db.enable_load_extension(False)


class SqliteVecIndex:
    """`VectorIndex` over two `vec0` tables (one per field) in the store's own database."""

    def __init__(self, db: apsw.Connection) -> None:
        self.db = db
        self.dim: int | None = None
        self._ready()

    def _ready(self) -> bool:
        """Whether the vector tables exist (re-read while unknown: another process may have
        created them after this connection opened)."""
        if self.dim is None:
            row: Any = self.db.execute(
                "SELECT value FROM meta WHERE key = 'vector_dim'"
            ).fetchone()
            if row:
                self.dim = int(row[0])
        return self.dim is not None

    def ensure(self, dim: int) -> None:
        if self._ready():
            return
        for f in FIELDS:
            self.db.execute(
                f"""CREATE VIRTUAL TABLE IF NOT EXISTS vec_{f} USING vec0 (
                    rid INTEGER PRIMARY KEY,
                    tenant TEXT PARTITION KEY,
                    namespace TEXT, state TEXT, classification INTEGER, role_key TEXT,
                    valid_from FLOAT, valid_until FLOAT, recorded_at FLOAT,
                    embedding FLOAT[{int(dim)}] distance_metric=cosine
                )"""
            )
        self.db.execute("INSERT INTO meta (key, value) VALUES ('vector_dim', ?)", (str(dim),))
        self.dim = dim

    def add(self, rid: int, vectors: dict[str, Vector], meta: VectorMeta) -> None:
        for f in FIELDS:
            self.db.execute(
                f"""INSERT INTO vec_{f} (rid, tenant, namespace, state, classification, role_key,
                    valid_from, valid_until, recorded_at, embedding)
                    VALUES (?,?,?,?,?,?,?,?,?,?)""",
                (rid, *_meta_tuple(meta), _blob(vectors[f])),
            )
        self.db.execute(
            "INSERT INTO vectors (rid, content, state) VALUES (?, ?, ?)",
            (rid, _blob(vectors["content"]), _blob(vectors["state"])),
        )

    def update_meta(self, rid: int, meta: VectorMeta) -> None:
        if not self._ready():
            return
        for f in FIELDS:
            self.db.execute(
                f"""UPDATE vec_{f} SET namespace = ?, state = ?, classification = ?,
                    role_key = ?, valid_from = ?, valid_until = ?, recorded_at = ?
                    WHERE rid = ?""",
                (*_meta_tuple(meta)[1:], rid),
            )

    def remove(self, rid: int) -> None:
        if not self._ready():
            return
        for f in FIELDS:
            self.db.execute(f"DELETE FROM vec_{f} WHERE rid = ?", (rid,))
        self.db.execute("DELETE FROM vectors WHERE rid = ?", (rid,))

    def search(
        self, field: str, query: Vector, k: int, where: str, params: Sequence[object]
    ) -> list[tuple[int, float]]:
        """The k nearest eligible rows as (rid, cosine similarity), best first."""
        if not self._ready() or field not in FIELDS:
            return []
        k = max(1, min(k, MAX_K))
        rows: list[Any] = self.db.execute(
            f"""SELECT rid, distance FROM vec_{field}
                WHERE embedding MATCH ? AND k = ? AND {where}
                ORDER BY distance""",
            (_blob(query), k, *params),
        ).fetchall()
        # a zero vector (a text without a token the embedder knows, e.g. "!!!") has no cosine
        # distance: sqlite-vec returns NULL; similarity 0, as the resident index computes it
        return [(int(rid), 0.0 if dist is None else 1.0 - float(dist)) for rid, dist in rows]

    def vectors(self, field: str, rids: Sequence[int]) -> dict[int, Vector]:
        if not rids or not self._ready():
            return {}
        if field not in FIELDS:
            return {}
        marks = ",".join("?" * len(rids))
        rows: list[Any] = self.db.execute(
            f"SELECT rid, {field} FROM vectors WHERE rid IN ({marks})", tuple(rids)
        ).fetchall()
        return {int(r): np.frombuffer(b, dtype=np.float32) for r, b in rows}


def _meta_tuple(m: VectorMeta) -> tuple[object, ...]:
    return (
        m.tenant, m.namespace, m.state, m.classification, m.role_key,
        m.valid_from, m.valid_until, m.recorded_at,
    )


def _blob(v: Vector) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float32).tobytes()
