"""API keys: each bound to exactly one principal, kept only as a hash of its secret.

A key is created, listed and revoked by an operator of the store (the CLI); the HTTP and MCP
doors resolve a presented secret to its principal here and nowhere else. A key's creation and
revocation are ledger events about no memory, in the key's tenant, shown to that tenant's
restricted-cleared admins (the ledger's default scope for such rows, `m005`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from situated.errors import NotFound
from situated.models import Classification, Principal, from_epoch, utcnow
from situated.store.ledger import EventType
from situated.store.scope import System

if TYPE_CHECKING:
    from situated.store.sqlite import Store

SESSION_KEPT = 2 * 24 * 3600.0
"""Seconds a browser session's row is kept (past any cookie's age): older ones are deleted
when a new session begins."""
SECRET_PREFIX = "sit_"
"""Every secret starts with it, so a leaked one is recognisable (and scanners can match it)."""


@dataclass(frozen=True)
class ApiKey:
    """A stored key: its id and the principal it stands for (never the secret)."""

    id: str
    tenant: str
    roles: tuple[str, ...]
    clearance: Classification
    actor: str
    label: str
    created_at: datetime
    created_by: str
    revoked_at: datetime | None

    @property
    def principal(self) -> Principal:
        return Principal(self.tenant, frozenset(self.roles), self.clearance, self.actor)


def hash_secret(secret: str) -> str:
    """SHA-256 of the secret (secrets are 256 random bits: no slow hash is needed)."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


_COLUMNS = ("id, tenant, roles, clearance, actor, label, created_at, created_by, revoked_at")


def _key(row: tuple[object, ...]) -> ApiKey:
    i, t, roles, c, a, label, at, by, rev = row
    return ApiKey(
        str(i), str(t), tuple(json.loads(str(roles))), Classification(int(str(c))), str(a),
        str(label), from_epoch(float(str(at))), str(by),
        None if rev is None else from_epoch(float(str(rev))),
    )


class Keys:
    """The `api_keys` table of one `Store` (`store.keys`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create(self, principal: Principal, *, actor: str, label: str, scope: System
               ) -> tuple[ApiKey, str]:
        """A new key for `principal`; returns it with its secret, which is not kept."""
        key_id = "key_" + secrets.token_hex(8)
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        roles = sorted(principal.roles)
        with self._store.transaction():
            self._store.db.execute(
                f"INSERT INTO api_keys ({_COLUMNS}, secret_hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (key_id, principal.tenant, json.dumps(roles), int(principal.clearance),
                 principal.name, label, now, actor, None, hash_secret(secret)),
            )
            self._store._ledger(
                EventType.KEY_CREATED, principal.tenant, None, None, actor,
                f"api key {key_id} created",
                {"key_id": key_id, "roles": roles, "clearance": principal.clearance.name.lower(),
                 "actor": principal.name, "label": label},
            )
        return self.get(key_id, scope), secret

    def get(self, key_id: str, scope: System) -> ApiKey:
        row = self._store._one(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        if row is None:
            raise NotFound(f"no api key {key_id}")
        return _key(row)

    def list(self, scope: System, tenant: str | None = None) -> list[ApiKey]:
        """Every key (of one tenant), oldest first, revoked ones included."""
        where, params = ("WHERE tenant = ?", (tenant,)) if tenant else ("", ())
        rows = self._store._all(
            f"SELECT {_COLUMNS} FROM api_keys {where} ORDER BY created_at, id", params
        )
        return [_key(r) for r in rows]

    def revoke(self, key_id: str, *, actor: str, reason: str, scope: System) -> ApiKey:
        """Refuse the key from now on (idempotent: a revoked key stays revoked)."""
        with self._store.transaction():
            key = self.get(key_id, scope)
            if key.revoked_at is None:
                self._store.db.execute(
                    "UPDATE api_keys SET revoked_at = ? WHERE id = ?", (utcnow(), key_id)
                )
                self._store._ledger(
                    EventType.KEY_REVOKED, key.tenant, None, None, actor,
                    reason or f"api key {key_id} revoked", {"key_id": key_id},
                )
        return self.get(key_id, scope)

    def resolve(self, secret: str) -> ApiKey | None:
        """The live key whose secret this is, or None (unknown, malformed or revoked)."""
        if not secret.startswith(SECRET_PREFIX) or len(secret) > 200:
            return None
        row = self._store._one(
            f"SELECT {_COLUMNS} FROM api_keys WHERE secret_hash = ? AND revoked_at IS NULL",
            (hash_secret(secret),),
        )
        return None if row is None else _key(row)

    def begin_session(self, key: ApiKey) -> str:
        """A new browser session of `key` (a dashboard login); returns its id."""
        session_id = "bs_" + secrets.token_urlsafe(18)
        now = utcnow()
        with self._store.transaction():
            self._store.db.execute("DELETE FROM browser_sessions WHERE created_at < ?",
                                   (now - SESSION_KEPT,))
            self._store.db.execute(
                "INSERT INTO browser_sessions (id, key_id, tenant, created_at) VALUES (?,?,?,?)",
                (session_id, key.id, key.tenant, now),
            )
        return session_id

    def session_live(self, key: ApiKey, session_id: str) -> bool:
        """Whether `session_id` is a browser session of `key` that has not ended."""
        row = self._store._one(
            "SELECT 1 FROM browser_sessions WHERE id = ? AND key_id = ? AND ended_at IS NULL",
            (session_id, key.id),
        )
        return row is not None

    def end_session(self, key: ApiKey, session_id: str) -> None:
        """End a browser session of `key` (a logout): its cookie is refused from now on."""
        with self._store.transaction():
            self._store.db.execute(
                "UPDATE browser_sessions SET ended_at = ? WHERE id = ? AND key_id = ? "
                "AND ended_at IS NULL", (utcnow(), session_id, key.id),
            )
