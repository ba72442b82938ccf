"""Every read endpoint, through a real server: a key never sees, counts or infers anything of
another tenant, of a role it lacks, or of a classification above its clearance."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from serving import Served, serve

LESSON = "Annual plans past 30 days get a prorated refund, not a full one."
STATE = {"text": "Annual subscriber asks for a refund after 60 days",
         "facts": {"plan": "annual", "days": 60}}
NOW = {"state": {"text": "Annual subscriber wants a refund after 45 days",
                 "facts": {"plan": "annual", "days": 45}}, "namespace": "refunds"}


def _add(c: httpx.Client, content: str, **kw: object) -> str:
    body = {"content": content, "namespace": "refunds", "state": STATE} | kw
    r = c.post("/v1/memories", json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str, set[str]]]:
    """A reader's own memory, and hidden ones: another tenant's, a role's, a higher level's
    (each also as a proposal held for review, and each recalled and given feedback)."""
    with serve(tmp_path_factory.mktemp("elig") / "elig.db") as s:
        owner = s.client(s.key("acme", "support", "finance", "reviewer", "admin",
                               clearance="restricted", actor="acme-admin"))
        other = s.client(s.key("globex", "support", "reviewer", clearance="restricted",
                               actor="globex-agent"))
        visible = _add(owner, LESSON)
        hidden = {
            _add(other, LESSON + " (globex)"),
            _add(owner, LESSON + " (finance only)", roles=["finance"]),
            _add(owner, LESSON + " (confidential)", classification="confidential"),
            _add(other, "Globex proposal: escalate refunds.", authority="externally_verified"),
            _add(owner, "Finance proposal: escalate refunds.", roles=["finance"],
                 authority="externally_verified"),
            _add(owner, "Confidential proposal: escalate refunds.",
                 classification="confidential", authority="externally_verified"),
        }
        for c in (owner, other):  # recalls and feedback the reader must not count
            b = c.post("/v1/recall", json=NOW).json()
            c.post("/v1/feedback", json={"recall_id": b["recall_id"], "success": False,
                                         "used": [i["memory_id"] for i in b["items"]]})
        owner.close()
        other.close()
        yield s, visible, hidden


@pytest.fixture(scope="module")
def reader(world: tuple[Served, str, set[str]]) -> Iterator[httpx.Client]:
    s = world[0]
    with s.client(s.key("acme", "support", "reviewer", clearance="internal",
                        actor="reader")) as c:
        yield c


def _leaks(text: str, hidden: set[str]) -> list[str]:
    leaked = [h for h in hidden if h in text]
    for word in ("globex", "finance only", "confidential", "Finance proposal",
                 "Globex proposal", "Confidential proposal"):
        if word.lower() in text.lower():
            leaked.append(word)
    return leaked


def test_recall_serves_and_names_only_eligible_memories(world: tuple[Served, str, set[str]],
                                                        reader: httpx.Client) -> None:
    _, visible, hidden = world
    b = reader.post("/v1/recall", json=NOW | {"explain": True, "k": 20})
    assert b.status_code == 200
    assert [i["memory_id"] for i in b.json()["items"]] == [visible]
    assert _leaks(b.text, hidden) == []


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/export", "/v1/ledger?limit=1000",
                                  "/v1/review/pending", "/v1/memories?state=PROPOSED",
                                  "/v1/memories?state=ACTIVE&state=REJECTED"])
def test_listings_hold_nothing_out_of_scope(world: tuple[Served, str, set[str]],
                                            reader: httpx.Client, path: str) -> None:
    _, _, hidden = world
    r = reader.get(path)
    assert r.status_code == 200, r.text
    assert _leaks(r.text, hidden) == []


def test_listings_hold_the_readers_own(world: tuple[Served, str, set[str]],
                                       reader: httpx.Client) -> None:
    _, visible, _ = world
    assert [m["id"] for m in reader.get("/v1/memories").json()] == [visible]
    assert [json.loads(x)["id"] for x in reader.get("/v1/export").text.splitlines()] == [
        visible]
    assert reader.get("/v1/review/pending").json() == []


def test_counts_count_only_what_the_key_may_see(world: tuple[Served, str, set[str]]) -> None:
    s, visible, _ = world
    reader = s.client(s.key("acme", "support", actor="counter"))  # made no recall itself
    stats = reader.get("/v1/stats").json()
    assert stats["memories_by_state"] == {"ACTIVE": 1}
    assert stats["recalls"] == 0 and stats["feedback"] == 0  # others' recalls are not its own
    events = reader.get("/v1/ledger", params={"limit": 1000}).json()
    assert stats["ledger_events"] == len(events)
    assert {e["memory_id"] for e in events} <= {visible, None}


def test_single_reads_answer_as_if_it_did_not_exist(world: tuple[Served, str, set[str]],
                                                    reader: httpx.Client) -> None:
    _, visible, hidden = world
    assert reader.get(f"/v1/memories/{visible}").status_code == 200
    for mid in [*sorted(hidden), "mem_0000000000000000"]:
        for path in (f"/v1/memories/{mid}", f"/v1/memories/{mid}/history"):
            r = reader.get(path)
            assert r.status_code == 404, (path, r.text)
            assert r.json()["error"] == "NotFound"
            assert _leaks(r.json()["message"].replace(mid, ""), hidden) == []
        for action in ("promote", "reject"):
            r = reader.post(f"/v1/review/{mid}/{action}", json={"reason": "x"})
            assert r.status_code == 404, r.text


def test_feedback_on_another_principals_recall_is_not_found(world: tuple[Served, str, set[str]]
                                                            ) -> None:
    s, _, _ = world
    with s.client(s.key("globex", "support")) as g, s.client(s.key("acme", "support")) as a:
        recall_id = g.post("/v1/recall", json=NOW).json()["recall_id"]
        r = a.post("/v1/feedback", json={"recall_id": recall_id, "success": True})
        assert r.status_code == 404 and r.json()["error"] == "NotFound"
