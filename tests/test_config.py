"""Configuration in one place: SITUATED_* variables, situated.toml, [tool.situated]; explicit
arguments win. The openai embedder and the llm reconstructor configured this way talk to the
real stub server on 127.0.0.1 (tests/openai_server.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openai_server import OpenAIStub, chat_reply, hash_embeddings
from situated import Memory, Principal
from situated.cli import app
from situated.config import Settings, load_settings
from situated.embed import HashEmbedder, OpenAIEmbedder
from situated.errors import EmbedderMismatch, InvalidInput
from situated.recall.reconstruct.llm import LLMReconstructor

RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def _no_db_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SITUATED_DB")  # conftest's: these tests set the database themselves


@pytest.fixture
def srv() -> Iterator[OpenAIStub]:
    with OpenAIStub(embeddings=hash_embeddings(dim=8)) as stub:
        yield stub


def write(name: str, text: str) -> None:
    Path(name).write_text(text, encoding="utf-8")


# -- the settings object ---------------------------------------------------------------------


def test_nothing_configured_means_every_default() -> None:
    s = load_settings()
    assert s == Settings()
    assert (s.db, s.embedder, s.reconstructor, s.tenant, s.roles) == (None,) * 5


def test_arguments_beat_env_beat_situated_toml_beat_pyproject(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write("pyproject.toml", '[project]\nname = "x"\n[tool.situated]\ntenant = "from-pyproject"\n'
          'actor = "pp-actor"\nclearance = "public"\nembedder_model = "pp-model"\n')
    assert load_settings().tenant == "from-pyproject"
    write("situated.toml", 'tenant = "from-toml"\nactor = "toml-actor"\n')
    s = load_settings()
    assert (s.tenant, s.actor, s.clearance, s.embedder_model) == (
        "from-toml", "toml-actor", "public", "pp-model")
    monkeypatch.setenv("SITUATED_TENANT", "from-env")
    assert load_settings().tenant == "from-env"
    assert load_settings(tenant="given", actor=None).tenant == "given"
    assert load_settings(actor=None).actor == "toml-actor"  # None is "not given"


def test_roles_from_env_are_space_or_comma_separated_and_a_list_in_toml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write("situated.toml", 'roles = ["support", "billing"]\n')
    assert load_settings().roles == ("support", "billing")
    monkeypatch.setenv("SITUATED_ROLES", "support admin,reviewer")
    assert load_settings().roles == ("support", "admin", "reviewer")


def test_endpoint_settings_go_to_the_endpoint_plugins_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SITUATED_EMBEDDER_MODEL", "nomic")
    monkeypatch.setenv("SITUATED_EMBEDDER_API_KEY", "sk-secret")
    monkeypatch.setenv("SITUATED_RECONSTRUCTOR_TIMEOUT", "4.5")
    s = load_settings()
    assert s.embedder_options("openai") == {"model": "nomic", "api_key": "sk-secret"}
    assert s.embedder_options("hash") == {}
    assert s.reconstructor_options("llm") == {"timeout": 4.5}
    assert s.reconstructor_options("rules") == {}
    assert "sk-secret" not in repr(s)  # a key is a SecretStr


@pytest.mark.parametrize(
    ("env", "toml", "field"),
    [
        ({"SITUATED_EMBEDDER_TIMEOUT": "soon"}, "", "settings.embedder_timeout"),
        ({"SITUATED_RECONSTRUCTOR_MAX_RETRIES": "-1"}, "", "settings.reconstructor_max_retries"),
        ({}, "tenat = 'acme'\n", "settings.tenat"),
        ({}, "tenant = \n", "situated.toml or pyproject.toml"),
        ({}, "roles = 5\n", "settings.roles"),
    ],
)
def test_a_bad_setting_is_an_invalid_input_naming_it(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], toml: str, field: str
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if toml:
        write("situated.toml", toml)
    with pytest.raises(InvalidInput) as err:
        load_settings()
    assert err.value.field == field


def test_import_reads_nothing(tmp_path: Path) -> None:
    """A broken configuration never breaks `import situated`: it is read on use."""
    write("situated.toml", "this is = not toml\n")
    env = dict(os.environ, SITUATED_EMBEDDER_TIMEOUT="soon")
    code = "import situated, situated.config, situated.cli; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["situated.toml"]  # nothing created


# -- Memory ----------------------------------------------------------------------------------


def test_memory_takes_what_it_is_not_given_from_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("situated.toml", f'db = "{tmp_path / "from-toml.db"}"\nembedder = "hash"\n')
    with Memory() as mem:
        assert mem.store.path == str(tmp_path / "from-toml.db")
        assert isinstance(mem.embedder, HashEmbedder)
        assert mem.reconstructor.name == "rules"
    monkeypatch.setenv("SITUATED_RECONSTRUCTOR", "learned")
    with Memory(tmp_path / "given.db") as mem:  # given path, embedder from the file
        assert mem.store.path == str(tmp_path / "given.db")
        assert isinstance(mem.embedder, HashEmbedder)
        assert mem.reconstructor.name == "learned"
    with Memory(tmp_path / "given.db", embedder="hash", reconstructor="rules") as mem:
        assert mem.reconstructor.name == "rules"  # arguments win


def test_memory_openai_embedder_from_the_settings(
    srv: OpenAIStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITUATED_EMBEDDER", "openai")
    monkeypatch.setenv("SITUATED_EMBEDDER_BASE_URL", srv.url)
    monkeypatch.setenv("SITUATED_EMBEDDER_MODEL", "stub-embed")
    me = Principal("acme")
    with Memory(tmp_path / "o.db") as mem:
        assert isinstance(mem.embedder, OpenAIEmbedder)
        mem.add("Reset the router before escalating.", principal=me, kind="note")
        assert mem.store.embedder_ref() == "openai:stub-embed@1:8"
    assert srv.requests and srv.requests[0].json["model"] == "stub-embed"
    with pytest.raises(EmbedderMismatch):  # an explicit option wins, and the store notices
        Memory(tmp_path / "o.db", embedder_options={"model": "other"})


def test_explicit_options_win_over_the_settings(
    srv: OpenAIStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITUATED_RECONSTRUCTOR_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("SITUATED_RECONSTRUCTOR_MODEL", "configured")
    monkeypatch.setenv("SITUATED_RECONSTRUCTOR_TIMEOUT", "7")
    with Memory(tmp_path / "r.db", embedder="hash", reconstructor="llm",
                reconstructor_options={"base_url": srv.url, "max_retries": 0}) as mem:
        llm = mem.reconstructor
        assert isinstance(llm, LLMReconstructor)
        assert (llm.url, llm.model, llm.timeout) == (
            srv.url + "/v1/chat/completions", "configured", 7.0)
        assert llm._endpoint.max_retries == 0


def test_a_missing_model_names_where_to_set_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        Memory(tmp_path / "x.db", embedder="openai")
    assert err.value.field == "embedder_options.model"
    assert "SITUATED_EMBEDDER_MODEL or embedder_model in situated.toml" in str(err.value)
    with pytest.raises(InvalidInput) as err:
        Memory(tmp_path / "x.db", embedder="hash", reconstructor="llm")
    assert err.value.field == "reconstructor_options.model"
    assert "SITUATED_RECONSTRUCTOR_MODEL" in str(err.value)
    assert not (tmp_path / "x.db").exists()


def test_a_bad_configured_value_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITUATED_EMBEDDER_BASE_URL", "localhost:8080")
    with pytest.raises(InvalidInput) as err:
        Memory(tmp_path / "x.db", embedder="openai", embedder_options={"model": "m"})
    assert err.value.field == "settings.embedder_base_url"


def test_settings_must_be_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        Memory(tmp_path / "x.db", embedder="hash", settings={"db": "x"})  # type: ignore[arg-type]
    assert err.value.field == "settings"


# -- the CLI ---------------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = RUNNER.invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_cli_openai_init_without_a_model_is_one_clean_line(tmp_path: Path) -> None:
    code, out, err = cli("--db", str(tmp_path / "c.db"), "--embedder", "openai", "init")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: embedder_options.model: is required")
    assert "SITUATED_EMBEDDER_MODEL" in err


def test_cli_openai_init_with_the_endpoint_configured(srv: OpenAIStub, tmp_path: Path) -> None:
    write("situated.toml", f'embedder_base_url = "{srv.url}"\nembedder_model = "stub-embed"\n')
    code, out, err = cli("--db", str(tmp_path / "c.db"), "--embedder", "openai", "init")
    assert code == 0, err
    assert '"embedder": "openai:stub-embed@1:8"' in out
    # the store remembers its embedder: later commands need no --embedder
    code, out, err = cli("--db", str(tmp_path / "c.db"), "add", "Reset the router first.",
                         "--tenant", "acme", "--kind", "note")
    assert code == 0, err


def test_cli_reconstructor_option_and_setting(srv: OpenAIStub, tmp_path: Path) -> None:
    srv.chat.always(chat_reply("not json"))
    db = str(tmp_path / "r.db")
    env = {"SITUATED_RECONSTRUCTOR_BASE_URL": srv.url, "SITUATED_RECONSTRUCTOR_MODEL": "m",
           "SITUATED_RECONSTRUCTOR_MAX_RETRIES": "0"}
    assert cli("--db", db, "--embedder", "hash", "add", "Reset the router first.",
               "--tenant", "acme", "--state", "router is blinking red")[0] == 0
    code, out, err = cli("--db", db, "--embedder", "hash", "--reconstructor", "llm", "recall",
                         "router is blinking red", "--tenant", "acme", env=env)
    assert code == 0, err
    assert srv.chat_requests  # the llm was asked (and fell back to rules on its bad answer)
    code, out, err = cli("--db", db, "--embedder", "hash", "stats", "--tenant", "acme",
                         env=env | {"SITUATED_RECONSTRUCTOR": "llm"})
    assert code == 0 and '"reconstructor": "llm@1"' in out, err


def test_cli_principal_from_the_file_env_and_options(tmp_path: Path) -> None:
    db = str(tmp_path / "p.db")
    write("situated.toml", 'tenant = "acme"\nroles = ["support"]\nactor = "bot-7"\n'
          'embedder = "hash"\n')
    code, out, err = cli("--db", db, "add", "Reset the router first.", "--kind", "note",
                         "--role-required", "support")
    assert code == 0, err
    assert '"tenant": "acme"' in out and '"proposed_by": "bot-7"' in out
    code, out, _ = cli("--db", db, "list", env={"SITUATED_TENANT": "globex"})
    assert code == 0 and out == ""  # the environment beats the file
    code, out, _ = cli("--db", db, "list", "--tenant", "acme", "--role", "other")
    assert code == 0 and out == ""  # an option beats both: without `support`, nothing
    code, out, _ = cli("--db", db, "list")
    assert code == 0 and out.count("\n") == 1


def test_cli_a_broken_settings_file_is_one_line(tmp_path: Path) -> None:
    write("situated.toml", "tenant = \n")
    code, out, err = cli("--db", str(tmp_path / "b.db"), "list", "--tenant", "acme")
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("error: situated.toml or pyproject.toml: is not valid TOML")
    write("situated.toml", "clearence = 'public'\n")
    code, _, err = cli("--db", str(tmp_path / "b.db"), "list", "--tenant", "acme")
    assert code == 1 and err.startswith("error: settings.clearence: is not a setting")


def test_cli_db_from_the_settings(tmp_path: Path) -> None:
    write("situated.toml", f'db = "{tmp_path / "configured.db"}"\nembedder = "hash"\n')
    assert cli("init")[0] == 0
    assert (tmp_path / "configured.db").exists()
