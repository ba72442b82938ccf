"""ASGI guards in front of the routes: the body size limit (413), the header count (431), and
the API key check and session bounds of the mounted MCP endpoint (401, 400, 429), all answering
with an `ErrorDoc`."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from anyio import to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from situated.http.errors import error_body
from situated.http.sessions import McpLimits, SessionTable

if TYPE_CHECKING:
    from situated.service import Service

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body accepted (an `add_many` of 1000 items of a few KB each fits)."""


@dataclass(frozen=True)
class DoorLimits:
    """Every bound of a request to `situated serve` (README, "Security"): the server's
    (`situated.http.protocol`) and the app's (`HeadLimit`, `BodyLimit`)."""

    head_bytes: int = 16 * 1024
    """Request line and headers together, bytes (431 past it)."""
    head_fields: int = 64
    """Header fields in one request (431 past it)."""
    head_timeout: float = 10.0
    """Seconds from a connection (or the end of the previous response) to a complete head."""
    body_timeout: float = 15.0
    """Longest silence, seconds, while a declared body is being read (408 past it)."""
    keep_alive: float = 5.0
    """Seconds an idle keep-alive connection is kept."""
    connections: int = 512
    """Open connections per server process (503 and closed past it)."""
    body_bytes: int = MAX_BODY_BYTES
    """A request body, bytes (413 past it)."""
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


SESSION_CHARS = 200
"""The longest session header (`X-Situated-Session`, `Mcp-Session-Id`), as the REST door's."""


class HeadLimit:
    """Refuses a request whose head has more than `fields` header fields or `size` bytes
    (431). The server stops reading an unfinished head past `size` (h11's limit,
    `situated.http.protocol`); a complete one that arrived at once is refused here."""

    def __init__(self, app: ASGIApp, fields: int, size: int) -> None:
        self.app = app
        self.fields = fields
        self.size = size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers", ())
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            size += sum(len(k) + len(v) + 4 for k, v in headers)
            if len(headers) > self.fields or size > self.size:
                await _refuse(send, 431, error_body(
                    "TooLarge", f"request head over {self.fields} header fields or "
                    f"{self.size} bytes"), [(b"connection", b"close")])
                return
        await self.app(scope, receive, send)


class KeyGuard:
    """The MCP endpoint behind the same API keys as the routes: no key, no session.

    A session is bound to the key that opened it: the key's id is the SDK's user, whose
    owner check answers a request on another key's session 404, as if it did not exist. The
    session headers are refused past `SESSION_CHARS` as the REST door refuses them (400). New
    sessions are counted per key and per tenant (`SessionTable`, 429 past a cap); `sweep`
    closes the sessions of revoked keys."""

    def __init__(self, app: ASGIApp, service: Service, limits: McpLimits | None = None,
                 stateless: bool = False) -> None:
        self.app = app
        self.service = service
        self.table = None if stateless else SessionTable(limits or McpLimits())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", ()))
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, secret = auth.partition(" ")
        key = None
        if scheme.lower() == "bearer" and secret.strip():
            key = self.service.key_for(secret.strip())  # one indexed read
        if key is None:
            await _refuse(send, 401, error_body("Unauthenticated", "an API key is required: "
                                                "Authorization: Bearer <key>"),
                          [(b"www-authenticate", b"Bearer")])
            return
        for name in (b"mcp-session-id", b"x-situated-session"):
            value = headers.get(name)
            if value is not None and not _session_value(value):
                await _refuse(send, 400, error_body("InvalidInput", f"{name.decode()}: at most "
                                                    f"{SESSION_CHARS} visible ASCII characters"))
                return
        scope = dict(scope)
        scope[PRINCIPAL] = key.principal
        scope["user"] = _owner(key.id)
        if self.table is None:
            await self.app(scope, receive, send)
            return
        sid = headers.get(b"mcp-session-id")
        if sid is None:
            await self._open(key.id, key.principal.tenant, headers.get(b"host", b""),
                             scope, receive, send)
        else:
            await self._on(sid.decode("ascii"), key.id, key.principal.tenant,
                           headers.get(b"host", b""), scope, receive, send)

    async def _open(self, key_id: str, tenant: str, host: bytes, scope: Scope,
                    receive: Receive, send: Send) -> None:
        assert self.table is not None
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)  # no session to open: the SDK answers
            return
        refused = self.table.refusal(key_id, tenant)
        if refused is not None:
            await _refuse(send, 429, error_body("TooManySessions", refused),
                          [(b"retry-after", str(int(self.table.limits.idle)).encode())])
            return
        released = False

        def settle(session_id: str | None) -> None:
            nonlocal released
            if not released:  # once: the SDK's call may last past its response (SSE)
                released = True
                self.table.release(key_id, tenant)  # type: ignore[union-attr]
                if session_id is not None:
                    self.table.opened(session_id, key_id, tenant, host)  # type: ignore[union-attr]

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                sid = dict(message.get("headers", ())).get(b"mcp-session-id")
                ok = message["status"] < 400 and sid is not None
                settle(sid.decode("ascii") if ok and sid is not None else None)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            settle(None)

    async def _on(self, sid: str, key_id: str, tenant: str, host: bytes, scope: Scope,
                  receive: Receive, send: Send) -> None:
        assert self.table is not None
        known = self.table.open.get(sid)
        if known is not None and known.key_id != key_id:
            await self.app(scope, receive, send)  # the SDK's owner check: 404, as for none
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        if known is not None:
            known.busy += 1
        try:
            await self.app(scope, receive, watch)
        finally:
            if known is not None:
                known.busy -= 1
                known.last = time.monotonic()
            answered = status[0] if status else 0
            if answered == 404 or (scope.get("method") == "DELETE" and answered < 400):
                self.table.closed(sid)
            elif known is None and 0 < answered < 400:  # the SDK still had it: count it
                self.table.opened(sid, key_id, tenant, host)

    async def sweep(self) -> None:
        """Forever: close the sessions of revoked keys, forget idle ones."""
        if self.table is None:
            return
        while True:
            await anyio.sleep(self.table.limits.sweep)
            self.table.forget_idle()
            for key_id in self.table.key_ids():
                live = await to_thread.run_sync(self.service.live_key, key_id)
                if live is None:
                    for sid, entry in self.table.of_key(key_id):
                        await self._close(sid, key_id, entry.host)

    async def _close(self, sid: str, key_id: str, host: bytes) -> None:
        """End a session as its owner's DELETE would (through the SDK's own handler)."""
        assert self.table is not None
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError  # unreachable

        async def discard(message: Message) -> None:
            return None

        scope: dict[str, Any] = {
            "type": "http", "method": "DELETE", "path": "/mcp", "raw_path": b"/mcp",
            "root_path": "", "scheme": "http", "query_string": b"", "http_version": "1.1",
            "headers": [(b"host", host), (b"mcp-session-id", sid.encode("ascii"))],
            "client": None, "server": None, "user": _owner(key_id),
        }
        with anyio.move_on_after(10):
            await self.app(scope, receive, discard)
        self.table.closed(sid)


def _session_value(value: bytes) -> bool:
    return 0 < len(value) <= SESSION_CHARS and all(0x21 <= b <= 0x7E for b in value)


def _owner(key_id: str) -> Any:
    """The SDK's user for a key: sessions compare its `client_id`, the key's id."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token=key_id, client_id=key_id, scopes=[]))
