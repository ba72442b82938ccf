"""A populated store for the dashboard tests: the demo's scenario (two tenants, recalls,
held proposals) plus stored XSS payloads in both tenants, served by a real uvicorn server."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from serving import Served, serve
from situated.dashboard.demo import fill
from situated.demo import NAMESPACE
from situated.memory import Memory
from situated.models import Principal, State

XSS = (  # passes the write gates: served by recalls
    "Annual refund tip <script>alert('xss-script')</script> then "
    "[click me](javascript:alert('xss-link')) and <a href=\"javascript:alert(1)\">here</a>"
)
XSS_REFUSED = (  # refused at write, still shown on its page
    "Refund tip <script>alert('xss-script')</script> <img src=x onerror=alert('xss-onerror')> "
    "and ![pixel](https://evil.example/track.png) <svg onload=alert(3)>"
)
GLOBEX_MARK = "globex-only-lesson-zebra"


@dataclass
class Site:
    served: Served
    reviewer_key: str
    globex_key: str
    support_key: str
    held: tuple[str, ...]
    xss_ids: tuple[str, ...]
    globex_marker_id: str


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def login(url: str, key: str) -> httpx.Client:
    """A browser-like client with a logged-in session (the session cookie)."""
    client = httpx.Client(base_url=url, timeout=30)
    page = client.get("/login")
    assert page.status_code == 200
    done = client.post("/login", data={"key": key, "csrf": csrf_of(page.text)})
    assert done.status_code == 303 and done.headers["location"] == "/memories", done.text
    return client


@contextmanager
def site(folder: Path) -> Iterator[Site]:
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)  # the demo keeps its store under the test's folder
    try:
        filled = fill("hash")
    finally:
        tempfile.tempdir = saved
    acme = Principal("acme", roles={"support"}, clearance="internal", name="acme-support-bot")
    globex = Principal("globex", roles={"support"}, clearance="internal", name="globex-bot")
    with Memory(filled.path, embedder="hash", reconstructor="rules") as mem:
        xss = [mem.add(XSS, principal=acme, namespace=NAMESPACE,
                       state=State("Annual customer <b onmouseover=alert(2)>asks</b>",
                                   facts={"plan": "annual", "days_since_purchase": 12}),
                       action="<script>alert('xss-action')</script>", success=True).id,
               mem.add(XSS_REFUSED, principal=acme, namespace=NAMESPACE, kind="note").id]
        mark = mem.add(f"{GLOBEX_MARK}: monthly plans get prorated refunds",
                       principal=globex, namespace=NAMESPACE,
                       state=State("Monthly customer asks for a refund",
                                   facts={"plan": "monthly"}))
        mem.recall(State("Annual customer asks for a refund tip",
                         facts={"plan": "annual", "days_since_purchase": 12}),
                   principal=acme, namespace=NAMESPACE, intent="refund <script>tip</script>")
        mem.recall(State(f"{GLOBEX_MARK} monthly refund", facts={"plan": "monthly"}),
                   principal=globex, namespace=NAMESPACE)
    with serve(filled.path) as served:
        support = served.key("acme", "support", actor="acme-support-only")
        yield Site(served, filled.reviewer_key, filled.other_tenant_key, support,
                   filled.held, tuple(xss), mark.id)
