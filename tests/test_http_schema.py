"""schemathesis against the OpenAPI schema the running server serves (bounded examples): no 5xx,
every status and body as the schema documents, and nothing stored changes on a refused request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from conftest import snapshot
from serving import Served, serve
from situated.http.app import create_app
from situated.memory import Memory
from situated.service import Pool, Service

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("schema") / "schema.db", mcp=False) as s:
        with s.client(s.key("acme", "support")) as c:  # something to read and recall
            c.post("/v1/memories", json={
                "content": "Annual plans past 30 days get a prorated refund.",
                "namespace": "refunds", "conditions": ["days > 30"],
                "state": {"text": "annual plan, 60 days", "facts": {"days": 60}}})
        yield s


@pytest.fixture(scope="module")
def secret(served: Served) -> str:
    return served.key("acme", "support", "reviewer", "admin", "operator",
                      clearance="restricted", actor="fuzzer")


@pytest.fixture(scope="module")
def observer(served: Served) -> Iterator[Memory]:
    with Memory(served.path, embedder="hash") as mem:
        yield mem


def _schema_document() -> dict[str, Any]:
    """The app's OpenAPI document (built without opening a store); the test checks it is the
    one the running server serves."""
    return create_app(Service(Pool(_no_store)), mcp=False).openapi()


def _no_store() -> Memory:
    raise AssertionError("the schema is built without a store")


DOCUMENT = _schema_document()
SEEN: dict[str, set[int]] = {}
"""Statuses each operation answered, for the check that both doors of the fuzzing ran."""
schema = schemathesis.openapi.from_dict(DOCUMENT)

CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance]


@schema.parametrize()
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_the_served_schema_holds(case: Any, served: Served, secret: str,
                                 observer: Memory) -> None:
    if case.operation.label == "GET /v1/stats":  # once is enough: the served one is this
        assert served.client().get("/openapi.json").json() == DOCUMENT
    before = snapshot(observer)
    response = case.call(base_url=served.url, headers={"Authorization": f"Bearer {secret}"},
                         timeout=60)
    SEEN.setdefault(case.operation.label, set()).add(response.status_code)
    case.validate_response(response, checks=CHECKS)
    if response.status_code >= 400:
        assert snapshot(observer) == before, (case.operation.label, response.status_code,
                                              response.text[:300])


def test_the_fuzzing_reached_both_success_and_refusal() -> None:
    if not SEEN:
        pytest.skip("run with the schema test")
    assert len(SEEN) == len([m for p in DOCUMENT["paths"].values() for m in p])
    codes = set().union(*SEEN.values())
    assert 200 in codes and 400 in codes
    assert sum(200 in c for c in SEEN.values()) >= len(SEEN) // 2, SEEN
