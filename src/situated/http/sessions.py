"""The MCP sessions open at `/mcp`, counted per API key and per tenant (`SessionTable`).

The MCP SDK keeps one table of sessions per process, bounded as a whole (`McpLimits.table`) and
bound to the key that opened each (`KeyGuard` names the key's id as the SDK's user, so a request
on a session with any other key is answered 404, as for a session that does not exist). This
table adds what the SDK lacks: at most `per_key` sessions per key and `per_tenant` per tenant,
well below the process's table, so that one tenant cannot fill it; and the sessions of a
revoked key closed within `sweep` seconds. Idle sessions end after `idle` seconds (the SDK's
own timer; this table forgets them with the same clock).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class McpLimits:
    """The bounds of MCP sessions (README, "Security")."""

    per_key: int = 8
    per_tenant: int = 32
    table: int = 1024
    """Open sessions in one process, all tenants (the SDK refuses past it, 503)."""
    idle: float = 300.0
    """Seconds a session with no request in flight stays open."""
    sweep: float = 2.0
    """Seconds between two looks for revoked keys and idle sessions."""


@dataclass
class Open:
    """One session as the table knows it."""

    key_id: str
    tenant: str
    host: bytes
    last: float = field(default_factory=time.monotonic)
    busy: int = 0


class SessionTable:
    """Counts open sessions per key and per tenant; reserves a place before a session opens."""

    def __init__(self, limits: McpLimits) -> None:
        self.limits = limits
        self.open: dict[str, Open] = {}
        self._pending: dict[tuple[str, str], int] = {}

    def refusal(self, key_id: str, tenant: str) -> str | None:
        """Why a new session of this key may not open now (None: it may; a place is kept for
        it until `opened` or `release`)."""
        self.forget_idle()
        by_key = sum(1 for s in self.open.values() if s.key_id == key_id)
        by_key += sum(n for (k, _), n in self._pending.items() if k == key_id)
        by_tenant = sum(1 for s in self.open.values() if s.tenant == tenant)
        by_tenant += sum(n for (_, t), n in self._pending.items() if t == tenant)
        if by_key >= self.limits.per_key:
            return f"this key has {by_key} open MCP sessions (at most {self.limits.per_key})"
        if by_tenant >= self.limits.per_tenant:
            return (f"this tenant has {by_tenant} open MCP sessions "
                    f"(at most {self.limits.per_tenant})")
        self._pending[key_id, tenant] = self._pending.get((key_id, tenant), 0) + 1
        return None

    def release(self, key_id: str, tenant: str) -> None:
        """The place `refusal` kept is no longer needed."""
        n = self._pending.get((key_id, tenant), 0) - 1
        if n > 0:
            self._pending[key_id, tenant] = n
        else:
            self._pending.pop((key_id, tenant), None)

    def opened(self, session_id: str, key_id: str, tenant: str, host: bytes) -> None:
        self.open[session_id] = Open(key_id, tenant, host)

    def closed(self, session_id: str) -> None:
        self.open.pop(session_id, None)

    def forget_idle(self, now: float | None = None) -> None:
        """Forget the sessions idle past `limits.idle` (the SDK has ended them)."""
        now = time.monotonic() if now is None else now
        for sid in [s for s, o in self.open.items()
                    if o.busy == 0 and now - o.last > self.limits.idle]:
            del self.open[sid]

    def key_ids(self) -> set[str]:
        return {o.key_id for o in self.open.values()}

    def of_key(self, key_id: str) -> list[tuple[str, Open]]:
        return [(sid, o) for sid, o in self.open.items() if o.key_id == key_id]
