"""mem0 as the raw-replay peer (`mem0_replay`, the `peers` extra): a real mem0 store per
scenario on the run's embedder, scoped by tenant like its `user_id` filter, pasted verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from situated.errors import InvalidInput
from situated.eval import run_eval
from situated.eval.arms import make_arms
from situated.eval.mem0_arm import available
from test_eval_run import _tiny

if (_missing := available()) is not None:  # imports mem0 with its telemetry off
    pytest.skip(_missing, allow_module_level=True)


def test_mem0_replays_the_tenants_memories_verbatim(tmp_path: Path) -> None:
    result = run_eval([_tiny(tmp_path)], [1], False, tmp_path / "out", embedder="hash",
                      plots=False, arms=["no_memory", "raw_replay", "mem0_replay", "compiled"])
    rows = {(r.scenario_id, r.arm): r for r in result.rows}
    leak = rows[("leak-1", "mem0_replay")]
    assert leak.served == ("mine",)  # its user_id filter keeps the other tenant out
    twin = rows[("twin-1", "mem0_replay")]
    assert set(twin.served) == {"pan", "micro"}  # no applicability check: the twin too
    assert twin.inapplicable_served == 1
    assert rows[("twin-1", "compiled")].served == ("pan",)
    card = result.scorecard.overall["mem0_replay"]
    assert card.tokens_per_task > 0 and card.leaks == 0


def test_an_unknown_arm_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match="arms"):
        make_arms(["no_memory", "mem1_replay"], 3, 400)
