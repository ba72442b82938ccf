"""AsyncMemory: the same surface as Memory, safe for many concurrent coroutines."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from situated import InvalidInput, Memory, Mode, Principal, State, UsageError
from situated.aio import AsyncMemory

ME = Principal(tenant="acme", roles={"support"}, clearance="internal")
OTHER = Principal(tenant="globex", roles={"support"}, clearance="internal")


def test_same_surface_as_memory() -> None:
    public = {n for n, v in vars(Memory).items() if callable(v) and not n.startswith("_")}
    mine = {n for n, v in vars(AsyncMemory).items() if callable(v) and not n.startswith("_")}
    assert public <= mine, public - mine
    for name in public - {"close"}:
        assert inspect.iscoroutinefunction(getattr(AsyncMemory, name)), name


def test_round_trip(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemory(tmp_path / "a.db", embedder="hash") as mem:
            rec = await mem.add("Refunds above 250 USD need a supervisor's approval.",
                                principal=ME, kind="fact", entity="refund_policy",
                                attribute="approval_threshold_usd", value=250,
                                authority="system_observed")
            b = await mem.recall(State("a refund of 300 USD needs approval?"), principal=ME,
                                 intent="refund approval threshold")
            assert b.mode is Mode.GUIDED
            assert [i.memory_id for i in b.items] == [rec.id]
            fb = await mem.feedback(b.recall_id, principal=ME, success=True, used=[rec.id])
            assert fb.credited == (rec.id,)
            assert (await mem.inspect(rec.id, principal=ME)).counters.successes == 1
            assert [r["id"] for r in await mem.export(principal=ME)] == [rec.id]
            assert (await mem.stats(principal=ME)).recalls == 1
            assert (await mem.health()).ok
            assert await mem.list(principal=OTHER) == []

    asyncio.run(main())


def test_errors_are_the_librarys_own(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as exc:
        AsyncMemory(tmp_path / "a.db", embedder="hash", workers=0)
    assert exc.value.field == "workers"

    async def main() -> None:
        mem = AsyncMemory(tmp_path / "a.db", embedder="hash")
        with pytest.raises(InvalidInput) as err:
            await mem.recall("x", principal=ME, k=0)
        assert err.value.field == "k"
        await mem.aclose()
        await mem.aclose()  # idempotent
        with pytest.raises(UsageError):
            await mem.list(principal=ME)

    asyncio.run(main())


@pytest.mark.parametrize("workers", [1, 4])
def test_many_concurrent_coroutines_lose_nothing(tmp_path: Path, workers: int) -> None:
    writes, readers = 120, 40

    async def main() -> None:
        async with AsyncMemory(tmp_path / "c.db", embedder="hash", workers=workers) as mem:
            async def write(n: int) -> str:
                rec = await mem.add(
                    f"Ticket {n}: customer number {n} prefers e-mail at hour {n % 24}.",
                    principal=ME, kind="note", namespace=f"ns{n % 3}")
                return rec.id

            async def read(n: int) -> str:
                b = await mem.recall(f"customer {n} contact preference", principal=ME)
                await mem.feedback(b.recall_id, principal=ME, success=n % 2 == 0,
                                   used=[i.memory_id for i in b.items[:1]])
                return b.recall_id

            results = await asyncio.gather(*(write(n) for n in range(writes)),
                                           *(read(n) for n in range(readers)))
            ids = set(results[:writes])
            assert len(ids) == writes  # every write is its own memory
            listed = await mem.list(principal=ME, limit=1000)
            assert {r.id for r in listed} == ids  # none lost
            stats = await mem.stats(principal=ME)
            assert stats.recalls == readers and stats.feedback == readers
            assert (await mem.health()).ok

    asyncio.run(main())


def test_add_many_review_and_erase(tmp_path: Path) -> None:
    admin = Principal(tenant="acme", roles={"support", "admin", "reviewer"},
                      clearance="restricted")

    async def main() -> None:
        async with AsyncMemory(tmp_path / "m.db", embedder="hash", workers=2) as mem:
            items = ({"content": f"Order {n} ships from the Lyon depot.", "kind": "note"}
                     for n in range(3))  # a generator, consumed in the worker
            recs = await mem.add_many(items, principal=ME)
            assert len(recs) == 3
            await mem.erase(recs[0].id, principal=admin, reason="asked")
            assert len(await mem.list(principal=ME)) == 2
            assert await mem.pending(reviewer=admin) == []
            assert len(await mem.ledger(principal=admin, limit=50)) >= 4
            assert (await mem.rebuild()).mismatched == ()

    asyncio.run(main())
