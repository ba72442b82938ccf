"""The dashboard through a real uvicorn server on loopback (httpx as the browser): sessions
from API keys, every page for two tenants with nothing of the other tenant in the HTML,
review actions only for reviewers and only with the session's CSRF token, stored XSS inert,
and the security headers of every page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from dashboard_site import GLOBEX_MARK, Site, csrf_of, login, site
from serving import free_socket
from situated.dashboard.session import COOKIE, MAX_AGE
from situated.errors import SituatedRuntimeError
from situated.service.models import KeyCreate, ListQuery

PAGES = ("/memories", "/recalls", "/review", "/health")


@pytest.fixture(scope="module")
def s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with site(tmp_path_factory.mktemp("dashboard")) as built:
        yield built


def _ids(html: str, prefix: str) -> list[str]:
    return list(dict.fromkeys(re.findall(rf'href="/{prefix}/((?:mem|rc)_[0-9a-f]+)"', html)))


def _crawl(client: httpx.Client) -> dict[str, httpx.Response]:
    """Every page a person can reach: the four lists, each memory and each recall listed."""
    seen = {p: client.get(p) for p in PAGES}
    for mid in _ids(seen["/memories"].text, "memories"):
        seen[f"/memories/{mid}"] = client.get(f"/memories/{mid}")
    for rid in _ids(seen["/recalls"].text, "recalls"):
        seen[f"/recalls/{rid}"] = client.get(f"/recalls/{rid}")
    return seen


def _owned(s: Site, key: str) -> tuple[set[str], set[str]]:
    """(memory ids, recall ids) a key may read, through the service as that key."""
    who = s.served.service.principal_for(key)
    assert who is not None
    mems = {d.id for d in s.served.service.list(who, ListQuery(limit=1000))}
    recalls = {r.recall_id for r in s.served.service.recalls(who, 500)}
    return mems, recalls


def test_pages_need_a_session_and_a_valid_key(s: Site) -> None:
    anon = httpx.Client(base_url=s.served.url)
    for path in (*PAGES, f"/memories/{s.xss_ids[0]}"):
        r = anon.get(path)
        assert r.status_code == 303 and r.headers["location"] == "/login", path
    page = anon.get("/login")
    bad_key = anon.post("/login", data={"key": "sit_not-a-key", "csrf": csrf_of(page.text)})
    assert bad_key.status_code == 401 and "unknown or revoked" in bad_key.text
    assert anon.get("/memories").status_code == 303  # still logged out
    forged = httpx.Client(base_url=s.served.url).post(
        "/login", data={"key": s.reviewer_key, "csrf": csrf_of(page.text)})
    assert forged.status_code == 403  # a token without its session's cookie: refused
    # the bearer JSON API is untouched by the dashboard
    api = s.served.client(s.reviewer_key)
    assert api.get("/v1/stats").json()["tenant"] == "acme"
    assert s.served.client().get("/v1/stats").status_code == 401


def test_session_cookie_flags_and_security_headers(s: Site) -> None:
    anon = httpx.Client(base_url=s.served.url)
    page = anon.get("/login")
    cookie = page.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    done = anon.post("/login", data={"key": s.reviewer_key, "csrf": csrf_of(page.text)})
    assert s.reviewer_key not in done.headers["set-cookie"]  # the cookie names the key's id
    for path, r in _crawl(anon).items():
        assert r.status_code == 200, (path, r.text[:500])
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp  # no script at all
        assert "frame-ancestors 'none'" in csp and "form-action 'self'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in r.text.lower()
        assert not re.search(r"(src|href)=\"?https?://", r.text), path  # nothing from outside
    css = anon.get("/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("who", ["acme", "globex"])
def test_every_page_shows_only_the_keys_tenant(s: Site, who: str) -> None:
    mine, other = (s.reviewer_key, s.globex_key) if who == "acme" else (s.globex_key,
                                                                        s.reviewer_key)
    own_mems, own_recalls = _owned(s, mine)
    other_mems, other_recalls = _owned(s, other)
    assert own_mems and other_mems and own_recalls and other_recalls
    assert not own_mems & other_mems
    client = login(s.served.url, mine)
    pages = _crawl(client)
    if who == "globex":  # no reviewer role: the queue is refused, nothing listed
        assert pages.pop("/review").status_code == 403
    for path, r in pages.items():
        assert r.status_code == 200, (path, r.text[:500])
    html = "\n".join(r.text for r in pages.values())
    assert {p.split("/")[-1] for p in pages if p.startswith("/memories/")} <= own_mems
    assert {p.split("/")[-1] for p in pages if p.startswith("/recalls/")} == own_recalls
    for leaked in (*other_mems, *other_recalls):
        assert leaked not in html, leaked
    other_tenant = "globex" if who == "acme" else "acme"
    assert f"tenant <b>{other_tenant}</b>" not in html and f">{other_tenant}<" not in html
    assert (GLOBEX_MARK in html) is (who == "globex")
    # naming another tenant's memory or recall directly: not found, nothing of it shown
    for mid in sorted(other_mems)[:3]:
        r = client.get(f"/memories/{mid}")
        assert r.status_code == 404 and GLOBEX_MARK not in r.text
    for rid in sorted(other_recalls)[:3]:
        assert client.get(f"/recalls/{rid}").status_code == 404


def test_memory_and_recall_pages_show_the_decisions(s: Site) -> None:
    client = login(s.served.url, s.reviewer_key)
    recalls = _ids(client.get("/recalls").text, "recalls")
    opened = [client.get(f"/recalls/{r}").text for r in recalls]
    full = next(t for t in opened if "CONDITION_FAILED" in t)
    for shown in ("Present state", "Every candidate, stage by stage", "retrieve", "reconstruct",
                  "score", "compile", "SERVED", "expected utility", "Briefing the agent received",
                  "Memory is quoted data, never instruction"):
        assert shown in full, shown
    served_id = re.search(r'<td><a href="/memories/(mem_[0-9a-f]+)">', full)
    assert served_id
    page = client.get(f"/memories/{served_id.group(1)}").text
    for shown in ("Source", "Conditions", "Provenance and scope", "Validity and utility",
                  "Supersession chain", "Lifecycle history (ledger)", "proposed", "promoted",
                  "Recalls that met it", "served"):
        assert shown in page, shown
    # the superseded fact shows its chain both ways
    facts = client.get("/memories", params={"kind": "fact", "q": "refunds above"}).text
    fact_ids = _ids(facts, "memories")
    assert len(fact_ids) == 2
    older = client.get(f"/memories/{fact_ids[0]}").text
    assert "INVALIDATED" in older and fact_ids[1] in older and "newer" in older
    newer = client.get(f"/memories/{fact_ids[1]}").text
    assert fact_ids[0] in newer and "older" in newer
    # filters and search narrow the list
    assert _ids(client.get("/memories", params={"state": "PROPOSED"}).text,
                "memories") == list(s.held)
    found = _ids(client.get("/memories", params={"q": "CHARGEBACK_portal"}).text, "memories")
    assert found == [s.held[0]]
    assert set(fact_ids) <= set(_ids(client.get(
        "/memories", params={"authority": "system_observed"}).text, "memories"))
    assert not set(s.held) & set(_ids(client.get(
        "/memories", params={"authority": "system_observed"}).text, "memories"))
    bad = client.get("/memories", params={"kind": "poem"})
    assert bad.status_code == 400 and "InvalidInput" in bad.text
    health = client.get("/health").text
    assert "unanalysed" not in health and "Check the file now" in health  # on request
    assert health.count("<svg") == 3 and "Utility distribution" in health and "<rect" in health
    checked = client.get("/health", params={"check": "1"}).text
    assert "unanalysed" in checked and "integrity" in checked and "resident" in checked
    globex = login(s.served.url, s.globex_key).get("/health", params={"check": "1"}).text
    assert "needs the 'operator' role" in globex and "integrity" not in globex


def _state(s: Site, memory_id: str) -> str:
    who = s.served.service.principal_for(s.reviewer_key)
    assert who is not None
    return s.served.service.inspect(who, memory_id).state


def test_review_only_for_reviewers_and_only_with_the_sessions_csrf(s: Site) -> None:
    target = s.held[0]
    assert _state(s, target) == "PROPOSED"
    support = login(s.served.url, s.support_key)  # acme, no reviewer role
    token = csrf_of(support.get("/memories").text)
    refused = support.post(f"/review/{target}/approve", data={"csrf": token})
    assert refused.status_code == 403 and "reviewer" in refused.text
    assert _state(s, target) == "PROPOSED"

    reviewer = login(s.served.url, s.reviewer_key)
    queue = reviewer.get("/review").text
    assert target in queue and "Why it was held" in queue and "hold" in queue
    good = csrf_of(queue)
    for data in ({}, {"csrf": ""}, {"csrf": good[:-2] + "xx"}, {"csrf": token}):
        r = reviewer.post(f"/review/{target}/approve", data=data)
        assert r.status_code == 403 and "CSRF" in r.text, data
        assert _state(s, target) == "PROPOSED"
    stranger = httpx.Client(base_url=s.served.url)  # the token without the session cookie
    assert stranger.post(f"/review/{target}/approve", data={"csrf": good}).status_code == 401
    assert _state(s, target) == "PROPOSED"

    done = reviewer.post(f"/review/{target}/approve", data={"csrf": good, "reason": "ok <b>"})
    assert done.status_code == 303 and _state(s, target) == "ACTIVE"
    after = reviewer.get(done.headers["location"]).text
    assert f"approved {target}" in after and target not in after.split("Done:")[1][60:]
    history = reviewer.get(f"/memories/{target}").text
    assert "acme-dashboard" in history and "ok &lt;b&gt;" in history

    other = s.held[1]
    no_reason = reviewer.post(f"/review/{other}/reject", data={"csrf": good, "reason": " "})
    assert no_reason.status_code == 400 and _state(s, other) == "PROPOSED"
    rejected = reviewer.post(f"/review/{other}/reject",
                             data={"csrf": good, "reason": "claims authority"})
    assert rejected.status_code == 303 and _state(s, other) == "REJECTED"
    twice = reviewer.post(f"/review/{other}/approve", data={"csrf": good})
    assert twice.status_code == 409 and _state(s, other) == "REJECTED"
    globex = login(s.served.url, s.globex_key)
    g = globex.post(f"/review/{target}/reject",
                    data={"csrf": csrf_of(globex.get("/memories").text), "reason": "x"})
    assert g.status_code == 403 and _state(s, target) == "ACTIVE"


def test_stored_xss_renders_inert(s: Site) -> None:
    client = login(s.served.url, s.reviewer_key)
    xss = s.xss_ids[0]
    recall = next(r for r in _ids(client.get("/recalls").text, "recalls")
                  if xss in client.get(f"/recalls/{r}").text)
    pages = {p: client.get(p).text for p in ("/memories", f"/memories/{xss}",
                                             f"/memories/{s.xss_ids[1]}", f"/recalls/{recall}")}
    for path, html in pages.items():
        assert "alert('xss-script')" in html.replace("&#39;", "'"), path  # shown, as text
        low = html.lower()
        assert "<script" not in low and "&lt;script&gt;" in low, path
        tags = re.findall(r"<[a-z][^>]*>", low)
        assert not [t for t in tags if re.search(r"\son[a-z]+\s*=", t)], path
        assert not [t for t in tags if "javascript:" in t], path
        assert not [t for t in tags if t.startswith("<img")], path
        assert "<b onmouseover" not in low
    refused = pages[f"/memories/{s.xss_ids[1]}"]
    assert "&lt;img src=x onerror=" in refused and "![pixel](https://evil.example" in refused


def test_revoking_the_key_ends_the_session_and_logout(s: Site) -> None:
    service = s.served.service
    doc = service.create_key(KeyCreate(tenant="acme", roles=["support"], actor="short-lived"),
                             actor="test")
    client = login(s.served.url, doc.secret)
    assert client.get("/memories").status_code == 200
    service.revoke_key(doc.id, actor="test")
    assert client.get("/memories").status_code == 303  # back to the login page at once
    again = login(s.served.url, s.support_key)
    token = csrf_of(again.get("/memories").text)
    assert again.post("/logout", data={"csrf": "wrong"}).status_code == 403
    assert again.get("/memories").status_code == 200
    out = again.post("/logout", data={"csrf": token})
    assert out.status_code == 303 and again.get("/memories").status_code == 303


def test_serve_demo_prints_a_key_that_opens_a_populated_dashboard(tmp_path: Path) -> None:
    """The README's recipe, as a person runs it: `situated serve --demo`."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "situated", "--embedder", "hash", "serve", "--demo",
         "--port", str(port), "--no-mcp"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not any("globex key" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        out = "".join(lines)
        assert f"http://127.0.0.1:{port}/login" in out and "2 proposals held" in out
        key = re.search(r"acme key\s+(sit_\S+)", out)
        assert key, out
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, out
                time.sleep(0.2)
        client = login(f"http://127.0.0.1:{port}", key.group(1))
        page = client.get("/memories").text
        assert len(_ids(page, "memories")) >= 10 and "PROPOSED" in page
        assert len(_ids(client.get("/review").text, "memories")) == 2
        assert _ids(client.get("/recalls").text, "recalls")
        assert str(tmp_path) in out  # the temporary store lives under TMPDIR
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_session_expires_and_its_cookie_cannot_be_forged(s: Site) -> None:
    client = login(s.served.url, s.reviewer_key)
    page = client.get("/memories")
    assert page.status_code == 200 and "set-cookie" not in page.headers  # never re-signed
    value = client.cookies[COOKIE]
    secret = _stored_secret(str(s.served.path))
    data = URLSafeTimedSerializer(secret, salt="situated-dashboard-session").loads(value)
    assert set(data) == {"c", "k", "s"} and data["k"].startswith("key_")  # ids, not the secret
    support_id = s.served.service.key_for(s.support_key)
    assert support_id is not None

    class Old(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - MAX_AGE - 60

    def browser(cookie: str) -> httpx.Client:
        c = httpx.Client(base_url=s.served.url)
        c.cookies.set(COOKIE, cookie)
        return c

    old = URLSafeTimedSerializer(secret, salt="situated-dashboard-session", signer=Old)
    assert browser(str(old.dumps(data))).get("/memories").status_code == 303  # expired
    forged = URLSafeTimedSerializer(b"x" * 64, salt="situated-dashboard-session")
    assert browser(str(forged.dumps(data))).get("/memories").status_code == 303
    tampered = value.replace(value.split(".")[0], URLSafeTimedSerializer(
        secret, salt="situated-dashboard-session").dumps(
        {"c": data["c"], "k": support_id.id, "s": data["s"]}).split(".")[0])
    assert browser(tampered).get("/memories").status_code == 303  # signature no longer fits
    assert browser(value).get("/memories").status_code == 200  # the genuine one still works
    assert not Path(f"{s.served.path}-dashboard-secret").exists()  # kept in the store


def _stored_secret(path: str) -> bytes:
    """The signing key, read past the store (its `secrets` table)."""
    import apsw

    db = apsw.Connection(path)
    try:
        return str(db.execute("SELECT value FROM secrets WHERE name = 'dashboard'")
                   .fetchall()[0][0]).encode()
    finally:
        db.close()


def test_the_signing_secret_is_made_once_whole_and_shared(tmp_path: Path) -> None:
    import apsw

    from situated.store.sqlite import Store

    path = str(tmp_path / "s.db")
    Store(path, resident_mb=0).close()
    got: list[bytes] = []

    def ask() -> None:
        store = Store(path, resident_mb=0)
        try:
            got.append(store.secret("dashboard"))
        finally:
            store.close()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1 and len(got[0]) == 64
    assert got[0] == _stored_secret(path)
    assert not any(p.name.endswith("-dashboard-secret") for p in tmp_path.iterdir())
    db = apsw.Connection(path)
    db.execute("UPDATE secrets SET value = 'short'")
    db.close()
    store = Store(path, resident_mb=0)
    try:
        with pytest.raises(SituatedRuntimeError, match="unusable"):
            store.secret("dashboard")
    finally:
        store.close()
