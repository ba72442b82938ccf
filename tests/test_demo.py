"""`situated demo`: the scenario's outcome, its isolation guarantees, and its determinism."""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from situated import Memory, Principal, RejectionReason
from situated.demo import DemoResult, run_demo
from situated.store.ledger import EventType


@pytest.fixture(autouse=True)
def temp_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's temporary store goes under this test's tmp_path."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def demo(keep: bool = False) -> tuple[DemoResult, str]:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, force_terminal=False)
    result = run_demo(console, "minilm-static", keep=keep)  # what a newcomer runs
    return result, out.getvalue()


def test_demo_serves_rejects_and_isolates(tmp_path: Path) -> None:
    result, text = demo()
    ids = result.ids
    assert result.mode == "GUIDED"
    assert result.served_ids, "at least one memory is served"
    assert ids["full_refund"] in result.served_ids
    reasons = dict(result.rejected)
    assert reasons[ids["prorated"]] is RejectionReason.CONDITION_FAILED
    assert RejectionReason.CONDITION_FAILED in result.rejected_reasons
    # the other tenant's memory is never a candidate, let alone served
    assert result.other_tenant_ids == (ids["globex"],)
    assert not set(result.other_tenant_ids) & set(result.candidate_ids)
    assert not set(result.other_tenant_ids) & set(result.served_ids)
    assert ids["globex"] not in {m for m, _ in result.rejected}
    # the poisoned lesson never reaches the agent: refused at write or rejected at recall
    if "poisoned" in result.write_refusals:  # held or rejected by the write gates
        assert ids.get("poisoned") not in result.candidate_ids
    else:
        assert reasons.get(ids["poisoned"]) in {
            RejectionReason.SUSPECTED_POISONING, RejectionReason.SCOPE_MISMATCH
        }
    assert ids.get("poisoned") not in result.served_ids
    # the superseded fact is not served; the current one is
    assert ids["threshold_100"] not in result.served_ids
    assert ids["threshold_250"] in result.served_ids
    # the text-only lesson, if served, carries an honest low confidence
    assert "CONDITION_FAILED" in text and "README" in text
    assert "LOW_VALUE" in text and "REJECTED" in text and "REVOKED" in text
    assert result.recall_id in text
    # the temporary store is gone
    assert result.db_path is None
    assert not list(tmp_path.glob("situated-demo-*"))


def test_demo_text_only_lesson_is_low_confidence_when_served() -> None:
    result, _ = demo()
    text_only = result.ids["double_charge"]
    if text_only in result.served_ids:
        assert result.confidence[text_only] < 0.5
    else:
        assert text_only in {m for m, _ in result.rejected}
    assert result.confidence[result.ids["full_refund"]] >= 0.5


def test_demo_feedback_lands_in_the_database() -> None:
    result, _ = demo(keep=True)
    assert result.db_path is not None and Path(result.db_path).exists()
    acme = Principal("acme", roles={"support"})
    with Memory(result.db_path, embedder="minilm-static") as mem:
        full = mem.inspect(result.ids["full_refund"], principal=acme)
        # today's ticket and the two follow-ups that used it all succeeded
        assert (full.counters.uses, full.counters.successes) == (3, 3)
        feedback = [e for e in mem.ledger(principal=acme, limit=1000)
                    if e.event is EventType.FEEDBACK and e.recall_id == result.recall_id]
        assert {e.memory_id for e in feedback} == set(result.served_ids)
        credited = {e.memory_id for e in feedback if e.data["credit"] == "credited"}
        assert credited == {result.ids["full_refund"], result.ids["threshold_250"]}
        # globex's lesson is stored, and only globex sees it
        globex = Principal("globex", roles={"support"})
        assert mem.inspect(result.ids["globex"], principal=globex).scope.tenant == "globex"
        assert result.ids["globex"] not in {r.id for r in mem.list(principal=acme)}
        assert mem.health().ok


def test_demo_demotes_the_lookalike_with_a_transitioned_event() -> None:
    result, text = demo(keep=True)
    ids = result.ids
    lookalike, helpful = ids["free_month"], ids["full_refund"]
    # at first the look-alike is served as confidently as the lesson that helps
    assert lookalike in result.served_ids
    assert result.confidence[lookalike] >= result.confidence[helpful]
    assert result.demoted_id == lookalike
    [event] = result.demotion_events
    assert event.event is EventType.TRANSITIONED and event.memory_id == lookalike
    assert event.data == {"to": "LOW_VALUE", "uses": 3, "successes": 0}
    assert "0.20 < 0.35 after 3 uses" in event.reason
    # the memory's own history numbers it: named as such, never as a ledger seq
    assert f"free_month's event {event.seq} transitioned by" in text
    # afterwards it ranks below the helpful memory on the same present state
    ranked = [m for m, _ in result.ranking]
    eu = dict(result.ranking)
    assert ranked.index(helpful) < ranked.index(lookalike)
    assert eu[lookalike] < eu[helpful]
    assert result.db_path is not None
    acme = Principal("acme", roles={"support"})
    with Memory(result.db_path, embedder="minilm-static") as mem:
        rec = mem.inspect(lookalike, principal=acme)
        assert rec.state.value == "LOW_VALUE"
        assert (rec.counters.uses, rec.counters.successes) == (3, 0)
        assert mem.inspect(helpful, principal=acme).state.value == "ACTIVE"
        # nothing was deleted: its whole story is still in the ledger
        events = [e.event for e in mem.history(lookalike, principal=acme)]
        assert events[:2] == [EventType.PROPOSED, EventType.PROMOTED]
        assert events[-1] is EventType.TRANSITIONED
        assert events.count(EventType.FEEDBACK) == 6  # 3 blamed, 3 exposed


def test_demo_reviewer_rejects_the_poisoned_proposal() -> None:
    result, text = demo(keep=True)
    poisoned = result.ids["poisoned"]
    assert result.rejected_proposal == poisoned
    assert result.review_reasons, "pending shows the reviewer why the gates held it"
    assert all(r in text for r in result.review_reasons)
    assert result.db_path is not None
    reviewer = Principal("acme", roles={"reviewer"}, name="acme-reviewer")
    with Memory(result.db_path, embedder="minilm-static") as mem:
        assert mem.inspect(poisoned, principal=reviewer).state.value == "REJECTED"
        assert mem.pending(reviewer=reviewer) == []
        last = mem.history(poisoned, principal=reviewer)[-1]
        assert last.event is EventType.REJECTED
        assert last.actor == "acme-reviewer" and last.reason
        # never recallable, even by a state it was written for
        acme = Principal("acme", roles={"support"})
        briefing = mem.recall("Customer wants a refund for an annual plan", principal=acme,
                              namespace="refunds")
        assert poisoned not in {t.memory_id for t in briefing.trace}


def test_demo_revoked_consent_disappears_from_recall() -> None:
    result, _ = demo(keep=True)
    pref, plan = result.ids["preference"], result.ids["customer_plan"]
    assert result.revoked_id == pref
    assert pref in result.consent_served and plan in result.consent_served
    after = result.after_revoke
    assert set(after) == {"items", "rejected", "trace"}
    for where, mids in after.items():
        assert pref not in mids, f"revoked memory still in the later recall's {where}"
    assert plan in after["items"], "the same recall still works for the other memory"
    assert result.db_path is not None
    acme = Principal("acme", roles={"support"})
    with Memory(result.db_path, embedder="minilm-static") as mem:
        assert mem.inspect(pref, principal=acme).state.value == "REVOKED"
        last = mem.history(pref, principal=acme)[-1]
        assert last.event is EventType.REVOKED and last.data == {"consent": "consent-123"}
        assert pref not in {r.id for r in mem.list(principal=acme, states=["ACTIVE"])}
        assert mem.health().ok


def test_demo_is_deterministic_in_content() -> None:
    def masked(text: str) -> str:
        text = re.sub(r"\bmem_[0-9a-f]{16}\b", "mem_*", text)
        return re.sub(r"\brc_[0-9a-f]{16}\b", "rc_*", text)

    (first, a), (second, b) = demo(), demo()
    assert masked(a) == masked(b)
    assert [r for _, r in first.rejected] == [r for _, r in second.rejected]
    assert len(first.served_ids) == len(second.served_ids)
    assert [e.reason for e in first.demotion_events] == [
        e.reason for e in second.demotion_events
    ]
    assert [eu for _, eu in first.ranking] == [eu for _, eu in second.ranking]



def test_demo_with_the_default_embedder_shows_the_fact_change() -> None:
    """What a newcomer runs: the shipped static embedder, not the test one."""
    out = io.StringIO()
    result = run_demo(Console(file=out, width=100, color_system=None), "minilm-static",
                      keep=True)
    ids = result.ids
    assert ids["threshold_100"] != ids["threshold_250"], (
        "the newer fact was merged into the older one instead of superseding it"
    )
    assert ids["threshold_250"] in result.served_ids
    assert ids["threshold_100"] not in result.candidate_ids
    assert RejectionReason.CONDITION_FAILED in result.rejected_reasons
    assert not set(result.other_tenant_ids) & set(result.candidate_ids)
    assert result.demoted_id == ids["free_month"] and result.demotion_events
    eu = dict(result.ranking)
    assert eu[ids["free_month"]] < eu[ids["full_refund"]]
    assert result.rejected_proposal == ids["poisoned"]
    assert result.revoked_id == ids["preference"] in result.consent_served
    assert all(ids["preference"] not in m for m in result.after_revoke.values())
    assert result.db_path is not None
    with Memory(result.db_path, embedder="minilm-static") as mem:
        old = mem.inspect(ids["threshold_100"], principal=Principal("acme", {"support"}))
        assert old.state.value == "INVALIDATED"
        assert old.superseded_by == ids["threshold_250"]
