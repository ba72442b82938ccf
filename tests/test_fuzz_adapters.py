"""Fuzz the doors agents reach situated through in Python: `BoundMemory` (what the LangChain,
LangGraph and OpenAI Agents adapters call), the framework-free tools, and `AsyncMemory`.

The property is `test_fuzz`'s: a malformed argument raises a `SituatedError` (never a
`TypeError`, `AttributeError`, a pydantic or an SQLite error), and after it the store is
unchanged. The same catalogue of values (`test_fuzz.MALFORMED`) and seeded store
(`test_fuzz.World`) are used, so a value that breaks one door is tried on all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from situated import AsyncMemory
from situated.adapters import BoundMemory
from situated.adapters import tools as agent_tools
from situated.errors import SituatedError
from test_fuzz import ADMIN, MALFORMED, MISSING, World, _crash, _short


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    try:
        yield w
    finally:
        w.close()


def _probe(world: World, where: str, call: Callable[[], Any], found: list[str]) -> None:
    before = world.snapshot()
    try:
        call()
    except SituatedError:
        if world.snapshot() != before:
            found.append(f"changed after error at {where}")
    except Exception as exc:
        found.append(f"{type(exc).__name__} at {where}: {_crash(exc)}")


REQUIRED = {"principal", "situation", "content", "recall_id", "success", "state", "memory_id"}
"""Left out, these are Python's own TypeError (a call that cannot be made), not a value."""


def _values(name: str) -> list[Any]:
    return MALFORMED if name in REQUIRED else [*MALFORMED, MISSING]


def _args_with(base: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    out = dict(base)
    if value is MISSING:
        out.pop(name, None)
    else:
        out[name] = value
    return out


BOUND_CALLS: dict[str, tuple[dict[str, Any], Callable[[BoundMemory, dict[str, Any]], Any]]] = {
    "recall": ({"situation": "annual plan refund request", "facts": {"days": 40},
                "intent": "refund"}, lambda b, kw: b.recall(**kw)),
    "remember": ({"content": "Refund annual plans past 30 days.", "kind": "lesson",
                  "situation": "annual plan, 40 days", "facts": {"days": 40},
                  "action": "refunded", "success": True, "conditions": ["days > 30"]},
                 lambda b, kw: b.remember(**kw)),
    "feedback": ({"recall_id": "", "success": True, "used": []},
                 lambda b, kw: b.feedback(**kw)),
}


def test_bound_memory_refuses_malformed_values(world: World) -> None:
    found: list[str] = []
    base = {"principal": ADMIN, "namespace": "refunds", "k": 5, "budget_tokens": 800,
            "policy": None, "authority": "inferred"}
    for name in base:
        for value in _values(name):
            kw = _args_with(base, name, value)
            _probe(world, f"BoundMemory({name}={_short(value)})",
                   lambda kw=kw: BoundMemory(world.mem, **kw), found)
    _probe(world, "BoundMemory(memory=<str>)", lambda: BoundMemory("x", ADMIN), found)  # type: ignore[arg-type]
    bound = BoundMemory(world.mem, ADMIN, namespace="refunds")
    rid = world.mem.recall(world.state, principal=ADMIN, namespace="refunds").recall_id
    for method, (defaults, run) in BOUND_CALLS.items():
        base_kw = defaults | ({"recall_id": rid} if method == "feedback" else {})
        for name in base_kw:
            for value in _values(name):
                kw = _args_with(base_kw, name, value)
                _probe(world, f"BoundMemory.{method}({name}={_short(value)})",
                       lambda kw=kw, run=run: run(bound, kw), found)
    assert not found, "\n".join(found[:40])


def test_agent_tools_refuse_malformed_values(world: World) -> None:
    """The tools' argument models refuse what they cannot take (pydantic, before a call);
    what they accept reaches the store only as the project's errors or a JSON answer."""
    found: list[str] = []
    bound = BoundMemory(world.mem, ADMIN, namespace="refunds")
    runs = {
        "recall": (agent_tools.RecallArgs, agent_tools.recall,
                   {"situation": "annual plan", "facts": [{"name": "days", "value": 40}]}),
        "remember": (agent_tools.RememberArgs, agent_tools.remember,
                     {"content": "Refund annual plans past 30 days.", "kind": "lesson",
                      "situation": "annual plan", "facts": [{"name": "days", "value": 40}],
                      "conditions": ["days > 30"]}),
    }
    from pydantic import ValidationError

    for tool, (schema, run, base) in runs.items():
        for name in base:
            for value in [*MALFORMED, MISSING, [{"name": "days", "value": 1}] * 2,
                          [{"name": "\ud800", "value": "x"}]]:
                try:
                    parsed = schema.model_validate(_args_with(base, name, value))
                except ValidationError:
                    continue  # the framework hands this back to the model
                _probe(world, f"tool {tool}({name}={_short(value)})",
                       lambda parsed=parsed, run=run: run(bound, parsed), found)
    assert not found, "\n".join(found[:40])


ASYNC_CALLS: dict[str, dict[str, Any]] = {
    "add": {"content": "Refund annual plans past 30 days.", "principal": ADMIN,
            "namespace": "refunds", "kind": "lesson"},
    "recall": {"state": "annual plan refund request", "principal": ADMIN,
               "namespace": "refunds", "k": 5},
    "inspect": {"memory_id": "", "principal": ADMIN},
    "list": {"principal": ADMIN, "limit": 10},
    "stats": {"principal": ADMIN},
    "gate_results": {"memory_id": "", "principal": ADMIN},
}


def test_async_memory_refuses_malformed_values(world: World) -> None:
    """The same values through `AsyncMemory`'s worker threads: the caller's coroutine gets
    the project's error, and the workers keep serving (a call after each error succeeds)."""
    found: list[str] = []
    path = world.path  # world.mem stays open: its snapshot sees the workers' commits

    async def main() -> None:
        amem = AsyncMemory(path, embedder="hash", workers=2)
        try:
            for method, base in ASYNC_CALLS.items():
                base = base | ({"memory_id": world.lesson} if "memory_id" in base else {})
                first, *rest = base
                for name in [first, *rest]:
                    for value in [v for v in _values(name) if v is not MISSING or
                                  name != first][:26]:
                        kw = _args_with(base, name, value)
                        positional = first in ("content", "state", "memory_id")
                        pos = [kw.pop(first)] if positional and first in kw else []
                        where = f"AsyncMemory.{method}({name}={_short(value)})"
                        before = world.snapshot()
                        try:
                            await getattr(amem, method)(*pos, **kw)
                        except SituatedError:
                            if world.snapshot() != before:
                                found.append(f"changed after error at {where}")
                        except Exception as exc:
                            found.append(f"{type(exc).__name__} at {where}: {_crash(exc)}")
                await amem.stats(principal=ADMIN)  # still serving
        finally:
            await amem.aclose()

    asyncio.run(main())
    assert not found, "\n".join(found[:40])
