"""ASGI guards in front of the routes: the body size limit (413) and the API key check for
the mounted MCP endpoint (401), both answering with an `ErrorDoc`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from situated.http.errors import error_body

if TYPE_CHECKING:
    from situated.service import Service

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body accepted (an `add_many` of 1000 items of a few KB each fits)."""
PRINCIPAL = "situated.principal"
"""Where `KeyGuard` leaves the key's principal in the ASGI scope."""


async def _refuse(send: Send, status: int, body: dict[str, Any],
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": data})


class BodyLimit:
    """Refuses a request whose body is over `limit` bytes, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        too_large = error_body("TooLarge", f"request body larger than {self.limit} bytes")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _refuse(send, 413, too_large)
            return
        seen = 0
        started = False

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _Over()
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except _Over:
            if not started:
                await _refuse(send, 413, too_large)


class _Over(Exception):
    pass


class KeyGuard:
    """The MCP endpoint behind the same API keys as the routes: no key, no session."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from anyio import to_thread

        headers = dict(scope.get("headers", ()))
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, secret = auth.partition(" ")
        who = None
        if scheme.lower() == "bearer" and secret.strip():
            who = await to_thread.run_sync(self.service.principal_for, secret.strip())
        if who is None:
            await _refuse(send, 401, error_body("Unauthenticated", "an API key is required: "
                                                "Authorization: Bearer <key>"),
                          [(b"www-authenticate", b"Bearer")])
            return
        scope = dict(scope)
        scope[PRINCIPAL] = who
        await self.app(scope, receive, send)
