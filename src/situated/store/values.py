"""Values every store backend returns: a persisted recall record and a ledger-replay report.

Backend-neutral (no database import), so `store.contract`, `store.sqlite` and `store.pg` share
them without one backend importing another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
class RebuildReport:
    """The result of replaying the ledger against stored state."""

    checked: int
    mismatched: tuple[str, ...]
    repaired: bool
