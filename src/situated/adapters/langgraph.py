"""LangGraph: recall / remember / feedback tools for a graph's agent (extra `langgraph`).

```python
from langgraph.prebuilt import ToolNode
from situated.adapters.langgraph import situated_tools

tools = situated_tools(mem, me, namespace="refunds")   # recall_memory, remember, memory_feedback
graph.add_node("tools", ToolNode(tools))                # and model.bind_tools(tools) upstream
```

Why tools and not a `langgraph.store.base.BaseStore`: a `BaseStore` is a key-value store. Its
contract is that `put(namespace, key, value)` stores that value under the caller's key,
`get` returns it, a second `put` overwrites it, `put(..., None)` deletes it, and `search`
returns the items under a namespace prefix that match a filter. situated keeps none of these
promises, on purpose: a write passes gates that may redact it, hold it for review, refuse it
or merge it into an existing memory (so `get` after `put` would not return the value, or
anything); ids are situated's own; nothing is overwritten or deleted by a writer (facts
supersede by entity and attribute, erasure is an admin's act); and a recall is compiled
against the present state, with rejections and a mode, not a filtered listing. Namespaces in a
`BaseStore` are also where callers put user ids, which would let a caller choose whose memory
it reads. A `BaseStore` over situated would either break LangGraph's contract or drop
situated's; the tools keep both, and the principal is fixed when they are made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from situated.extras import missing_extra

try:  # the extra that provides it, named in one line when it is missing
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ModuleNotFoundError as exc:
    raise missing_extra(exc, __name__, "langgraph") or exc from None
from pydantic import BaseModel

from situated.adapters import tools as t
from situated.adapters.bound import BoundMemory
from situated.errors import UsageError
from situated.memory import Memory
from situated.models import Authority, Principal
from situated.recall.reconstruct import Policy


def situated_tools(
    memory: Memory,
    principal: Principal,
    *,
    namespace: str | None = None,
    k: int = 5,
    budget_tokens: int = 800,
    policy: Policy | None = None,
    authority: Authority | str = Authority.INFERRED,
) -> list[BaseTool]:
    """The `recall_memory`, `remember` and `memory_feedback` tools, acting as `principal`.

    Args:
        memory: the `Memory` the tools use.
        principal: who every tool call acts as; no tool argument can change it.
        namespace: where recalls search (None: everywhere the principal may read) and
            writes go (None: `"default"`).
        k: at most this many guidance items per recall.
        budget_tokens: the token budget of each briefing.
        policy: allowed tools, prohibited effects and policy version of the run.
        authority: the authority of what the agent writes (default `inferred`).

    Returns:
        LangChain tools, usable by `ToolNode`, `langchain.agents.create_agent` or any
        LangChain agent.
        A caller's mistake (`UsageError`) comes back to the model as the tool's error text.

    Raises:
        InvalidInput: an argument is not what it names.
    """
    bound = BoundMemory(memory, principal, namespace=namespace, k=k,
                        budget_tokens=budget_tokens, policy=policy, authority=authority)
    return [
        _tool("recall_memory", t.RECALL_DESCRIPTION, t.RecallArgs, bound, t.recall),
        _tool("remember", t.REMEMBER_DESCRIPTION, t.RememberArgs, bound, t.remember),
        _tool("memory_feedback", t.FEEDBACK_DESCRIPTION, t.FeedbackArgs, bound, t.feedback),
    ]


def _tool(
    name: str,
    description: str,
    schema: type[Any],
    bound: BoundMemory,
    run: Callable[[BoundMemory, Any], str],
) -> BaseTool:
    def call(**kwargs: Any) -> str:
        args: BaseModel = schema.model_validate(kwargs)
        try:
            return run(bound, args)
        except UsageError as exc:  # the caller's mistake: told to the model, not raised
            raise ToolException(f"error: {exc}") from exc

    async def acall(**kwargs: Any) -> str:
        return await asyncio.to_thread(call, **kwargs)  # a recall blocks; BoundMemory locks

    return StructuredTool.from_function(
        func=call, coroutine=acall, name=name, description=description, args_schema=schema,
        handle_tool_error=True,
    )
