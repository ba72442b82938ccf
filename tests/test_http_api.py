"""The HTTP API through a real uvicorn server on loopback: every endpoint, every error status,
keys (a revoked key is refused at once), and that a refused request changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import snapshot
from serving import Served, serve
from situated.memory import Memory

REFUND = {
    "content": "Annual plans past 30 days get a prorated refund, not a full one.",
    "namespace": "refunds",
    "state": {"text": "Annual subscriber asks for a refund after 60 days",
              "facts": {"plan": "annual", "days": 60}},
    "action": "offered the prorated amount", "success": True,
    "conditions": ["plan == 'annual'", "days > 30"],
}
NOW = {"state": {"text": "Annual customer wants a refund 45 days after buying",
                 "facts": {"plan": "annual", "days": 45}}, "namespace": "refunds"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("http") / "api.db") as s:
        yield s


@pytest.fixture(scope="module")
def agent(served: Served) -> Iterator[httpx.Client]:
    with served.client(served.key("acme", "support", "reviewer", "admin",
                                  clearance="restricted", actor="agent-1")) as c:
        yield c


def test_add_recall_feedback_inspect_history(agent: httpx.Client) -> None:
    added = agent.post("/v1/memories", json=REFUND)
    assert added.status_code == 200, added.text
    doc = added.json()
    assert doc["state"] == "ACTIVE" and doc["scope"]["tenant"] == "acme"
    assert doc["proposed_by"] == "agent-1"  # the key's actor, never a request field
    assert doc["validity"]["valid_until"] is None
    assert doc["validity"]["recorded_at"].endswith("Z")  # ISO 8601, UTC

    briefing = agent.post("/v1/recall", json=NOW | {"explain": True}).json()
    assert briefing["mode"] == "GUIDED"
    assert [i["memory_id"] for i in briefing["items"]] == [doc["id"]]
    assert doc["id"] in briefing["rendered"] and briefing["explain"].startswith("recall ")

    fb = agent.post("/v1/feedback", json={"recall_id": briefing["recall_id"], "success": True,
                                          "used": [doc["id"]]})
    assert fb.status_code == 200 and fb.json()["credited"] == [doc["id"]]
    again = agent.post("/v1/feedback", json={"recall_id": briefing["recall_id"],
                                             "success": True, "used": [doc["id"]]})
    assert again.json()["duplicate"] is True
    differs = agent.post("/v1/feedback", json={"recall_id": briefing["recall_id"],
                                               "success": False, "used": [doc["id"]]})
    assert differs.status_code == 409 and differs.json()["error"] == "FeedbackConflict"

    one = agent.get(f"/v1/memories/{doc['id']}").json()
    assert one["counters"]["successes"] == 1
    events = agent.get(f"/v1/memories/{doc['id']}/history").json()
    assert [e["event"] for e in events][:2] == ["proposed", "promoted"]
    assert "feedback" in [e["event"] for e in events]


def test_add_many_list_export_ledger_stats(agent: httpx.Client) -> None:
    items = [{"content": f"Shipping to zone {n} takes {n + 2} days.", "namespace": "shipping",
              "kind": "fact", "entity": f"zone{n}", "attribute": "days", "value": n + 2}
             for n in range(3)]
    batch = agent.post("/v1/memories/batch", json={"items": items})
    assert batch.status_code == 200 and len(batch.json()) == 3
    listed = agent.get("/v1/memories", params={"namespace": "shipping", "limit": 2}).json()
    assert [m["id"] for m in listed] == [m["id"] for m in batch.json()[:2]]
    active = agent.get("/v1/memories", params={"state": ["ACTIVE"], "namespace": "shipping"})
    assert len(active.json()) == 3
    export = agent.get("/v1/export", params={"namespace": "shipping"})
    assert export.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line)["id"] for line in export.text.splitlines()] == [
        m["id"] for m in batch.json()]
    ledger = agent.get("/v1/ledger", params={"limit": 5}).json()
    assert len(ledger) == 5 and ledger[0]["seq"] > ledger[-1]["seq"]
    stats = agent.get("/v1/stats").json()
    assert stats["tenant"] == "acme" and stats["memories_by_state"]["ACTIVE"] >= 3


def test_review_learn_revoke_erase(agent: httpx.Client) -> None:
    held = agent.post("/v1/memories", json={"content": "Refunds over 500 need a manager.",
                                            "authority": "externally_verified",
                                            "namespace": "review"}).json()
    assert held["state"] == "PROPOSED"
    pending = agent.get("/v1/review/pending", params={"namespace": "review"}).json()
    assert [p["id"] for p in pending] == [held["id"]] and pending[0]["gates"]
    promoted = agent.post(f"/v1/review/{held['id']}/promote", json={"reason": "checked"})
    assert promoted.json()["state"] == "ACTIVE"
    twice = agent.post(f"/v1/review/{held['id']}/promote")
    assert twice.status_code == 409 and twice.json()["error"] == "UsageError"

    other = agent.post("/v1/memories", json={"content": "Never refund gift cards.",
                                             "authority": "externally_verified",
                                             "namespace": "review"}).json()
    rejected = agent.post(f"/v1/review/{other['id']}/reject", json={"reason": "wrong"})
    assert rejected.json()["state"] == "REJECTED"

    trajectory = {
        "episode_id": "ep-1", "namespace": "learned", "task": "refund an annual plan",
        "steps": [{"observation": "annual plan, 40 days", "facts": {"days": 40},
                   "action": "offer prorated refund", "result": "customer accepted"}],
        "outcome": {"success": True},
    }
    learned = agent.post("/v1/learn", json={"trajectory": trajectory})
    assert learned.status_code == 200, learned.text
    assert all(m["scope"]["namespace"] == "learned" for m in learned.json())

    consented = agent.post("/v1/memories", json={"content": "Customer 42 prefers email.",
                                                 "kind": "preference", "consent": "c-42"})
    revoked = agent.post("/v1/consents/revoke", json={"consent": "c-42", "reason": "withdrawn"})
    assert revoked.json() == {"consent": "c-42", "revoked": 1}
    assert agent.get(f"/v1/memories/{consented.json()['id']}").json()["state"] == "REVOKED"

    gone = agent.post(f"/v1/memories/{other['id']}/erase", json={"reason": "request 7"})
    assert gone.json() == {"erased": other["id"]}
    assert agent.get(f"/v1/memories/{other['id']}").status_code == 404  # a tombstone only


def test_health_and_maintain_need_an_operator_key(served: Served, agent: httpx.Client) -> None:
    refused = agent.get("/v1/health")
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"
    assert agent.post("/v1/maintain").status_code == 403
    with served.client(served.key("ops", "operator")) as ops:
        health = ops.get("/v1/health")
        assert health.status_code == 200 and health.json()["ok"] is True
        assert "m010_api_keys" in health.json()["migrations"]
        assert set(ops.post("/v1/maintain").json()) == {"demoted", "archived", "failures",
                                                        "refit", "graphs"}


def test_openapi_and_docs_are_served(served: Served) -> None:
    with served.client() as anyone:
        schema = anyone.get("/openapi.json").json()
        assert {"/v1/memories", "/v1/recall", "/v1/feedback", "/v1/export",
                "/v1/review/pending"} <= set(schema["paths"])
        assert anyone.get("/docs").status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), [
    ("post", "/v1/memories", REFUND),
    ("post", "/v1/recall", NOW),
    ("get", "/v1/memories", None),
    ("get", "/v1/stats", None),
    ("get", "/v1/export", None),
    ("get", "/v1/ledger", None),
    ("get", "/v1/health", None),
    ("post", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
])
def test_no_endpoint_works_without_a_valid_key(served: Served, method: str, path: str,
                                               body: object) -> None:
    for headers in ({}, {"Authorization": "Bearer sit_not-a-key"},
                    {"Authorization": "Basic dXNlcjpwYXNz"}):
        with httpx.Client(base_url=served.url, headers=headers) as c:
            r = c.request(method.upper(), path, json=body)
        assert r.status_code == 401, (path, headers, r.text)
        assert r.json()["error"] == "Unauthenticated"
        assert r.headers["www-authenticate"] == "Bearer"


def test_a_revoked_key_is_refused_at_once(served: Served) -> None:
    secret = served.key("acme", "support")
    keys = served.service.list_keys("acme")
    key_id = next(k.id for k in keys if k.created_by == "test" and k.revoked_at is None
                  and k.roles == ["support"])
    with served.client(secret) as c:
        assert c.get("/v1/stats").status_code == 200
        served.service.revoke_key(key_id, actor="test", reason="leaked")
        assert c.get("/v1/stats").status_code == 401
        assert c.post("/v1/recall", json=NOW).status_code == 401


def test_errors_name_the_argument_and_change_nothing(served: Served, agent: httpx.Client
                                                     ) -> None:
    with Memory(served.path, embedder="hash") as mem:
        before = snapshot(mem)
    cases = [
        (REFUND | {"kind": "bogus"}, "kind"),
        (REFUND | {"tenant": "globex"}, "tenant"),  # a body cannot name another tenant
        (REFUND | {"conditions": ["days >"]}, "conditions"),
        ({"namespace": "x"}, "content"),
        (REFUND | {"classification": "secret"}, "classification"),
        (REFUND | {"state": {"text": "s", "facts": {"a": [1]}}}, "state.facts.a"),
    ]
    for body, field in cases:
        r = agent.post("/v1/memories", json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"] in ("InvalidInput", "ConditionSyntaxError")
        assert r.json()["field"].startswith(field), r.json()
    too_many = agent.post("/v1/memories/batch", json={"items": [{"content": "a"}] * 1001})
    assert too_many.status_code == 400 and too_many.json()["field"] == "items"
    not_json = agent.post("/v1/memories", content=b"{not json",
                          headers={"content-type": "application/json"})
    assert not_json.status_code == 400
    assert agent.get("/v1/memories/not an id!").status_code == 400
    assert agent.get("/v1/memories", params={"limit": 0}).json()["field"] == "limit"
    missing = agent.get("/v1/memories/mem_0000000000000000")
    assert missing.status_code == 404 and missing.json()["error"] == "NotFound"
    assert agent.post("/v1/feedback", json={"recall_id": "rc_0000000000000000",
                                            "success": True}).status_code == 404
    with Memory(served.path, embedder="hash") as mem:
        assert snapshot(mem) == before


def test_roles_and_clearance_of_the_key_bound_writes(served: Served) -> None:
    with served.client(served.key("acme", "support", clearance="internal")) as support:
        above = support.post("/v1/memories", json=REFUND | {"classification": "restricted"})
        assert above.status_code == 403 and above.json()["error"] == "PermissionDenied"
        role = support.post("/v1/memories", json=REFUND | {"roles": ["finance"]})
        assert role.status_code == 403
        assert support.get("/v1/review/pending").status_code == 403
        assert support.post("/v1/memories/mem_0000000000000000/erase",
                            json={"reason": "x"}).status_code == 403


def test_a_body_over_the_limit_is_413(tmp_path: Path) -> None:
    with serve(tmp_path / "small.db", mcp=False, max_body=2000) as s, s.client(
        s.key("acme")
    ) as c:
        big = c.post("/v1/memories", json={"content": "x" * 5000})
        assert big.status_code == 413 and big.json()["error"] == "TooLarge"
        chunked = c.post("/v1/memories", content=iter([b'{"content": "', b"y" * 3000, b'"}']),
                         headers={"content-type": "application/json"})
        assert chunked.status_code == 413
        assert c.get("/v1/memories").json() == []


def test_every_domain_error_has_its_status() -> None:
    from situated import errors
    from situated.http.errors import status_of

    expected = {
        errors.InvalidInput("f", "m"): 400, errors.ConditionSyntaxError("f", "m"): 400,
        errors.UnknownPlugin("x"): 400, errors.PermissionDenied("x"): 403,
        errors.NotFound("x"): 404, errors.FeedbackConflict("x"): 409,
        errors.EmbedderMismatch("x"): 409, errors.UsageError("x"): 409,
        errors.ModelError("x"): 502, errors.StoreBusy("x"): 503,
        errors.StoreFailure("x", "SQLITE_FULL"): 500, errors.SituatedRuntimeError("x"): 500,
    }
    assert {type(e).__name__: status_of(e) for e in expected} == {
        type(e).__name__: code for e, code in expected.items()}


def test_add_conversation(agent: httpx.Client) -> None:
    done = agent.post("/v1/conversations", json={
        "session": "s-http", "namespace": "chat",
        "messages": [{"speaker": "carol", "content": "I prefer calls after 5 pm."},
                     {"role": "assistant", "content": "Noted."}]})
    assert done.status_code == 200, done.text
    doc = done.json()
    assert doc["session"] == "s-http" and doc["extractor"] == "none"
    assert [n["source"]["evidence"] for n in doc["notes"]][1] == [
        "session:s-http", "speaker:assistant", "turn:1"]
    bad = agent.post("/v1/conversations", json={"messages": [{"content": "who?"}]})
    assert bad.status_code == 400 and "messages.messages.0.speaker" in bad.text
