"""The quick scorecard (`situated eval --quick`: 123 tasks, 3 seeds) gives the same figures on
SQLite and on PostgreSQL: every scenario's world is built in a fresh database on the test
server, and `results.json` (every row and every figure; timings left out) is equal."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

import situated.eval.runner as runner
from pg_server import PgServer
from situated.eval import run_eval

TIMINGS = ("elapsed", "_ms", "_s", "seconds")


def _figures(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _figures(v) for k, v in d.items() if not any(t in k for t in TIMINGS)}
    if isinstance(d, list):
        return [_figures(x) for x in d]
    return d


@pytest.mark.slow
def test_quick_scorecard_is_the_same_on_both_backends(
    tmp_path: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds = [1]  # one seed of the quick run: every shipped scenario once
    run_eval(None, seeds, True, tmp_path / "sqlite", plots=False)
    build, n = runner.build_world, itertools.count()
    monkeypatch.setattr(runner, "build_world", lambda sc, path, emb: build(
        sc, pg_server.fresh_dsn(f"eval{next(n)}"), emb))
    run_eval(None, seeds, True, tmp_path / "postgres", plots=False)
    assert next(n) > 30  # every world was on PostgreSQL
    sqlite, postgres = (json.loads((tmp_path / b / "results.json").read_text())
                        for b in ("sqlite", "postgres"))
    assert sqlite["rows"] and sqlite["scorecard"]
    assert _figures(postgres) == _figures(sqlite)
