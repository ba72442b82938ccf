"""Values every store backend returns: a persisted recall record, a recall candidate's row and a
ledger-replay report.

Backend-neutral (no database import), so `store.contract`, `store.sqlite` and `store.pg` share
them without one backend importing another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from situated.embed.base import Vector
from situated.models import MemoryRecord


@dataclass(frozen=True)
class StoredRecall:
    """A recall record as persisted."""

    id: str
    tenant: str
    at: float
    namespace: str | None
    state_hash: str
    mode: str
    served: tuple[str, ...]
    payload: dict[str, Any]


@dataclass(frozen=True)
class RecallRow:
    """A recall candidate's row: the record, its stored analysis (None unless current) and
    its two vectors (None when the row has none)."""

    record: MemoryRecord
    analysis: bytes | None
    content: Vector | None
    state: Vector | None


@dataclass(frozen=True)
class RebuildReport:
    """The result of replaying the ledger against stored state."""

    checked: int
    mismatched: tuple[str, ...]
    repaired: bool
