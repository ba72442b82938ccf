"""The reconstructor contract and registry.

A reconstructor compares one candidate memory (then) with the present situation (now) and
returns a `Reconstruction`. It sees only candidates that passed the deterministic pre-checks.
Built-ins register through `register_reconstructor`, the same door as third-party plugins
(entry-point group `situated.reconstructors`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from situated import arguments as args
from situated.errors import UnknownPlugin
from situated.frozen import quick_init
from situated.models import MemoryRecord, State, _digest
from situated.recall.briefing import Reconstruction

if TYPE_CHECKING:
    from situated.reader import Reading
    from situated.recall.analysis import Analysis


@dataclass(frozen=True)
class Policy:
    """The rules of the present run, given with a recall. Memory can never widen them.

    Args:
        allowed_tools: tools the agent may call; None means no allow-list is enforced.
        prohibited_effects: effects guidance must not ask for (e.g. "delete", "refund").
        version: the policy version; memories recorded under another version are rejected.
    """

    allowed_tools: frozenset[str] | None = None
    prohibited_effects: frozenset[str] = frozenset()
    version: str | None = None

    def __post_init__(self) -> None:
        """Checked as made (a Policy is an argument of `recall`); lists become frozensets."""
        if self.allowed_tools is not None:
            object.__setattr__(self, "allowed_tools", frozenset(
                args.labels(self.allowed_tools, "policy.allowed_tools", args.MAX_LIMIT)))
        object.__setattr__(self, "prohibited_effects", frozenset(
            args.labels(self.prohibited_effects, "policy.prohibited_effects", args.MAX_LIMIT)))
        args.optional_label(self.version, "policy.version")


@quick_init
@dataclass(frozen=True, slots=True)
class ReconstructionInput:
    """Everything a reconstructor may look at for one candidate."""

    record: MemoryRecord
    present: State
    intent: str
    state_similarity: float | None
    content_similarity: float
    relevance: float
    policy: Policy
    embedder: str
    extra: dict[str, Any] = field(default_factory=dict)
    present_fingerprint: str = ""
    """`present.fingerprint()` when the caller has it (a recall computes it once for all its
    candidates); "" to have it computed."""
    analysis: Analysis | None = None
    """What the memory's own text says, read when it was written (`situated.recall.analysis`);
    None to read it from `record` (the built-in stages give the same result either way)."""
    relevance_floor: float | None = None
    """The embedder's `relevance_floor` (None: no floor)."""
    present_reading: Reading | None = None
    """The reader's reading of the present state's text (a recall reads it once for all its
    candidates); None to read it here."""


class Reconstructor(ABC):
    """Decides APPLICABLE | PARTIAL | NOT_APPLICABLE | INSUFFICIENT_EVIDENCE for a candidate."""

    name: str = ""
    version: str = ""
    max_candidates: int | None = None
    """At most this many candidates (by relevance) per recall go to this reconstructor; the rest
    are judged by `rules`. Model-backed reconstructors set it to bound calls per recall."""

    def bind(self, store: Any) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Called once with the store the reconstructor will serve (learned models fit on it)."""

    @abstractmethod
    def reconstruct(self, item: ReconstructionInput) -> Reconstruction:
        """Compare then and now; write guidance for now or a typed rejection."""

    def provenance(self, item: ReconstructionInput, **more: Any) -> dict[str, Any]:
        src = item.record.source.state
        if item.analysis is not None:
            source_hash = item.analysis.source_hash
        else:
            source_hash = state_fingerprint(src) if src else None
        return {
            "reconstructor": self.name,
            "reconstructor_version": self.version,
            "embedder": item.embedder,
            "present_state_hash": item.present_fingerprint or state_fingerprint(item.present),
            "source_state_hash": source_hash,
            "state_similarity": item.state_similarity,
            "content_similarity": item.content_similarity,
            "relevance": item.relevance,
            **more,
        }


def state_fingerprint(state: State) -> str:
    """`state.fingerprint()`, with the hash cached per described state (the same present and
    source states are hashed for every candidate of a recall and across recalls)."""
    return digest_of(state.describe())


@lru_cache(maxsize=8192)
def digest_of(described: str) -> str:
    return _digest(described)


_REGISTRY: dict[str, Callable[..., Reconstructor]] = {}


def register_reconstructor(name: str, factory: Callable[..., Reconstructor]) -> None:
    """Register a reconstructor factory under `name` (replaces an earlier one)."""
    _REGISTRY[name] = factory


def get_reconstructor(name: str, **kwargs: Any) -> Reconstructor:
    """Build the reconstructor registered as `name`."""
    if name not in _REGISTRY:
        for ep in entry_points(group="situated.reconstructors"):
            if ep.name == name:
                register_reconstructor(name, ep.load())
    if name not in _REGISTRY:
        raise UnknownPlugin(
            f"no reconstructor {name!r}; available: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name](**kwargs)


def available_reconstructors() -> list[str]:
    return sorted(_REGISTRY)
