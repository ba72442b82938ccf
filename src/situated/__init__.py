"""situated: experience memory for LLM agents, compiled at recall, not replayed from storage."""

from situated.errors import (
    FeedbackConflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
    SituatedError,
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

__all__ = [
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
    "State",
    "Stats",
    "UsageError",
    "Verdict",
]
