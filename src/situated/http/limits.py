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
        if scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)  # no body read: streams (MCP's GET) pass
            return
        chunks: list[bytes] = []
        seen = 0
        while True:  # the whole body first (at most `limit` bytes), then the app
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await _refuse(send, 413, too_large)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class KeyGuard:
    """The MCP endpoint behind the same API keys as the routes: no key, no session."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", ()))
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, secret = auth.partition(" ")
        who = None
        if scheme.lower() == "bearer" and secret.strip():
            who = self.service.principal_for(secret.strip())  # one indexed read
        if who is None:
            await _refuse(send, 401, error_body("Unauthenticated", "an API key is required: "
                                                "Authorization: Bearer <key>"),
                          [(b"www-authenticate", b"Bearer")])
            return
        scope = dict(scope)
        scope[PRINCIPAL] = who
        await self.app(scope, receive, send)
