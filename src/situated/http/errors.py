"""Domain errors as HTTP statuses, with the project's error name and the argument at fault.

400 bad input (`InvalidInput` and its kind, a body that does not parse or validate), 401 no or
unknown or revoked key, 403 a role or clearance the key lacks, 404 not found or not visible,
409 a conflict with stored state (feedback retry that differs, a proposal already reviewed,
another embedder), 413 a body over the limit, 502 a model endpoint failed, 503 the store
stayed locked, 500 the store failed. Every error body is an `ErrorDoc`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from situated import arguments as args
from situated.errors import (
    EmbedderMismatch,
    FeedbackConflict,
    InvalidInput,
    ModelError,
    NotFound,
    PermissionDenied,
    SituatedError,
    StoreBusy,
    UnknownPlugin,
    UsageError,
)
from situated.service.models import ErrorDoc

STATUS: tuple[tuple[type[SituatedError], int], ...] = (
    (InvalidInput, 400),
    (UnknownPlugin, 400),
    (PermissionDenied, 403),
    (NotFound, 404),
    (FeedbackConflict, 409),
    (EmbedderMismatch, 409),
    (UsageError, 409),  # a valid request the stored state refuses (e.g. already reviewed)
    (ModelError, 502),
    (StoreBusy, 503),
)
"""First match wins; any other `SituatedRuntimeError` is 500."""


class Unauthenticated(Exception):
    """No API key, or one that is unknown or revoked."""


class TooLarge(Exception):
    """The request body is over the server's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body larger than {limit} bytes")


def status_of(exc: SituatedError) -> int:
    return next((code for cls, code in STATUS if isinstance(exc, cls)), 500)


def error_body(name: str, message: str, field: str | None = None) -> dict[str, Any]:
    return ErrorDoc(error=name, field=field, message=message).model_dump()


def _situated(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SituatedError)
    field = exc.field if isinstance(exc, InvalidInput) else None
    message = exc.message if isinstance(exc, InvalidInput) else str(exc)
    headers = {"Retry-After": "1"} if isinstance(exc, StoreBusy) else None
    return JSONResponse(error_body(type(exc).__name__, message, field), status_of(exc),
                        headers=headers)


def _validation(_: Request, exc: Exception) -> JSONResponse:
    """A body, query or path that does not validate: 400 naming the argument at fault. An
    argument the request does not take names itself and the accepted ones; a body that is
    not JSON is the `body`'s fault (pydantic's location there is a character offset)."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first: dict[str, Any] = dict(errors[0]) if errors else {"loc": (), "msg": "invalid request"}
    kind = first.get("type")
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    message = " ".join(str(first.get("msg", "invalid")).split())
    if kind == "json_invalid":
        at = first.get("loc", ())[-1:]
        where = f" at character {at[0]}" if at and isinstance(at[0], int) else ""
        detail = (first.get("ctx") or {}).get("error", "")
        return JSONResponse(error_body(
            "InvalidInput", f"not valid JSON{where}" + (f": {detail}" if detail else ""),
            "body"), 400)
    if kind == "unknown_argument":
        ctx = first.get("ctx") or {}
        refused = args.unknown_argument(str(ctx.get("name")),
                                        str(ctx.get("accepted", "")).split(", "))
        field = ".".join([*loc, refused.field])
        return JSONResponse(error_body("InvalidInput", refused.message, field), 400)
    if kind == "extra_forbidden" and loc:  # a query parameter's or a nested model's
        message = "unknown argument"
    return JSONResponse(error_body("InvalidInput", message, ".".join(loc) or "body"), 400)


def _unauthenticated(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(error_body("Unauthenticated", str(exc)), 401,
                        headers={"WWW-Authenticate": "Bearer"})


_HTTP_NAMES = {400: "InvalidInput", 404: "NotFound", 405: "MethodNotAllowed",
               413: "TooLarge"}


def _http(_: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (a body that does not parse, an unknown path or method)."""
    assert isinstance(exc, StarletteHTTPException)
    name = _HTTP_NAMES.get(exc.status_code, "HTTPError")
    field = "body" if exc.status_code == 400 else None
    return JSONResponse(error_body(name, str(exc.detail), field), exc.status_code,
                        headers=getattr(exc, "headers", None))


def install(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(SituatedError, _situated)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(Unauthenticated, _unauthenticated)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorDoc, "description": text}
    for code, text in ((400, "Bad input: `field` names the argument"),
                       (401, "No API key, or an unknown or revoked one"),
                       (403, "The key's principal lacks a role or clearance"),
                       (404, "Not found, or not visible to this key"),
                       (409, "Conflicts with stored state"),
                       (413, "Request body too large"))
}
