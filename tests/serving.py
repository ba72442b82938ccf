"""A real uvicorn server on 127.0.0.1 (a free port) over a temp store, for the door tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from situated.http.app import create_app
from situated.http.limits import DoorLimits
from situated.http.protocol import DoorConfig
from situated.http.sessions import McpLimits
from situated.memory import Memory
from situated.service import Pool, Service
from situated.service.models import KeyCreate


@dataclass
class Served:
    url: str
    service: Service
    path: Path

    def key(self, tenant: str, *roles: str, clearance: str = "internal",
            actor: str | None = None) -> str:
        """A new API key's secret for this principal."""
        doc = self.service.create_key(
            KeyCreate(tenant=tenant, roles=list(roles), clearance=clearance, actor=actor),
            actor="test",
        )
        return doc.secret

    def client(self, secret: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(path: Path, *, mcp: bool = True, inferred: bool = True, max_body: int | None = None,
          mcp_stateless: bool = False, limits: DoorLimits | None = None,
          mcp_limits: McpLimits | None = None, **memory: Any) -> Iterator[Served]:
    """`situated serve`'s app and server (`DoorConfig`: its protocol and limits) in a thread,
    on a real loopback socket (`memory`: more arguments of its `Memory`, e.g. a
    reconstructor)."""
    service = Service(Pool(lambda: Memory(path, embedder="hash", **memory), 2),
                      inferred_feedback=inferred)
    kw = {} if max_body is None else {"max_body": max_body}
    app = create_app(service, mcp=mcp, mcp_stateless=mcp_stateless, mcp_limits=mcp_limits,
                     limits=limits, **kw)
    sock = free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(DoorConfig(app, limits, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", service, path)
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()
        service.close()
