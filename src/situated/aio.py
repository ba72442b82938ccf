"""`AsyncMemory`: the surface of `Memory` for asyncio code.

Every call runs in a worker thread (a `Memory` does blocking SQLite and numpy work), so the event
loop never waits on the store. A `Memory` is used by one thread at a time: `AsyncMemory` opens
one `Memory` per worker over the same file and hands each call a free one, so any number of
coroutines may share one `AsyncMemory`. With `workers=1` (the default) calls run one after the
other in submission order; with more, reads and writes from several workers meet in SQLite
(WAL, busy timeout, retries), as several processes would.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from situated import arguments as args
from situated.errors import UsageError
from situated.learning.maintenance import MaintenanceReport
from situated.learning.schema import SchemaEntry
from situated.memory import FeedbackResult, Health, Memory, Stats
from situated.models import MemoryRecord
from situated.recall.briefing import Briefing
from situated.service.operations import Pool
from situated.store.ledger import LedgerEvent
from situated.store.recall_reads import RecallView
from situated.store.values import RebuildReport
from situated.write.gates import WritePolicy
from situated.write.importer import ImportReport
from situated.write.ingest import ConversationResult

T = TypeVar("T")
MAX_WORKERS = 32


class AsyncMemory:
    """`Memory` with every method a coroutine; safe for concurrent use by many coroutines.

    Each method takes the same arguments as the `Memory` method of the same name and returns
    the same value (`export` returns the list of pages' records instead of an iterator), and
    raises the same errors. Use it as `async with AsyncMemory(...) as mem:` or call `aclose`.

    Args:
        path: the SQLite file, as for `Memory`.
        workers: how many worker threads, each with its own `Memory` over `path` (1 to 32).
        **options: keyword arguments of `Memory` (embedder, reconstructor, ...). An embedder or
            reconstructor given as an object is shared by the workers' `Memory`s; give it by
            name (each `Memory` then builds its own) when it is not safe across threads.
    """

    def __init__(self, path: str | Path = "situated.db", *, workers: int = 1,
                 **options: Any) -> None:
        n = args.integer(workers, "workers", 1, MAX_WORKERS)
        # the first Memory now, so bad arguments fail here; the others when first needed
        self._first = Memory(path, **options)
        self._spare = [self._first]

        def factory() -> Memory:
            try:
                return self._spare.pop()  # atomic: the pool may call this from two threads
            except IndexError:
                return Memory(path, **options)

        self._pool = Pool(factory, n)  # the service layer's pool: one thread per Memory
        self._executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="situated")
        self._closed = False
        self._close_lock = threading.Lock()

    @property
    def memory(self) -> Memory:
        """The first worker's `Memory` (its settings: embedder, gates, policies). Calling it
        directly bypasses the workers: do so only when no coroutine is using this object."""
        return self._first

    def _use(self, fn: Callable[[Memory], T]) -> T:
        with self._pool.use() as mem:  # a free Memory: one thread uses it at a time
            return fn(mem)

    async def _call(self, name: str, *a: Any, **kw: Any) -> Any:
        if self._closed:
            raise UsageError("this AsyncMemory is closed")

        def run(mem: Memory) -> Any:
            return getattr(mem, name)(*a, **kw)

        return await self._submit(run)

    async def _submit(self, fn: Callable[[Memory], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, functools.partial(self._use, fn))
        except RuntimeError:  # closed between the check and the submission
            raise UsageError("this AsyncMemory is closed") from None
        return await future

    async def aclose(self) -> None:
        """Wait for running calls, then close every worker's `Memory`. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        self._pool.close()  # the Memorys it opened
        for m in self._spare:  # the first, if no call ever took it
            m.close()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- writing ----------------------------------------------------------------------------

    async def add(self, content: str, **kwargs: Any) -> MemoryRecord:
        """`Memory.add`: propose a memory."""
        result: MemoryRecord = await self._call("add", content, **kwargs)
        return result

    async def add_many(self, items: Any, **kwargs: Any) -> builtins.list[MemoryRecord]:
        """`Memory.add_many`: propose many memories, validated before anything is written."""
        result: builtins.list[MemoryRecord] = await self._call("add_many", items, **kwargs)
        return result

    async def import_records(self, lines: Any, **kwargs: Any) -> ImportReport:
        """`Memory.import_records`: JSON lines of memories, one transaction per batch."""
        result: ImportReport = await self._call("import_records", lines, **kwargs)
        return result

    async def learn(self, trajectory: Any, **kwargs: Any) -> builtins.list[MemoryRecord]:
        """`Memory.learn`: distil a finished episode into lessons."""
        result: builtins.list[MemoryRecord] = await self._call("learn", trajectory, **kwargs)
        return result

    async def add_conversation(self, messages: Any, **kwargs: Any) -> ConversationResult:
        """`Memory.add_conversation`: chat turns as notes, plus the extractor's proposals."""
        result: ConversationResult = await self._call("add_conversation", messages, **kwargs)
        return result

    async def promote(self, memory_id: str, **kwargs: Any) -> MemoryRecord:
        """`Memory.promote`: approve a proposal held for review."""
        result: MemoryRecord = await self._call("promote", memory_id, **kwargs)
        return result

    async def reject(self, memory_id: str, **kwargs: Any) -> MemoryRecord:
        """`Memory.reject`: reject a proposal held for review."""
        result: MemoryRecord = await self._call("reject", memory_id, **kwargs)
        return result

    async def pending(self, **kwargs: Any) -> builtins.list[tuple[MemoryRecord, Any]]:
        """`Memory.pending`: proposals waiting for review, with their gate results."""
        result: builtins.list[tuple[MemoryRecord, Any]] = await self._call("pending", **kwargs)
        return result

    async def revoke_consent(self, consent: str, **kwargs: Any) -> int:
        """`Memory.revoke_consent`: withdraw a consent (admin)."""
        result: int = await self._call("revoke_consent", consent, **kwargs)
        return result

    async def erase(self, memory_id: str, **kwargs: Any) -> None:
        """`Memory.erase`: right to erasure (admin)."""
        await self._call("erase", memory_id, **kwargs)

    # -- recall and feedback ----------------------------------------------------------------

    async def recall(self, state: Any, **kwargs: Any) -> Briefing:
        """`Memory.recall`: compile guidance for the present state."""
        result: Briefing = await self._call("recall", state, **kwargs)
        return result

    async def feedback(self, recall_id: str, **kwargs: Any) -> FeedbackResult:
        """`Memory.feedback`: credit, blame or expose the memories a recall served."""
        result: FeedbackResult = await self._call("feedback", recall_id, **kwargs)
        return result

    async def infer_feedback(self, recall_id: str, **kwargs: Any) -> bool:
        """`Memory.infer_feedback`: record an outcome inferred from a session."""
        result: bool = await self._call("infer_feedback", recall_id, **kwargs)
        return result

    # -- reads ------------------------------------------------------------------------------

    async def inspect(self, memory_id: str, **kwargs: Any) -> MemoryRecord:
        """`Memory.inspect`: one memory the principal may read."""
        result: MemoryRecord = await self._call("inspect", memory_id, **kwargs)
        return result

    async def history(self, memory_id: str, **kwargs: Any) -> builtins.list[LedgerEvent]:
        """`Memory.history`: one memory's ledger events."""
        result: builtins.list[LedgerEvent] = await self._call("history", memory_id, **kwargs)
        return result

    async def gate_results(self, memory_id: str, **kwargs: Any
                           ) -> builtins.list[dict[str, Any]]:
        """`Memory.gate_results`: the write gates' results for a memory's proposal."""
        result: builtins.list[dict[str, Any]] = await self._call("gate_results", memory_id,
                                                                 **kwargs)
        return result

    async def recalls(self, **kwargs: Any) -> builtins.list[RecallView]:
        """`Memory.recalls`: recent recalls the principal may see, newest first."""
        result: builtins.list[RecallView] = await self._call("recalls", **kwargs)
        return result

    async def recall_record(self, recall_id: str, **kwargs: Any) -> RecallView:
        """`Memory.recall_record`: one stored recall, cut to what the principal may read."""
        result: RecallView = await self._call("recall_record", recall_id, **kwargs)
        return result

    async def recalls_of(self, memory_id: str, **kwargs: Any) -> builtins.list[RecallView]:
        """`Memory.recalls_of`: the recalls that served or rejected one memory."""
        result: builtins.list[RecallView] = await self._call("recalls_of", memory_id, **kwargs)
        return result

    async def recall_outcomes(self, **kwargs: Any
                              ) -> builtins.list[tuple[float, builtins.list[str]]]:
        """`Memory.recall_outcomes`: (time, verdicts) of recent recalls, for charts."""
        result: builtins.list[tuple[float, builtins.list[str]]] = await self._call(
            "recall_outcomes", **kwargs)
        return result

    async def utilities(self, **kwargs: Any) -> builtins.list[float]:
        """`Memory.utilities`: the utilities of the memories the principal may read."""
        result: builtins.list[float] = await self._call("utilities", **kwargs)
        return result

    async def list(self, **kwargs: Any) -> builtins.list[MemoryRecord]:
        """`Memory.list`: a page of the memories the principal may read."""
        result: builtins.list[MemoryRecord] = await self._call("list", **kwargs)
        return result

    async def export(self, **kwargs: Any) -> builtins.list[dict[str, Any]]:
        """`Memory.export`, read to the end in the worker: every record as a dict."""

        def read_all(mem: Memory) -> builtins.list[dict[str, Any]]:
            return builtins.list(mem.export(**kwargs))

        if self._closed:
            raise UsageError("this AsyncMemory is closed")
        return await self._submit(read_all)

    async def export_training(self, **kwargs: Any) -> builtins.list[dict[str, Any]]:
        """`Memory.export_training`, read to the end in the worker: the training examples."""

        def read_all(mem: Memory) -> builtins.list[dict[str, Any]]:
            return builtins.list(mem.export_training(**kwargs))

        if self._closed:
            raise UsageError("this AsyncMemory is closed")
        return await self._submit(read_all)

    async def attribute_schema(self, **kwargs: Any) -> builtins.list[SchemaEntry]:
        """`Memory.attribute_schema`: what the store learned about attributes."""
        result: builtins.list[SchemaEntry] = await self._call("attribute_schema", **kwargs)
        return result

    async def ledger(self, **kwargs: Any) -> builtins.list[LedgerEvent]:
        """`Memory.ledger`: the events the principal may see."""
        result: builtins.list[LedgerEvent] = await self._call("ledger", **kwargs)
        return result

    async def stats(self, **kwargs: Any) -> Stats:
        """`Memory.stats`: counts of what the principal may see."""
        result: Stats = await self._call("stats", **kwargs)
        return result

    async def health(self) -> Health:
        """`Memory.health`: integrity, orphans, failures, resident index."""
        result: Health = await self._call("health")
        return result

    async def write_policy(self, namespace: str) -> WritePolicy:
        """`Memory.write_policy`: the namespace's write policy."""
        result: WritePolicy = await self._call("write_policy", namespace)
        return result

    # -- maintenance ------------------------------------------------------------------------

    async def maintain(self, **kwargs: Any) -> MaintenanceReport:
        """`Memory.maintain`: lifecycle transitions in bulk."""
        result: MaintenanceReport = await self._call("maintain", **kwargs)
        return result

    async def rebuild(self, **kwargs: Any) -> RebuildReport:
        """`Memory.rebuild`: replay the ledger and compare (or repair)."""
        result: RebuildReport = await self._call("rebuild", **kwargs)
        return result

    async def close(self) -> None:
        """Same as `aclose`."""
        await self.aclose()
