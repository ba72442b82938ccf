"""The doors under abuse (issue 29, items 1-4): what each attack costs a real `situated serve`.

Run from the repository root (the same script measures any checkout: put its `src` first on
PYTHONPATH to measure that code):

    python benchmarks/doors.py                   # one worker for 1-3, two workers for 4
    python benchmarks/doors.py --json out.json

1. a note of 2 KB (`"(" + ".a_" * 700`) and one at the content limit (8,000 characters) added
   through `POST /v1/memories`, while another tenant polls `GET /v1/stats` and a client without
   a key polls `GET /openapi.json`: the add's time and the longest wait of the others;
2. an 8 MiB header without a key (when the server answers, and what), then four connections
   each sending up to 50 MiB of an unfinished header: how much was sent, and the server's
   growth in resident memory;
3. a silent connection, a half-sent head, and a POST declaring 1,000 bytes that sends one:
   when the server closes each (observed for `--watch` seconds);
4. 40 MCP calls with a 1 MiB `X-Situated-Session` header (two workers, as the issue found it):
   their answers and the server's growth.

Each figure is bounded in time: a request that takes longer than its client's timeout is
reported as such, and the server is stopped at the end whatever it was doing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def situated(db: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "situated", "--db", str(db), "--embedder",
                          "hash", *args], capture_output=True, text=True, timeout=300)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return out.stdout


def key(db: Path, tenant: str) -> str:
    doc = json.loads(situated(db, "keys", "create", "--tenant", tenant, "--json").splitlines()[-1])
    return str(doc["secret"])


@contextmanager
def server(db: Path, workers: int) -> Iterator[tuple[str, int, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", "hash", "serve",
         "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("situated serve did not start")
        time.sleep(0.2)
    try:
        yield url, port, proc
    finally:
        proc.kill()
        proc.wait(30)


def rss_mib(proc: subprocess.Popen[bytes]) -> float:
    root = psutil.Process(proc.pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20


def regex_write(url: str, owner: str, other: str, units: int, timeout: float
                ) -> dict[str, Any]:
    """Item 1: one adversarial add, and the longest wait of a foreign and an anonymous read."""
    waits = {"stats": 0.0, "openapi": 0.0}
    done = threading.Event()

    def poll(path: str, name: str, secret: str | None) -> None:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        with httpx.Client(base_url=url, headers=headers, timeout=timeout + 30) as c:
            while not done.is_set():
                start = time.monotonic()
                with contextlib.suppress(httpx.HTTPError):
                    c.get(path)
                waits[name] = max(waits[name], time.monotonic() - start)
                time.sleep(0.05)

    pollers = [threading.Thread(target=poll, args=a, daemon=True) for a in
               (("/v1/stats", "stats", other), ("/openapi.json", "openapi", None))]
    for p in pollers:
        p.start()
    time.sleep(0.5)
    content = "(" + ".a_" * units
    start = time.monotonic()
    status: Any
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {owner}"},
                          timeout=timeout) as c:
            status = c.post("/v1/memories", json={"content": content, "kind": "note"}
                            ).status_code
    except httpx.TimeoutException:
        status = f"no answer in {timeout:g} s"
    took = time.monotonic() - start
    done.set()
    for p in pollers:
        p.join(timeout + 60)
    return {"chars": len(content), "status": status, "add_s": round(took, 3),
            "stats_wait_s": round(waits["stats"], 3),
            "openapi_wait_s": round(waits["openapi"], 3)}


def headers(port: int, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Item 2: an 8 MiB header without a key; four unfinished 50 MiB heads."""
    out: dict[str, Any] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        start = time.monotonic()
        try:
            s.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (8 << 20)
                      + b"\r\n\r\n")
            answer = s.recv(64)
        except OSError as exc:
            answer = f"connection closed early ({type(exc).__name__})".encode()
        out["8MiB_answer"] = answer.split(b"\r\n")[0].decode("latin-1")
        out["8MiB_s"] = round(time.monotonic() - start, 3)
    before = rss_mib(proc)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(4)]
    sent = []
    for s in socks:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        n = 0
        try:
            for _ in range(50):
                s.sendall(b"a" * (1 << 20))
                n += 1
        except OSError:
            pass
        sent.append(n)
    time.sleep(1)
    out["unfinished_MiB_sent"] = sent
    out["rss_before_MiB"] = round(before)
    out["rss_held_MiB"] = round(rss_mib(proc))
    for s in socks:
        s.close()
    return out


def slow(port: int, watch: float) -> dict[str, Any]:
    """Item 3: when the server closes a silent, a half-head and a short-body connection."""
    def conn(data: bytes) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), timeout=watch)
        if data:
            s.sendall(data)
        return s

    cases = {
        "silent": conn(b""),
        "half_head": conn(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n"),
        "short_body": conn(b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Length: 1000"
                           b"\r\nContent-Type: application/json\r\n\r\n{"),
    }
    out: dict[str, Any] = {}

    def watch_one(name: str, s: socket.socket) -> None:
        start = time.monotonic()
        got = b""
        try:
            while chunk := s.recv(4096):
                got += chunk
            out[name] = f"closed at {time.monotonic() - start:.1f} s " + (
                got.split(b"\r\n")[0].decode("latin-1") or "(nothing sent)")
        except TimeoutError:
            out[name] = f"still open after {watch:g} s"
        except OSError as exc:
            out[name] = f"reset at {time.monotonic() - start:.1f} s ({type(exc).__name__})"
        finally:
            s.close()

    threads = [threading.Thread(target=watch_one, args=c) for c in cases.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(watch + 30)
    return out


def session_header(url: str, secret: str, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Item 4: 40 MCP calls with a 1 MiB session header."""
    before = rss_mib(proc)
    statuses: dict[str, int] = {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "stats", "arguments": {}}}
    with httpx.Client(base_url=url, timeout=60) as c:
        for i in range(40):
            try:
                r = c.post("/mcp", json=body, headers={
                    "Authorization": f"Bearer {secret}",
                    "Accept": "application/json, text/event-stream",
                    "X-Situated-Session": f"{i}-" + "s" * (1 << 20)})
                code = str(r.status_code)
            except httpx.HTTPError as exc:
                code = type(exc).__name__
            statuses[code] = statuses.get(code, 0) + 1
    time.sleep(1)
    return {"answers": statuses, "rss_before_MiB": round(before),
            "rss_after_MiB": round(rss_mib(proc))}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=60, help="client timeout of one add, s")
    ap.add_argument("--watch", type=float, default=30, help="how long slow clients are watched")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)
    import situated as package

    report: dict[str, Any] = {"code": str(Path(package.__file__).parent)}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "doors.db"
        situated(db, "keys", "list")
        owner, other = key(db, "acme"), key(db, "globex")
        with server(db, 1) as (url, port, proc):
            report["1_regex_2KB"] = regex_write(url, owner, other, 700, args.timeout)
            print(json.dumps({"1_regex_2KB": report["1_regex_2KB"]}), flush=True)
            report["1_regex_8000"] = regex_write(url, owner, other, 2666, args.timeout)
            print(json.dumps({"1_regex_8000": report["1_regex_8000"]}), flush=True)
        with server(db, 1) as (url, port, proc):
            report["2_headers"] = headers(port, proc)
            print(json.dumps({"2_headers": report["2_headers"]}), flush=True)
            report["3_slow_clients"] = slow(port, args.watch)
            print(json.dumps({"3_slow_clients": report["3_slow_clients"]}), flush=True)
        with server(db, 2) as (url, port, proc):
            report["4_session_header"] = session_header(url, owner, proc)
            print(json.dumps({"4_session_header": report["4_session_header"]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
