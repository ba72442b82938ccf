"""Choosing ScienceWorld tasks: `all`, names, and bad names (no simulator needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from situated.errors import InvalidInput
from situated.eval.envs.scienceworld import TASKS_FULL, make_config
from situated.eval.envs.swtasks import TASKS_ALL, resolve_tasks


def test_all_means_the_thirty_tasks_and_names_pass_through() -> None:
    assert len(TASKS_ALL) == 30 and len(set(TASKS_ALL)) == 30
    assert set(TASKS_FULL) <= set(TASKS_ALL)
    assert make_config(False, ["all"]).tasks == TASKS_ALL
    assert make_config(False, ["boil", " all"]).tasks == TASKS_ALL  # no task twice
    assert make_config(False, ["melt", "boil"]).tasks == ("melt", "boil")
    assert make_config(False).tasks == TASKS_FULL
    assert resolve_tasks(None) is None


@pytest.mark.parametrize("names", [["boil", "bake-a-cake"], [" "], []])
def test_an_unknown_task_is_an_error_naming_tasks(names: list[str]) -> None:
    with pytest.raises(InvalidInput) as err:
        make_config(False, names) if names else resolve_tasks(names)
    assert err.value.field == "tasks"


def test_the_list_matches_the_installed_simulator() -> None:
    if importlib.util.find_spec("scienceworld") is None:
        pytest.skip("the scienceworld package is not installed")
    from scienceworld.constants import ID2TASK

    assert tuple(ID2TASK.values()) == TASKS_ALL


def test_the_cli_names_tasks_for_an_unknown_task(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from situated.cli import app

    out = f"{tmp_path}/sw"
    result = CliRunner().invoke(app, ["--embedder", "hash", "eval", "scienceworld", "--tasks",
                                      "boil,bake-a-cake", "--out", out])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: tasks: unknown ScienceWorld task 'bake-a-cake'")
