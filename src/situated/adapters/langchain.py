"""LangChain: `SituatedRetriever`, a `BaseRetriever` over compiled recall (extra `langchain`).

```python
from situated.adapters.langchain import SituatedRetriever

retriever = SituatedRetriever(mem, me, namespace="refunds")
docs = retriever.invoke("Annual customer wants a refund 12 days after buying",
                        facts={"plan": "annual", "days_since_purchase": 12})
docs[0].metadata["verdict"], docs[0].metadata["memory_id"], docs[0].metadata["scores"]
retriever.feedback(docs[0].metadata["recall_id"], success=True, used=docs[:1])
```

Each document is one guidance item of the briefing: `page_content` is its text as adapted to
the present state; `metadata` holds `memory_id`, `recall_id`, the briefing's `mode` and
`missing_facts`, the item's `verdict`, `confidence`, `kind`, `authority`, `adaptations` and
`scores` (relevance, applicability, trust, freshness, expected_utility). An item whose text
reads as instruction is withheld, as `Briefing.render` withholds it. An empty list means
`NO_APPLICABLE_MEMORY` or `INSUFFICIENT_EVIDENCE`; `retriever.briefing(query)` gives the whole
`Briefing` (mode, missing facts, rejections) when the agent needs to tell them apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from situated.extras import missing_extra

try:  # the extra that provides it, named in one line when it is missing
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as exc:
    raise missing_extra(exc, __name__) or exc from None
from pydantic import ConfigDict

from situated.adapters.bound import BoundMemory
from situated.errors import InvalidInput
from situated.memory import FeedbackResult, Memory
from situated.models import Principal
from situated.recall.briefing import Briefing, GuidanceItem, unsafe_text
from situated.recall.reconstruct import Policy


def documents(briefing: Briefing) -> list[Document]:
    """The briefing's servable items as LangChain documents (see the module docstring)."""
    out = []
    for item in briefing.items:
        if _reads_as_instruction(item):  # never handed on, as render() never shows it
            continue
        out.append(Document(
            page_content=item.text,
            id=item.memory_id,
            metadata={
                "memory_id": item.memory_id,
                "recall_id": briefing.recall_id,
                "mode": briefing.mode.value,
                "missing_facts": list(briefing.missing_facts),
                "verdict": item.verdict.value,
                "confidence": item.confidence,
                "kind": item.kind,
                "authority": item.authority,
                "adaptations": list(item.adaptations),
                "scores": asdict(item.scores),
                "source": "situated",
            },
        ))
    return out


class SituatedRetriever(BaseRetriever):
    """A LangChain retriever whose every query is a situated recall, as one principal.

    Args:
        memory: the `Memory` to recall from.
        principal: who every query acts as; fixed here, never taken from a query or config.
        namespace: the namespace to search (None: all the principal may read).
        k: at most this many documents.
        budget_tokens: the token budget of each briefing.
        policy: allowed tools, prohibited effects and policy version of the run.
        **kwargs: `BaseRetriever` fields (`tags`, `metadata`).

    Raises:
        InvalidInput: an argument is not what it names.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bound: BoundMemory

    def __init__(
        self,
        memory: Memory,
        principal: Principal,
        *,
        namespace: str | None = None,
        k: int = 5,
        budget_tokens: int = 800,
        policy: Policy | None = None,
        **kwargs: Any,
    ) -> None:
        if "bound" in kwargs:
            raise InvalidInput("bound", "give memory and principal instead")
        bound = BoundMemory(memory, principal, namespace=namespace, k=k,
                            budget_tokens=budget_tokens, policy=policy)
        super().__init__(bound=bound, **kwargs)  # type: ignore[call-arg]  # a pydantic field

    def briefing(
        self, query: str, *, facts: Mapping[str, Any] | None = None, intent: str = ""
    ) -> Briefing:
        """The whole `Briefing` for a query (mode, items, rejections, missing facts)."""
        return self.bound.recall(query, facts=facts, intent=intent)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        facts: Mapping[str, Any] | None = None,
        intent: str = "",
    ) -> list[Document]:
        return documents(self.bound.recall(query, facts=facts, intent=intent))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        facts: Mapping[str, Any] | None = None,
        intent: str = "",
    ) -> list[Document]:
        # in a worker thread: a recall blocks (SQLite, numpy); BoundMemory holds the lock
        briefing = await asyncio.to_thread(self.bound.recall, query, facts=facts, intent=intent)
        return documents(briefing)

    def feedback(
        self,
        recall_id: str,
        *,
        success: bool,
        used: Sequence[str | Document] = (),
        cited: str | None = None,
    ) -> FeedbackResult:
        """Report how the episode after a recall ended (`Memory.feedback`, as this principal).

        Args:
            recall_id: the `recall_id` in the documents' metadata.
            success: how the episode ended.
            used: the documents (or memory ids) the agent acted on.
            cited: the agent's output text; served ids cited in it count as used.

        Returns:
            The `FeedbackResult`.
        """
        if isinstance(used, str | Document):
            raise InvalidInput("used", "must be a list of documents or memory ids")
        ids = [_memory_id(u, n) for n, u in enumerate(used)]
        return self.bound.feedback(recall_id, success=success, used=ids, cited=cited)


def _reads_as_instruction(item: GuidanceItem) -> bool:
    """`Briefing.render`'s rule for withholding an item: its text or an adaptation reads as
    instruction or claims authority."""
    return any(unsafe_text(t) for t in (item.text, *item.adaptations) if t.strip())


def _memory_id(value: Any, n: int) -> Any:
    if isinstance(value, Document):
        mid = value.metadata.get("memory_id")
        if not isinstance(mid, str):
            raise InvalidInput(f"used[{n}]", "a document without a situated memory_id")
        return mid
    return value  # an id: Memory.feedback checks it
