"""Exceptions raised by situated, and the warnings it gives.

Two families, as callers need to tell them apart: `UsageError` is a mistake in how the library was
called (fix the call); `SituatedRuntimeError` is a failure of something the library depends on
(retry, or look at `health`).

    SituatedError
    +-- UsageError
    |   +-- InvalidInput (field, message; also a ValueError)
    |   |   +-- ConditionSyntaxError
    |   +-- NotFound (also a LookupError)
    |   +-- PermissionDenied
    |   +-- FeedbackConflict
    |   +-- EmbedderMismatch
    |   +-- UnknownPlugin (also a KeyError)
    |   +-- MissingExtra (situated.extras; also an ImportError)
    +-- SituatedRuntimeError (also a RuntimeError)
        +-- StoreBusy
        +-- StoreFailure (code)
        +-- ModelError

    SituatedWarning (a UserWarning: message, memory_id)
    +-- UnservableWarning, SupersessionWarning, RedactionWarning, HeldForReviewWarning,
        ProposalRejectedWarning (RefusedWarning), ProbationWarning, DuplicateWarning,
        ModelFallbackWarning
"""

from __future__ import annotations


class SituatedError(Exception):
    """Base class for every error situated raises."""


class UsageError(SituatedError):
    """The caller passed something situated cannot accept."""


class InvalidInput(UsageError, ValueError):
    """A value failed validation; `field` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ConditionSyntaxError(InvalidInput):
    """A condition string could not be parsed."""


class NotFound(UsageError, LookupError):
    """No memory, recall or event with that id is visible to this principal."""


class PermissionDenied(UsageError):
    """The principal is not allowed to perform this operation."""


class FeedbackConflict(UsageError):
    """Feedback for this recall was already given with a different outcome."""


class EmbedderMismatch(UsageError):
    """The store holds vectors from a different embedding model than the one supplied."""


class UnknownPlugin(UsageError, KeyError):
    """No embedder, reconstructor or gate is registered under that name."""


class SituatedRuntimeError(SituatedError, RuntimeError):
    """A dependency of situated failed at run time."""


class StoreBusy(SituatedRuntimeError):
    """The database stayed locked by other writers beyond the retry budget."""


class StoreFailure(SituatedRuntimeError):
    """The database could not be read or written (I/O error, disk full, corruption) and the
    call's transaction was rolled back; `code` names SQLite's result (e.g. `SQLITE_FULL`).

    Retry once the cause is fixed. Had the process crashed at that moment instead, the write
    may have survived whole (its commit record can reach the log before a later step fails):
    retrying is safe, as a repeated `add` or `feedback` changes nothing twice."""

    def __init__(self, message: str, code: str = "") -> None:
        self.code = code
        super().__init__(message)


class ModelError(SituatedRuntimeError):
    """A model endpoint timed out, failed, or returned output that does not validate."""


class SituatedWarning(UserWarning):
    """Base of situated's warnings: something happened that the caller should know (a write
    stored, held, redacted or merged; a configured model that failed over to its fallback).

    Every door hands them to its caller (`situated.notices`): Python as `warnings` at the
    call, the CLI as `warning:` lines on stderr, HTTP and MCP in the response (`warnings`).

    Attributes:
        message: the one-line text.
        memory_id: the memory it is about (the one the caller gets back), if any.
    """

    def __init__(self, message: str, memory_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.memory_id = memory_id

    def __str__(self) -> str:
        return self.message


class UnservableWarning(SituatedWarning):
    """A memory was stored that recall can never serve as written (e.g. a lesson with neither
    a source state nor conditions, or one already expired)."""


class ProbationWarning(SituatedWarning):
    """A proposal was promoted on probation: recall serves it marked unproven, never as the
    only guidance on its surface, until outcomes corroborate it."""


class SupersessionWarning(SituatedWarning):
    """A new fact superseded an older one although it reads like an additional value."""


class RedactionWarning(SituatedWarning):
    """The secrets gate replaced spans of a proposal with `[REDACTED:<kind>]` before storage."""


class HeldForReviewWarning(SituatedWarning):
    """A proposal was stored but held for review (PROPOSED): a gate or the promotion policy
    held it, and recall does not serve it until a reviewer promotes it."""


class ProposalRejectedWarning(SituatedWarning):
    """A gate rejected a proposal: it is kept in the ledger (REJECTED), never recalled."""


class DuplicateWarning(SituatedWarning):
    """A proposal restated a stored memory of the same scope: that memory was reinforced
    and returned; nothing new was stored."""


RefusedWarning = ProposalRejectedWarning
"""Another name of `ProposalRejectedWarning`: a proposal refused at write."""


class ModelFallbackWarning(SituatedWarning):
    """A configured model (reconstructor, distiller, extractor) failed and its fallback ran
    instead; the failure is recorded and counted in `health`."""
