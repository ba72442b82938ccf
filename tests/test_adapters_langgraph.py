"""The LangGraph tools, run by a real LangGraph graph (StateGraph + ToolNode, no model)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from adapter_store import ME, NOW, OTHER, quickstart
from situated import Authority, InvalidInput, Memory
from situated.adapters.langgraph import situated_tools

FACTS = [{"name": "plan", "value": "annual"}, {"name": "days_since_purchase", "value": 12}]


def graph(tools: list[Any]) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def call(app: Any, name: str, args: dict[str, Any], n: int = 0) -> ToolMessage:
    msg = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{n}",
                                             "type": "tool_call"}])
    out = app.invoke({"messages": [msg]})["messages"][-1]
    assert isinstance(out, ToolMessage)
    return out


@pytest.fixture
def store(tmp_path: Path) -> tuple[Memory, dict[str, str]]:
    return quickstart(tmp_path / "lg.db")


def test_recall_remember_feedback_through_a_graph(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    tools = situated_tools(mem, ME, namespace="refunds")
    assert [t.name for t in tools] == ["recall_memory", "remember", "memory_feedback"]
    app = graph(tools)
    answer = json.loads(call(app, "recall_memory", {"situation": NOW, "facts": FACTS}).content)
    assert answer["mode"] == "GUIDED"
    served = [i["memory_id"] for i in answer["items"]]
    assert ids["pref"] in served and ids["lesson"] not in served and ids["foreign"] not in served
    assert answer["briefing"].splitlines()[0].startswith("Memory")  # the quoted-data header
    wrote = json.loads(call(app, "remember", {
        "content": "Refund requests from annual customers in their first 14 days are full.",
        "kind": "lesson", "situation": NOW, "facts": FACTS, "action": "refunded in full",
        "success": True}, 1).content)
    assert wrote["state"] == "ACTIVE" and wrote["warnings"] == []
    rec = mem.inspect(wrote["memory_id"], principal=ME)
    assert rec.scope.tenant == "acme" and rec.authority is Authority.INFERRED
    assert rec.source.state is not None and rec.source.state.facts["days_since_purchase"] == 12
    fb = json.loads(call(app, "memory_feedback", {"recall_id": answer["recall_id"],
                                                  "success": True, "used": served[:1]}, 2).content)
    assert fb["credited"] == served[:1]


def test_a_stateless_lesson_is_written_with_its_warning(
        store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    app = graph(situated_tools(mem, ME))
    wrote = json.loads(call(app, "remember", {"content": "Always double-check the invoice.",
                                              "kind": "lesson"}).content)
    assert wrote["warnings"] and "never" in " ".join(wrote["warnings"]).lower()


def test_mistakes_come_back_as_error_text(store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    app = graph(situated_tools(mem, ME))
    out = call(app, "memory_feedback", {"recall_id": "rc_0000000000000000", "success": True})
    assert out.status == "error" or out.content.startswith("error")
    out = call(app, "recall_memory", {"situation": NOW, "facts": FACTS + FACTS[:1]})
    assert "facts[2]" in str(out.content)


def test_no_argument_names_a_tenant(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    for tool in situated_tools(mem, ME):
        props = set(tool.args)
        assert not props & {"tenant", "principal", "roles", "clearance", "namespace"}
    app = graph(situated_tools(mem, OTHER, namespace="refunds"))
    answer = json.loads(call(app, "recall_memory", {"situation": NOW}).content)
    assert {i["memory_id"] for i in answer["items"]} <= {ids["foreign"]}
    # a tool call smuggling a tenant is refused by the schema, not obeyed
    out = call(app, "recall_memory", {"situation": NOW, "tenant": "acme"})
    assert ids["pref"] not in str(out.content)


def test_async_graph_runs_tools_concurrently(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    app = graph(situated_tools(mem, ME, namespace="refunds"))
    before = len(mem.list(principal=ME, namespace="refunds"))

    async def main() -> list[Any]:
        calls = [AIMessage(content="", tool_calls=[
            {"name": "recall_memory", "args": {"situation": NOW, "facts": FACTS},
             "id": f"a{n}", "type": "tool_call"},
            {"name": "remember", "args": {"content": f"Customer {n} asked twice about refunds."},
             "id": f"b{n}", "type": "tool_call"}]) for n in range(10)]
        return await asyncio.gather(*(app.ainvoke({"messages": [m]}) for m in calls))

    for state in asyncio.run(main()):
        recalled, wrote = (json.loads(m.content) for m in state["messages"][-2:])
        assert ids["pref"] in [i["memory_id"] for i in recalled["items"]]
        assert wrote["state"] == "ACTIVE"
    assert len(mem.list(principal=ME, namespace="refunds")) == before + 10


def test_bad_construction_is_invalid_input(store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    with pytest.raises(InvalidInput) as exc:
        situated_tools(mem, None)  # type: ignore[arg-type]
    assert exc.value.field == "principal"
    with pytest.raises(InvalidInput) as exc:
        situated_tools(mem, ME, authority="gospel")
    assert exc.value.field == "authority"


def test_an_agent_loop_recalls_then_gives_feedback(store: tuple[Memory, dict[str, str]]) -> None:
    """agent -> tools -> agent -> tools -> agent -> END, the agent scripted (no model)."""
    mem, ids = store

    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if not isinstance(last, ToolMessage):
            calls = [{"name": "recall_memory", "args": {"situation": NOW, "facts": FACTS},
                      "id": "r", "type": "tool_call"}]
        elif last.name == "recall_memory":
            recalled = json.loads(str(last.content))
            calls = [{"name": "memory_feedback", "id": "f", "type": "tool_call",
                      "args": {"recall_id": recalled["recall_id"], "success": True,
                               "used": [i["memory_id"] for i in recalled["items"][:1]]}}]
        else:
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(situated_tools(mem, ME, namespace="refunds")))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    out = g.compile().invoke({"messages": [HumanMessage("refund after 12 days?")]})
    assert out["messages"][-1].content == "done"
    feedback = json.loads(str(out["messages"][-2].content))
    assert feedback["credited"] and feedback["credited"][0] in {ids["pref"], ids["fact"]}
    assert mem.stats(principal=ME).feedback == 1
