"""Checks for the arguments of public entry points: each failure is `InvalidInput` naming the
argument, raised before anything is read or written.

One rule per kind of value, shared by `Memory`, the records and the CLI:

- **text** (content, state text, action, reasons, intent): a `str` of valid Unicode (no unpaired
  surrogate), at most `MAX_TEXT_CHARS` (reasons and intents `MAX_REASON_CHARS`).
- **label** (episode id, consent, entity, attribute, evidence reference, policy version, tool,
  actor): one line: a non-blank `str` of valid Unicode without control characters, at most
  `MAX_LABEL_CHARS`. Lists of labels hold at most `MAX_ITEMS`.
- **id** (memory and recall ids): letters, digits, `_` and `-`, at most `MAX_ID_CHARS`.
- **numbers**: ints (never bools) within stated bounds; floats finite; `limit` 1..`MAX_LIMIT`,
  `offset` 0..`MAX_OFFSET`, `step` 0..`MAX_STEP`; fact values within SQLite's 64-bit range.
- **enum-like strings** (kind, authority, classification, lifecycle states): a member, its name
  or its value, any case.
- **paths**: a `str` or `os.PathLike` naming a file (valid Unicode, no NUL), never bytes.
"""

from __future__ import annotations

import difflib
import inspect
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, TypeVar

from situated.errors import InvalidInput
from situated.models import Principal, check_unicode

MAX_ID_CHARS = 64
MAX_TEXT_CHARS = 8000
MAX_REASON_CHARS = 2000
MAX_LABEL_CHARS = 200
MAX_ITEMS = 100
MAX_LIMIT = 10_000
MAX_OFFSET = 10**9
MAX_STEP = 10**6
MAX_PATH_CHARS = 4096
INT64 = 2**63 - 1
_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
E = TypeVar("E", bound=Enum)


def shown(value: Any, limit: int = 40) -> str:
    """`repr(value)` cut to `limit` characters, for error messages (a refused value may be
    huge, or hold characters a terminal would act on: `repr` escapes them)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def principal(value: Any, field: str = "principal") -> Principal:
    """`value` if it is a `Principal`."""
    if not isinstance(value, Principal):
        raise InvalidInput(field, "a Principal is required")
    return value


def flag(value: Any, field: str) -> bool:
    """True or False (not 0, 1 or "yes")."""
    if not isinstance(value, bool):
        raise InvalidInput(field, "must be true or false")
    return value


def optional_flag(value: Any, field: str) -> bool | None:
    """None, or `flag(value)`."""
    return None if value is None else flag(value, field)


def integer(value: Any, field: str, lo: int, hi: int) -> int:
    """An int (not a bool) from `lo` to `hi`."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidInput(field, f"must be an integer from {lo} to {hi}")
    return value


def optional_integer(value: Any, field: str, lo: int, hi: int) -> int | None:
    """None, or `integer(value)`."""
    return None if value is None else integer(value, field, lo, hi)


def number(value: Any, field: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A finite int or float (not a bool) from `lo` to `hi`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, "must be a finite number")
    try:
        result = float(value)
    except OverflowError:
        raise InvalidInput(field, "must be a finite number") from None
    if not math.isfinite(result) or not lo <= result <= hi:
        raise InvalidInput(field, "must be a finite number" + _bounds(lo, hi))
    return result


def optional_number(value: Any, field: str) -> float | None:
    """None, or `number(value)`."""
    return None if value is None else number(value, field)


def _bounds(lo: float, hi: float) -> str:
    return "" if math.isinf(lo) and math.isinf(hi) else f" from {lo:g} to {hi:g}"


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


def label(value: Any, field: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A one-line reference: non-blank text without control characters."""
    text(value, field, max_chars, required=True)
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput(field, "must be one line without control characters")
    return str(value)


def optional_label(value: Any, field: str, max_chars: int = MAX_LABEL_CHARS) -> str | None:
    """None, or `label(value)`."""
    return None if value is None else label(value, field, max_chars)


def items(value: Any, field: str, max_items: int = MAX_ITEMS) -> list[Any]:
    """The elements of a list, tuple, set or other iterable that is not a string, bytes or a
    mapping (a string is one value, not a list of characters)."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidInput(field, "must be a list")
    out = []
    for n, item in enumerate(value):
        if n >= max_items:
            raise InvalidInput(field, f"more than {max_items} items")
        out.append(item)
    return out


def labels(value: Any, field: str, max_items: int = MAX_ITEMS) -> tuple[str, ...]:
    """A list of `label`s."""
    return tuple(label(v, f"{field}[{n}]") for n, v in enumerate(items(value, field, max_items)))


def identifier(value: Any, field: str) -> str:
    """A memory or recall id: letters, digits, `_` and `-`, at most 64 characters."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(field, "must be an id (letters, digits, _ and -, at most 64)")
    return value


def identifiers(value: Any, field: str, max_items: int = MAX_ITEMS) -> tuple[str, ...]:
    """A list of `identifier`s."""
    return tuple(identifier(v, field) for v in items(value, field, max_items))


def choice(enum_cls: type[E], value: Any, field: str) -> E:
    """A member of `enum_cls` given as itself, its name or its value (any case)."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str) and len(value) <= MAX_LABEL_CHARS:
        key = value.strip().lower()
        for member in enum_cls:
            if key in (member.name.lower(), str(member.value).lower()):
                return member
    allowed = ", ".join(m.name.lower() for m in enum_cls)
    raise InvalidInput(field, f"{shown(value)} is not one of: {allowed}")


def scalar(value: Any, field: str) -> str | int | float | bool | None:
    """A fact value: None, a bool, an int in SQLite's 64-bit range, a finite float, or
    `text`."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return integer(value, field, -INT64 - 1, INT64)
    if isinstance(value, float):
        return number(value, field)
    if isinstance(value, str):
        return text(value, field)
    raise InvalidInput(field, "must be a scalar (string, number, boolean or null)")


def instance(value: Any, field: str, cls: type[Any], what: str) -> Any:
    """`value` if it is a `cls`."""
    if not isinstance(value, cls):
        raise InvalidInput(field, f"must be {what}")
    return value


def has_methods(value: Any, field: str, *names: str) -> Any:
    """`value` if it has a callable attribute of each name (a plugin's small contract)."""
    if not all(callable(getattr(value, n, None)) for n in names):
        raise InvalidInput(field, f"must provide {', '.join(names)}()")
    return value


def path(value: Any, field: str = "path") -> str:
    """A file path given as a `str` or an `os.PathLike` (never bytes, a number or None)."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidInput(field, "must be a str or os.PathLike file path")
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise InvalidInput(field, "must be a str or os.PathLike file path (not bytes)")
    text(raw, field, MAX_PATH_CHARS, required=True)
    if "\x00" in raw:
        raise InvalidInput(field, "holds a NUL character")
    return raw


def callable_of(value: Any, field: str, n_args: int) -> Any:
    """A callable that takes `n_args` positional arguments (checked by its signature, before
    anything is written; one whose signature cannot be read is taken on trust)."""
    if not callable(value):
        raise InvalidInput(field, f"must be a function taking {n_args} argument(s), got "
                           f"{type(value).__name__}")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return value
    try:
        signature.bind(*([None] * n_args))
    except TypeError as exc:
        raise InvalidInput(field, f"must take {n_args} positional argument(s): {exc}") from None
    return value


PRINCIPAL_WORDS = frozenset({"tenant", "roles", "role", "clearance", "principal", "actor"})
"""Arguments a caller may try to name itself with: who acts comes from the door alone."""
RENAMED = {"state": "situation", "situation": "state"}
"""An argument one door spells as another does (MCP's flat `situation` and `facts`, HTTP's and
Python's `state`): the likely one meant."""


def unknown_argument(name: str, accepted: Iterable[str]) -> InvalidInput:
    """The refusal of an argument an entry point does not take: one line naming it and the
    accepted ones, with the likely one meant (a near spelling, another door's name for it),
    or why a principal's name is never an argument."""
    known = list(accepted)
    shown = str(name)[:60]
    if shown in PRINCIPAL_WORDS:
        hint = ("; who acts comes from the door (the CLI's options, the API key, the MCP "
                "server's launch configuration), never from an argument")
    else:
        close = ([RENAMED[shown]] if RENAMED.get(shown) in known else []) or (
            difflib.get_close_matches(shown, known, n=1))
        hint = f"; did you mean {close[0]!r}?" if close else ""
    return InvalidInput(shown, f"unknown argument; accepted: {', '.join(known)}{hint}")
