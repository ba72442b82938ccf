"""The MCP door (named `mcp_server` so that `mcp` stays the SDK's package)."""

from __future__ import annotations

from typing import Any

from situated.extras import missing_extra

try:  # the extra that provides it, named in one line when it is missing
    from mcp.server.mcpserver import Context, MCPServer
    from starlette.types import ASGIApp
except ModuleNotFoundError as exc:
    raise missing_extra(exc, __name__) or exc from None

from situated.errors import PermissionDenied
from situated.http.limits import PRINCIPAL
from situated.mcp_server.server import INSTRUCTIONS, PrincipalOf, build_server
from situated.models import Principal
from situated.service import Service


def http_principal(service: Service) -> PrincipalOf:
    """Each request's principal: the one `KeyGuard` found for its API key."""

    def of(ctx: Context) -> Principal:
        request: Any = ctx.request_context.request if ctx.request_context else None
        scope = getattr(request, "scope", None) or {}
        who = scope.get(PRINCIPAL)
        if not isinstance(who, Principal):  # never reached behind KeyGuard
            raise PermissionDenied("no API key for this MCP session")
        return who

    return of


def fixed_principal(who: Principal) -> PrincipalOf:
    """Every call as `who` (stdio: the principal the launch configuration names)."""
    return lambda _ctx: who


def key_principal(service: Service, secret: str) -> PrincipalOf:
    """Every call as the principal of the API key `secret`, asked of the key store at each
    call (stdio with `--key`): a revoked key is refused from its next call on."""

    def of(_ctx: Context) -> Principal:
        who = service.principal_for(secret)
        if who is None:
            raise PermissionDenied("this server's API key is unknown or revoked")
        return who

    return of


def http_handler(server: MCPServer, host: str = "127.0.0.1", stateless: bool = False,
                 idle: float = 300.0, table: int = 1024) -> ASGIApp:
    """The streamable HTTP endpoint of `server`, to mount (its session manager must run in
    the hosting app's lifespan: `server.session_manager.run()`). `stateless`: no MCP
    sessions, for several worker processes (a session lives in one process); else a session
    idle for `idle` seconds ends, and at most `table` are open at once."""
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host,
                                     stateless_http=stateless, session_idle_timeout=idle,
                                     max_sessions=table)
    route: Any = next(r for r in app.routes if getattr(r, "path", None) == "/mcp")
    endpoint: ASGIApp = route.app if hasattr(route, "app") else route.endpoint
    return endpoint


__all__ = ["INSTRUCTIONS", "build_server", "fixed_principal", "http_handler", "http_principal",
           "key_principal"]
