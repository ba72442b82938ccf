"""OpenAI Agents SDK: recall / remember / feedback function tools (extra `openai-agents`).

```python
from agents import Agent, Runner
from situated.adapters.openai_agents import situated_tools

agent = Agent(name="support", instructions="...", tools=situated_tools(mem, me,
              namespace="refunds"))
result = await Runner.run(agent, "An annual customer wants a refund after 12 days")
```

The tools are `agents.function_tool`s with strict JSON schemas (facts are name/value pairs).
They run in the SDK's worker threads; each call holds the `Memory`'s lock (`BoundMemory`).
A caller's mistake comes back to the model as `error: <field>: <message>`; any other failure
propagates to the SDK's own error handling.
"""

from __future__ import annotations

from situated.extras import missing_extra

try:  # the extra that provides it, named in one line when it is missing
    from agents import FunctionTool, function_tool
except ModuleNotFoundError as exc:
    raise missing_extra(exc, __name__) or exc from None

from situated.adapters import tools as t
from situated.adapters.bound import BoundMemory
from situated.adapters.tools import Fact
from situated.errors import UsageError
from situated.memory import Memory
from situated.models import Authority, Principal
from situated.recall.reconstruct import Policy

__all__ = ["Fact", "situated_tools"]


def situated_tools(
    memory: Memory,
    principal: Principal,
    *,
    namespace: str | None = None,
    k: int = 5,
    budget_tokens: int = 800,
    policy: Policy | None = None,
    authority: Authority | str = Authority.INFERRED,
) -> list[FunctionTool]:
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
        Three `FunctionTool`s for `Agent(tools=...)`.

    Raises:
        InvalidInput: an argument is not what it names.
    """
    bound = BoundMemory(memory, principal, namespace=namespace, k=k,
                        budget_tokens=budget_tokens, policy=policy, authority=authority)

    def recall_memory(situation: str, facts: list[Fact] | None = None, intent: str = "") -> str:
        try:
            return t.recall(bound, t.RecallArgs(situation=situation, facts=facts or [],
                                                intent=intent))
        except UsageError as exc:
            return f"error: {exc}"

    def remember(
        content: str,
        kind: t.KindName = "note",
        situation: str | None = None,
        facts: list[Fact] | None = None,
        action: str | None = None,
        success: bool | None = None,
        conditions: list[str] | None = None,
    ) -> str:
        try:
            return t.remember(bound, t.RememberArgs(
                content=content, kind=kind, situation=situation, facts=facts or [],
                action=action, success=success, conditions=conditions or [],
            ))
        except UsageError as exc:
            return f"error: {exc}"

    def memory_feedback(recall_id: str, success: bool, used: list[str] | None = None) -> str:
        try:
            return t.feedback(bound, t.FeedbackArgs(recall_id=recall_id, success=success,
                                                    used=used or []))
        except UsageError as exc:
            return f"error: {exc}"

    return [
        function_tool(recall_memory, description_override=t.RECALL_DESCRIPTION,
                      use_docstring_info=False),
        function_tool(remember, description_override=t.REMEMBER_DESCRIPTION,
                      use_docstring_info=False),
        function_tool(memory_feedback, description_override=t.FEEDBACK_DESCRIPTION,
                      use_docstring_info=False),
    ]
