"""`situated serve` as a user starts it (a subprocess on 127.0.0.1, one worker or several), with
raw-socket clients, MCP over plain HTTP and the server's memory, for `tests/test_doors.py`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from serving import free_socket

MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "doors", "version": "1"}}}


@dataclass
class Running:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    db: Path
    log: Path
    workers: int = 1

    def key(self, tenant: str, *roles: str, clearance: str = "internal") -> str:
        """A new key's secret, made by `situated keys create` (as an operator does)."""
        args = ["keys", "create", "--tenant", tenant, "--clearance", clearance, "--json"]
        for role in roles:
            args += ["--role", role]
        out = cli(self.db, *args)
        return str(json.loads(out.splitlines()[-1])["secret"])

    def rss_mib(self) -> float:
        """Resident memory of the server and its worker processes, MiB."""
        root = psutil.Process(self.proc.pid)
        procs = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running()) / 2**20

    def client(self, secret: str | None = None, timeout: float = 30) -> httpx.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)


def cli(db: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", "hash", *args],
        capture_output=True, text=True, timeout=120, env=_env(),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _env() -> dict[str, str]:
    """This process's environment, with the package it imports first on the path (the
    children run the code under test, wherever the test's working directory is)."""
    import situated

    here = str(Path(situated.__file__).resolve().parents[1])
    path = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "HF_HUB_OFFLINE": "1", "SITUATED_EMBEDDER": "hash",
            "PYTHONPATH": path}


@contextmanager
def running(tmp: Path, workers: int = 1) -> Iterator[Running]:
    """`situated serve --workers N` over a new store, until the block ends."""
    db = tmp / f"doors-{workers}.db"
    cli(db, "init")  # creates the store
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    log = tmp / f"serve-{workers}.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "situated", "--db", str(db), "--embedder", "hash", "serve",
             "--port", str(port), "--workers", str(workers)],
            stdout=subprocess.DEVNULL, stderr=err, env=_env(),
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the server did not start: " + log.read_text()[-2000:])
        time.sleep(0.2)
    try:
        yield Running(url, port, proc, db, log, workers)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def closed_within(sock: socket.socket, seconds: float) -> tuple[float, bytes]:
    """(seconds until the server closed the connection, what it sent before); fails past
    `seconds`."""
    sock.settimeout(seconds)
    start = time.monotonic()
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"still open after {seconds} s (sent {got[:80]!r})") from None
    return time.monotonic() - start, got


def mcp_post(client: httpx.Client, body: dict[str, Any], session: str | None = None,
             **headers: str) -> httpx.Response:
    """One JSON-RPC message to `/mcp` (with the session header when given)."""
    h = dict(MCP_HEADERS, **headers)
    if session is not None:
        h["Mcp-Session-Id"] = session
        h["Mcp-Protocol-Version"] = "2025-06-18"
    return client.post("/mcp", json=body, headers=h)


def mcp_open(client: httpx.Client) -> str:
    """A new MCP session's id (initialize, then the initialized notification)."""
    r = mcp_post(client, INIT)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    sid = r.headers["mcp-session-id"]
    n = mcp_post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    assert n.status_code in (200, 202), n.text[:300]
    return sid


def mcp_tool(client: httpx.Client, session: str | None, tool: str, **arguments: Any
             ) -> httpx.Response:
    return mcp_post(client, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}}, session)
