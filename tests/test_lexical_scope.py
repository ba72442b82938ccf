"""Lexical scores on the SQLite path are the tenant's own: other tenants' writes never move
them, and they equal the resident index's (`situated.store.lexical`)."""

from __future__ import annotations

import itertools
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from situated import Classification, Memory, Principal, State
from situated.models import LifecycleState
from situated.recall.briefing import Briefing
from situated.store.scope import Eligibility
from situated.write.promotion import AutoPromote

A = Principal(tenant="acme", roles={"admin", "reviewer"}, clearance="restricted", name="a")
B = Principal(tenant="globex", roles={"admin"}, clearance="restricted", name="b")
A_OPS = Principal(tenant="acme", roles={"admin", "reviewer", "ops"}, clearance="restricted",
                  name="a")  # a writer may require only roles it holds
A_NOTES = [
    "Refund the annual invoice within thirty days.",
    "Rollback the deploy when the canary alert fires.",
    "Check the kettle before the stove is on.",
    "Invoice disputes go to billing after the refund window.",
    "Drain the node before a deploy rollback.",
]
SHARED = "refund invoice deploy rollback canary kettle billing node window alert".split()
LIFECYCLE = tuple(LifecycleState)
VOCAB = [*SHARED, "Café", "cafe", "naïve", "naive", "running", "runs", "run", "DEPLOY",
         "error_rate", "x2", "straße", "the", "a", "Ünïcödé"]


def _recall(mem: Memory, as_of: float) -> tuple[str, list[Any]]:
    """A's recall as bytes that must not move: explain (recall id masked) and every score."""
    b: Briefing = mem.recall(State("the canary deploy failed, invoice refund pending"),
                             principal=A, intent="rollback deploy refund", as_of=as_of)
    scores = [(i.memory_id, i.scores) for i in b.items]
    return b.explain().replace(b.recall_id, "<recall>"), scores + list(b.rejected)


def _tenant_b_writes(mem: Memory, round_: int) -> None:
    """Many writes by B sharing A's words, an erasure and a revocation among them."""
    ids = [
        mem.add(f"{' '.join(SHARED[(i + round_) % 10 :][:1 + i % 6])} step {round_}-{i}: "
                f"{'refund ' * (i % 3)}invoice", principal=B, kind="note",
                consent="cb" if i % 7 == 0 else None).id
        for i in range(25)
    ]
    mem.erase(ids[1], principal=B, reason="subject asked")
    mem.revoke_consent("cb", principal=B, reason="withdrawn")


@pytest.mark.parametrize("fresh", [False, True], ids=["resident_mb=0", "fresh-first-search"])
def test_recall_unmoved_by_other_tenants_writes(tmp_path: Path, fresh: bool) -> None:
    path = tmp_path / "m.db"
    writer = Memory(path, embedder="hash", resident_mb=0)
    for text in A_NOTES:
        writer.add(text, principal=A, kind="note")
    as_of = time.time() + 60

    def recall() -> tuple[str, list[Any]]:
        if not fresh:
            return _recall(writer, as_of)
        with Memory(path, embedder="hash") as mem:  # default resident index: first search
            out = _recall(mem, as_of)
            assert mem.store.resident.loads == 0 and not mem.store.resident.slices
            return out

    before = recall()
    assert max(map(float, re.findall(r"lexical=([0-9.]+)", before[0]))) > 0  # scores shown
    for round_ in range(3):
        _tenant_b_writes(writer, round_)
        assert recall() == before


def test_lexical_floats_unmoved_by_other_tenants_writes(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash", resident_mb=0)
    for text in A_NOTES:
        mem.add(text, principal=A, kind="note")
    elig = Eligibility.for_recall(A)
    before = mem.store.lexical("refund invoice deploy rollback", 10, elig)
    assert len(before) == 4
    _tenant_b_writes(mem, 0)
    assert mem.store.lexical("refund invoice deploy rollback", 10, elig) == before


# -- the SQLite path computes what the resident index computes -------------------------------

memories = st.lists(
    st.fixed_dictionaries({
        "tenant": st.sampled_from(["acme", "acme", "globex"]),
        "words": st.lists(st.sampled_from(VOCAB), min_size=0, max_size=6),
        "twin": st.integers(0, 2),  # 0: the words of the memory before (ties in BM25)
        "sep": st.sampled_from([" ", ", ", "-", "_", ". "]),
        "state": st.none() | st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4),
        "namespace": st.sampled_from(["ops", "ops", "billing", "billing", "review"]),
        "roles": st.sampled_from([(), (), ("ops",)]),
        "classification": st.sampled_from(["public", "internal", "confidential"]),
        "expired": st.integers(0, 9).map(lambda x: x == 0),
        "then": st.sampled_from(["keep"] * 8 + ["erase", "revoke"]),
    }),
    min_size=8, max_size=24,
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    corpus=memories,
    tenant=st.sampled_from(["acme", "acme", "globex"]),
    roles=st.sampled_from([frozenset(), frozenset({"ops"}), frozenset({"ops"})]),
    clearance=st.sampled_from([Classification.RESTRICTED, Classification.INTERNAL,
                               Classification.PUBLIC]),
    namespace=st.sampled_from([None, None, "ops", "billing"]),
    inspect=st.booleans(),
    k=st.sampled_from([1, 3, 50]),
)
def test_sqlite_path_equals_resident(
    data: st.DataObject, corpus: list[dict[str, Any]], tenant: str, roles: frozenset[str],
    clearance: Classification, namespace: str | None, inspect: bool, k: int,
) -> None:
    for before, m in itertools.pairwise(corpus):
        if m["twin"] == 0:
            m["words"], m["state"] = before["words"], before["state"]
    pool = sorted({w for m in corpus for w in m["words"] + (m["state"] or [])}) or VOCAB
    query = " ".join(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=5)))
    with tempfile.TemporaryDirectory(prefix="lexical-") as d:
        on = Memory(Path(d) / "m.db", embedder="hash",
                    promotion=AutoPromote(review_namespaces=["review"]))  # held: PROPOSED
        on.store.resident.load_after = 1  # the resident slice from the first search
        now = time.time()
        for i, m in enumerate(corpus):
            who = Principal(tenant=m["tenant"], roles={"admin", *m["roles"]},
                            clearance="restricted")
            state = State(" ".join(m["state"])) if m["state"] else None
            rec = on.add(
                f"note {i}{m['sep']}" + m["sep"].join(m["words"]), principal=who, kind="note",
                state=state, namespace=m["namespace"], roles=list(m["roles"]),
                classification=m["classification"], consent=f"c{i}",
                valid_from=now - 100 if m["expired"] else None,
                valid_until=now - 10 if m["expired"] else None,
            )
            if m["then"] == "erase":
                on.erase(rec.id, principal=who, reason="asked")
            elif m["then"] == "revoke":
                on.revoke_consent(f"c{i}", principal=who, reason="withdrawn")
        off = Memory(Path(d) / "m.db", embedder="hash", resident_mb=0)
        who = Principal(tenant=tenant, roles=roles, clearance=clearance)
        elig = (Eligibility.for_inspection(who, namespace) if inspect
                else Eligibility.for_recall(who, namespace))
        assert on.store._slice(elig) is not None and off.store._slice(elig) is None
        sqlite = off.store.lexical(query, k, elig)
        resident = on.store.lexical(query, k, elig)
        assert sqlite == resident  # same rows, same order, same float32 scores
        qvec = on.embedder.embed([query])[0]
        assert off.store.search(qvec, query, k, elig).lexical == resident
        on.close()
        off.close()


# -- erasure, lifecycle and migration -------------------------------------------------------


def _stats(mem: Memory, tenant: str) -> tuple[int, int]:
    row = mem.store._one("SELECT docs, length FROM lexicon_stats WHERE tenant = ?", (tenant,))
    assert row is not None
    return int(row[0]), int(row[1])


def _twins(path: Path) -> tuple[Memory, Memory]:
    """Two connections to one file: resident slice from the first search, and SQLite only."""
    on = Memory(path, embedder="hash")
    on.store.resident.load_after = 1
    return on, Memory(path, embedder="hash", resident_mb=0)


def _by_id(mem: Memory, ranked: list[tuple[int, float]]) -> list[tuple[str, float]]:
    elig = Eligibility(A, states=LIFECYCLE)
    recs = mem.store.by_rids([r for r, _ in ranked], elig)
    return [(recs[r].content, s) for r, s in ranked]


def test_erasure_removes_the_memory_from_the_statistics(tmp_path: Path) -> None:
    on, off = _twins(tmp_path / "m.db")
    for text in A_NOTES:
        on.add(text, principal=A, kind="note")
    gone = on.add("Zanzibar refund rule: refund twice.", principal=A, kind="note")
    on.add("refund invoice elsewhere", principal=B, kind="note")
    docs, length = _stats(off, "acme")
    b_stats = _stats(off, "globex")
    on.erase(gone.id, principal=A, reason="subject asked")

    assert _stats(off, "acme") == (docs - 1, length - 5)  # its five words
    assert _stats(off, "globex") == b_stats
    rid = off.store._one("SELECT rid FROM memories WHERE id = ?", (gone.id,))
    assert off.store._one("SELECT COUNT(*) FROM lexicon_postings WHERE rid = ?", rid) == (0,)
    assert off.store._one("SELECT COUNT(*) FROM lexicon_docs WHERE rid = ?", rid) == (0,)
    elig = Eligibility.for_recall(A)
    assert off.store.lexical("zanzibar", 5, elig) == []
    after = off.store.lexical("refund invoice rollback", 10, elig)
    assert after == on.store.lexical("refund invoice rollback", 10, elig)
    # the numbers of a store where it was never written (nor anything of another tenant)
    with Memory(tmp_path / "never.db", embedder="hash", resident_mb=0) as never:
        for text in A_NOTES:
            never.add(text, principal=A, kind="note")
        expected = _by_id(never, never.store.lexical("refund invoice rollback", 10,
                                                     Eligibility.for_recall(A)))
    assert _by_id(off, after) == expected


def test_lifecycle_changes_gate_rows_but_keep_statistics(tmp_path: Path) -> None:
    on, off = _twins(tmp_path / "m.db")
    on.promotion = AutoPromote(review_namespaces=["review"])
    for text in A_NOTES[:4]:
        on.add(text, principal=A, kind="note")
    revoked = on.add("Refund by voucher for the trial invoice.", principal=A, kind="note",
                     consent="c1")
    held = on.add("Refund the deploy invoice on review.", principal=A, kind="note",
                  namespace="review")
    stats = _stats(off, "acme")
    elig = Eligibility.for_recall(A)
    before = dict(off.store.lexical("refund invoice", 10, elig))
    ids = {str(m): int(r) for r, m in off.store._all("SELECT rid, id FROM memories")}
    assert ids[held.id] not in before  # held for review: not recallable, but counted

    on.revoke_consent("c1", principal=A, reason="withdrawn")
    after = dict(off.store.lexical("refund invoice", 10, elig))
    assert ids[revoked.id] in before and ids[revoked.id] not in after
    assert after == {r: s for r, s in before.items() if r != ids[revoked.id]}  # same floats
    assert _stats(off, "acme") == stats
    inspect = Eligibility.for_inspection(A)  # a revoked row is still inspectable: same score
    assert dict(off.store.lexical("refund invoice", 10, inspect))[ids[revoked.id]] == before[
        ids[revoked.id]]

    on.promote(held.id, reviewer=A)
    promoted = dict(off.store.lexical("refund invoice", 10, elig))
    assert promoted == after | {ids[held.id]: promoted[ids[held.id]]}
    assert _stats(off, "acme") == stats
    for e in (elig, inspect):
        assert off.store.lexical("refund invoice", 10, e) == on.store.lexical(
            "refund invoice", 10, e)


def test_existing_store_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hash") as mem:
        for text in A_NOTES:
            mem.add(text, principal=A, kind="note")
        gone = mem.add("Zanzibar refund rule.", principal=A, kind="note")
        mem.add("refund invoice elsewhere", principal=B, kind="note")
        mem.erase(gone.id, principal=A, reason="asked")
        tables = ("lexicon_postings", "lexicon_docs", "lexicon_stats")
        written = {t: sorted(mem.store._all(f"SELECT * FROM {t}")) for t in tables}
        ranked = mem.store.lexical("refund invoice rollback", 10, Eligibility.for_recall(A))
        with mem.store.transaction():  # the store as it was before m006
            for t in tables:
                mem.store.db.execute(f"DROP TABLE {t}")
            mem.store.db.execute("DELETE FROM _migrations WHERE name = 'm006_tenant_lexicon'")
    on, off = _twins(path)
    assert "m006_tenant_lexicon" in off.store.migrations()
    assert {t: sorted(off.store._all(f"SELECT * FROM {t}")) for t in tables} == written
    elig = Eligibility.for_recall(A)
    assert off.store.lexical("refund invoice rollback", 10, elig) == ranked
    assert on.store.lexical("refund invoice rollback", 10, elig) == ranked


@pytest.mark.parametrize("reader", ["ops-role-less", "billing", "nowhere"])
def test_gates_checked_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """Ranked rows pass the gates batch by batch, or (when few of them pass: another
    namespace's rows rank first) through the reader's eligible rows: the same answer."""
    import situated.store.lexical as lexical

    on, off = _twins(tmp_path / "m.db")
    for i in range(20):  # two terms, each in half the matching rows; billing's rank last
        billing = i % 10 >= 8
        on.add(f"{'refund' if i < 10 else 'invoice'} case {i}" + " and more" * 3 * billing,
               principal=A_OPS, kind="note", roles=["ops"] if i % 3 else [],
               namespace="billing" if billing else "ops")
    for i in range(4):
        on.add(f"kettle case {i}", principal=A, kind="note")
    if reader == "ops-role-less":  # sees a third of the rows, spread over the ranking
        elig = Eligibility.for_recall(Principal(tenant="acme", clearance="restricted"))
    else:
        ops = Principal(tenant="acme", roles={"ops"}, clearance="restricted")
        elig = Eligibility.for_recall(ops, reader)
    expected = on.store.lexical("refund invoice", 3, elig)
    assert len(expected) == {"ops-role-less": 3, "billing": 3, "nowhere": 0}[reader]
    monkeypatch.setattr(lexical, "FIRST_BATCH", 1)
    monkeypatch.setattr(lexical, "MAX_BATCH", 2)
    queries: list[str] = []
    off.store.db.exec_trace = lambda _c, sql, _b: queries.append(sql) or True
    assert off.store.lexical("refund invoice", 3, elig) == expected
    by_id = sum("m.rid IN" in q for q in queries)
    whole = sum("INDEXED BY memories_scope" in q for q in queries)
    if reader == "ops-role-less":
        assert by_id > 1 and whole == 0  # walked, several batches
    else:
        assert by_id < 10 and whole == 1  # gave up walking (10 batches would check all 20)
    assert all(score > 0.1 for _, score in expected)


def test_postings_cap_keeps_document_frequency_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `MAX_TERM_POSTINGS` rows holding a term, only the newest are scored (the one
    documented difference from the resident index), with the term's exact frequency."""
    import situated.store.lexical as lexical

    on, off = _twins(tmp_path / "m.db")
    for i in range(6):
        on.add(f"refund case {i}{' again' * (i % 2)}", principal=A, kind="note")
    for i in range(14):  # rows without the term: its idf is not clamped at its floor
        on.add(f"kettle case {i}", principal=A, kind="note")
    elig = Eligibility.for_recall(A)
    everything = on.store.lexical("refund", 10, elig)
    monkeypatch.setattr(lexical, "MAX_TERM_POSTINGS", 3)
    capped = off.store.lexical("refund", 10, elig)
    newest = sorted(r for r, _ in everything)[-3:]
    assert sorted(capped) == sorted((r, s) for r, s in everything if r in newest)
