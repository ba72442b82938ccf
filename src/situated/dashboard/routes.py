"""The dashboard's routes, mounted on the HTTP app at `/` (the JSON API keeps `/v1`, `/mcp`,
`/docs`). Server-rendered HTML, Jinja2 with autoescape on every template; plain forms, no
JavaScript. Every page runs as the principal of the session's API key (`session`) and reads
through `Service` (`views`); every POST needs the session's CSRF token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import ValidationError

from situated.dashboard import views
from situated.dashboard.session import Cookies, Session
from situated.errors import InvalidInput, SituatedError
from situated.http.errors import status_of
from situated.models import Principal
from situated.service import Service
from situated.service.models import FindQuery

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}
KINDS = ("lesson", "fact", "preference", "note")
STATES = ("PROPOSED", "ACTIVE", "LOW_VALUE", "ARCHIVED", "INVALIDATED", "REJECTED", "REVOKED")
AUTHORITIES = ("inferred", "user_declared", "system_observed", "externally_verified")
Text = Annotated[str, Query(max_length=200)]
FormText = Annotated[str, Form(max_length=2000)]


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return "" if value is None else str(value)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("situated.dashboard", "templates"),
                      autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True)
    env.filters["when"] = _when
    env.filters["num"] = _number
    env.filters["brief"] = _brief
    return env


def _brief(data: Any) -> str:
    """An event's data as one line of `key: value` (text: autoescaped by the template)."""
    if not isinstance(data, dict):
        return str(data)
    parts = []
    for k, v in data.items():
        if k == "gates" and isinstance(v, list):
            held = [f"{g.get('gate')} {g.get('verdict')}" for g in v
                    if isinstance(g, dict) and g.get("verdict") != "pass"]
            v = ", ".join(held) or "all passed"
        elif isinstance(v, list):
            v = ", ".join(str(x) for x in v) or "-"
        parts.append(f"{k}: {v}")
    return "; ".join(parts)


class Dashboard:
    """The pages over one `Service`."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.env = _environment()
        self.css = resources.files("situated.dashboard").joinpath("static/dashboard.css"
                                                                  ).read_bytes()
        self._cookies: Cookies | None = None
        self._lock = threading.Lock()

    @property
    def cookies(self) -> Cookies:
        with self._lock:
            if self._cookies is None:  # the secret is kept in the store: read it once
                self._cookies = Cookies(self.service.dashboard_secret())
            return self._cookies

    # -- responses --------------------------------------------------------------------------

    def page(self, request: Request, session: Session, template: str, status: int = 200,
             who: Principal | None = None, **context: Any) -> HTMLResponse:
        body = self.env.get_template(template).render(
            who=who, csrf=session.csrf, path=request.url.path, **context
        )
        response = HTMLResponse(body, status_code=status, headers=HEADERS)
        if session.fresh:
            self.cookies.write(request, response, session)
        return response

    def session(self, request: Request) -> Session:
        return self.cookies.read(request) or Session.anonymous()

    def principal(self, session: Session) -> Principal | None:
        if session.key_id is None or session.session_id is None:
            return None
        key = self.service.live_browser_session(session.key_id, session.session_id)
        return None if key is None else key.principal

    def guarded(self, request: Request, render: Callable[[Principal, Session], Response],
                csrf: str | None = None, post: bool = False) -> Response:
        """Run a page as the session's principal: no live session -> the login page; a POST
        without the session's CSRF token -> 403, nothing changed; a domain error -> its
        status, as an HTML page."""
        session = self.session(request)
        who = self.principal(session)
        if who is None:
            if post:
                return self.page(request, Session.anonymous(), "login.html", 401,
                                 error="your session ended: paste your API key again")
            return RedirectResponse("/login", 303, headers=HEADERS)
        if post and not session.valid_csrf(csrf):
            return self.page(request, session, "error.html", 403, who=who,
                             error="this form is stale or forged (CSRF token missing or "
                             "wrong): nothing was changed; reload the page and try again")
        try:
            return render(who, session)
        except SituatedError as exc:
            return self.page(request, session, "error.html", status_of(exc), who=who,
                             error=str(exc), kind=type(exc).__name__)
        except ValidationError as exc:
            wrong = InvalidInput(".".join(str(p) for p in exc.errors()[0]["loc"]) or "query",
                                 exc.errors()[0]["msg"])
            return self.page(request, session, "error.html", 400, who=who, error=str(wrong),
                             kind="InvalidInput")


def mount(app: FastAPI, service: Service) -> Dashboard:
    """Add the dashboard's routes to `app` (not in the OpenAPI schema)."""
    d = Dashboard(service)
    r = APIRouter(include_in_schema=False)

    @r.get("/")
    def home() -> Response:
        return RedirectResponse("/memories", 303, headers=HEADERS)

    @r.get("/static/dashboard.css")
    def css() -> Response:
        return Response(d.css, media_type="text/css",
                        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options":
                                 "nosniff"})

    @r.get("/login")
    def login_form(request: Request) -> Response:
        session = d.session(request)
        return d.page(request, session, "login.html", who=d.principal(session), error=None)

    @r.post("/login")
    def login(request: Request, key: FormText = "", csrf: FormText = "") -> Response:
        session = d.cookies.read(request)
        if session is None or not session.valid_csrf(csrf):
            return d.page(request, Session.anonymous(), "login.html", 403,
                          error="the login form expired or was not sent from this page: "
                          "try again")
        found = service.key_for(key.strip())
        if found is None:
            return d.page(request, session, "login.html", 401,
                          error="unknown or revoked API key")
        response = RedirectResponse("/memories", 303, headers=HEADERS)
        d.cookies.write(request, response,
                        Session.logged_in(found.id, service.begin_browser_session(found)))
        return response

    @r.post("/logout")
    def logout(request: Request, csrf: FormText = "") -> Response:
        session = d.session(request)
        if not session.valid_csrf(csrf):
            return d.page(request, session, "error.html", 403, who=d.principal(session),
                          error="logout needs the form's CSRF token: nothing was changed")
        if session.key_id is not None and session.session_id is not None:
            service.end_browser_session(session.key_id, session.session_id)  # a copy: refused
        response = RedirectResponse("/login", 303, headers=HEADERS)
        d.cookies.clear(response)
        return response

    @r.get("/memories")
    def memories(
        request: Request, q: Text = "", namespace: Text = "", kind: Text = "",
        state: Text = "", authority: Text = "",
        offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    ) -> Response:
        def render(who: Principal, s: Session) -> Response:
            query = FindQuery.model_validate({
                "text": q, "namespace": namespace or None, "kinds": [kind] if kind else None,
                "states": [state] if state else None,
                "authorities": [authority] if authority else None, "offset": offset,
            })
            rows = views.memories(service, who, query)
            return d.page(request, s, "memories.html", who=who, rows=rows, offset=offset,
                          limit=query.limit, kinds=KINDS, states=STATES,
                          authorities=AUTHORITIES, f={"q": q, "namespace": namespace,
                          "kind": kind, "state": state, "authority": authority})
        return d.guarded(request, render)

    @r.get("/memories/{memory_id}")
    def memory(request: Request, memory_id: str) -> Response:
        def render(who: Principal, s: Session) -> Response:
            return d.page(request, s, "memory.html", who=who,
                          **views.memory(service, who, memory_id))
        return d.guarded(request, render)

    @r.get("/recalls")
    def recalls(request: Request,
                offset: Annotated[int, Query(ge=0, le=10**9)] = 0) -> Response:
        def render(who: Principal, s: Session) -> Response:
            return d.page(request, s, "recalls.html", who=who, offset=offset, limit=50,
                          recalls=service.recalls(who, 50, offset))
        return d.guarded(request, render)

    @r.get("/recalls/{recall_id}")
    def recall(request: Request, recall_id: str) -> Response:
        def render(who: Principal, s: Session) -> Response:
            return d.page(request, s, "recall.html", who=who,
                          **views.recall(service, who, recall_id))
        return d.guarded(request, render)

    @r.get("/review")
    def review(request: Request, done: Text = "") -> Response:
        def render(who: Principal, s: Session) -> Response:
            return d.page(request, s, "review.html", who=who, done=done,
                          pending=views.review(service, who))
        return d.guarded(request, render)

    @r.post("/review/{memory_id}/approve")
    def approve(request: Request, memory_id: str, csrf: FormText = "",
                reason: FormText = "") -> Response:
        def act(who: Principal, s: Session) -> Response:
            service.promote(who, memory_id, reason.strip() or "approved")
            return RedirectResponse(f"/review?done=approved+{memory_id}", 303,
                                    headers=HEADERS)
        return d.guarded(request, act, csrf, post=True)

    @r.post("/review/{memory_id}/reject")
    def reject(request: Request, memory_id: str, csrf: FormText = "",
               reason: FormText = "") -> Response:
        def act(who: Principal, s: Session) -> Response:
            service.reject(who, memory_id, reason.strip())
            return RedirectResponse(f"/review?done=rejected+{memory_id}", 303,
                                    headers=HEADERS)
        return d.guarded(request, act, csrf, post=True)

    @r.get("/health")
    def health(request: Request, check: Annotated[bool, Query()] = False) -> Response:
        def render(who: Principal, s: Session) -> Response:
            return d.page(request, s, "health.html", who=who,
                          **views.health(service, who, check))
        return d.guarded(request, render)

    app.include_router(r)
    return d


def _number(v: object) -> str:
    """A score to 3 places, a count whole (`tokens=44`), nothing for None."""
    if v is None:
        return ""
    x = float(v)  # type: ignore[arg-type]
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.3f}"
