"""A light core: `import situated` imports nothing heavy (the CLI's module does since its
commands print the service layer's documents: see the README's start-up table); plots need
the `eval` extra and are skipped with a note without it; phone numbers need only
phonenumberslite."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

HEAVY = ("numpy", "pydantic", "pydantic_settings", "openai", "rich", "tokenizers",
         "disarm", "detect_secrets", "phonenumbers", "matplotlib", "situated.memory")


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(out.stdout.split())


def test_importing_loads_nothing_heavy() -> None:
    assert not loaded_after("import situated") & set(HEAVY)


def test_the_public_names_resolve_on_use() -> None:
    import situated

    for name in situated.__all__:
        assert getattr(situated, name).__name__ == name
    assert set(dir(situated)) >= set(situated.__all__)
    with pytest.raises(AttributeError):
        situated.NoSuchThing  # noqa: B018


def test_cli_help_needs_no_library() -> None:
    out = subprocess.run([sys.executable, "-c", "from situated.cli import main; main()",
                          "--help"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "Usage: situated" in out.stdout


def test_plots_are_skipped_with_a_note_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from situated.eval.conversations import plot_recall
    from situated.eval.report import write_plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    result = types.SimpleNamespace(notes=[])
    assert write_plots(result, tmp_path) == {}  # type: ignore[arg-type]
    assert result.notes == ["plots skipped: matplotlib is not installed "
                            "(pip install 'situated[eval]')"]
    assert plot_recall(tmp_path, "x", {"results": {}}, "turn") is None
    assert list(tmp_path.iterdir()) == []


def test_phone_numbers_are_found_by_phonenumberslite() -> None:
    from importlib.metadata import distribution

    from situated.write.gates import _phones

    files = distribution("phonenumberslite").files or []  # the same `phonenumbers` module,
    assert any(str(f) == "phonenumbers/phonenumbermatcher.py" for f in files)  # no geodata
    text = "Call me on +44 20 7946 0958 or (415) 555-2671 tomorrow."
    spans = [text[s:e] for s, e, _ in _phones(text)]
    assert any("7946 0958" in s for s in spans) and any("555-2671" in s for s in spans)
