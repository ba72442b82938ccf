"""Framework adapters, each an optional extra; importing this package imports no framework.

- `situated.adapters.langchain`: `SituatedRetriever` (a LangChain `BaseRetriever`) and
  `feedback` (extra `langchain`).
- `situated.adapters.langgraph`: recall / remember / feedback tools for LangGraph agents
  (extra `langgraph`).
- `situated.adapters.openai_agents`: the same tools for the OpenAI Agents SDK
  (extra `openai-agents`).

Every adapter is built over a `Memory` and one `Principal`: the tenant, roles and clearance
are fixed when the adapter is made, and nothing a caller, a model or a tool call passes can
name another.
"""

from situated.adapters.bound import BoundMemory

__all__ = ["BoundMemory"]
