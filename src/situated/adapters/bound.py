"""`BoundMemory`: a `Memory` used on behalf of one principal, one call at a time.

The one door every framework adapter goes through: the principal, namespace, recall limits,
policy and the authority of what a tool writes are fixed at construction; the calls take only
what an agent may choose (the situation, a memory's text, the outcome). Frameworks call tools
and retrievers from worker threads; a `Memory` is used by one thread at a time, so every call
on the same `Memory` through any `BoundMemory` holds that `Memory`'s lock.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from situated import arguments as args
from situated.errors import InvalidInput
from situated.memory import FeedbackResult, Memory
from situated.models import (
    Authority,
    Kind,
    MemoryRecord,
    Principal,
    Scope,
    State,
    validate_input,
)
from situated.notices import collected, lines
from situated.recall.briefing import Briefing
from situated.recall.reconstruct import Policy

_LOCKS: weakref.WeakKeyDictionary[Memory, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()
# kinds a tool may write; a fact needs entity and attribute, which tools do not ask for
TOOL_KINDS = (Kind.NOTE, Kind.PREFERENCE, Kind.LESSON)


def lock_for(memory: Memory) -> threading.RLock:
    """The lock every adapter holds while it calls `memory`."""
    with _LOCKS_LOCK:
        lock = _LOCKS.get(memory)
        if lock is None:
            lock = _LOCKS[memory] = threading.RLock()
        return lock


@dataclass(frozen=True)
class Remembered:
    """What a write through an adapter did.

    Attributes:
        record: the stored record (ACTIVE if promoted, PROPOSED if held for review,
            REJECTED if a gate refused it), or an existing one it reinforced.
        warnings: what the write's `SituatedWarning`s said (held for review, redacted,
            merged into a stored twin, never servable, ...), one line each.
    """

    record: MemoryRecord
    warnings: tuple[str, ...] = ()


class BoundMemory:
    """A `Memory` bound to one principal and its recall settings.

    Args:
        memory: the `Memory` to use.
        principal: who every call acts as (tenant, roles, clearance); never taken per call.
        namespace: the namespace recalls search (None: all the principal may read) and
            writes go to (None: `"default"`).
        k: at most this many guidance items per recall.
        budget_tokens: the token budget of each briefing.
        policy: allowed tools, prohibited effects and policy version of the run.
        authority: the authority of what is written through this object (default
            `inferred`: an agent's own notes are not the user's or the system's word).

    Raises:
        InvalidInput: an argument is not what it names.
    """

    def __init__(
        self,
        memory: Memory,
        principal: Principal,
        *,
        namespace: str | None = None,
        k: int = 5,
        budget_tokens: int = 800,
        policy: Policy | None = None,
        authority: Authority | str = Authority.INFERRED,
    ) -> None:
        self.memory: Memory = args.instance(memory, "memory", Memory, "a Memory")
        self.principal = args.principal(principal)
        if namespace is not None:  # the rule `Memory` applies: a scope's namespace name
            args.text(namespace, "namespace", args.MAX_LABEL_CHARS)
            validate_input("", lambda: Scope(tenant="t", namespace=namespace))
        self.namespace = namespace
        self.k = args.integer(k, "k", 1, 100)
        self.budget_tokens = args.integer(budget_tokens, "budget_tokens", 1, 32_000)
        if policy is not None:
            args.instance(policy, "policy", Policy, "a Policy")
        self.policy = policy
        self.authority = args.choice(Authority, authority, "authority")
        self._lock = lock_for(self.memory)

    def state(self, situation: str, facts: Mapping[str, Any] | None = None) -> State:
        """The present `State` from an agent's words and optional flat facts."""
        args.text(situation, "situation", args.MAX_TEXT_CHARS)
        if facts is not None and not isinstance(facts, Mapping):
            raise InvalidInput("facts", "must be a flat mapping of name -> scalar")
        return State(situation, facts=dict(facts or {}))

    def recall(
        self, situation: str | State, *, facts: Mapping[str, Any] | None = None, intent: str = ""
    ) -> Briefing:
        """Recall for the present situation, as the bound principal.

        Args:
            situation: the present situation in words, or a `State`.
            facts: flat named observations of the present (with a text `situation`).
            intent: what the agent is trying to do.

        Returns:
            The `Briefing`.
        """
        state = situation if isinstance(situation, State) else self.state(situation, facts)
        with self._lock, collected():  # a fallback's warning is the briefing's `warnings`
            return self.memory.recall(
                state, principal=self.principal, intent=intent, namespace=self.namespace,
                k=self.k, budget_tokens=self.budget_tokens, policy=self.policy,
            )

    def remember(
        self,
        content: str,
        *,
        kind: Kind | str = Kind.NOTE,
        situation: str | None = None,
        facts: Mapping[str, Any] | None = None,
        action: str | None = None,
        success: bool | None = None,
        conditions: Sequence[str] = (),
    ) -> Remembered:
        """Propose a memory as the bound principal, through every write gate.

        Args:
            content: the memory's text.
            kind: `note`, `preference` or `lesson` (facts need an entity and attribute: write
                them with `Memory.add`).
            situation: for a lesson, the situation it was learned in.
            facts: for a lesson, the flat facts of that situation.
            action: for a lesson, what was done.
            success: for a lesson, whether it worked.
            conditions: for a lesson, when it applies (`"plan == 'annual'"`).

        Returns:
            The record and the warnings the write raised.
        """
        chosen = args.choice(Kind, kind, "kind")
        if chosen not in TOOL_KINDS:
            raise InvalidInput("kind", "one of note, preference, lesson")
        state = None if situation is None else self.state(situation, facts)
        if state is None and facts:
            raise InvalidInput("facts", "facts describe a situation: give `situation` too")
        with self._lock, collected() as notices:
            rec = self.memory.add(
                content, principal=self.principal, kind=chosen,
                namespace=self.namespace or "default", state=state, action=action,
                success=success, conditions=conditions, authority=self.authority,
            )
        return Remembered(rec, tuple(lines(notices)))

    def feedback(
        self, recall_id: str, *, success: bool, used: Sequence[str] = (), cited: str | None = None
    ) -> FeedbackResult:
        """Report how the episode after a recall ended, as the bound principal.

        Args:
            recall_id: the briefing's `recall_id`.
            success: how the episode ended.
            used: ids of served memories the agent acted on.
            cited: the agent's output text; served ids cited in it count as used.

        Returns:
            The `FeedbackResult`.
        """
        with self._lock:
            return self.memory.feedback(
                recall_id, principal=self.principal, success=success, used=used, cited=cited
            )


def briefing_summary(briefing: Briefing) -> dict[str, Any]:
    """A briefing as JSON-ready data for a tool's answer: the rendered, quoted guidance, the
    ids an agent needs for feedback, and the notes (a model that failed over, proposals
    waiting for review)."""
    return {
        "recall_id": briefing.recall_id,
        "mode": briefing.mode.value,
        "missing_facts": list(briefing.missing_facts),
        "items": [
            {"memory_id": i.memory_id, "verdict": i.verdict.value,
             "confidence": round(i.confidence, 3)}
            for i in briefing.items
        ],
        "briefing": briefing.render(),
        "notes": briefing.notes(),
    }


def remembered_summary(done: Remembered) -> dict[str, Any]:
    """A write's outcome as JSON-ready data for a tool's answer."""
    return {"memory_id": done.record.id, "state": done.record.state.value,
            "warnings": list(done.warnings)}


def feedback_summary(result: FeedbackResult) -> dict[str, Any]:
    """A feedback result as JSON-ready data for a tool's answer."""
    return {"recall_id": result.recall_id, "credited": list(result.credited),
            "blamed": list(result.blamed), "exposed": len(result.exposed),
            "duplicate": result.duplicate}
