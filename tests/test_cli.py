"""The `situated` CLI through its real entry point; then the database is opened and checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import situated
from situated import Memory, Principal
from situated.cli import app, parse_value
from situated.service.models import MemoryDoc
from situated.store.ledger import EventType

ACME = Principal("acme", roles={"support"})
RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No SITUATED_* setting of the machine leaks into a test; no model hub access."""
    for key in list(os.environ):
        if key.startswith("SITUATED_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


@pytest.fixture
def mem_of(db: Path) -> Iterator[Any]:
    opened: list[Memory] = []

    def open_() -> Memory:
        m = Memory(db, embedder="hash")
        opened.append(m)
        return m

    yield open_
    for m in opened:
        m.close()


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return RUNNER.invoke(app, ["--db", str(db), "--embedder", "hash", *args], env=env)


def ok(db: Path, *args: str) -> Any:
    result = run(db, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def lines(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def add_refund_lessons(db: Path) -> tuple[str, str]:
    """An applicable lesson and a minimally different one (a condition fails at 12 days)."""
    full = lines(ok(
        db, "add", "Annual plans within 14 days get a full refund.", "--tenant", "acme",
        "--namespace", "refunds", "--state", "Annual subscriber, refund after 9 days",
        "--fact", "plan=annual", "--fact", "days=9", "--condition", "plan == 'annual'",
        "--condition", "days <= 14", "--action", "refunded in full", "--success",
    ))[0]["id"]
    prorated = lines(ok(
        db, "add", "Annual plans past 30 days get a prorated refund.", "--tenant", "acme",
        "--namespace", "refunds", "--state", "Annual subscriber, refund after 60 days",
        "--fact", "plan=annual", "--fact", "days=60", "-c", "plan == 'annual'", "-c",
        "days > 30", "--success",
    ))[0]["id"]
    return full, prorated


def named_field(stderr: str) -> str:
    """The field an `error: <field>: <message>` line names."""
    assert stderr.startswith("error: "), stderr
    return stderr.removeprefix("error: ").split(": ", 1)[0]


def snapshot(mem: Memory, who: Principal = ACME) -> tuple[Any, ...]:
    """Everything a tenant's reads can see, for 'nothing changed' checks."""
    return (
        list(mem.export(principal=who)),
        [(e.seq, e.event, e.memory_id) for e in mem.ledger(principal=who, limit=10_000)],
        mem.stats(principal=who).memories_by_state,
    )


# -- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12", 12), ("-3", -3), ("1.5", 1.5), ("2e3", 2000.0), ("true", True), ("False", False),
        ("null", None), ("annual", "annual"), ("'12'", "12"), ('"true"', "true"), ("", ""),
        ("nan", "nan"), ("inf", "inf"), ("1_000", "1_000"), ("drawer 2", "drawer 2"),
    ],
)
def test_parse_value(raw: str, expected: object) -> None:
    value = parse_value(raw)
    assert value == expected
    assert type(value) is type(expected)


# -- writing -----------------------------------------------------------------------------------


def test_add_stores_the_record_with_its_source(db: Path, mem_of: Any) -> None:
    out = lines(ok(
        db, "add", "Check drawer 2 for the mug.", "--tenant", "acme", "--role", "support",
        "--namespace", "kitchen", "--state", "Mug not visible on the counter",
        "--fact", "room=kitchen", "--fact", "price=42", "--fact", "target_visible=false",
        "--fact", "ratio=0.5", "--condition", "target_visible == false",
        "--action", "open drawer 2", "--failure", "--reward", "-1", "--episode", "ep-7",
        "--step", "3", "--evidence", "log:1",
        "--role-required", "support", "--classification", "confidential", "--authority",
        "system_observed", "--actor", "tester", "--clearance", "confidential",
    ))
    assert len(out) == 1
    mid = out[0]["id"]
    assert out[0]["state"] == "ACTIVE"
    rec = mem_of().inspect(mid, principal=Principal("acme", {"support"}, "confidential"))
    assert rec.content == "Check drawer 2 for the mug."
    assert rec.scope.namespace == "kitchen"
    assert rec.scope.roles == frozenset({"support"})
    assert rec.scope.classification.label == "confidential"
    assert rec.authority.label == "system_observed"
    assert rec.source.state is not None
    assert rec.source.state.facts == {
        "room": "kitchen", "price": 42, "target_visible": False, "ratio": 0.5,
    }
    assert rec.source.state.text == "Mug not visible on the counter"
    assert rec.source.action == "open drawer 2"
    assert rec.source.outcome.success is False
    assert rec.source.outcome.reward == -1.0
    assert (rec.source.episode_id, rec.source.step, rec.source.evidence) == ("ep-7", 3, ("log:1",))
    assert rec.conditions == ("target_visible == false",)
    assert rec.proposed_by == "tester"
    events = [e.event for e in mem_of().history(mid, principal=Principal("acme", {"support"},
                                                                            "confidential"))]
    assert events[:2] == [EventType.PROPOSED, EventType.PROMOTED]


def test_add_without_state_marks_source_state_unknown(db: Path, mem_of: Any) -> None:
    mid = lines(ok(db, "add", "Prefer email over phone.", "--tenant", "acme", "--kind",
                   "preference"))[0]["id"]
    rec = mem_of().inspect(mid, principal=ACME)
    assert rec.source.state is None and rec.source.state_unknown
    assert rec.kind.value == "preference"


def test_superseding_fact_via_cli(db: Path, mem_of: Any) -> None:
    common = ("--tenant", "acme", "--kind", "fact", "--entity", "policy", "--attribute",
              "threshold")
    old = lines(ok(db, "add", "Threshold is 100.", *common, "--value", "100",
                   "--valid-from", "2024-01-01T00:00:00Z"))[0]["id"]
    new = lines(ok(db, "add", "Threshold is 250.", *common, "--value", "250",
                   "--valid-from", "2025-01-01T00:00:00Z"))[0]["id"]
    mem = mem_of()
    assert mem.inspect(old, principal=ACME).state.value == "INVALIDATED"
    assert mem.inspect(new, principal=ACME).value == 250
    past = lines(ok(db, "recall", "what is the threshold", "--tenant", "acme", "--json",
                    "--as-of", "2024-06-01T00:00:00Z"))[0]
    assert [i["memory_id"] for i in past["items"]] == [old]
    today = lines(ok(db, "recall", "what is the threshold", "--tenant", "acme", "--json"))[0]
    assert [i["memory_id"] for i in today["items"]] == [new]


# -- recall and feedback -----------------------------------------------------------------------


def test_recall_serves_the_applicable_and_rejects_the_twin(db: Path, mem_of: Any) -> None:
    full, prorated = add_refund_lessons(db)
    out = lines(ok(db, "recall", "Annual subscriber wants a refund after 12 days", "--tenant",
                   "acme", "--fact", "plan=annual", "--fact", "days=12", "-n", "refunds",
                   "--json"))
    assert len(out) == 1
    briefing = out[0]
    assert briefing["mode"] == "GUIDED"
    assert [i["memory_id"] for i in briefing["items"]] == [full]
    assert {r["memory_id"]: r["reason"] for r in briefing["rejected"]} == {
        prorated: "CONDITION_FAILED"
    }
    stored = mem_of().stats(principal=ACME)
    assert stored.recalls == 1


def test_recall_text_cites_ids_and_names_the_recall_on_stderr(db: Path) -> None:
    full, prorated = add_refund_lessons(db)
    result = ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact",
                "plan=annual", "--fact", "days=12")
    assert f"[{full}]" in result.stdout
    assert prorated not in result.stdout
    assert "rc_" not in result.stdout  # the rendered briefing is clean agent context
    assert "recall rc_" in result.stderr and "1 rejected" in result.stderr
    md = ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact", "plan=annual",
            "--fact", "days=12", "--format", "markdown")
    assert md.stdout.startswith("**")


def test_recall_explain_tells_why(db: Path) -> None:
    _, prorated = add_refund_lessons(db)
    result = ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact",
                "plan=annual", "--fact", "days=12", "--explain")
    assert f"memory {prorated}" in result.stdout
    assert "precheck" in result.stdout
    assert f"rejected {prorated}: CONDITION_FAILED" in result.stdout
    as_json = lines(ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact",
                       "plan=annual", "--fact", "days=12", "--explain", "--json"))[0]
    assert prorated in as_json["explain"]


def test_allow_tool_becomes_the_policy(db: Path) -> None:
    # an agent's lesson naming a tool is held (inferred, touches tools); a user's is stored
    held = lines(ok(db, "add", "Call the `wire_transfer` tool to pay the refund.", "--tenant",
                    "beta", "--fact", "plan=annual", "-c", "plan == 'annual'"))[0]
    assert held["state"] == "PROPOSED"
    mid = lines(ok(db, "add", "Call the `wire_transfer` tool to pay the refund.", "--tenant",
                   "acme", "--fact", "plan=annual", "-c", "plan == 'annual'", "--authority",
                   "user_declared"))[0]["id"]
    args = ("recall", "refund", "--tenant", "acme", "--fact", "plan=annual", "--json")
    allowed = lines(ok(db, *args, "--allow-tool", "wire_transfer"))[0]
    assert [i["memory_id"] for i in allowed["items"]] == [mid]
    # no allow-list is deny-by-default: the tool is never named in guidance
    for extra in ((), ("--allow-tool", "refund_payment", "--allow-tool", "lookup_order")):
        restricted = lines(ok(db, *args, *extra))[0]
        assert restricted["items"] == []
        assert {r["memory_id"]: r["reason"] for r in restricted["rejected"]} == {
            mid: "SCOPE_MISMATCH"
        }


def test_feedback_updates_counters_and_ledger(db: Path, mem_of: Any) -> None:
    full, _ = add_refund_lessons(db)
    briefing = lines(ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact",
                        "plan=annual", "--fact", "days=12", "--json"))[0]
    rid = briefing["recall_id"]
    fb = lines(ok(db, "feedback", rid, "--success", "--used", full, "--tenant", "acme"))[0]
    assert fb["credited"] == [full] and fb["blamed"] == [] and not fb["duplicate"]
    mem = mem_of()
    rec = mem.inspect(full, principal=ACME)
    assert (rec.counters.uses, rec.counters.successes) == (1, 1)
    assert rec.utility == pytest.approx(2 / 3)
    feedback = [e for e in mem.ledger(principal=ACME) if e.event is EventType.FEEDBACK]
    assert [(e.memory_id, e.recall_id, e.data["credit"]) for e in feedback] == [
        (full, rid, "credited")
    ]
    assert mem.stats(principal=ACME).feedback == 1
    # the same feedback again is idempotent; a different outcome is a conflict
    again = lines(ok(db, "feedback", rid, "--success", "--used", full, "--tenant", "acme"))[0]
    assert again["duplicate"] is True
    conflict = run(db, "feedback", rid, "--failure", "--used", full, "--tenant", "acme")
    assert conflict.exit_code == 1
    assert conflict.stderr.startswith("error: ") and conflict.stdout == ""
    assert mem_of().inspect(full, principal=ACME).counters.uses == 1


def test_feedback_with_an_id_that_was_not_served(db: Path, mem_of: Any) -> None:
    full, prorated = add_refund_lessons(db)
    rid = lines(ok(db, "recall", "refund after 12 days", "--tenant", "acme", "--fact",
                   "plan=annual", "--fact", "days=12", "--json"))[0]["recall_id"]
    result = run(db, "feedback", rid, "--success", "--used", f"{full},{prorated}", "--tenant",
                 "acme")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: used: ")
    assert mem_of().stats(principal=ACME).feedback == 0


def test_feedback_for_another_tenants_recall_is_not_found(db: Path, mem_of: Any) -> None:
    add_refund_lessons(db)
    rid = lines(ok(db, "recall", "refund", "--tenant", "acme", "--fact", "plan=annual",
                   "--fact", "days=12", "--json"))[0]["recall_id"]
    result = run(db, "feedback", rid, "--success", "--tenant", "globex")
    assert result.exit_code == 1
    assert "no recall" in result.stderr
    assert mem_of().stats(principal=ACME).feedback == 0


# -- errors ------------------------------------------------------------------------------------


def test_bad_condition_is_one_line_exit_1_and_writes_nothing(db: Path, mem_of: Any) -> None:
    add_refund_lessons(db)
    before = snapshot(mem_of())
    result = run(db, "add", "Bad lesson.", "--tenant", "acme", "--condition", "price <<= 3")
    assert result.exit_code == 1
    assert result.stdout == ""
    err = result.stderr.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: conditions: ")
    assert "price <<= 3" in err[0]
    assert snapshot(mem_of()) == before


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--kind", "recipe"), "kind"),
        (("--authority", "god"), "authority"),
        (("--classification", "top-secret"), "classification"),
        (("--valid-from", "yesterday"), "valid_from"),
        (("--valid-from", "2025-01-02", "--valid-until", "2025-01-01"), "valid_until"),
        (("--kind", "fact"), "entity"),
        (("--fact", "bad key=1"), "facts"),
    ],
)
def test_invalid_add_names_the_field(
    db: Path, mem_of: Any, args: tuple[str, ...], field: str
) -> None:
    add_refund_lessons(db)
    before = snapshot(mem_of())
    result = run(db, "add", "Some lesson.", "--tenant", "acme", *args)
    assert result.exit_code == 1, result.stdout
    err = result.stderr.splitlines()
    assert len(err) == 1 and named_field(err[0]).endswith(field), err
    assert snapshot(mem_of()) == before


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("-k", "0"), "k"),
        (("--budget", "0"), "budget_tokens"),
        (("--as-of", "not-a-time"), "as_of"),
        (("--namespace", "bad\x01ns"), "namespace"),
    ],
)
def test_invalid_recall_names_the_field(
    db: Path, mem_of: Any, args: tuple[str, ...], field: str
) -> None:
    add_refund_lessons(db)
    result = run(db, "recall", "refund", "--tenant", "acme", *args)
    assert result.exit_code == 1
    assert named_field(result.stderr).endswith(field), result.stderr
    assert mem_of().stats(principal=ACME).recalls == 0


def test_invalid_principal_names_the_field(db: Path) -> None:
    result = run(db, "list", "--tenant", "acme", "--clearance", "cosmic")
    assert result.exit_code == 1
    assert named_field(result.stderr).endswith("clearance"), result.stderr


def test_usage_mistakes_are_one_line_exit_2(db: Path) -> None:
    for args in (("list",),  # no tenant
                 ("add", "x", "--tenant", "acme", "--fact", "no-equals-sign"),
                 ("recall", "x", "--tenant", "acme", "--format", "yaml"),
                 ("feedback", "rc_x", "--tenant", "acme"),  # no outcome
                 ("list", "--tenant", "acme", "--limit", "many"),
                 ("eval", "textworld", "--step-cap", "0"),  # refused before any game is made
                 ("lst", "--tenant", "acme")):
        result = run(db, *args)
        assert result.exit_code == 2, args
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("error: ") and "--help)" in result.stderr


def test_unreadable_trajectory_and_bad_values_are_one_line_exit_1(db: Path, tmp_path: Path) -> None:
    for args in (("learn", str(tmp_path / "missing.json"), "--tenant", "acme"),
                 ("learn", str(tmp_path), "--tenant", "acme"),
                 ("list", "--tenant", "acme", "--limit", "0"),
                 ("add", "x", "--tenant", "acme", "--evidence", "caf\udce9"),
                 ("inspect", "mem_\x1b[2J", "--tenant", "acme")):
        result = run(db, *args)
        assert result.exit_code == 1, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
        assert "\x1b" not in result.stderr  # escaped, never sent to the terminal


def test_missing_directory_is_a_clean_error(tmp_path: Path) -> None:
    result = run(tmp_path / "nope" / "x.db", "list", "--tenant", "acme")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: db: ")


def test_not_a_database_is_a_clean_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    result = run(bogus, "list", "--tenant", "acme")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) == 1


# -- eligibility on the read commands ----------------------------------------------------------


def test_foreign_tenant_cannot_inspect_history_or_list(db: Path) -> None:
    full, _ = add_refund_lessons(db)
    for cmd in ("inspect", "history"):
        result = run(db, cmd, full, "--tenant", "globex")
        assert result.exit_code == 1, cmd
        assert result.stdout == ""
        assert result.stderr.startswith("error: no memory ") and full in result.stderr
    assert ok(db, "list", "--tenant", "globex").stdout == ""
    assert ok(db, "export", "--tenant", "globex").stdout == ""
    assert ok(db, "ledger", "--tenant", "globex").stdout == ""
    stats = lines(ok(db, "stats", "--tenant", "globex"))[0]
    assert stats["memories_by_state"] in ({}, {"ACTIVE": 0})
    assert full in ok(db, "inspect", full, "--tenant", "acme").stdout


def test_roles_and_clearance_gate_the_cli(db: Path) -> None:
    mid = lines(ok(db, "add", "Billing-only lesson.", "--tenant", "acme", "--role-required",
                   "billing", "--classification", "confidential", "--role", "billing",
                   "--clearance", "confidential"))[0]["id"]
    assert run(db, "inspect", mid, "--tenant", "acme").exit_code == 1
    assert run(db, "inspect", mid, "--tenant", "acme", "--role", "billing").exit_code == 1
    assert run(db, "inspect", mid, "--tenant", "acme", "--clearance", "confidential").exit_code == 1
    ok(db, "inspect", mid, "--tenant", "acme", "--role", "billing", "--clearance", "confidential")
    assert ok(db, "list", "--tenant", "acme").stdout == ""
    listed = lines(ok(db, "list", "--tenant", "acme", "--role", "billing", "--role", "support",
                      "--clearance", "restricted"))
    assert [r["id"] for r in listed] == [mid]


def test_env_vars_supply_db_and_principal(tmp_path: Path, mem_of: Any, db: Path) -> None:
    env = {"SITUATED_DB": str(db), "SITUATED_TENANT": "acme", "SITUATED_ROLES": "support billing",
           "SITUATED_EMBEDDER": "hash"}
    result = RUNNER.invoke(app, ["add", "Env lesson.", "--role-required", "billing"], env=env)
    assert result.exit_code == 0, result.stderr
    mid = json.loads(result.stdout)["id"]
    rec = mem_of().inspect(mid, principal=Principal("acme", {"billing"}))
    assert rec.scope.tenant == "acme"
    listed = RUNNER.invoke(app, ["list"], env=env)
    assert [json.loads(x)["id"] for x in listed.stdout.splitlines()] == [mid]


# -- the other commands ------------------------------------------------------------------------


def test_list_history_ledger_export_are_json_lines(db: Path, mem_of: Any) -> None:
    full, prorated = add_refund_lessons(db)
    listed = lines(ok(db, "list", "--tenant", "acme"))
    assert [r["id"] for r in listed] == [full, prorated]
    assert all(r["utility"] == 0.5 for r in listed)
    assert [r["id"] for r in lines(ok(db, "list", "--tenant", "acme", "--limit", "1"))] == [full]
    assert lines(ok(db, "list", "--tenant", "acme", "--state", "INVALIDATED")) == []
    history = lines(ok(db, "history", full, "--tenant", "acme"))
    assert [e["event"] for e in history] == ["proposed", "promoted"]
    assert all(e["memory_id"] == full for e in history)
    ledger = lines(ok(db, "ledger", "--tenant", "acme", "--limit", "3"))
    assert len(ledger) == 3
    assert [e["seq"] for e in ledger] == sorted((e["seq"] for e in ledger), reverse=True)
    exported = lines(ok(db, "export", "--tenant", "acme"))
    # the service's document (ISO times, utility), the same the HTTP API's /v1/export sends
    assert exported == [
        MemoryDoc.of(r).model_dump(mode="json") for r in mem_of().list(principal=ACME)
    ]


def test_plain_views_are_tables(db: Path) -> None:
    full, _ = add_refund_lessons(db)
    inspected = ok(db, "inspect", full, "--tenant", "acme", "--plain").stdout
    assert "Annual plans within 14 days get a full refund." in inspected
    assert "ACTIVE" in inspected and "days <= 14" in inspected
    with pytest.raises(json.JSONDecodeError):
        json.loads(inspected)
    assert "promoted" in ok(db, "history", full, "--tenant", "acme", "-p").stdout
    assert full in ok(db, "list", "--tenant", "acme", "--plain").stdout
    assert "memories_by_state" in ok(db, "stats", "--tenant", "acme", "--plain").stdout


def test_init_binds_the_embedder_and_later_commands_follow_it(db: Path) -> None:
    out = lines(ok(db, "init"))[0]
    assert out["embedder"].startswith("hash@") and out["ok"] is True
    # no --embedder: the store's own embedder is used, not the default
    result = RUNNER.invoke(app, ["--db", str(db), "add", "A lesson.", "--tenant", "acme"])
    assert result.exit_code == 0, result.stderr
    mismatch = RUNNER.invoke(
        app, ["--db", str(db), "--embedder", "minilm-static", "list", "--tenant", "acme"]
    )
    assert mismatch.exit_code == 1
    assert mismatch.stderr.startswith("error: ") and "refusing to mix" in mismatch.stderr


def test_health_and_stats(db: Path) -> None:
    add_refund_lessons(db)
    health = lines(ok(db, "health"))[0]
    assert health["ok"] is True and health["ledger_mismatches"] == 0
    stats = lines(ok(db, "stats", "--tenant", "acme"))[0]
    assert stats["memories_by_state"] == {"ACTIVE": 2}
    assert stats["embedder"].startswith("hash@")


def test_demo_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = RUNNER.invoke(app, ["--embedder", "hash", "demo"])
    assert result.exit_code == 0, result.stderr
    assert "CONDITION_FAILED" in result.stdout
    assert "README" in result.stdout
    assert not list(tmp_path.glob("situated-demo-*"))  # the temporary store is removed


# -- a real process --------------------------------------------------------------------------


def test_python_dash_m_entry_point(db: Path, mem_of: Any) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SITUATED_")}
    env["PYTHONPATH"] = str(Path(situated.__file__).parents[1])
    base = [sys.executable, "-m", "situated.cli", "--db", str(db), "--embedder", "hash"]
    added = subprocess.run(
        [*base, "add", "Subprocess lesson.", "--tenant", "acme", "--fact", "x=1"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert added.returncode == 0, added.stderr
    mid = json.loads(added.stdout)["id"]
    assert mem_of().inspect(mid, principal=ACME).source.state.facts == {"x": 1}  # type: ignore[union-attr]
    bad = subprocess.run(
        [*base, "add", "x", "--tenant", "acme", "-c", "x ==== 1"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr.startswith("error: conditions: ") and len(bad.stderr.splitlines()) == 1
    foreign = subprocess.run(
        [*base, "inspect", mid, "--tenant", "globex"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert foreign.returncode == 1 and "no memory" in foreign.stderr
