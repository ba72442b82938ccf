"""The scope layer cannot be bypassed by accident: every store method that reads or changes
rows of memories, the ledger or recalls takes the caller's scope, and nothing above the store
runs SQL of its own."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from situated.store.sqlite import Store

SRC = Path(__file__).resolve().parents[1] / "src" / "situated"
SCOPED = re.compile(r"FROM (memories|ledger|\{RECALLS\}\.recalls|recalls)\b|UPDATE memories|"
                    r"INTO (ledger|feedback)\b")
SCOPE_TYPES = ("Eligibility", "System", "Principal", "StoredRecall", "MemoryRecord")
EXEMPT = {
    # writes of a new row (the writer is checked by `check_write` inside) or derived data
    "insert", "set_analysis", "_ledger", "_rid", "_vector_meta", "_role_keys",
    "_move_legacy_recalls", "rebuild", "orphans", "integrity", "_erase_row",
    "record_failure",  # reads a memory's scope only to label the failure row; returns nothing
}


def test_every_row_touching_store_method_takes_a_scope() -> None:
    unscoped = []
    for name, fn in inspect.getmembers(Store, inspect.isfunction):
        if name in EXEMPT or not SCOPED.search(inspect.getsource(fn)):
            continue
        params = inspect.signature(fn).parameters.values()
        if not any(any(t in str(p.annotation) for t in SCOPE_TYPES) for p in params):
            unscoped.append(name)
    assert unscoped == []


def test_nothing_above_the_store_runs_sql() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if "store" in path.relative_to(SRC).parts[:-1]:  # the store package, backends included
            continue
        text = path.read_text()
        for pattern in (r"\.store\._(all|one|events)\(", r"\.store\.db\.", r"\._store\._"):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(SRC)}: {pattern}")
    assert offenders == []


def test_the_store_imports_nothing_above_it() -> None:
    for path in (SRC / "store").rglob("*.py"):
        imports = re.findall(r"^from situated\.(\w+)", path.read_text(), re.M)
        assert set(imports) <= {"store", "models", "errors", "embed", "conditions", "names"}, path
