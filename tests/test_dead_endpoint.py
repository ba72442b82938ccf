"""A configured `llm` reconstructor whose endpoint is dead is visible, and cheap: the briefing,
its rendering, `explain`, the recall's record, the Python warnings and `health` (library,
CLI) say the fallback happened and name the endpoint, and a dead endpoint costs one short
wait per process per interval, not one per candidate or per recall. Against a real closed
port on 127.0.0.1 and a real OpenAI-compatible server (`openai_server`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import situated
from openai_server import OpenAIStub, chat_reply
from situated import Memory, Principal, State
from situated import endpoint as endpoint_module
from situated.errors import ModelFallbackWarning
from situated.recall.briefing import Mode
from situated.recall.reconstruct.llm import LLMReconstructor

ME = Principal("acme", {"support"}, "internal")
PRESENT = State("Annual customer wants a refund 45 days after buying",
                facts={"plan": "annual", "days_since_purchase": 45})
LESSONS = [
    ("Annual plans past 30 days get a prorated refund, not a full one.",
     ["plan == 'annual'", "days_since_purchase > 30"]),
    ("Annual customers past 30 days may keep their add-ons.", ["plan == 'annual'"]),
    ("Refunds of annual plans go through the billing queue.", ["plan == 'annual'"]),
]
VALID = {
    "verdict": "APPLICABLE", "confidence": 0.8,
    "guidance": "Offer the prorated refund for the 45 days since purchase.", "reason": None,
    "rationale": "The plan matches.", "transferable": [], "rejected": [], "matched": [],
    "mismatched": [], "unknown": [], "missing_facts": [], "adaptations": [],
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, then released: nothing listens there
        return int(s.getsockname()[1])


def memory(path: Path, base_url: str, timeout: float = 2.0) -> Memory:
    mem = Memory(path, embedder="hash",
                 reconstructor=LLMReconstructor(base_url, "judge", timeout=timeout))
    for content, conditions in LESSONS:
        mem.add(content, principal=ME, namespace="refunds", conditions=conditions,
                state=State("Annual subscriber asks for a refund after 60 days",
                            facts={"plan": "annual", "days_since_purchase": 60}))
    return mem


def recall(mem: Memory) -> situated.Briefing:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b = mem.recall(PRESENT, principal=ME, namespace="refunds")
    said = [str(w.message) for w in caught if issubclass(w.category, ModelFallbackWarning)]
    assert said == list(b.warnings)  # the Python warnings are the briefing's
    return b


def test_a_dead_endpoint_is_named_everywhere_and_paid_once(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    chat = f"{url}/v1/chat/completions"
    db = tmp_path / "dead.db"
    mem = memory(db, url)
    started = time.perf_counter()
    first = recall(mem)
    first_s = time.perf_counter() - started
    assert first.mode is Mode.GUIDED  # the rules reconstructor judged every candidate
    [said] = first.warnings
    assert said.startswith(f"the llm reconstructor at {chat} failed (") and \
        said.endswith("3 candidates were judged by the rules reconstructor instead")
    assert f"Note: {said}" in first.render(feedback="feedback(...)")
    assert f"note: {said}" in first.explain()
    record = mem.recall_record(first.recall_id, principal=ME).payload
    assert record["briefing"]["warnings"] == [said]
    assert all(r["provenance"]["fallback_from"] == "llm" and r["provenance"]["endpoint"] == chat
               for r in record["reconstructions"].values())
    health = mem.health()
    assert not health.ok and health.failing["reconstructor:llm"]["endpoint"] == chat
    assert health.failing["reconstructor:llm"]["failures"] == 3
    # later recalls of this process skip the endpoint at once (paused), still say so
    started = time.perf_counter()
    for _ in range(5):
        assert recall(mem).warnings
    later_s = (time.perf_counter() - started) / 5
    assert later_s < 0.25 and first_s < 5.0, (first_s, later_s)
    mem.close()
    # `situated health` in another process (configured with no model at all) names it too
    done = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(db), "--embedder", "hash", "health"],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
             "PYTHONPATH": str(Path(situated.__file__).parents[1])},
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["failing"]["reconstructor:llm"]["endpoint"] == chat


def test_a_server_that_stops_answering_costs_one_timeout_per_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIStub() as srv:
        srv.chat.always(chat_reply(VALID))
        mem = memory(tmp_path / "slow.db", srv.url, timeout=0.5)
        healthy = recall(mem)
        assert healthy.warnings == () and mem.health().ok
        assert {i.text for i in healthy.items} == {VALID["guidance"]}
        answered = len(srv.chat_requests)
        srv.chat.always(chat_reply(VALID, delay=3.0))  # alive, but far slower than 0.5 s
        monkeypatch.setattr(endpoint_module, "PAUSE_SECONDS", 1.0)
        for _ in range(3):
            assert "timed out after 0.5s" in recall(mem).warnings[0]
        # one request timed out (with its one retry); every other candidate was skipped
        assert len(srv.chat_requests) - answered == 2
        time.sleep(1.1)  # the pause is over: one request tries the endpoint again
        srv.chat.always(chat_reply(VALID))
        again = recall(mem)
        assert again.warnings == () and {i.text for i in again.items} == {VALID["guidance"]}
        mem.close()
