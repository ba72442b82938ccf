"""The arms: what each memory system puts in the agent's context, on the same store contents.

Every scenario gets a fresh situated store holding exactly the scenario's memories (written
through the public `Memory.add`, in file order, each under its own tenant; revoked consent
through `Memory.revoke_consent`). The baselines read the same memories from the scenario data
and the same embedder's vectors, and are implemented honestly inside the harness:

- `no_memory`: nothing.
- `raw_replay`: top-k memories by cosine similarity between the query (intent + present
  state) and each memory's content plus source state, pasted verbatim, as ReasoningBank and
  mem0 retrieve. Like those systems it searches only the asking tenant's memories (their user
  or agent id filter), and applies no applicability, validity, consent, role, classification
  or poisoning check.
- `utility_replay`: the same candidates ranked by `0.5 * similarity + 0.5 * utility`, utility
  being the Beta(1,1) posterior mean of the memory's recorded track record (as ReMem-style
  value-aware retrieval does); no applicability stage.
- `compiled` (situated, `rules` reconstructor): `Memory.recall` with the scenario's
  principal, namespace, intent and policy; its rendered briefing is the context.
- `mem0_replay` (optional, the `peers` extra): mem0 itself as the raw-replay arm, on the same
  embedder's vectors (`situated.eval.mem0_arm`).
- `unscoped_replay`: raw replay with no tenant filter at all. Not part of the default
  scorecard: it exists to show that the cross-scope leak metric can see a leak.

The track records in the scenario are given to `utility_replay` only: the public API has no
way to import outcome history, so compiled recall sees every memory at the prior utility 0.5.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.errors import InvalidInput, SituatedError
from situated.eval.agents import Guidance, ServedItem
from situated.eval.scenarios import MemorySpec, Scenario, ScenarioError
from situated.memory import Memory
from situated.models import LifecycleState, Principal, State, utcnow
from situated.recall.compile import token_counter
from situated.recall.reconstruct import Policy

DAY = 86400.0
RAW_HEADER = "Relevant past experience:"


class Unsupported(Exception):
    """The scenario needs a capability the installed situated does not have yet."""


def revoke_available() -> str | None:
    """None when `Memory.revoke_consent` exists; otherwise why revoked consent is unsupported."""
    if callable(getattr(Memory, "revoke_consent", None)):
        return None
    return "Memory.revoke_consent does not exist yet"


@dataclass
class World:
    """One scenario's store, its id -> key map, and the baselines' vectors."""

    scenario: Scenario
    memory: Memory
    embedder: Embedder
    path: Path
    keys_by_id: dict[str, list[str]] = field(default_factory=dict)
    vectors: dict[str, Vector] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)
    merged: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Memory] = field(default_factory=dict)
    peers: dict[str, tuple[Any, Callable[[Any], None]]] = field(default_factory=dict)
    """Other systems' stores built from this scenario (the mem0 arm's), with their close."""

    def stable_id(self, memory_id: str) -> str:
        """A run-independent id of the same form (`mem_` + 16 hex) for a stored memory."""
        keys = self.keys_by_id.get(memory_id, [memory_id])
        digest = hashlib.sha256(f"{self.scenario.id}\x1f{keys[0]}".encode()).hexdigest()
        return f"mem_{digest[:16]}"

    def memory_for(self, reconstructor: str) -> Memory:
        """The scenario's store opened with another reconstructor (same file)."""
        if reconstructor == "rules":
            return self.memory
        if reconstructor not in self.extra:
            self.extra[reconstructor] = Memory(
                self.path, embedder=self.embedder, reconstructor=reconstructor
            )
        return self.extra[reconstructor]

    def peer(self, name: str, build: Callable[[], Any], close: Callable[[Any], None]) -> Any:
        """Another system's store for this scenario, built on first use, closed with it."""
        if name not in self.peers:
            self.peers[name] = (build(), close)
        return self.peers[name][0]

    def close(self) -> None:
        for store, close in self.peers.values():
            close(store)
        for m in self.extra.values():
            m.close()
        self.memory.close()


def _principal(sc: Scenario) -> Principal:
    p = sc.principal
    return Principal(tenant=p.tenant, roles=frozenset(p.roles), clearance=p.clearance,
                     name="eval-agent")


def _writer(sc: Scenario, m: MemorySpec) -> Principal:
    return Principal(tenant=m.tenant or sc.principal.tenant, roles=frozenset(m.roles),
                     clearance="restricted", name="eval-writer")


def memory_text(m: MemorySpec) -> str:
    """What the replay baselines embed for a memory: its content and its source state."""
    return f"{m.content} | {m.state.describe()}" if m.state else m.content


def build_world(sc: Scenario, path: Path, embedder: Embedder) -> World:
    """Write the scenario's memories into a fresh store at `path`."""
    mem = Memory(path, embedder=embedder, reconstructor="rules")  # not the settings
    world = World(sc, mem, embedder, path)
    now = utcnow()
    try:
        for i, m in enumerate(sc.memories):
            _write(world, i, m, now)
        vecs = embedder.embed([memory_text(m) for m in sc.memories])
    except BaseException:
        world.close()
        raise
    world.vectors = {m.key: vecs[i] for i, m in enumerate(sc.memories)}
    return world


def _write(world: World, i: int, m: MemorySpec, now: float) -> None:
    sc, mem = world.scenario, world.memory
    writer = _writer(sc, m)
    try:
        rec = mem.add(
            m.content, principal=writer, kind=m.kind, namespace=m.namespace or sc.ns,
            state=m.state.to_state() if m.state else None, action=m.action, success=m.success,
            conditions=m.conditions, entity=m.entity, attribute=m.attribute, value=m.value,
            roles=m.roles, classification=m.classification, consent=m.consent,
            authority=m.authority,
            valid_from=None if m.valid_from is None else now + m.valid_from * DAY,
            valid_until=None if m.valid_until is None else now + m.valid_until * DAY,
            policy_version=m.policy_version,
        )
    except InvalidInput as exc:
        raise ScenarioError(f"{sc.id}: memories[{i}].{exc.field}", exc.message) from None
    except SituatedError as exc:  # a write gate refused it: the store does not hold it
        world.refused[m.key] = f"{type(exc).__name__}: {exc}"
        return
    if rec.id in world.keys_by_id:
        # situated folded this proposal into a memory it already holds (an exact or near
        # duplicate): the store keeps that memory's content, scope and consent, not this one's
        world.merged[m.key] = world.keys_by_id[rec.id][0]
    else:
        world.keys_by_id[rec.id] = [m.key]
        if rec.state is LifecycleState.PROPOSED:
            world.held.append(m.key)
    if m.consent_revoked:  # the owner withdraws consent whatever the store did with it
        _revoke(mem, writer, m)


def _revoke(mem: Memory, owner: Principal, m: MemorySpec) -> None:
    fn: Callable[..., object] | None = getattr(mem, "revoke_consent", None)
    if fn is None:
        raise Unsupported("Memory.revoke_consent does not exist yet")
    params = inspect.signature(fn).parameters
    # consent is withdrawn by an administrator of the memory's tenant
    admin = Principal(tenant=owner.tenant, roles=frozenset({"admin"}), clearance="restricted",
                      name="eval-admin")
    kwargs: dict[str, object] = {}
    if "principal" in params:
        kwargs["principal"] = admin
    elif "actor" in params:
        kwargs["actor"] = admin
    if "reason" in params:
        kwargs["reason"] = "consent withdrawn (eval scenario)"
    try:
        fn(m.consent, **kwargs)
    except (SituatedError, TypeError) as exc:
        raise Unsupported(f"Memory.revoke_consent failed: {exc}") from exc


class Arm(Protocol):
    """Serves guidance for one scenario's store."""

    @property
    def name(self) -> str: ...

    def serve(self, world: World) -> Guidance: ...


@dataclass(frozen=True)
class NoMemory:
    """The agent acts on its own."""

    name: str = "no_memory"

    def serve(self, world: World) -> Guidance:
        return Guidance()


def _query(sc: Scenario) -> str:
    return f"{sc.intent} {sc.present.describe()}".strip()


@dataclass(frozen=True)
class RawReplay:
    """Top-k by similarity, pasted verbatim; tenant-scoped unless `scoped` is false."""

    k: int = 3
    scoped: bool = True
    utility_weight: float = 0.0
    name: str = "raw_replay"

    def rank(self, world: World, qvec: Vector) -> list[MemorySpec]:
        sc = world.scenario
        pool = [
            m for m in sc.memories
            if not self.scoped or (m.tenant or sc.principal.tenant) == sc.principal.tenant
        ]
        w = self.utility_weight
        scored = [
            ((1 - w) * float(np.dot(world.vectors[m.key], qvec))
             + w * m.track_record.utility, -i, m)
            for i, m in enumerate(pool)
        ]
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [m for _, _, m in scored[: self.k]]

    def serve(self, world: World) -> Guidance:
        started = time.perf_counter()
        qvec = world.embedder.embed([_query(world.scenario)])[0]
        chosen = self.rank(world, qvec)
        latency = (time.perf_counter() - started) * 1000
        counter = token_counter()
        lines = [f"- {m.content}" for m in chosen]
        context = "\n".join([RAW_HEADER, *lines]) if chosen else ""
        items = tuple(
            ServedItem(m.key, counter.count(line)) for m, line in zip(chosen, lines, strict=True)
        )
        return Guidance(items, context, counter.count(context) if context else 0, latency)


def utility_replay(k: int = 3) -> RawReplay:
    """Similarity plus outcome utility, no applicability stage."""
    return RawReplay(k=k, utility_weight=0.5, name="utility_replay")


def unscoped_replay(k: int = 3) -> RawReplay:
    """Raw replay without even a tenant filter (to prove the leak metric sees leaks)."""
    return RawReplay(k=k, scoped=False, name="unscoped_replay")


@dataclass(frozen=True)
class Compiled:
    """situated's compiled recall: the rendered briefing is the context."""

    k: int = 3
    budget_tokens: int = 400
    reconstructor: str = "rules"
    name: str = "compiled"

    def serve(self, world: World) -> Guidance:
        sc = world.scenario
        mem = world.memory_for(self.reconstructor)
        pol = sc.policy
        policy = Policy(
            allowed_tools=None if pol.allowed_tools is None else frozenset(pol.allowed_tools),
            prohibited_effects=frozenset(pol.prohibited_effects), version=pol.version,
        )
        state = State(sc.present.text, facts=sc.present.facts)
        started = time.perf_counter()
        b = mem.recall(state, principal=_principal(sc), intent=sc.intent, namespace=sc.ns,
                       k=self.k, budget_tokens=self.budget_tokens, policy=policy)
        latency = (time.perf_counter() - started) * 1000
        # memory ids are random; put stable ids of the same form in the context, so token
        # counts (and anything an agent reads) do not change from run to run
        context = b.render()
        counter = token_counter()
        items: list[ServedItem] = []
        for item in b.items:
            stable = world.stable_id(item.memory_id)
            context = context.replace(item.memory_id, stable)
            tokens = counter.count(f"{item.text} [{stable}]")
            items.extend(ServedItem(k, tokens) for k in world.keys_by_id.get(item.memory_id, []))
        rejected = tuple(
            (key, r.reason.value)
            for r in b.rejected for key in world.keys_by_id.get(r.memory_id, [])
        )
        return Guidance(tuple(items), context, counter.count(context), latency, b.mode.value,
                        rejected)


ARM_NAMES = ("no_memory", "raw_replay", "utility_replay", "compiled")
"""The default arms, in report order."""


def make_arms(names: Sequence[str], k: int, budget_tokens: int) -> list[Arm]:
    """Build arms by name: the defaults, `unscoped_replay`, or `compiled:<reconstructor>`."""
    out: list[Arm] = []
    for name in names:
        if name == "no_memory":
            out.append(NoMemory())
        elif name == "raw_replay":
            out.append(RawReplay(k=k))
        elif name == "utility_replay":
            out.append(utility_replay(k))
        elif name == "unscoped_replay":
            out.append(unscoped_replay(k))
        elif name == "compiled":
            out.append(Compiled(k=k, budget_tokens=budget_tokens))
        elif name == "mem0_replay":
            from situated.eval.mem0_arm import Mem0Replay, available

            if (reason := available()) is not None:
                raise InvalidInput("arms", reason)
            out.append(Mem0Replay(k=k))
        elif name.startswith("compiled:"):
            recon = name.split(":", 1)[1]
            out.append(Compiled(k=k, budget_tokens=budget_tokens, reconstructor=recon, name=name))
        else:
            raise InvalidInput("arms", f"unknown arm {name!r}")
    if not out or out[0].name != "no_memory":
        raise InvalidInput("arms", "the first arm must be no_memory (the paired baseline)")
    return out
