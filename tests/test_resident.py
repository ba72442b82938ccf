"""The resident index: same answers as the SQLite path, coherent with other processes' writes,
nothing erased left in memory, never trusted inside a write transaction."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situated import Classification, InvalidInput, Memory, Principal, State
from situated.models import LifecycleState
from situated.store.resident import tokens
from situated.store.scope import Eligibility
from situated.store.sqlite import lexical_terms

WORDS = "refund invoice deploy rollback mug drawer stove kettle flight visa".split()
ADMIN = Principal(tenant="acme", roles={"admin", "ops", "support"}, clearance="restricted")


def _fill(mem: Memory, n: int, seed: int) -> list[str]:
    """Memories of two tenants with varied namespaces, roles, levels, validity and states."""
    rng = np.random.default_rng(seed)
    ids = []
    now = time.time()
    for i in range(n):
        tenant = "acme" if rng.random() < 0.7 else "globex"
        roles = [r for r in ("ops", "support") if rng.random() < 0.3]
        writer = Principal(tenant=tenant, roles=set(roles) | {"admin"}, clearance="restricted")
        words = " ".join(str(w) for w in rng.choice(WORDS, 5))
        until = now - 10 if rng.random() < 0.1 else None
        rec = mem.add(
            f"lesson {i}: {words}", principal=writer,
            namespace=str(rng.choice(["ops", "billing", "home"])),
            state=State(f"the {rng.choice(WORDS)} is {rng.choice(['on', 'off'])}",
                        facts={"n": i}) if rng.random() < 0.7 else None,
            kind="lesson" if rng.random() < 0.8 else "note",
            roles=roles, classification=str(rng.choice(["public", "internal", "confidential"])),
            valid_from=now - 1000 if until else None, valid_until=until,
            consent="c1" if rng.random() < 0.2 else None,
        )
        ids.append(rec.id)
    return ids


principals = st.builds(
    Principal,
    tenant=st.sampled_from(["acme", "globex"]),
    roles=st.frozensets(st.sampled_from(["ops", "support", "admin"]), max_size=2),
    clearance=st.sampled_from(list(Classification)),
)


@pytest.fixture(scope="module")
def twin_stores() -> tuple[Memory, Memory]:
    """One file, two connections: the resident index on and off."""
    d = Path(tempfile.mkdtemp(prefix="resident-"))
    on = Memory(d / "m.db", embedder="hash")
    on.store.resident.load_after = 1  # from the first search
    _fill(on, 120, seed=3)
    on.revoke_consent("c1", principal=ADMIN, reason="test")
    off = Memory(d / "m.db", embedder="hash", resident_mb=0)
    return on, off


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(
    who=principals,
    namespace=st.sampled_from([None, "ops", "billing", "nowhere"]),
    as_of_shift=st.sampled_from([None, -5000.0, 0.0]),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    k=st.sampled_from([1, 5, 200]),
)
def test_same_rankings_as_sqlite(
    twin_stores: tuple[Memory, Memory], who: Principal, namespace: str | None,
    as_of_shift: float | None, query: str, k: int,
) -> None:
    on, off = twin_stores
    as_of = None if as_of_shift is None else time.time() + as_of_shift
    elig = Eligibility.for_recall(who, namespace, as_of)
    qvec = on.embedder.embed([query])[0]
    a = on.store.search(qvec, query, k, elig)
    b = off.store.search(qvec, query, k, elig)
    assert on.store.resident.slices and not off.store.resident.slices
    assert np.allclose([s for _, s in a.content], [s for _, s in b.content], atol=1e-5)
    assert _above_cut(a.content) == _above_cut(b.content)  # the order of equal scores is free
    # state: the top k situation-bound rows; SQLite's path keeps those among its top k rows
    assert _above_cut(b.state) <= {r for r, _ in a.state}
    assert all(a.situational[r] for r, _ in a.state)
    # BM25 statistics differ (per tenant vs global): the matching rows are the same
    if k == 200:
        assert {r for r, _ in a.lexical} == {r for r, _ in b.lexical}
    eligible = {r.id for r in off.store.page(elig, limit=10_000)}
    rids = {r for r, _ in a.content + a.state + a.lexical}
    assert {rec.id for rec in on.store.by_rids(list(rids), elig).values()} <= eligible
    assert len(on.store.by_rids(list(rids), elig)) == len(rids)  # nothing ineligible proposed


def _above_cut(ranked: list[tuple[int, float]]) -> set[int]:
    """The rows scoring clearly above the last one kept (ties at the cut may go either way)."""
    if not ranked:
        return set()
    cut = ranked[-1][1]
    return {r for r, s in ranked if s > cut + 1e-5}


def test_other_connections_writes_are_seen(tmp_path: Path) -> None:
    reader = Memory(tmp_path / "m.db", embedder="hash")
    reader.store.resident.load_after = 1
    writer = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0)
    who = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    first = writer.add("Refund the annual plan within 30 days.", principal=who,
                       namespace="billing", consent="c9", kind="note")
    b = reader.recall("customer asks for a refund", principal=who, intent="refund")
    assert first.id in {i.memory_id for i in b.items}
    slice_ = reader.store.resident.slices["acme"]
    assert slice_.n == 1

    second = writer.add("Offer store credit on refund for the monthly plan.", principal=who,
                        namespace="billing", kind="note")
    b = reader.recall("customer asks for a refund", principal=who, intent="refund")
    assert {first.id, second.id} <= {i.memory_id for i in b.items} | {
        r.memory_id for r in b.rejected}
    assert reader.store.resident.slices["acme"].n == 2  # patched, not reloaded
    assert reader.store.resident.loads == 1

    writer.revoke_consent("c9", principal=who, reason="user withdrew consent")
    b = reader.recall("customer asks for a refund", principal=who, intent="refund")
    assert first.id not in {i.memory_id for i in b.items}
    assert reader.health().resident["mismatches"] == 0


def test_erasure_leaves_nothing_resident(tmp_path: Path) -> None:
    reader = Memory(tmp_path / "m.db", embedder="hash")
    reader.store.resident.load_after = 1
    writer = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0)
    who = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    keep = writer.add("Restart the kettle service after a deploy.", principal=who, kind="note")
    gone = writer.add("Zanzibarquux protocol: call the vendor first.", principal=who,
                      kind="note")
    reader.recall("zanzibarquux vendor", principal=who)
    s = reader.store.resident.slices["acme"]
    assert "zanzibarquux" in s.vocab

    writer.erase(gone.id, principal=who, reason="subject asked")
    b = reader.recall("zanzibarquux vendor", principal=who)
    assert gone.id not in {i.memory_id for i in b.items} | {r.memory_id for r in b.rejected}
    s = reader.store.resident.slices["acme"]
    assert "zanzibarquux" not in s.vocab  # the slice was rebuilt without it
    assert s.n == 1 and keep.id in {r.id for r in reader.store.by_rids(list(s.pos), Eligibility(
        who, states=tuple(LifecycleState))).values()}


def test_repair_without_events_reloads(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.store.resident.load_after = 1
    who = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    rec = mem.add("Drain the node before the upgrade.", principal=who, kind="note")
    # a change with no ledger event (what `rebuild(repair=True)` fixes): the state drifts
    with mem.store.transaction():
        mem.store.db.execute("UPDATE memories SET state = 'ARCHIVED' WHERE id = ?", (rec.id,))
    b = mem.recall("upgrade the node", principal=who)
    assert not b.items and mem.store.resident.slices  # the slice holds the drifted state
    assert mem.rebuild(repair=True).repaired  # back to ACTIVE, still without an event
    b = mem.recall("upgrade the node", principal=who)
    assert rec.id in {i.memory_id for i in b.items}
    assert mem.store.resident.loads == 2
    assert mem.health().resident["mismatches"] == 0


def test_not_used_inside_a_write_transaction(mem: Memory) -> None:
    mem.store.resident.load_after = 1
    who = Principal(tenant="acme", clearance="internal")
    mem.add("Pin the config before the release.", principal=who)
    elig = Eligibility.for_recall(who)
    with mem.store.transaction():
        assert mem.store._slice(elig) is None
    assert mem.store._slice(elig) is not None


def test_over_budget_tenant_uses_sqlite(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0.001)
    mem.store.resident.load_after = 1
    who = Principal(tenant="acme", clearance="internal")
    rec = mem.add("Verify the backup before the migration.", principal=who, kind="note")
    b = mem.recall("migration backup", principal=who)
    assert rec.id in {i.memory_id for i in b.items}
    assert not mem.store.resident.slices
    assert mem.health().resident["over_budget_tenants"] == 1


def test_resident_mb_is_validated(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as e:
        Memory(tmp_path / "m.db", embedder="hash", resident_mb=-1)
    assert e.value.field == "resident_mb"
    assert not (tmp_path / "m.db").exists()


def test_tokens_split_like_fts5() -> None:
    assert tokens("Tests_passing, CAFÉ au-lait x2") == ["tests", "passing", "cafe", "au",
                                                       "lait", "x2"]
    assert lexical_terms("the error_rate is high") == ["error", "rate", "high"]


def test_one_shot_process_never_loads(tmp_path: Path) -> None:
    """The first search of a tenant runs in SQLite; the second loads the slice."""
    who = Principal(tenant="acme", clearance="internal")
    with Memory(tmp_path / "m.db", embedder="hash") as writer:
        rec = writer.add("Check the invoice before the refund.", principal=who, kind="note")
    mem = Memory(tmp_path / "m.db", embedder="hash")
    first = mem.recall("refund invoice", principal=who)
    assert not mem.store.resident.slices and mem.store.resident.loads == 0
    second = mem.recall("refund invoice", principal=who)
    assert mem.store.resident.loads == 1
    assert [i.memory_id for i in first.items] == [i.memory_id for i in second.items] == [rec.id]


def test_postings_merge_keeps_bm25(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows appended later sit in the delta until a merge; scores are the same either way."""
    import situated.store.slice as resident

    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.store.resident.load_after = 1
    who = Principal(tenant="acme", clearance="internal")
    rng = np.random.default_rng(5)
    for i in range(60):
        mem.add(f"note {i}: " + " ".join(str(w) for w in rng.choice(WORDS, 6)), principal=who,
                kind="note")
    mem.recall("refund deploy", principal=who)  # loads the slice: all postings in the delta
    s = mem.store.resident.slices["acme"]
    assert len(s.delta[0]) and len(s.post_rows) == 0
    terms = ["refund", "deploy", "visa", "note", "absent"]
    before = s.bm25(terms).copy()
    s._merge()
    assert len(s.delta[0]) == 0 and len(s.post_rows)
    assert np.allclose(s.bm25(terms), before)
    monkeypatch.setattr(resident, "DELTA_MIN", 1)
    monkeypatch.setattr(resident, "DELTA_FRACTION", 0.0)
    new = mem.add("refund the visa fee", principal=who, kind="note")
    b = mem.recall("refund visa", principal=who)  # patched in, merged at once
    assert len(s.delta[0]) == 0 and s.n == 61
    assert new.id in {i.memory_id for i in b.items}
    rows, _tf = s.postings("visa")
    assert list(rows) == sorted(rows) and s.pos[mem.store._rid(new.id)] in set(rows.tolist())


def test_working_set_over_budget_does_not_thrash(tmp_path: Path) -> None:
    """Tenants taking turns over a budget that holds one slice: evicted tenants wait longer
    for their next load each time, so most searches stay in SQLite instead of reloading."""
    mem = Memory(tmp_path / "m.db", embedder="hash")
    whos = [Principal(tenant=t, clearance="internal") for t in ("a", "b", "c")]
    for who in whos:
        for i in range(30):
            mem.add(f"note {i} about refunds for {who.tenant}", principal=who, kind="note")
    with mem.store.snapshot():
        one = mem.store.resident._load("a", mem.embedder.dim, 0)  # as a recall would load it
    assert one is not None
    mem.store.resident.budget = int(one.nbytes * 1.5)  # room for one slice, not two
    mem.store.resident.slices.clear()
    for _ in range(40):
        for who in whos:
            b = mem.recall("refund", principal=who)
            assert b.items and all(i.memory_id for i in b.items)
    r = mem.store.resident
    assert r.loads < 20, r.describe()  # without backoff: one load per search after the first
    assert max(r.backoff.values()) > 1


def test_erase_in_this_process_drops_the_slice_at_once(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.store.resident.load_after = 1
    who = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    gone = mem.add("Quuxsecret: call the vendor first.", principal=who, kind="note")
    mem.recall("vendor", principal=who)
    rid = mem.store._rid(gone.id)
    assert "acme" in mem.store.resident.slices
    mem.erase(gone.id, principal=who, reason="asked")
    assert "acme" not in mem.store.resident.slices  # no recall needed to forget it
    assert mem.store.vectors_of("content", [rid], Eligibility.for_inspection(who)) == {}


def test_refused_reload_leaves_no_stale_slice(tmp_path: Path) -> None:
    reader = Memory(tmp_path / "m.db", embedder="hash")
    reader.store.resident.load_after = 1
    writer = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0)
    who = Principal(tenant="acme", roles={"admin"}, clearance="internal")
    gone = writer.add("Quuxsecret lesson.", principal=who, kind="note")
    reader.recall("lesson", principal=who)
    s = reader.store.resident.slices["acme"]
    for i in range(40):
        writer.add(f"note {i} on refunds", principal=who, kind="note")
    reader.store.resident.budget = s.nbytes + 1  # the grown tenant will not fit again
    writer.erase(gone.id, principal=who, reason="asked")  # forces a reload, which is refused
    reader.recall("lesson", principal=who)
    assert "acme" not in reader.store.resident.slices
    assert reader.health().resident["mismatches"] == 0


def test_big_patch_reloads_instead_of_binding_every_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import situated.store.resident as resident

    monkeypatch.setattr(resident, "MAX_PATCH_ROWS", 3)
    reader = Memory(tmp_path / "m.db", embedder="hash")
    reader.store.resident.load_after = 1
    writer = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0)
    who = Principal(tenant="acme", clearance="internal")
    for i in range(30):
        writer.add(f"note {i} on refunds", principal=who, kind="note")
    reader.recall("refunds", principal=who)
    for i in range(5):
        writer.add(f"later note {i} on refunds", principal=who, kind="note")
    reader.recall("refunds", principal=who)
    assert reader.store.resident.loads == 2 and reader.store.resident.slices["acme"].n == 35


def test_an_oversize_tenant_does_not_evict_the_others(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    mem.store.resident.load_after = 1
    small, big = (Principal(tenant=t, clearance="internal") for t in ("small", "big"))
    mem.add("one note on refunds", principal=small, kind="note")
    for i in range(300):
        mem.add(f"note {i} on refunds and more words", principal=big, kind="note")
    mem.recall("refunds", principal=small)
    one = mem.store.resident.slices["small"].nbytes
    mem.store.resident.budget = one * 3
    mem.recall("refunds", principal=big)
    assert "small" in mem.store.resident.slices and "big" not in mem.store.resident.slices
    assert mem.store.resident.evictions == 0


def test_top_breaks_ties_by_row_order() -> None:
    from situated.store.resident import top

    rng = np.random.default_rng(2)
    for _ in range(200):
        scores = rng.integers(0, 4, size=50).astype(np.float32)
        rows = np.sort(rng.choice(50, size=30, replace=False))
        k = int(rng.integers(1, 30))
        want = rows[np.lexsort((rows, -scores[rows]))][:k]
        assert list(top(scores, rows, k)) == list(want)


def test_readers_do_not_share_mutable_records(mem: Memory) -> None:
    who = Principal(tenant="acme", clearance="internal")
    rec = mem.add("Lower the heat.", principal=who, state=State("pot", facts={"temp": 90}))
    a = mem.inspect(rec.id, principal=who)
    assert a.source.state is not None
    a.source.state.facts["temp"] = -1  # a caller mutating what it was given
    b = mem.inspect(rec.id, principal=who)
    assert b.source.state is not None and b.source.state.facts == {"temp": 90}
