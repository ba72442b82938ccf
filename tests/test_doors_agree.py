"""The CLI's JSON and the HTTP API's responses are the same documents for the same operation
(one service layer: a field, a default or a time format exists once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from serving import serve
from situated.cli import app

PRINCIPAL = ["--tenant", "acme", "--role", "support", "--role", "reviewer", "--role", "admin",
             "--clearance", "restricted", "--actor", "same"]


def cli(db: Path, *argv: str) -> list[Any]:
    out = CliRunner().invoke(app, ["--db", str(db), "--embedder", "hash", *argv])
    assert out.exit_code == 0, out.output
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_cli_json_and_http_bodies_are_the_same_documents(tmp_path: Path) -> None:
    db = tmp_path / "same.db"
    cli(db, "init")
    with serve(db) as s, s.client(s.key("acme", "support", "reviewer", "admin",
                                        clearance="restricted", actor="same")) as http:
        [added] = cli(db, "add", "Annual plans past 30 days get a prorated refund.",
                      *PRINCIPAL, "-n", "refunds", "--state", "annual plan, 60 days",
                      "--fact", "days=60", "--condition", "days > 30")
        mid = added["id"]
        assert http.get(f"/v1/memories/{mid}").json() == cli(db, "inspect", mid, *PRINCIPAL)[0]
        assert http.get(f"/v1/memories/{mid}/history").json() == cli(db, "history", mid,
                                                                     *PRINCIPAL)
        assert http.get("/v1/memories").json() == cli(db, "list", *PRINCIPAL)
        assert [json.loads(x) for x in http.get("/v1/export").text.splitlines()] == cli(
            db, "export", *PRINCIPAL)
        assert http.get("/v1/ledger", params={"limit": 50}).json() == cli(
            db, "ledger", *PRINCIPAL, "--limit", "50")
        assert http.get("/v1/stats").json() == cli(db, "stats", *PRINCIPAL)[0]
        # a proposal held for review, through both doors' listings
        [held] = cli(db, "add", "Refunds over 500 need a manager.", *PRINCIPAL,
                     "--authority", "externally_verified", "-n", "review")
        assert http.get("/v1/review/pending").json() == cli(db, "review", *PRINCIPAL,
                                                            "--list")
        promoted_http = http.post(f"/v1/review/{held['id']}/promote").json()
        assert promoted_http == cli(db, "inspect", held["id"], *PRINCIPAL)[0]
        # recall: the same briefing document (ids and times differ per call, shapes do not)
        http_b = http.post("/v1/recall", json={"state": {"text": "annual plan, 45 days",
                                                         "facts": {"days": 45}},
                                               "namespace": "refunds"}).json()
        [cli_b] = cli(db, "recall", "annual plan, 45 days", *PRINCIPAL, "--fact", "days=45",
                      "-n", "refunds", "--json")
        assert set(http_b) == set(cli_b)
        strip = ("recall_id", "rendered")
        assert {k: v for k, v in http_b.items() if k not in strip} == {
            k: v for k, v in cli_b.items() if k not in strip}
        # feedback, once through each door, on its own recall
        fb_http = http.post("/v1/feedback", json={"recall_id": http_b["recall_id"],
                                                  "success": True, "used": [mid]}).json()
        [fb_cli] = cli(db, "feedback", cli_b["recall_id"], "--success", "--used", mid,
                       *PRINCIPAL)
        assert fb_http | {"recall_id": ""} == fb_cli | {"recall_id": ""}
        [revoked] = cli(db, "revoke", "nothing-under-it", "--reason", "r", "--tenant", "acme",
                        "--role", "support", "--role", "reviewer", "--role", "admin",
                        "--actor", "same")
        assert http.post("/v1/consents/revoke", json={"consent": "nothing-under-it",
                                                      "reason": "r"}).json() == revoked
