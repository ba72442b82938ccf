"""Erasure leaves nothing: the raw bytes of every file of the store hold none of the erased text."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from situated import Memory, PermissionDenied, Principal, State

ADMIN = Principal("acme", roles={"admin", "support"}, clearance="restricted", name="dpo")
WRITER = Principal("acme", roles={"support"}, clearance="internal")
SECRET = "Zanzibarquux lives at Wolverhampton Crescent and pays with Jabberwocky"
WORDS = ("zanzibarquux", "wolverhampton", "jabberwocky", "Zanzibarquux", "Jabberwocky")


def _bytes(db: Path) -> bytes:
    """Every byte of the store's files: database, WAL, shared memory, the recall file's."""
    return b"".join(Path(f).read_bytes() for f in sorted(glob.glob(f"{db}*")))


@pytest.mark.parametrize("resident_mb", [0, 64])
def test_no_erased_text_in_any_file_after_erase(tmp_path: Path, resident_mb: float) -> None:
    db = tmp_path / "e.db"
    mem = Memory(db, embedder="hash", resident_mb=resident_mb)
    keep = mem.add("Ship orders from the north depot first.", principal=WRITER,
                   state=State("order waiting", {"depot": "north"}))
    gone = mem.add(SECRET, principal=WRITER, kind="note", action=f"noted {SECRET}",
                   state=State(f"customer said {SECRET}", {"city": "Wolverhampton"}),
                   evidence=["ticket-Jabberwocky-9"], episode_id="ep-zanzibarquux")
    for _ in range(3):  # recall records quote the text; feedback and the resident index too
        b = mem.recall(State("where does the customer live"), principal=WRITER,
                       intent="customer address crescent")
        mem.feedback(b.recall_id, principal=WRITER, success=True,
                     used=[i.memory_id for i in b.items])
    for name in (n for n in WORDS if n.islower()):
        assert name.encode() in _bytes(db).lower()  # the test can see the text before
    with mem.store.transaction():  # a model failure that quoted the memory
        mem.store.record_failure("reconstructor:llm", f"bad output for: {SECRET}", keep.id)
    mem.erase(gone.id, principal=ADMIN, reason="data subject request")
    raw = _bytes(db)
    for word in (SECRET, *WORDS):
        assert word.encode() not in raw, word
        assert word.lower().encode() not in raw.lower(), word
    assert mem.inspect(keep.id, principal=WRITER).content.startswith("Ship orders")
    assert mem.health().ok
    mem.close()
    reopened = Memory(db, embedder="hash")  # and the files still open and read
    assert reopened.recall("order waiting", principal=WRITER).items
    reopened.close()


def test_tombstones_hold_only_the_audit_and_are_listed_to_admins(mem: Memory) -> None:
    gone = mem.add(SECRET, principal=WRITER, episode_id="ep-7", consent="consent-42",
                   reward=1.0, success=True, state=State("s", {"x": 1}))
    mem.erase(gone.id, principal=ADMIN, reason="asked")
    with pytest.raises(PermissionDenied):
        mem.list(principal=WRITER, states=["ERASED"])
    [tomb] = mem.list(principal=ADMIN, states=["ERASED"])
    assert tomb.id == gone.id and tomb.content == "" and tomb.source.state is None
    assert (tomb.source.episode_id, tomb.scope.consent, tomb.source.outcome.reward,
            tomb.source.outcome.success, tomb.proposed_by) == (None, None, None, None, "")
    assert [e.event.value for e in mem.history(gone.id, principal=ADMIN)][-1] == "erased"
