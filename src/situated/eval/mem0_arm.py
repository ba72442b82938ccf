"""mem0 as a raw-replay arm: a real peer beside the in-harness `raw_replay`.

Each scenario's memories are added to a fresh mem0 store (`mem0ai`, local Qdrant in the
scenario's directory, SQLite history), each under its tenant as mem0's `user_id`, with
`infer=False` (stored verbatim, no LLM), and the text the in-harness replay embeds (content
and source state, `arms.memory_text`). A recall is `Memory.search(query, filters={"user_id":
tenant}, top_k=k)` with mem0's default score threshold, and what it returns is pasted
verbatim under the same header as `raw_replay`, tokens counted the same way.

The embedder is situated's own (the run's `--embedder`), put in place of mem0's embedding
model after construction, so both replay arms see identical vectors: the difference between
them is mem0's store and search, not the embedding. Telemetry is off (`MEM0_TELEMETRY`); no
call leaves the machine (mem0's LLM client is configured but never called with `infer=False`).

Needs the `peers` extra: `pip install 'situated[peers]'`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from situated.embed.base import Embedder
from situated.eval.agents import Guidance, ServedItem
from situated.eval.arms import RAW_HEADER, Unsupported, World, _query, memory_text
from situated.recall.compile import token_counter


def _quiet() -> None:
    """Before mem0 is imported: its telemetry reads the environment at import time."""
    os.environ["MEM0_TELEMETRY"] = "False"
    for name in ("mem0", "qdrant_client", "httpx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def available() -> str | None:
    """None when mem0 can be imported; otherwise why not."""
    _quiet()
    try:
        import mem0  # noqa: F401
    except ImportError as exc:
        return f"mem0ai is not installed (pip install 'situated[peers]'): {exc}"
    return None


def _embedding(embedder: Embedder, dims: int) -> Any:
    from mem0.configs.embeddings.base import BaseEmbedderConfig
    from mem0.embeddings.base import EmbeddingBase

    class SituatedEmbedding(EmbeddingBase):  # type: ignore[misc]
        """mem0's embedding interface over situated's embedder: the same vectors."""

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in embedder.embed([text])[0]]

    return SituatedEmbedding(BaseEmbedderConfig(model=embedder.model_ref, embedding_dims=dims))


def local_mem0(root: Path, dims: int) -> Any:
    """A mem0 `Memory` in its documented local setup under `root` (Qdrant in the process,
    SQLite history; the LLM and embedder clients are configured, never called: the caller
    puts its own `embedding_model` in place)."""
    _quiet()
    from mem0 import Memory as Mem0

    return Mem0.from_config({
        "vector_store": {"provider": "qdrant", "config": {
            "path": str(root / "qdrant"), "collection_name": "memories",
            "embedding_model_dims": dims, "on_disk": False}},
        "embedder": {"provider": "openai", "config": {
            "model": "unused", "api_key": "unused", "embedding_dims": dims}},
        "llm": {"provider": "openai", "config": {"model": "unused", "api_key": "unused"}},
        "history_db_path": str(root / "history.db"),
    })


def open_mem0(world: World) -> Any:
    """A fresh mem0 `Memory` beside the scenario's store, holding the scenario's memories."""
    dims = world.embedder.dim
    m = local_mem0(world.path.parent / f"{world.path.stem}-mem0", dims)
    m.embedding_model = _embedding(world.embedder, dims)
    sc = world.scenario
    for spec in sc.memories:
        m.add(memory_text(spec), user_id=spec.tenant or sc.principal.tenant, infer=False,
              metadata={"key": spec.key})
    return m


@dataclass(frozen=True)
class Mem0Replay:
    """mem0's search, pasted verbatim (a real raw-replay peer)."""

    k: int = 3
    name: str = "mem0_replay"

    def serve(self, world: World) -> Guidance:
        reason = available()
        if reason is not None:
            raise Unsupported(reason)
        m = world.peer(self.name, lambda: open_mem0(world), lambda m: m.close())
        sc = world.scenario
        started = time.perf_counter()
        found = m.search(_query(sc), filters={"user_id": sc.principal.tenant}, top_k=self.k)
        latency = (time.perf_counter() - started) * 1000
        hits = found.get("results", []) if isinstance(found, dict) else list(found)
        counter = token_counter()
        lines = [f"- {h['memory']}" for h in hits]
        context = "\n".join([RAW_HEADER, *lines]) if hits else ""
        items = tuple(ServedItem(str((h.get("metadata") or {}).get("key")), counter.count(line))
                      for h, line in zip(hits, lines, strict=True))
        return Guidance(items, context, counter.count(context) if context else 0, latency)
