"""The server's log: every value that came with a request is escaped before it is written.

A request's header or path may carry control and format characters (NEL `\\x85`, a carriage
return, bidi overrides) that would split a log line or disguise it. `escape` writes them as
Python escapes; `EscapingFormatter` applies it to every record's message (its arguments are
where request values go; a traceback keeps its lines), and `log_config` gives uvicorn's loggers
and the root logger (the MCP SDK's) that formatter.
"""

from __future__ import annotations

import logging
import unicodedata
from typing import Any

from uvicorn.logging import DefaultFormatter

_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def escape(text: str) -> str:
    """`text` with every control, format, surrogate, private, unassigned or line-separating
    character written as its Python escape (`\\x85`, `\\u202e`); all else unchanged."""
    if text.isprintable():
        return text
    return "".join(
        c if c == " " or unicodedata.category(c) not in _UNSAFE
        else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


class EscapingFormatter(DefaultFormatter):
    """uvicorn's formatter over the escaped message."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)


def log_config(level: str = "WARNING") -> dict[str, Any]:
    """uvicorn's logging configuration with `EscapingFormatter`, on its loggers and the root."""
    handler = {"formatter": "default", "class": "logging.StreamHandler",
               "stream": "ext://sys.stderr"}
    escaped = {"()": "situated.http.logs.EscapingFormatter",
               "fmt": "%(levelprefix)s %(name)s: %(message)s", "use_colors": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        # uvicorn's names: `use_colors` is set on both when given
        "formatters": {"default": escaped, "access": dict(escaped)},
        "handlers": {"escaped": handler},
        "loggers": {
            "uvicorn": {"handlers": ["escaped"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["escaped"], "level": level, "propagate": False},
        },
        "root": {"handlers": ["escaped"], "level": level},
    }
