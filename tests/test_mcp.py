"""A real MCP client session (the SDK's client) over stdio to `situated mcp` and over
streamable HTTP to the server `situated serve` runs: tools, remember, recall, feedback, the
inferred-feedback rules, and keys on the HTTP transport."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from serving import serve
from situated.memory import Memory
from situated.models import Principal
from situated.store.ledger import EventType

TOOLS = {"remember", "add_conversation", "recall", "feedback", "inspect", "list_memories",
         "stats", "review_pending", "review_promote", "review_reject"}
ACME = Principal("acme", {"support"}, "internal", "mcp")
FACT = {"content": "Customer 42's plan is annual.", "kind": "fact", "namespace": "accounts",
        "entity": "customer42", "attribute": "plan", "value": "annual",
        "situation": "account review", "facts": {"customer": 42}}
ASK = {"situation": "What plan is customer 42 on?", "facts": {"customer": 42},
       "namespace": "accounts"}

Session = Callable[[], Any]


@asynccontextmanager
async def stdio_session(db: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "situated", "--db", str(db), "--embedder", "hash", "mcp", "--tenant",
              "acme", "--role", "support", "--actor", "mcp", *extra],
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, secret: str | None, session: str | None = None
                       ) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    if session:
        headers["X-Situated-Session"] = session
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client, \
            streamable_http_client(f"{url}/mcp", http_client=client) as (r, w), \
            ClientSession(r, w) as session:
        await session.initialize()
        yield session


async def call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    result: Any = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result


async def exercise(session: ClientSession) -> dict[str, Any]:
    """The flow a model follows; returns what the checks need."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) >= TOOLS
    assert "GUIDED" in (tools["recall"].description or "")  # teaches reading the mode
    stored = (await call(session, "remember", **FACT)).structured_content
    assert stored["state"] == "ACTIVE" and stored["scope"]["tenant"] == "acme"
    first = await call(session, "recall", **ASK)
    briefing = first.structured_content
    assert briefing["mode"] == "GUIDED"
    assert [i["memory_id"] for i in briefing["items"]] == [stored["id"]]
    assert first.content[0].text == briefing["rendered"]  # the text the model reads
    assert stored["id"] in first.content[0].text
    # explicit feedback: no inference for this recall
    fb = (await call(session, "feedback", recall_id=briefing["recall_id"], success=True,
                     used=[stored["id"]])).structured_content
    assert fb["credited"] == [stored["id"]]
    # a later recall with no correction in between: a weak success for the one before it
    second = (await call(session, "recall", **ASK)).structured_content
    third = (await call(session, "recall", **ASK)).structured_content
    # a remember that corrects the served fact: an inferred failure blamed on it
    corrected = (await call(session, "remember", **(FACT | {
        "content": "Customer 42's plan is monthly.", "value": "monthly"}))).structured_content
    stats = (await call(session, "stats")).structured_content
    assert stats["tenant"] == "acme"
    listed = (await call(session, "list_memories", namespace="accounts")).structured_content
    assert {m["id"] for m in listed["result"]} == {stored["id"], corrected["id"]}
    seen = (await call(session, "inspect", memory_id=stored["id"])).structured_content
    bad = await session.call_tool("inspect", {"memory_id": "not an id!"})
    assert bad.is_error and "InvalidInput: memory_id" in bad.content[0].text
    denied = await session.call_tool("review_pending", {})
    assert denied.is_error and "PermissionDenied" in denied.content[0].text
    conv = (await call(session, "add_conversation", **{
        "session": "s-mcp", "namespace": "chat",
        "messages": [{"speaker": "bob", "content": "I prefer email."}]})).structured_content
    assert conv["session"] == "s-mcp" and conv["notes"][0]["content"] == "bob: I prefer email."
    return {"fact": stored["id"], "corrected": corrected["id"], "first": briefing["recall_id"],
            "second": second["recall_id"], "third": third["recall_id"], "seen": seen}


def check_inferred(db: Path, ids: dict[str, Any], who: Principal = ACME) -> None:
    with Memory(db, embedder="hash") as mem:
        events = [e for e in mem.history(ids["fact"], principal=who)
                  if e.event is EventType.FEEDBACK]
        by_recall = {e.recall_id: e for e in events}
        explicit = by_recall[ids["first"]]
        assert explicit.data["credit"] == "credited" and not explicit.data.get("inferred")
        weak = by_recall[ids["second"]]  # recall 3 followed it, uncorrected
        assert weak.data == weak.data | {"credit": "exposed", "inferred": True}
        blamed = by_recall[ids["third"]]  # corrected by the monthly fact
        assert blamed.data == blamed.data | {"credit": "blamed", "inferred": True}
        rec = mem.inspect(ids["fact"], principal=who)
        # inferred outcomes never move the lifecycle counters: one explicit success only
        assert (rec.counters.uses, rec.counters.successes, rec.counters.failures) == (1, 1, 0)
        # weighted less: half a failure in the namespace's utility
        ns = mem.store.namespace_counters([ids["fact"]], "accounts",
                                          _eligibility(who))[ids["fact"]]
        assert ns == (1.5, 1.0)
        assert mem.rebuild().mismatched == ()  # the ledger replays to the same counts


def _eligibility(who: Principal) -> Any:
    from situated.store.scope import Eligibility

    return Eligibility.for_inspection(who)


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(coro)


def test_stdio_session(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"

    async def main() -> dict[str, Any]:
        async with stdio_session(db) as session:
            return await exercise(session)

    ids = run(main)
    check_inferred(db, ids)


def test_stdio_inferred_feedback_can_be_switched_off(tmp_path: Path) -> None:
    db = tmp_path / "off.db"

    async def main() -> None:
        async with stdio_session(db, "--no-inferred-feedback") as session:
            stored = (await call(session, "remember", **FACT)).structured_content
            await call(session, "recall", **ASK)
            await call(session, "recall", **ASK)
            await call(session, "remember", **(FACT | {"content": "Monthly now.",
                                                       "value": "monthly"}))
            with Memory(db, embedder="hash") as mem:
                assert [e for e in mem.history(stored["id"], principal=ACME)
                        if e.event is EventType.FEEDBACK] == []

    run(main)


def test_stdio_needs_a_principal(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "situated", "--db", str(tmp_path / "x.db"),
                          "mcp"], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "tenant" in out.stderr


def test_streamable_http_session_behind_keys(tmp_path: Path) -> None:
    db = tmp_path / "http.db"
    with serve(db) as s:
        secret = s.key("acme", "support", actor="mcp")

        async def main() -> dict[str, Any]:
            async with http_session(s.url, secret) as session:
                return await exercise(session)

        ids = run(main)
        check_inferred(db, ids)

        async def refused(secret: str | None) -> None:
            with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401
                async with http_session(s.url, secret):
                    pass

        run(lambda: refused(None))
        run(lambda: refused("sit_unknown"))
        # the principal comes from the key: globex's key sees none of acme's memories
        other = s.key("globex", "support")

        async def isolated() -> None:
            async with http_session(s.url, other) as session:
                listed = (await call(session, "list_memories")).structured_content
                assert listed["result"] == []
                r = await session.call_tool("inspect", {"memory_id": ids["fact"]})
                assert r.is_error and "NotFound" in r.content[0].text
                b = (await call(session, "recall", **ASK)).structured_content
                assert b["items"] == [] and b["rejected"] == []
                assert json.dumps(b).count(ids["fact"]) == 0

        run(isolated)


def test_stateless_http_for_several_workers_infers_with_a_session_header(tmp_path: Path
                                                                          ) -> None:
    db = tmp_path / "stateless.db"
    with serve(db, mcp_stateless=True) as s:
        secret = s.key("acme", "support", actor="mcp")

        async def main() -> dict[str, Any]:
            async with http_session(s.url, secret, session="agent-run-1") as session:
                return await exercise(session)

        check_inferred(db, run(main))
