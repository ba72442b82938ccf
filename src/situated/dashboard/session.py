"""Browser sessions for the dashboard: a signed cookie holding an API key's id and a CSRF token.

A person logs in by pasting an API key; the server resolves it to its principal as the bearer
path does (`Service.key_for`), begins a browser session in the store (`browser_sessions`) and
keeps only the key's *id* and the session's id in the cookie, never the secret. Every request
asks the store again (`Service.live_browser_session`), so revoking the key, or logging out
(which ends the session in the store), ends it at the next click: a copy of the cookie replayed
after logout is refused. The cookie is signed (itsdangerous, HMAC-SHA1 over a timestamped
payload), `HttpOnly`, `SameSite=Strict`, `Secure` over https, and expires after `MAX_AGE`.

The signing secret is generated once per store and kept in the store itself (its `secrets`
table, `store.secrets`: made atomically on first use, read by no other path), so every worker
process of every server of one store, SQLite file or PostgreSQL database, and every restart
signs alike. Every POST carries the session's CSRF token
in a form field (`csrf`), compared in constant time; a login rotates the token.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

COOKIE = "situated_session"
MAX_AGE = 12 * 3600
"""Seconds a session lasts after its login (then the key is pasted again)."""


@dataclass(frozen=True)
class Session:
    """What the cookie holds: the CSRF token, and the logged-in key's id (None: anonymous)."""

    csrf: str
    key_id: str | None = None
    session_id: str | None = None
    """The browser session in the store (`Service.begin_browser_session`)."""
    fresh: bool = False
    """Not yet in the browser's cookie (a new anonymous session, or a login): the response
    sets it. An existing cookie is never re-signed, so a session ends `MAX_AGE` after it
    began however busy it is."""

    @classmethod
    def anonymous(cls) -> Session:
        return cls(secrets.token_urlsafe(24), fresh=True)

    @classmethod
    def logged_in(cls, key_id: str, session_id: str) -> Session:
        """A new session for a key (a new CSRF token: nothing from before the login carries
        over)."""
        return cls(secrets.token_urlsafe(24), key_id, session_id, fresh=True)

    def valid_csrf(self, token: str | None) -> bool:
        return isinstance(token, str) and hmac.compare_digest(token.encode(), self.csrf.encode())


class Cookies:
    """Reads and writes the signed session cookie."""

    def __init__(self, secret: bytes) -> None:
        self._signer = URLSafeTimedSerializer(secret, salt="situated-dashboard-session")

    def read(self, request: Request) -> Session | None:
        raw = request.cookies.get(COOKIE)
        if not raw or len(raw) > 1000:
            return None
        try:
            data = self._signer.loads(raw, max_age=MAX_AGE)
        except BadSignature:  # also SignatureExpired
            return None
        if not isinstance(data, dict) or not isinstance(data.get("c"), str):
            return None
        key, sid = data.get("k"), data.get("s")
        if not isinstance(key, str) or not isinstance(sid, str):
            key = sid = None  # a login's cookie names both (an older cookie: anonymous)
        return Session(data["c"], key, sid)

    def write(self, request: Request, response: Response, session: Session) -> None:
        value = self._signer.dumps({"c": session.csrf, "k": session.key_id,
                                    "s": session.session_id})
        response.set_cookie(
            COOKIE, str(value), max_age=MAX_AGE, path="/", httponly=True, samesite="strict",
            secure=request.url.scheme == "https",
        )

    def clear(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
