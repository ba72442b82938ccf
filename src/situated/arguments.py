"""Checks for the arguments of public entry points: each failure is `InvalidInput` naming the
argument, raised before anything is read or written."""

from __future__ import annotations

import math
import re
from typing import Any

from situated.errors import InvalidInput
from situated.models import Principal, check_unicode

MAX_ID_CHARS = 64
MAX_TEXT_CHARS = 8000
MAX_OFFSET = 10**9
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


def principal(value: Any, field: str = "principal") -> Principal:
    """`value` if it is a `Principal`."""
    if not isinstance(value, Principal):
        raise InvalidInput(field, "a Principal is required")
    return value


def integer(value: Any, field: str, lo: int, hi: int) -> int:
    """An int (not a bool) from `lo` to `hi`."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(field, f"must be an integer from {lo} to {hi}")
    return value


def number(value: Any, field: str) -> float:
    """A finite int or float (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(field, "must be a finite number")
    return float(value)


def text(
    value: Any, field: str, max_chars: int = MAX_TEXT_CHARS, required: bool = False
) -> str:
    """A string of valid Unicode, at most `max_chars` long (non-blank when `required`)."""
    if not isinstance(value, str):
        raise InvalidInput(field, "must be a string")
    if required and not value.strip():
        raise InvalidInput(field, "must be a non-empty string")
    if len(value) > max_chars:
        raise InvalidInput(field, f"longer than {max_chars} characters")
    try:
        check_unicode(value, field)
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None
    return value


def optional_text(value: Any, field: str, max_chars: int = MAX_TEXT_CHARS) -> str | None:
    """None, or `text(value)`."""
    return None if value is None else text(value, field, max_chars)


def identifier(value: Any, field: str) -> str:
    """A memory or recall id: letters, digits, `_` and `-`, at most 64 characters."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(field, "must be an id (letters, digits, _ and -, at most 64)")
    return value
