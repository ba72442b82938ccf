"""API keys: one principal per key, only a hash stored, created / listed / revoked through
the CLI, each change a ledger event; `situated serve` binds loopback unless told otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from situated.cli import app
from situated.memory import Memory
from situated.models import Principal
from situated.store.keys import hash_secret


def run(db: Path, *argv: str) -> list[dict[str, object]]:
    out = CliRunner().invoke(app, ["--db", str(db), "--embedder", "hash", *argv])
    assert out.exit_code == 0, out.output
    return [json.loads(x) for x in out.stdout.splitlines() if x.strip()]


def test_create_list_revoke_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    [made] = run(db, "keys", "create", "--tenant", "acme", "--role", "support",
                 "--clearance", "internal", "--label", "support bot")
    secret = str(made["secret"])
    assert secret.startswith("sit_") and len(secret) > 40
    assert made["tenant"] == "acme" and made["roles"] == ["support"]
    assert made["clearance"] == "internal" and made["actor"] == "key:acme"
    listed = run(db, "keys", "list")
    assert [k["id"] for k in listed] == [made["id"]] and "secret" not in listed[0]
    with Memory(db, embedder="hash") as mem:
        key = mem.store.keys.resolve(secret)
        assert key is not None and key.principal == Principal("acme", {"support"},
                                                                "internal", "key:acme")
        assert mem.store.keys.resolve(secret + "x") is None
        assert "m010_api_keys" in mem.store.migrations()
    for f in tmp_path.iterdir():  # the secret is nowhere on disk, its hash is
        assert secret.encode() not in f.read_bytes(), f
    assert any(hash_secret(secret).encode() in f.read_bytes() for f in tmp_path.iterdir())
    [revoked] = run(db, "keys", "revoke", str(made["id"]), "--reason", "leaked")
    assert revoked["revoked_at"] is not None
    with Memory(db, embedder="hash") as mem:
        assert mem.store.keys.resolve(secret) is None
    assert run(db, "keys", "list", "--tenant", "globex") == []


def test_key_changes_are_ledger_events_of_their_tenant(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    [made] = run(db, "keys", "create", "--tenant", "acme", "--role", "support")
    run(db, "keys", "revoke", str(made["id"]), "--reason", "rotated")
    admin = Principal("acme", {"admin", "support"}, "restricted")
    with Memory(db, embedder="hash") as mem:
        events = mem.ledger(principal=admin)
        assert [(e.event.value, e.data.get("key_id")) for e in reversed(events)] == [
            ("key_created", made["id"]), ("key_revoked", made["id"])]
        assert events[0].reason == "rotated" and events[0].actor == "cli"
        assert all(hash_secret("") not in json.dumps(e.data) for e in events)
        # not another tenant's, nor a lesser principal's of the same tenant
        assert mem.ledger(principal=Principal("globex", {"admin"}, "restricted")) == []
        assert mem.ledger(principal=Principal("acme", {"support"}, "internal")) == []


def test_bad_key_arguments_name_the_argument(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    for argv, field in ((["--tenant", "a b"], "principal"),
                        (["--tenant", "acme", "--clearance", "secret"], "principal"),
                        (["--tenant", "acme", "--label", "x" * 300], "label")):
        out = CliRunner().invoke(app, ["--db", str(db), "--embedder", "hash", "keys",
                                       "create", *argv])
        assert out.exit_code == 1 and f"error: {field}" in out.stderr, out.stderr
    out = CliRunner().invoke(app, ["--db", str(db), "keys", "revoke", "key_missing"])
    assert out.exit_code == 1 and "no api key" in out.stderr
    assert run(db, "keys", "list") == []


def test_serve_binds_loopback_unless_told(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(tmp_path / "s.db"), "--embedder",
         "hash", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 1 and "--allow-remote" in out.stderr


def test_situated_serve_serves_with_keys(tmp_path: Path) -> None:
    """The real command: `situated serve` in its own process, on a free loopback port."""
    import socket
    import time

    import httpx

    db = tmp_path / "served.db"
    [made] = run(db, "keys", "create", "--tenant", "acme", "--role", "support")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", "hash", "serve",
         "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        auth = {"Authorization": f"Bearer {made['secret']}"}
        added = httpx.post(f"{url}/v1/memories", headers=auth, json={"content": "A lesson."})
        assert added.status_code == 200 and added.json()["scope"]["tenant"] == "acme"
        assert httpx.get(f"{url}/v1/stats").status_code == 401
        mcp = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert mcp.status_code == 401
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.stderr is not None and "serving" in proc.stderr.read()
