"""The API docs pages (`/docs`: Swagger UI, `/redoc`: ReDoc), served whole from this server.

FastAPI's own pages load their scripts from a CDN with floating versions and no integrity
hashes: blank on a machine without internet, and a third party's script on a page next to a
key. Here the scripts and styles are the ones `fastapi-offline` ships (pinned in
`pyproject.toml`), served at `/docs/assets/`, and each page carries a Content-Security-Policy
that allows scripts from this origin only, plus the page's one inline script by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

ASSETS = "/docs/assets"
_FILES = {
    "swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript", "favicon.png": "image/png",
}
_INLINE = re.compile(r"<script>(.*?)</script>", re.S)
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY"}


def csp(html: str) -> str:
    """The policy of a docs page: everything from this origin, inline scripts by hash only;
    inline styles, data: images and blob: workers, which both UIs make at run time."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.group(1).encode()).digest()).decode()
        + "'" for m in _INLINE.finditer(html)
    )
    return ("default-src 'none'; "
            f"script-src 'self' {hashes}".rstrip() + "; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
            "connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
            "frame-ancestors 'none'; form-action 'none'")


def _page(response: HTMLResponse) -> HTMLResponse:
    html = bytes(response.body).decode()
    return HTMLResponse(html, headers={"Content-Security-Policy": csp(html), **_HEADERS})


def mount(app: FastAPI, openapi_url: str = "/openapi.json") -> None:
    """Add `/docs`, `/redoc` and their assets to `app` (create it with `docs_url=None,
    redoc_url=None`)."""
    static = resources.files("fastapi_offline").joinpath("static")
    files = {name: static.joinpath(name).read_bytes() for name in _FILES}
    title = app.title

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return _page(get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png", oauth2_redirect_url=None,
        ))

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _page(get_redoc_html(
            openapi_url=openapi_url, title=f"{title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False,
        ))

    @app.get(ASSETS + "/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name not in files:
            return Response(status_code=404)
        return Response(files[name], media_type=_FILES[name],
                        headers={"Cache-Control": "max-age=86400", **_HEADERS})
