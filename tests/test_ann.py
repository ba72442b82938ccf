"""The approximate index of large tenants (`situated.store.ann`): the same eligible set as the
exact search (never an ineligible row, never fewer than k when k are eligible), persisted next
to the database, stale copies detected and rebuilt. The threshold is set low so the graphs are
built over small stores; exact search over the same file is the authority."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situated import InvalidInput, Memory, Principal
from situated.store.ann import Graph
from situated.store.scope import Eligibility
from test_resident import ADMIN, WORDS, _fill, principals

pytest.importorskip("faiss")

ROWS = 64


def _open(path: Path, **kw: object) -> Memory:
    mem = Memory(path, embedder="hash", ann_rows=ROWS, **kw)  # type: ignore[arg-type]
    mem.store.resident.load_after = 1
    return mem


@pytest.fixture(scope="module")
def twins() -> tuple[Memory, Memory]:
    """One file: approximate index on (low threshold) and exact search only."""
    d = Path(tempfile.mkdtemp(prefix="ann-"))
    on = _open(d / "m.db")
    _fill(on, 260, seed=5)
    on.revoke_consent("c1", principal=ADMIN, reason="test")
    exact = Memory(d / "m.db", embedder="hash", ann_rows=0)
    exact.store.resident.load_after = 1
    return on, exact


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(
    who=principals,
    namespace=st.sampled_from([None, "ops", "billing"]),
    as_of_shift=st.sampled_from([None, -5000.0]),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    k=st.sampled_from([1, 10, 40, 500]),
)
def test_same_eligible_set_as_exact(
    twins: tuple[Memory, Memory], who: Principal, namespace: str | None,
    as_of_shift: float | None, query: str, k: int,
) -> None:
    on, exact = twins
    as_of = None if as_of_shift is None else time.time() + as_of_shift
    elig = Eligibility.for_recall(who, namespace, as_of)
    qvec = on.embedder.embed([query])[0]
    a = on.store.search(qvec, query, k, elig)
    b = exact.store.search(qvec, query, k, elig)
    assert not exact.store.resident.slices["acme"].graphs
    eligible = {r.id: r for r in exact.store.page(elig, limit=10_000)}
    bound = [r for r in eligible.values()
             if r.kind.value == "lesson" and r.source.state is not None]
    for ranked, pool in ((a.content, eligible), (a.state, bound)):
        rids = [r for r, _ in ranked]
        got = on.store.by_rids(rids, elig)
        assert len(got) == len(rids) == len(set(rids))  # never an ineligible row
        assert len(rids) == min(k, len(pool))  # never fewer than k when k are eligible
    assert len(a.content) == len(b.content) and len(a.state) == len(b.state)
    # exact cosines, best first
    assert all(x[1] >= y[1] - 1e-6 for x, y in zip(a.content, a.content[1:], strict=False))
    assert np.allclose(
        [s for _, s in a.content],
        [float(np.dot(v, qvec)) for v in on.store.vectors_of(
            "content", [r for r, _ in a.content], elig).values()], atol=1e-5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(
    who=principals,
    queries=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
                     min_size=1, max_size=6),
    k=st.sampled_from([1, 5, 40, 500]),
)
def test_dense_many_through_the_graph_keeps_the_eligible_set(
    twins: tuple[Memory, Memory], who: Principal, queries: list[str], k: int,
) -> None:
    """The write path's near-duplicate search (`dense_many`) walks a large tenant's graph:
    never an ineligible row, exactly min(k, eligible) rows, exact cosines best first, and a
    stored row's own vector finds that row first (what a near-duplicate lookup relies on)."""
    on, exact = twins
    elig = Eligibility.for_recall(who)
    qs = on.embedder.embed(queries)
    got = on.store.dense_many("content", qs, k, elig)
    want = exact.store.dense_many("content", qs, k, elig)
    pool = {r.id for r in exact.store.page(elig, limit=10_000)}
    for q, hits, ref in zip(qs, got, want, strict=True):
        rids = [r for r, _ in hits]
        assert len(rids) == len(set(rids)) == min(k, len(pool)) == len(ref)
        assert set(on.store.by_rids(rids, elig)) == set(rids)  # never an ineligible row
        sims = [v for _, v in hits]
        assert all(x >= y - 1e-6 for x, y in itertools.pairwise(sims))
        vecs = on.store.vectors_of("content", rids, elig)
        assert np.allclose(sims, [float(np.dot(vecs[r], q)) for r in rids], atol=1e-5)
    # a stored row's own vector finds it (or an identical vector) first
    mine = [r for r, _ in got[0][:3]]
    if mine:
        own = on.store.vectors_of("content", mine, elig)
        found = on.store.dense_many("content", np.stack([own[r] for r in mine]), 1, elig)
        for hits in found:
            assert hits and hits[0][1] >= 1 - 1e-5


def test_the_graphs_answer_and_health_checks_them(twins: tuple[Memory, Memory]) -> None:
    on, _ = twins
    elig = Eligibility.for_recall(ADMIN, None, None)
    q = on.embedder.embed(["refund invoice"])[0]
    on.store.search(q, "refund invoice", 10, elig)
    s = on.store.resident.slices["acme"]
    assert set(s.graphs) == {"content", "state"} and all(g.n == s.n for g in s.graphs.values())
    assert s.graphs["content"].served > 0  # the approximate path ran, not only the fallback
    g = s.graphs["content"]
    walked = g.served + g.short
    on.store.dense_many("content", on.embedder.embed(["refund", "deploy", "mug"]), 5, elig)
    assert g.served + g.short == walked + 3  # the write path's batch search walks it too
    h = on.health()
    assert h.ok and h.resident["mismatches"] == 0
    assert h.resident["ann"]["tenants"] >= 1 and h.resident["ann"]["available"]
    # recall@10 of the graph against exact over the same rows, for queries near stored rows
    rng = np.random.default_rng(0)
    hits = 0
    for i in range(20):
        qv = s.matrix("content")[i * 7] + 0.5 * rng.standard_normal(s.dim).astype(
            np.float32) / np.sqrt(s.dim)
        qv /= np.linalg.norm(qv)
        allowed = np.ones(s.n, dtype=np.bool_)
        got = s.graphs["content"].search(s.matrix("content"), qv, 10, allowed, s.n, 128)
        assert got is not None
        truth = np.argsort(-(s.matrix("content") @ qv))[:10]
        hits += len(set(got.tolist()) & set(truth.tolist()))
    assert hits / 200 >= 0.9


def test_a_graph_that_cannot_promise_k_says_so() -> None:
    """A very selective allowed set and a tiny walk: the graph finds fewer than k, returns
    None (the slice then searches exactly); whatever it returns is allowed."""
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((3000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    g = Graph.build("content", vecs)
    shorts = 0
    for trial in range(30):
        allowed = np.zeros(3000, dtype=np.bool_)
        allowed[rng.choice(3000, 12, replace=False)] = True
        got = g.search(vecs, vecs[trial], 10, allowed, 12, ef=1)
        if got is None:
            shorts += 1
            continue
        assert len(got) == 10 and allowed[got].all()
    assert shorts == g.short and shorts > 0


def test_slice_falls_back_to_exact_when_the_graph_is_short(tmp_path: Path) -> None:
    on = _open(tmp_path / "m.db")
    _fill(on, 160, seed=9)
    elig = Eligibility.for_recall(ADMIN, None, None)
    q = on.embedder.embed(["kettle stove"])[0]
    on.store.search(q, "kettle", 10, elig)
    s = on.store.resident.slices["acme"]
    assert s.ann is not None
    s.ann = type(s.ann)(rows=ROWS, exact_below=1, ef_search=1)  # a walk too short to trust
    exact = Memory(tmp_path / "m.db", embedder="hash", ann_rows=0)
    exact.store.resident.load_after = 1
    for who in (ADMIN, Principal(tenant="acme", roles={"ops"}, clearance="public")):
        e = Eligibility.for_recall(who, "ops", None)
        for k in (5, 30):
            a, b = on.store.dense("content", q, k, e), exact.store.dense("content", q, k, e)
            assert len(a) == len(b) == len(on.store.by_rids([r for r, _ in a], e))


def test_persisted_graphs_are_reused_and_extended(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = _open(path)
    _fill(first, 160, seed=2)
    elig = Eligibility.for_recall(ADMIN, None, None)
    q = first.embedder.embed(["visa flight"])[0]
    before = first.store.search(q, "visa", 10, elig)
    assert first.store.resident.describe()["ann"]["builds"] == 2
    first.close()
    # another process adds memories without loading the graphs
    writer = Memory(path, embedder="hash", resident_mb=0)
    _fill(writer, 20, seed=4)
    writer.close()
    again = _open(path)
    after = again.store.search(q, "visa", 10, elig)
    ann = again.store.resident.describe()["ann"]
    assert ann["loaded"] == 2 and ann["builds"] == 0  # a restart does not rebuild
    s = again.store.resident.slices["acme"]
    assert all(g.n == s.n for g in s.graphs.values())  # the new rows were added
    assert again.health().ok
    exact = Memory(path, embedder="hash", ann_rows=0)
    assert len(after.content) == len(exact.store.search(q, "visa", 10, elig).content)
    assert before.content  # something to compare
    again.close()


def test_stale_graphs_are_rebuilt_and_erasure_deletes_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = _open(path)
    _fill(first, 160, seed=6)
    elig = Eligibility.for_recall(ADMIN, None, None)
    victim = first.store.page(elig, limit=1)[0].id
    q = first.embedder.embed(["mug drawer"])[0]
    first.store.search(q, "mug", 10, elig)
    first.close()
    saved = tmp_path / "saved"
    shutil.copytree(tmp_path / "m.db-ann", saved)
    eraser = Memory(path, embedder="hash", resident_mb=0)
    eraser.erase(victim, principal=ADMIN, reason="request")
    assert not list((tmp_path / "m.db-ann").glob("*.faiss"))  # the erasing process deleted them
    eraser.close()
    # a copy made before the erasure put back: its rows no longer match, it is rebuilt
    shutil.rmtree(tmp_path / "m.db-ann")
    shutil.copytree(saved, tmp_path / "m.db-ann")
    again = _open(path)
    found = again.store.search(q, "mug", 500, elig)
    ann = again.store.resident.describe()["ann"]
    assert ann["builds"] == 2 and ann["loaded"] == 0
    served = again.store.by_rids([r for r, _ in found.content], elig)
    assert len(served) == len(found.content) and victim not in {r.id for r in served.values()}
    s = again.store.resident.slices["acme"]
    assert all(g.n == s.n for g in s.graphs.values())
    assert again.health().ok
    again.close()


def test_ann_rows_is_validated(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="ann_rows"):
        Memory(tmp_path / "m.db", embedder="hash", ann_rows=-1)
    assert not (tmp_path / "m.db").exists()
