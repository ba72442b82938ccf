"""BoundMemory: the one door of every framework adapter (no framework needed)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from adapter_store import ME, NOW, NOW_FACTS, quickstart
from situated import InvalidInput, Kind, LifecycleState, Memory
from situated.adapters import BoundMemory
from situated.adapters.bound import lock_for


@pytest.fixture
def store(tmp_path: Path) -> tuple[Memory, dict[str, str]]:
    return quickstart(tmp_path / "b.db")


def test_one_lock_per_memory(store: tuple[Memory, dict[str, str]], tmp_path: Path) -> None:
    mem, _ = store
    a, b = BoundMemory(mem, ME), BoundMemory(mem, ME, namespace="refunds")
    assert a._lock is b._lock is lock_for(mem)
    other = Memory(tmp_path / "other.db", embedder="hash")
    assert lock_for(other) is not lock_for(mem)


def test_recall_remember_feedback(store: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = store
    bound = BoundMemory(mem, ME, namespace="refunds", k=2)
    briefing = bound.recall(NOW, facts=NOW_FACTS)
    assert len(briefing.items) <= 2 and ids["foreign"] not in [i.memory_id for i in briefing.items]
    done = bound.remember("Prefers a call-back after 5 pm.", kind="preference")
    assert done.record.kind is Kind.PREFERENCE and done.record.state is LifecycleState.ACTIVE
    assert done.record.scope.namespace == "refunds" and done.warnings == ()
    held = bound.remember("Card 4111 1111 1111 1111 was charged twice.")
    assert held.warnings and "REDACTED" in held.record.content  # the redaction, said
    result = bound.feedback(briefing.recall_id, success=True,
                            used=[briefing.items[0].memory_id])
    assert result.credited == (briefing.items[0].memory_id,)


def test_bad_input_names_the_argument(store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    bound = BoundMemory(mem, ME)
    cases = [
        (lambda: bound.remember("x", kind="fact"), "kind"),
        (lambda: bound.remember("x", kind="rumour"), "kind"),
        (lambda: bound.remember("x", facts={"a": 1}), "facts"),
        (lambda: bound.recall(42), "situation"),  # type: ignore[arg-type]
        (lambda: bound.recall("x", facts=[("a", 1)]), "facts"),  # type: ignore[arg-type]
        (lambda: BoundMemory(mem, ME, policy="strict"), "policy"),  # type: ignore[arg-type]
        (lambda: BoundMemory(mem, ME, budget_tokens=10**9), "budget_tokens"),
        (lambda: BoundMemory(mem, ME, namespace=b"refunds"), "namespace"),  # type: ignore[arg-type]
    ]
    for call, field in cases:
        with pytest.raises(InvalidInput) as exc:
            call()
        assert exc.value.field == field, field


def test_threads_share_one_memory_safely(store: tuple[Memory, dict[str, str]]) -> None:
    mem, _ = store
    bound = BoundMemory(mem, ME, namespace="threads")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            bound.remember(f"Thread {n} saw customer {n} ask for an invoice copy.")
            bound.recall(f"customer {n} invoice copy")
        except BaseException as exc:  # collected for the assertion below, then re-raised
            errors.append(exc)
            raise

    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(mem.list(principal=ME, namespace="threads")) == 12
