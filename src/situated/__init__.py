"""situated: experience memory for LLM agents, compiled at recall, not replayed from storage.

The names below are imported on first use (PEP 562), so `import situated` (and the CLI's
`--help`) does not load numpy, the store or the models until something needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from situated.aio import AsyncMemory
    from situated.errors import (
        FeedbackConflict,
        InvalidInput,
        NotFound,
        PermissionDenied,
        SituatedError,
        SituatedWarning,
        UsageError,
    )
    from situated.memory import FeedbackResult, Health, Memory, Stats
    from situated.models import (
        Authority,
        Classification,
        Kind,
        LifecycleState,
        MemoryRecord,
        Principal,
        State,
    )
    from situated.recall.briefing import (
        Briefing,
        GuidanceItem,
        Mode,
        Reconstruction,
        Rejected,
        RejectionReason,
        Scores,
        Verdict,
    )
    from situated.recall.reconstruct import Policy

_HOME = {
    "AsyncMemory": "situated.aio",
    "SituatedWarning": "situated.errors",
    "FeedbackConflict": "situated.errors",
    "InvalidInput": "situated.errors",
    "NotFound": "situated.errors",
    "PermissionDenied": "situated.errors",
    "SituatedError": "situated.errors",
    "UsageError": "situated.errors",
    "FeedbackResult": "situated.memory",
    "Health": "situated.memory",
    "Memory": "situated.memory",
    "Stats": "situated.memory",
    "Authority": "situated.models",
    "Classification": "situated.models",
    "Kind": "situated.models",
    "LifecycleState": "situated.models",
    "MemoryRecord": "situated.models",
    "Principal": "situated.models",
    "State": "situated.models",
    "Briefing": "situated.recall.briefing",
    "GuidanceItem": "situated.recall.briefing",
    "Mode": "situated.recall.briefing",
    "Reconstruction": "situated.recall.briefing",
    "Rejected": "situated.recall.briefing",
    "RejectionReason": "situated.recall.briefing",
    "Scores": "situated.recall.briefing",
    "Verdict": "situated.recall.briefing",
    "Policy": "situated.recall.reconstruct",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'situated' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    """The public names (not this module's own helpers: `Any`, `import_module`, ...)."""
    return sorted(__all__)


__all__ = [
    "AsyncMemory",
    "Authority",
    "Briefing",
    "Classification",
    "FeedbackConflict",
    "FeedbackResult",
    "GuidanceItem",
    "Health",
    "InvalidInput",
    "Kind",
    "LifecycleState",
    "Memory",
    "MemoryRecord",
    "Mode",
    "NotFound",
    "PermissionDenied",
    "Policy",
    "Principal",
    "Reconstruction",
    "Rejected",
    "RejectionReason",
    "Scores",
    "SituatedError",
    "SituatedWarning",
    "State",
    "Stats",
    "UsageError",
    "Verdict",
]
