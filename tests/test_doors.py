"""The doors under abuse (issue 29): each attack on the real server on 127.0.0.1, one worker and
several, as a check with a bound. Before these changes each of them failed (see the README's
"Security" section for the figures before and after)."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from doors_server import Running, _env, cli, closed_within, mcp_open, mcp_post, mcp_tool, running
from serving import serve
from situated.http.limits import DoorLimits
from situated.http.sessions import McpLimits

CUBIC = "(" + ".a_" * 2666
"""The issue's note: 8,000 characters that `safety`'s tool-mention pattern read cubically."""
WRITE_BOUND = 5.0
"""Seconds an adversarial write at the content limit may take through any door (a normal one
takes about 0.1 s; the cubic pattern took minutes)."""
READ_BOUND = 2.0
"""Seconds another tenant's read, or an unauthenticated one, may wait meanwhile (they waited
15 to 90 s before)."""


@pytest.fixture(scope="module", params=[1, 2], ids=["one-worker", "two-workers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Running:
    with running(tmp_path_factory.mktemp("doors"), workers=request.param) as s:
        yield s  # type: ignore[misc]


# -- 1. every screen bounded: the adversarial write and a concurrent foreign read -----------


def test_an_adversarial_write_stalls_no_other_tenant(server: Running) -> None:
    acme, globex = server.key("acme"), server.key("globex")
    waits: list[float] = []
    done = threading.Event()

    def read() -> None:
        with server.client(globex, timeout=60) as c, server.client(timeout=60) as anyone:
            while not done.is_set():
                for client, path in ((c, "/v1/stats"), (anyone, "/openapi.json")):
                    start = time.monotonic()
                    assert client.get(path).status_code == 200
                    waits.append(time.monotonic() - start)
                time.sleep(0.02)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    took: dict[str, float] = {}
    try:
        with server.client(acme, timeout=WRITE_BOUND * 4) as c:
            for door, send in (
                ("POST /v1/memories", lambda: c.post("/v1/memories", json={
                    "content": CUBIC, "kind": "note"})),
                ("POST /v1/conversations", lambda: c.post("/v1/conversations", json={
                    "messages": [{"speaker": "a", "content": CUBIC[:3001]}] * 3})),
                ("MCP remember", lambda: mcp_tool(c, None if server.workers > 1
                                                  else mcp_open(c), "remember",
                                                  content=CUBIC, kind="note")),
            ):
                start = time.monotonic()
                r = send()
                took[door] = time.monotonic() - start
                assert r.status_code == 200, (door, r.text[:300])
    finally:
        done.set()
        reader.join(60)
    slow = {d: round(t, 2) for d, t in took.items() if t > WRITE_BOUND}
    assert not slow, f"adversarial writes over {WRITE_BOUND} s: {slow}"
    assert waits and max(waits) < READ_BOUND, f"reads waited up to {max(waits):.2f} s"


# -- 2. headers bounded, without a key -------------------------------------------------------


def test_an_oversized_head_is_refused_early_and_memory_stays_flat(server: Running) -> None:
    with server.connect() as sock:  # a whole head past the limit: 431, before any key check
        sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000
                     + b"\r\n\r\n")
        _, answer = closed_within(sock, 10)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
    with server.connect() as sock:  # 8 MiB: answered 431 long before the end, then closed
        start = time.monotonic()
        with contextlib.suppress(OSError):
            sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (8 << 20))
        _, answer = closed_within(sock, 10)
        assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
        assert time.monotonic() - start < 10
    before = server.rss_mib()
    socks = [server.connect() for _ in range(4)]
    sent = [0] * 4
    for i, sock in enumerate(socks):  # four unfinished heads of up to 50 MiB each
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        try:
            for _ in range(50):
                sock.sendall(b"a" * (1 << 20))
                sent[i] += 1
        except OSError:
            pass  # refused: the server stopped reading and closed
    grew = server.rss_mib() - before
    for sock in socks:
        sock.close()
    assert max(sent) < 50, "a 50 MiB head was read whole"
    assert grew < 20, f"the server grew {grew:.0f} MiB holding unfinished heads"
    with server.connect() as sock:  # too many header fields: 431 too
        fields = b"".join(b"X-%d: 1\r\n" % i for i in range(DoorLimits().head_fields + 1))
        sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
        _, answer = closed_within(sock, 10)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]


# -- 3. slow and idle clients time out ---------------------------------------------------------


def test_slow_and_idle_connections_are_closed_within_their_timeouts(server: Running) -> None:
    limits = DoorLimits()
    silent, half, body = server.connect(), server.connect(), server.connect()
    idle = server.connect()  # a keep-alive connection left idle after its answer
    half.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")
    body.sendall(b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")
    idle.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
    results: dict[str, tuple[float, bytes]] = {}

    def watch(name: str, sock: socket.socket, bound: float) -> None:
        with sock:
            results[name] = closed_within(sock, bound)

    threads = [threading.Thread(target=watch, args=a) for a in (  # all at once: one wait
        ("silent", silent, limits.head_timeout + 5), ("half", half, limits.head_timeout + 5),
        ("body", body, limits.body_timeout + 5), ("idle", idle, limits.keep_alive + 5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == {"silent", "half", "body", "idle"}, results
    assert results["silent"][1] == b""
    assert results["half"][1].startswith(b"HTTP/1.1 408")
    assert results["body"][1].startswith(b"HTTP/1.1 408")
    waited, answer = results["idle"]
    assert answer.startswith(b"HTTP/1.1 200") and waited < limits.keep_alive + 3


def test_connections_past_the_cap_are_refused(tmp_path: Path) -> None:
    with serve(tmp_path / "c.db", limits=DoorLimits(connections=4)) as s:
        port = int(s.url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
        try:
            time.sleep(0.3)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
                _, answer = closed_within(extra, 5)
            assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)
        with httpx.Client(base_url=s.url) as c:  # room again once they are gone
            assert c.get("/openapi.json").status_code == 200


# -- 4. session headers validated like the REST one -------------------------------------------


def test_session_headers_are_bounded_on_every_door(server: Running) -> None:
    secret = server.key("acme")
    long = "s" * 300
    with server.client(secret) as c:
        rest = c.post("/v1/recall", json={"state": {"text": "x"}},
                      headers={"X-Situated-Session": long})
        assert rest.status_code == 400
        for header in ("X-Situated-Session", "Mcp-Session-Id"):
            r = mcp_post(c, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         **{header: long})
            assert r.status_code == 400, (header, r.status_code, r.text[:200])
        before = server.rss_mib()
        for i in range(40):  # just under the head limit: refused, nothing kept
            mcp_post(c, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                     **{"X-Situated-Session": f"{i}" + "x" * 12_000})
        assert server.rss_mib() - before < 10


# -- 5-7. MCP sessions: bound to their key, capped, closed on revocation and when idle ---------


MCP_TEST_LIMITS = McpLimits(per_key=3, per_tenant=5, table=50, idle=120, sweep=0.2)


def test_an_mcp_session_answers_only_its_own_key(tmp_path: Path) -> None:
    with serve(tmp_path / "s.db", mcp_limits=MCP_TEST_LIMITS) as s:
        owner, other = s.key("acme", "support"), s.key("globex", "support")
        with s.client(owner) as mine, s.client(other) as theirs:
            sid = mcp_open(mine)
            assert mcp_tool(theirs, sid, "stats").status_code == 404
            get = theirs.get("/mcp", headers={"Mcp-Session-Id": sid,
                                              "Accept": "text/event-stream"})
            assert get.status_code == 404
            gone = theirs.delete("/mcp", headers={"Mcp-Session-Id": sid})
            assert gone.status_code == 404
            r = mcp_tool(mine, sid, "stats")  # still the owner's
            assert r.status_code == 200 and "result" in r.text


def test_mcp_sessions_are_capped_per_key_and_tenant_and_closed(tmp_path: Path) -> None:
    limits = MCP_TEST_LIMITS  # 3 per key, 5 per tenant
    with serve(tmp_path / "s.db", mcp_limits=limits) as s:
        a1, a2, a3, b = s.key("acme"), s.key("acme"), s.key("acme"), s.key("globex")
        with s.client(a1) as c1, s.client(a2) as c2, s.client(a3) as c3, s.client(b) as cb:
            first = [mcp_open(c1) for _ in range(3)]
            assert mcp_post(c1, _init()).status_code == 429  # the key's cap
            second = [mcp_open(c2) for _ in range(2)]
            assert mcp_post(c2, _init()).status_code == 429  # the tenant's cap
            assert mcp_post(c3, _init()).status_code == 429
            assert mcp_open(cb)  # another tenant is not affected
            assert c1.delete("/mcp", headers={"Mcp-Session-Id": first[0]}).status_code == 200
            mcp_open(c3)  # a closed session frees its place
            assert mcp_post(c3, _init()).status_code == 429
            cli_revoke(s.service, a1)
            time.sleep(limits.sweep * 10)  # the sweep closes a revoked key's sessions
            assert mcp_tool(c1, first[1], "stats").status_code == 401
            mcp_open(c3)
            mcp_open(c3)
            assert mcp_tool(c2, second[0], "stats").status_code == 200


def test_an_idle_mcp_session_ends_and_frees_its_place(tmp_path: Path) -> None:
    limits = McpLimits(per_key=1, per_tenant=5, table=50, idle=1.5, sweep=0.2)
    with serve(tmp_path / "s.db", mcp_limits=limits) as s, s.client(s.key("acme")) as c:
        sid = mcp_open(c)
        assert mcp_post(c, _init()).status_code == 429
        time.sleep(limits.idle + 2)
        assert mcp_tool(c, sid, "stats").status_code == 404
        assert mcp_open(c)


def _init() -> dict[str, Any]:
    from doors_server import INIT

    return INIT


def cli_revoke(service: Any, secret: str) -> None:
    key = service.key_for(secret)
    assert key is not None
    service.revoke_key(key.id, actor="test", reason="doors")


def test_stdio_mcp_with_a_key_stops_at_revocation(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    cli(db, "init")
    made = json.loads(cli(db, "keys", "create", "--tenant", "acme", "--json").splitlines()[-1])

    async def main() -> tuple[bool, str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "situated", "--db", str(db), "--embedder", "hash", "mcp", "--key",
                  made["secret"]],
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                 "PYTHONPATH": _env()["PYTHONPATH"]},
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            before = await session.call_tool("remember", {"content": "a note", "kind": "note"})
            assert not before.is_error, before.content
            await anyio.to_thread.run_sync(
                lambda: cli(db, "keys", "revoke", made["id"], "--reason", "left"))
            after: Any = await session.call_tool("remember", {"content": "b", "kind": "note"})
            return bool(after.is_error), after.content[0].text

    refused, text = anyio.run(main)
    assert refused and "revoked" in text


# -- 8. dashboard logout ends the session on the server -----------------------------------------


def test_a_cookie_replayed_after_logout_is_refused(tmp_path: Path) -> None:
    import re

    with serve(tmp_path / "d.db") as s:
        secret = s.key("acme", "reviewer")
        with httpx.Client(base_url=s.url) as browser:
            form = browser.get("/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf is not None
            assert browser.post("/login", data={"key": secret, "csrf": csrf.group(1)}
                                ).status_code == 303
            copied = dict(browser.cookies)
            page = browser.get("/memories").text
            token = re.search(r'name="csrf" value="([^"]+)"', page)
            assert token is not None
            assert browser.post("/logout", data={"csrf": token.group(1)}).status_code == 303
        with httpx.Client(base_url=s.url, cookies=copied) as replay:
            r = replay.get("/memories")
            assert r.status_code == 303 and r.headers["location"] == "/login"


# -- 9. no namespace oracle across clearance ----------------------------------------------------


def test_a_lookalike_namespace_check_reveals_nothing_beyond_clearance(tmp_path: Path) -> None:
    with serve(tmp_path / "n.db") as s:
        top = s.key("acme", clearance="restricted")
        low = s.key("acme", clearance="public")
        with s.client(top) as c:
            made = c.post("/v1/memories", json={"content": "Escalate wire fraud at once.",
                                                "kind": "note", "namespace": "refunds",
                                                "classification": "restricted"})
            assert made.status_code == 200, made.text
        lookalike, unused = "rеfunds", "billing"  # a Cyrillic e
        with s.client(low) as c:
            answers = [c.post("/v1/memories", json={"content": "Offer store credit.",
                                                    "kind": "note", "namespace": ns,
                                                    "classification": "public"})
                       for ns in (lookalike, unused)]
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        with s.client(top) as c:  # who may see the name is still refused a look-alike
            r = c.post("/v1/memories", json={"content": "x y z", "kind": "note",
                                             "namespace": "refundѕ"})
            assert r.status_code == 400 and "looks like" in r.text


# -- 10. offline docs ----------------------------------------------------------------------------


def test_docs_pages_load_no_script_from_elsewhere(server: Running) -> None:
    import re

    with server.client() as c:
        for page in ("/docs", "/redoc"):
            r = c.get(page)
            assert r.status_code == 200
            policy = r.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "http" not in policy
            refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
            assert refs and all(ref.startswith("/") for ref in refs), refs
            for ref in refs:
                assert c.get(ref).status_code == 200, ref


# -- 11. control characters never reach the log ----------------------------------------------


def test_request_values_are_escaped_in_the_log(server: Running) -> None:
    secret = server.key("acme")
    with server.connect() as sock:  # a Host header the MCP door refuses, and logs
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: evil\x85forged.example\r\n"
                     b"Authorization: Bearer " + secret.encode() + b"\r\n"
                     b"Accept: application/json, text/event-stream\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        _, answer = closed_within(sock, 30)
    assert answer.startswith(b"HTTP/1.1 4"), answer[:80]
    time.sleep(0.5)
    log = server.log.read_bytes()
    assert b"evil" in log, log[-2000:]
    assert b"\xc2\x85" not in log and b"\x85" not in log
    assert b"evil\\x85forged" in log
