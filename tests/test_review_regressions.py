"""Defects found in review, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

from situated import LifecycleState, Memory, Principal, State
from situated.recall.reconstruct.prechecks import evaluate_conditions

ADMIN = Principal(tenant="acme", roles={"admin", "hr", "reviewer"}, clearance="restricted")


def test_erase_leaves_no_sentence_of_the_memory_in_recall_records(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    s = State("vault door", facts={"door": "locked"})
    rec = mem.add("Secret plan alpha works. Use the blue key first.", principal=who, state=s)
    b = mem.recall(s, principal=who)
    assert rec.id in {i.memory_id for i in b.items}
    mem.erase(rec.id, principal=ADMIN, reason="request")
    payloads = json.dumps(mem.store._all("SELECT payload FROM recalls"))
    for piece in ("Secret plan alpha", "blue key", "vault door"):
        assert piece not in payloads
    assert rec.id not in json.dumps(json.loads(mem.store._all(
        "SELECT payload FROM recalls")[0][0])["briefing"])
    assert "Secret" not in json.dumps(mem.store._all("SELECT fingerprint FROM memories"))


def test_a_connection_opened_on_an_empty_store_sees_vectors_written_later(
    tmp_path: Path,
) -> None:
    early = Memory(tmp_path / "m.db", embedder="hash")  # opened before any vector exists
    writer = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme", roles={"reviewer", "admin"})
    from situated.write.promotion import ReviewAll

    writer.promotion = ReviewAll()
    rec = writer.add("Check the breaker first.", principal=who, state=State("dark room"))
    early.promote(rec.id, reviewer=who)
    assert early.health().orphan_records == 0  # index metadata follows the promotion
    b = early.recall(State("dark room"), principal=who)
    assert rec.id in {i.memory_id for i in b.items} | {r.memory_id for r in b.rejected}
    early.erase(rec.id, principal=who, reason="request")
    assert not writer.store._all("SELECT rid FROM vectors")
    assert not writer.store._all("SELECT rid FROM vec_content")


def test_feedback_never_brings_back_a_revoked_memory(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    old = mem.add("Dana owns the api.", principal=who, kind="fact", entity="api",
                  attribute="owner", value="Dana", consent="c1")
    b = mem.recall(State("who owns the api"), principal=who)
    assert old.id in {i.memory_id for i in b.items}
    mem.revoke_consent("c1", principal=ADMIN, reason="withdrawn")
    mem.add("Eli owns the api.", principal=who, kind="fact", entity="api", attribute="owner",
            value="Eli")
    mem.feedback(b.recall_id, principal=who, success=False, used=[old.id])
    assert mem.inspect(old.id, principal=who).state is LifecycleState.REVOKED
    assert mem.rebuild().mismatched == ()


def test_restating_an_earlier_value_is_a_new_current_fact(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    kw = dict(principal=who, kind="fact", entity="alice", attribute="city")
    first = mem.add("Alice lives in Paris.", value="Paris", valid_from="2024-01-01", **kw)
    mem.add("Alice lives in Berlin.", value="Berlin", valid_from="2025-01-01", **kw)
    again = mem.add("Alice lives in Paris.", value="Paris", valid_from="2026-01-01", **kw)
    assert again.id != first.id and again.state is LifecycleState.ACTIVE
    b = mem.recall(State("where does alice live"), principal=who)
    assert {i.memory_id for i in b.items} == {again.id}


def test_a_writer_never_invalidates_a_fact_scoped_for_other_readers(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    hr = Principal(tenant="acme", roles={"hr"}, clearance="restricted")
    intern = Principal(tenant="acme", clearance="public")
    secret = mem.add("Alice is in band B7.", principal=hr, kind="fact", entity="alice",
                     attribute="band", value="B7", roles={"hr"}, classification="restricted")
    mem.add("Alice is in band B1.", principal=intern, kind="fact", entity="alice",
            attribute="band", value="B1", classification="public")
    assert mem.inspect(secret.id, principal=hr).state is LifecycleState.ACTIVE


def test_condition_cache_tells_true_from_one() -> None:
    first = evaluate_conditions(("n > 0",), {"n": 1})
    second = evaluate_conditions(("n > 0",), {"n": True})
    assert first[0].truth.value == "matched"
    assert second[0].truth.value == "mismatched"  # ordering on a boolean is not allowed


def test_supersession_event_records_the_closed_validity(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hash")
    who = Principal(tenant="acme")
    old = mem.add("x is 1.", principal=who, kind="fact", entity="x", attribute="v", value=1,
                  valid_from="2024-01-01")
    mem.add("x is 2.", principal=who, kind="fact", entity="x", attribute="v", value=2,
            valid_from="2025-01-01")
    ev = mem.history(old.id, principal=who)[-1]
    assert ev.event.value == "superseded"
    assert ev.data["valid_until"] == mem.inspect(old.id, principal=who).validity.valid_until_ts
