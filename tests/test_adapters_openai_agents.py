"""The OpenAI Agents SDK tools, invoked through the SDK's own tool-invocation path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from adapter_store import ME, NOW, OTHER, quickstart
from situated import InvalidInput, Memory
from situated.adapters.openai_agents import situated_tools

FACTS = [{"name": "plan", "value": "annual"}, {"name": "days_since_purchase", "value": 12}]


async def invoke(tool: FunctionTool, args: dict[str, Any], n: int = 0) -> Any:
    raw = json.dumps(args)
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"call_{n}",
                      tool_arguments=raw)
    return await tool.on_invoke_tool(ctx, raw)


def run(tool: FunctionTool, args: dict[str, Any]) -> Any:
    return asyncio.run(invoke(tool, args))


@pytest.fixture
def store(tmp_path: Path) -> tuple[Memory, dict[str, str]]:
    return quickstart(tmp_path / "oa.db")


def tools_by_name(mem: Memory, **kw: Any) -> dict[str, FunctionTool]:
    return {t.name: t for t in situated_tools(mem, kw.pop("principal", ME), **kw)}


def test_recall_remember_feedback(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    tools = tools_by_name(mem, namespace="refunds")
    assert set(tools) == {"recall_memory", "remember", "memory_feedback"}
    assert all(t.strict_json_schema for t in tools.values())
    answer = json.loads(run(tools["recall_memory"], {"situation": NOW, "facts": FACTS,
                                                     "intent": "refund"}))
    assert answer["mode"] == "GUIDED"
    served = [i["memory_id"] for i in answer["items"]]
    assert ids["pref"] in served and ids["lesson"] not in served and ids["foreign"] not in served
    wrote = json.loads(run(tools["remember"], {
        "content": "Annual customers in their first 14 days get a full refund.",
        "kind": "lesson", "situation": NOW, "facts": FACTS, "action": "refunded in full",
        "success": True, "conditions": ["days_since_purchase <= 14"]}))
    assert wrote["state"] == "ACTIVE"
    rec = mem.inspect(wrote["memory_id"], principal=ME)
    assert rec.scope.tenant == "acme" and rec.conditions == ("days_since_purchase <= 14",)
    fb = json.loads(run(tools["memory_feedback"], {"recall_id": answer["recall_id"],
                                                   "success": False, "used": served[:1]}))
    assert fb["blamed"] == served[:1]
    again = json.loads(run(tools["recall_memory"], {"situation": NOW, "facts": FACTS}))
    assert wrote["memory_id"] in [i["memory_id"] for i in again["items"]]


def test_mistakes_are_told_to_the_model(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    tools = tools_by_name(mem)
    out = run(tools["memory_feedback"], {"recall_id": "not an id!", "success": True})
    assert out.startswith("error: recall_id")
    out = run(tools["remember"], {"content": "x", "facts": FACTS})
    assert out.startswith("error: facts")
    # an argument outside the schema (a tenant) is dropped by the SDK, never obeyed
    out = json.loads(run(tools["recall_memory"], {"situation": NOW, "tenant": "globex"}))
    assert ids["foreign"] not in [i["memory_id"] for i in out["items"]]


def test_each_tool_set_is_one_principal(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    for tool in situated_tools(mem, ME):
        assert not set(tool.params_json_schema["properties"]) & {
            "tenant", "principal", "roles", "clearance", "namespace"}
    theirs = tools_by_name(mem, principal=OTHER, namespace="refunds")
    answer = json.loads(run(theirs["recall_memory"], {"situation": NOW}))
    assert {i["memory_id"] for i in answer["items"]} <= {ids["foreign"]}
    mine = tools_by_name(mem, namespace="refunds")
    out = run(mine["memory_feedback"], {"recall_id": answer["recall_id"], "success": True})
    assert out.startswith("error:")  # another tenant's recall is not found


def test_concurrent_tool_calls(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    tools = tools_by_name(mem, namespace="refunds")
    before = len(mem.list(principal=ME, namespace="refunds"))

    async def main() -> list[Any]:
        calls = []
        for n in range(15):
            calls.append(invoke(tools["recall_memory"], {"situation": NOW, "facts": FACTS}, n))
            calls.append(invoke(tools["remember"], {"content": f"Customer {n} called twice."},
                                100 + n))
        return await asyncio.gather(*calls)

    results = [json.loads(r) for r in asyncio.run(main())]
    assert all(ids["pref"] in [i["memory_id"] for i in r["items"]] for r in results[::2])
    assert all(r["state"] == "ACTIVE" for r in results[1::2])
    assert len(mem.list(principal=ME, namespace="refunds")) == before + 15


def test_bad_construction_is_invalid_input(store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    for kw, field in [({"principal": "acme"}, "principal"), ({"k": 1000}, "k"),
                      ({"budget_tokens": 0}, "budget_tokens")]:
        with pytest.raises(InvalidInput) as exc:
            situated_tools(mem, **({"principal": ME} | kw))
        assert exc.value.field == field


class ScriptedModel(Model):
    """A model with no LLM: recall, then feedback with the recall's id, then an answer."""

    def __init__(self) -> None:
        self.turn = 0

    async def get_response(self, system_instructions: Any, input: Any, *a: Any,
                           **kw: Any) -> ModelResponse:
        self.turn += 1
        if self.turn == 1:
            out: Any = _call("recall_memory", {"situation": NOW, "facts": FACTS})
        elif self.turn == 2:
            recalled = json.loads(next(i["output"] for i in reversed(input)
                                       if isinstance(i, dict)
                                       and i.get("type") == "function_call_output"))
            used = [i["memory_id"] for i in recalled["items"][:1]]
            out = _call("memory_feedback", {"recall_id": recalled["recall_id"],
                                            "success": True, "used": used})
        else:
            out = ResponseOutputMessage(
                id="msg_1", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(annotations=[], text="done", type="output_text")])
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError


def _call(name: str, args: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(arguments=json.dumps(args), call_id=f"call_{name}",
                                    name=name, type="function_call", id=f"fc_{name}",
                                    status="completed")


def test_an_agent_run_uses_the_tools(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    agent = Agent(name="support", instructions="Recall before you answer.",
                  model=ScriptedModel(), tools=situated_tools(mem, ME, namespace="refunds"))
    result = asyncio.run(Runner.run(agent, "An annual customer wants a refund after 12 days",
                                    run_config=RunConfig(tracing_disabled=True)))
    assert result.final_output == "done"
    assert mem.stats(principal=ME).feedback == 1
    assert mem.inspect(ids["pref"], principal=ME).counters.uses + mem.inspect(
        ids["fact"], principal=ME).counters.uses == 1
