"""Hermetic test setup: temp working dir, no network beyond loopback, the hash embedder."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from situated import Memory, Principal
from situated.endpoint import resume

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = host == "localhost"
        if not ok:
            raise RuntimeError(f"tests may not touch the network: {address!r}")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no situated.toml or pyproject.toml of the caller's is read
    for name in list(os.environ):  # nor the caller's configuration or keys
        if name.startswith(("SITUATED_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SITUATED_DB", str(tmp_path / "env.db"))
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    resume()  # no endpoint paused by an earlier test's dead port (ports are reused)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hash")
    yield m
    m.close()


@pytest.fixture
def acme() -> Principal:
    return Principal(tenant="acme", roles={"support"}, clearance="internal")


@pytest.fixture
def globex() -> Principal:
    return Principal(tenant="globex", roles={"support"}, clearance="internal")


def snapshot(mem: Memory) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, for byte-identical comparisons."""
    db = mem.store.db
    tables = [
        r[0]
        for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '%_chunks' AND name NOT LIKE '%_rowids' AND name NOT LIKE "
            "'%_vector_chunks%' AND name NOT LIKE '%_metadata%' AND name NOT LIKE '%_info' "
            "AND name NOT LIKE 'memories_fts_%' ORDER BY name"
        )
    ]
    tables.append("recall_log.recalls")  # the recall file, attached
    return {t: sorted(map(tuple, db.execute(f"SELECT * FROM {t}")), key=repr) for t in tables}


pytest_plugins = ("pg_server",)  # the PostgreSQL server fixtures (`tests/pg_server.py`)
