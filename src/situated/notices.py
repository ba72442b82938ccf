"""What a call did that its caller should know, handed to the caller of every door.

A write that was held for review, rejected, redacted or merged into a stored twin, a lesson
that can never be served, a configured model that failed over to its fallback: each is a
`SituatedWarning` raised with `notify`, never printed where the caller cannot see it. Who
receives it depends on who called:

- the Python API: every public `Memory` method that may raise one is `reported`: the notices
  of the call are issued as Python warnings at the caller's line, once the call returns;
- a door (the service layer for HTTP and MCP, the adapters) wraps its call in `collected()`
  and puts the notices in its response (`warnings`); nothing is warned then, and nothing
  crosses from one thread's (or task's) call to another's: the collector is a context
  variable, not the process-wide `warnings` state.

Imports nothing of the package but `errors` (a record-level module).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import ParamSpec, TypeVar

from situated.errors import SituatedWarning

P = ParamSpec("P")
R = TypeVar("R")

_SINK: ContextVar[list[SituatedWarning] | None] = ContextVar("situated_notices", default=None)


def notify(notice: SituatedWarning) -> None:
    """Hand `notice` to the caller of the current call (warned at once outside any call)."""
    sink = _SINK.get()
    if sink is not None:
        sink.append(notice)
    else:
        warnings.warn(notice, stacklevel=2)


@contextmanager
def collected() -> Iterator[list[SituatedWarning]]:
    """Every notice raised inside, in order, into the list yielded (and none warned)."""
    sink: list[SituatedWarning] = []
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def reported(fn: Callable[P, R]) -> Callable[P, R]:
    """A public method whose notices are warned at its caller's line when it returns or
    raises (`summarised`; inside an enclosing `collected()` or `reported` call, they go to
    that one instead)."""

    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if _SINK.get() is not None:
            return fn(*args, **kwargs)
        with collected() as notices:
            try:
                return fn(*args, **kwargs)
            finally:  # what was written before an error was written: its notices too
                for notice in summarised(notices):
                    warnings.warn(notice, stacklevel=2)

    return call


MAX_EACH = 10
"""Notices of one kind a person is shown one by one (`summarised`); the rest are counted."""


def summarised(notices: list[SituatedWarning], each: int = MAX_EACH) -> list[SituatedWarning]:
    """At most `each` notices of each kind, in order, then one counting the rest of that kind
    (a bulk write may raise thousands: a reader is told how many, not flooded)."""
    by_kind: dict[type[SituatedWarning], int] = {}
    out: list[SituatedWarning] = []
    for notice in notices:
        if notice.message.startswith(MORE):  # already a count of the rest
            out.append(notice)
            continue
        n = by_kind[type(notice)] = by_kind.get(type(notice), 0) + 1
        if n <= each:
            out.append(notice)
    for kind, n in by_kind.items():
        if n > each:
            out.append(more(kind, n - each))
    return out


MORE = "... and "


def more(kind: type[SituatedWarning], n: int) -> SituatedWarning:
    """The notice that counts `n` more notices of `kind` not shown one by one."""
    return kind(f"{MORE}{n} more {kind.__name__} like these")


def lines(notices: list[SituatedWarning]) -> list[str]:
    """The notices as the one-line texts a document carries, each once, in order."""
    return list(dict.fromkeys(" ".join(str(n).split()) for n in notices))
