"""`export-training`: TRL's JSONL formats from recalls and feedback, loaded by `datasets`;
eligibility applied (no other tenant's or role's text), erased memories absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import datasets  # the test extra installs it
import pytest

from situated import Memory, Principal, State
from situated.errors import InvalidInput
from situated.recall.reconstruct.llm import SYSTEM_PROMPT, Answer

ADMIN = Principal("acme", {"support", "admin"}, "restricted", "root")

REFUND = "Annual plans past 30 days get a prorated refund, not a full one."
SHIPPING = "Orders shipped abroad need a customs form before the refund."
ERASED = "Refund the VIP account of Zebulon Quarry in full at once."
GLOBEX = "Globex refunds are approved by the Kestrel desk only."
VIP = "VIP refunds go through the Onyx lounge review."


def _lesson(mem: Memory, who: Principal, text: str, **kw: Any) -> str:
    return mem.add(text, principal=who, namespace="refunds", success=True,
                   state=State("Annual customer asks for a refund",
                               facts={"plan": "annual", "days": 60}),
                   **kw).id


def _used(mem: Memory, who: Principal, mid: str, success: bool) -> None:
    b = mem.recall(State("Annual customer wants a refund", facts={"plan": "annual",
                                                                    "days": 45}),
                   principal=who, namespace="refunds", k=10)
    assert mid in {i.memory_id for i in b.items}, [r.reason for r in b.rejected]
    mem.feedback(b.recall_id, principal=who, success=success, used=[mid])


@pytest.fixture
def store(tmp_path: Path, acme: Principal, globex: Principal) -> Path:
    db = tmp_path / "t.db"
    with Memory(db, embedder="hash") as mem:
        _used(mem, acme, _lesson(mem, acme, REFUND), success=True)
        _used(mem, acme, _lesson(mem, acme, SHIPPING), success=False)
        gone = _lesson(mem, acme, ERASED)
        _used(mem, acme, gone, success=True)
        mem.erase(gone, principal=ADMIN, reason="right to erasure")
        _used(mem, globex, _lesson(mem, globex, GLOBEX), success=True)
        vip = Principal("acme", {"support", "vip"}, "internal", "vip-agent")
        _used(mem, vip, _lesson(mem, vip, VIP, roles=["vip"]), success=True)
    return db


def _text(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, ensure_ascii=False)


def test_sft_and_preference_load_in_datasets(
    store: Path, tmp_path: Path, acme: Principal
) -> None:
    with Memory(store, embedder="hash") as mem:
        sft = list(mem.export_training(principal=acme, format="sft"))
        pref = list(mem.export_training(principal=acme, format="preference"))
    assert len(sft) == len(pref) == 2
    for name, rows in (("sft", sft), ("pref", pref)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
        assert ds.num_rows == 2
        if name == "sft":
            assert ds.column_names == ["messages"]
            assert [m["role"] for m in ds[0]["messages"]] == ["system", "user", "assistant"]
        else:
            assert sorted(ds.column_names) == ["chosen", "prompt", "rejected"]
            assert [m["role"] for m in ds[0]["prompt"]] == ["system", "user"]
    # the input is what the llm reconstructor sends; the target validates against its schema
    ok, failed = sft
    assert ok["messages"][0]["content"] == SYSTEM_PROMPT
    assert REFUND in ok["messages"][1]["content"] and "untrusted-data-" in ok["messages"][1][
        "content"]
    good = Answer.model_validate_json(ok["messages"][2]["content"])
    assert good.verdict.value in ("APPLICABLE", "PARTIAL") and good.guidance
    bad = Answer.model_validate_json(failed["messages"][2]["content"])
    assert SHIPPING in failed["messages"][1]["content"]
    assert bad.verdict.value == "NOT_APPLICABLE" and bad.guidance == ""
    # preference: on the failure, the served answer is the rejected one
    served = Answer.model_validate_json(pref[1]["rejected"][0]["content"])
    assert served.verdict.value in ("APPLICABLE", "PARTIAL")
    assert Answer.model_validate_json(pref[1]["chosen"][0]["content"]).verdict.value == (
        "NOT_APPLICABLE")


def test_eligibility_and_erasure(store: Path, acme: Principal, globex: Principal) -> None:
    with Memory(store, embedder="hash") as mem:
        mine = _text(list(mem.export_training(principal=acme, format="preference")))
        theirs = _text(list(mem.export_training(principal=globex, format="sft")))
        admin = _text(list(mem.export_training(principal=ADMIN, format="sft")))
        every = _text(list(mem.export_training(
            principal=Principal("acme", {"support", "vip", "admin"}, "restricted"),
            format="sft")))
    assert REFUND in mine and GLOBEX not in mine and VIP not in mine  # another role's recall
    assert "Zebulon" not in mine and "Zebulon" not in admin  # erased text is absent
    assert GLOBEX in theirs and REFUND not in theirs
    assert VIP not in admin  # an admin without the role does not see that recall
    assert VIP in every and REFUND in every and GLOBEX not in every  # one tenant at a time
    assert "Zebulon" not in every


def test_bad_arguments_name_the_field(mem: Memory, acme: Principal) -> None:
    for kw, field in [({"format": "csv"}, "format"), ({"namespace": ""}, "namespace"),
                      ({"inferred": "yes"}, "inferred")]:
        with pytest.raises(InvalidInput) as e:
            mem.export_training(principal=acme, **kw)  # type: ignore[arg-type]
        assert e.value.field == field


def test_cli_export_training(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "pref.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(store), "--embedder", "hash",
         "export-training", "--tenant", "acme", "--role", "support", "--format",
         "preference", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "wrote 2 preference examples" in run.stderr
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 2 and "Kestrel" not in out.read_text("utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "situated", "--db", str(store), "--embedder", "hash",
         "export-training", "--tenant", "acme", "--format", "csv"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode != 0 and "format" in bad.stderr and "Traceback" not in bad.stderr
