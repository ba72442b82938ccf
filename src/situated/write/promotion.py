"""Promotion policies: a proposal becomes recallable only when a policy (or a reviewer) says so."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from situated.models import MemoryRecord


@dataclass(frozen=True)
class Decision:
    """Promote now, or hold for review, and why."""

    promote: bool
    reason: str


class PromotionPolicy(Protocol):
    """Decides what happens to a proposal that passed the gates."""

    def decide(self, record: MemoryRecord) -> Decision: ...


@dataclass(frozen=True)
class AutoPromote:
    """Promote every proposal at once, except in namespaces listed in `review_namespaces`."""

    review_namespaces: frozenset[str] = field(default_factory=frozenset)

    def __init__(self, review_namespaces: Iterable[str] = ()) -> None:
        object.__setattr__(self, "review_namespaces", frozenset(review_namespaces))

    def decide(self, record: MemoryRecord) -> Decision:
        if record.scope.namespace in self.review_namespaces:
            return Decision(False, f"namespace {record.scope.namespace!r} requires review")
        return Decision(True, "auto-promoted by policy")


@dataclass(frozen=True)
class ReviewAll:
    """Hold every proposal for a reviewer."""

    def decide(self, record: MemoryRecord) -> Decision:
        return Decision(False, "every proposal requires review")
