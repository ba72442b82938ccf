"""API keys of the PostgreSQL store: the `store.keys` contract (a key bound to one principal,
only the SHA-256 of its secret kept; creation and revocation are ledger events about no
memory, shown to the tenant's restricted-cleared admins)."""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING

from situated.errors import NotFound
from situated.models import Principal, utcnow
from situated.store.keys import (
    _COLUMNS,
    SECRET_PREFIX,
    SESSION_KEPT,
    ApiKey,
    _key,
    hash_secret,
)
from situated.store.ledger import EventType
from situated.store.pg.writes import no_nul
from situated.store.scope import System

if TYPE_CHECKING:
    from situated.store.pg.store import PostgresStore

_MARKS = ", ".join(["%s"] * 10)


class Keys:
    """The `api_keys` table of one `PostgresStore` (`store.keys`)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def create(self, principal: Principal, *, actor: str, label: str, scope: System
               ) -> tuple[ApiKey, str]:
        """A new key for `principal`; returns it with its secret, which is not kept."""
        no_nul("label", label)
        no_nul("actor", actor)
        key_id = "key_" + secrets.token_hex(8)
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        roles = sorted(principal.roles)
        s = self._store
        with s.transaction():
            s._run(
                f"INSERT INTO api_keys ({_COLUMNS}, secret_hash) VALUES ({_MARKS})",
                (key_id, principal.tenant, json.dumps(roles), int(principal.clearance),
                 principal.name, label, utcnow(), actor, None, hash_secret(secret)),
            )
            s._ledger(
                EventType.KEY_CREATED, principal.tenant, None, None, actor,
                f"api key {key_id} created",
                {"key_id": key_id, "roles": roles, "clearance": principal.clearance.name.lower(),
                 "actor": principal.name, "label": label},
            )
        return self.get(key_id, scope), secret

    def get(self, key_id: str, scope: System) -> ApiKey:
        row = self._store._one(f"SELECT {_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        if row is None:
            raise NotFound(f"no api key {key_id}")
        return _key(row)

    def list(self, scope: System, tenant: str | None = None) -> list[ApiKey]:
        """Every key (of one tenant), oldest first, revoked ones included."""
        where, params = ("WHERE tenant = %s", (tenant,)) if tenant else ("", ())
        rows = self._store._all(
            f"SELECT {_COLUMNS} FROM api_keys {where} ORDER BY created_at, id", params
        )
        return [_key(r) for r in rows]

    def revoke(self, key_id: str, *, actor: str, reason: str, scope: System) -> ApiKey:
        """Refuse the key from now on (idempotent)."""
        s = self._store
        with s.transaction():
            key = self.get(key_id, scope)
            s._lock(key.tenant)
            row = s._one("SELECT revoked_at FROM api_keys WHERE tenant = %s AND id = %s "
                         "FOR UPDATE", (key.tenant, key_id))
            if row is not None and row[0] is None:
                s._run("UPDATE api_keys SET revoked_at = %s WHERE tenant = %s AND id = %s",
                       (utcnow(), key.tenant, key_id))
                s._ledger(
                    EventType.KEY_REVOKED, key.tenant, None, None, actor,
                    reason or f"api key {key_id} revoked", {"key_id": key_id},
                )
        return self.get(key_id, scope)

    def resolve(self, secret: str) -> ApiKey | None:
        """The live key whose secret this is, or None (unknown, malformed or revoked)."""
        if not secret.startswith(SECRET_PREFIX) or len(secret) > 200:
            return None
        row = self._store._one(
            f"SELECT {_COLUMNS} FROM api_keys WHERE secret_hash = %s AND revoked_at IS NULL",
            (hash_secret(secret),),
        )
        return None if row is None else _key(row)

    def begin_session(self, key: ApiKey) -> str:
        """A new browser session of `key` (a dashboard login); returns its id."""
        session_id = "bs_" + secrets.token_urlsafe(18)
        now = utcnow()
        s = self._store
        with s.transaction():
            s._run("DELETE FROM browser_sessions WHERE created_at < %s", (now - SESSION_KEPT,))
            s._run("INSERT INTO browser_sessions (tenant, id, key_id, created_at) "
                   "VALUES (%s, %s, %s, %s)", (key.tenant, session_id, key.id, now))
        return session_id

    def session_live(self, key: ApiKey, session_id: str) -> bool:
        """Whether `session_id` is a browser session of `key` that has not ended."""
        row = self._store._one(
            "SELECT 1 FROM browser_sessions WHERE tenant = %s AND id = %s AND key_id = %s "
            "AND ended_at IS NULL", (key.tenant, session_id, key.id),
        )
        return row is not None

    def end_session(self, key: ApiKey, session_id: str) -> None:
        """End a browser session of `key` (a logout): its cookie is refused from now on."""
        s = self._store
        with s.transaction():
            s._run("UPDATE browser_sessions SET ended_at = %s WHERE tenant = %s AND id = %s "
                   "AND key_id = %s AND ended_at IS NULL",
                   (utcnow(), key.tenant, session_id, key.id))
