"""`learn` refuses text that is not a trajectory with one clear error, from Python and the CLI,
and documents the format in `--help`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from situated import Memory, Principal
from situated.cli import app
from situated.errors import InvalidInput

ME = Principal("acme")
GOOD = {"episode_id": "ep-1", "task": "boil water",
        "steps": [{"observation": "The stove is off.", "facts": {"stove_on": False},
                   "action": "turn on stove", "result": "The stove is now on."}],
        "outcome": {"success": True}}


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("not json", "trajectory", "is not JSON"),
        ("", "trajectory", "is not JSON"),
        ('{"episode_id": ', "trajectory", "is not JSON"),
        ("[1, 2]", "trajectory", "must be a JSON object"),
        ("42", "trajectory", "must be a JSON object"),
        ("{}", "trajectory.episode_id", "Field required"),
        (json.dumps(GOOD | {"steps": []}), "trajectory.steps", "at least 1"),
        (json.dumps(GOOD | {"outcome": {}}), "trajectory.outcome.success", "Field required"),
    ],
)
def test_python_learn_names_the_argument(
    mem: Memory, text: str, field: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        mem.learn(text, principal=ME)
    assert err.value.field == field
    assert says in err.value.message
    assert mem.list(principal=ME) == []


def test_a_valid_trajectory_is_learned(mem: Memory) -> None:
    assert mem.learn(json.dumps(GOOD), principal=ME)


def test_cli_learn_of_text_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["--db", str(tmp_path / "l.db"), "--embedder", "hash", "learn", "-",
              "--tenant", "acme"], input="the agent boiled water\n")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: trajectory: is not JSON")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_learn_help_documents_the_format() -> None:
    result = CliRunner().invoke(app, ["learn", "--help"])
    assert result.exit_code == 0
    for word in ("episode_id", "task", "steps", "observation", "facts", "action", "result",
                 "outcome", "success", "reward", "namespace"):
        assert f'"{word}"' in result.stdout
