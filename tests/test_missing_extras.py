"""Without an extra, what needs it says so in one line: a venv holding situated's core alone
(the distributions `pip install situated` installs, linked from this environment: no network,
no pip) runs `situated serve`, `situated mcp`, a PostgreSQL store and the framework adapters,
and each names the extra to install instead of a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import situated

SOURCE = Path(situated.__file__).parents[1]


def core_distributions() -> set[str]:
    """situated's requirements without extras, and theirs, transitively (as installed)."""
    todo = [r for r in metadata.requires("situated") or ()]
    seen: set[str] = set()
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo += metadata.requires(name) or []
    return seen


def link_core(into: Path) -> None:
    """Every file's top-level entry of the core distributions, linked into `into`."""
    into.mkdir()
    for name in core_distributions():
        dist = metadata.distribution(name)
        for file in dist.files or ():
            top = Path(str(file)).parts[0]
            source = Path(str(dist.locate_file(top)))
            target = into / top
            if top in ("..", "__pycache__") or target.exists() or not source.exists():
                continue
            target.symlink_to(source)


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("core")
    venv.EnvBuilder(with_pip=False).create(root / "venv")
    link_core(root / "site")
    [site] = list((root / "venv" / "lib").glob("python*/site-packages"))
    (site / "core.pth").write_text(f"{SOURCE}\n{root / 'site'}\n")
    return root / "venv" / "bin" / "python"


def run(python: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *argv], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                        "HF_HUB_OFFLINE": "1"})


def test_the_venv_holds_the_core_alone(core_python: Path, tmp_path: Path) -> None:
    done = run(core_python, "-c", "import importlib.util as u, situated; print(situated.__file__,"
               " [m for m in ('fastapi', 'mcp', 'uvicorn', 'langchain_core', 'psycopg') "
               "if u.find_spec(m)])", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(SOURCE / "situated" / "__init__.py"), "[]"]


@pytest.mark.parametrize(("argv", "extra"), [
    (["serve"], "serve"),
    (["mcp", "--tenant", "acme"], "serve"),
    (["--db", "postgresql://u@127.0.0.1:1/x", "stats", "--tenant", "acme"], "postgres"),
])
def test_a_command_names_the_extra_it_needs(core_python: Path, tmp_path: Path,
                                            argv: list[str], extra: str) -> None:
    done = run(core_python, "-m", "situated", "--db", str(tmp_path / "s.db"), *argv,
               cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.fullmatch(rf"error: .+ needs the '{extra}' extra: pip install "
                        rf"'situated\[{extra}\]' \(\w+ is not installed\)\n", done.stderr)


@pytest.mark.parametrize(("module", "extra"), [
    ("situated.adapters.langchain", "langchain"),
    ("situated.adapters.langgraph", "langgraph"),
    ("situated.adapters.openai_agents", "openai-agents"),
    ("situated.http.app", "serve"),
    ("situated.mcp_server", "serve"),
])
def test_an_import_names_the_extra_it_needs(core_python: Path, tmp_path: Path, module: str,
                                            extra: str) -> None:
    done = run(core_python, "-c", f"import {module}", cwd=tmp_path)
    assert done.returncode == 1
    *_, last = done.stderr.strip().splitlines()
    assert last == (f"situated.extras.MissingExtra: {module} needs the {extra!r} extra: "
                    f"pip install 'situated[{extra}]' "
                    f"({last.rsplit('(', 1)[1].split()[0]} is not installed)")
