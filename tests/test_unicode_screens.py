"""Text screens read the NFKC form and Unicode categories, not hand-listed ranges (issue 32)."""

from __future__ import annotations

import pytest

from situated import Memory, Principal, State
from situated.models import LifecycleState
from situated.safety import injection_findings
from situated.textforms import hidden_controls, nfkc_map
from situated.write.gates import redact

LESSON = "Annual plans past 30 days get a prorated refund, not a full one."
FORMAT_CHARACTERS = {
    "zero-width space": "\u200b",
    "bidi isolate": "\u2066",
    "pop directional isolate": "\u2069",
    "soft hyphen": "\u00ad",
    "tag character": "\U000e0041",
    "word joiner": "\u2060",
    "arabic letter mark": "\u061c",
    "mongolian vowel separator": "\u180e",
}


@pytest.mark.parametrize("name", sorted(FORMAT_CHARACTERS))
def test_every_format_character_is_hidden_content(name: str) -> None:
    ch = FORMAT_CHARACTERS[name]
    text = LESSON.replace("prorated", f"pro{ch}rated")
    assert hidden_controls(text) == 1
    assert any("hidden" in f.reason for f in injection_findings(text)), name


@pytest.mark.parametrize("text", [
    "The team \U0001f469\u200d\U0001f4bb reviewed it.",  # an emoji ZWJ sequence
    "\u0915\u094d\u200d\u0937 is written with a joiner after the virama",  # Devanagari
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 is Persian with a non-joiner",
])
def test_joiners_of_ordinary_writing_are_not_hidden(text: str) -> None:
    assert hidden_controls(text) == 0
    assert not any("hidden" in f.reason for f in injection_findings(text))


def _wide(text: str) -> str:
    """`text` in full-width forms (what NFKC folds back)."""
    return text.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})


@pytest.mark.parametrize("text", [
    "Write to jos\u00e9@exemple.fr before the refund.",
    f"Write to {_wide('john@example.com')} before the refund.",
    "Write to \u0438\u0432\u0430\u043d@"
    "\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444 before the refund.",
    "Write to jo\u200bhn@example.com before the refund.",
])
def test_addresses_in_any_script_or_width_are_redacted(text: str) -> None:
    cleaned, kinds = redact(text)
    assert kinds == ["email"]
    assert cleaned == "Write to [REDACTED:email] before the refund."


def test_full_width_phone_and_secret_are_redacted() -> None:
    cleaned, kinds = redact(f"Call {_wide('+33 6 12 34 56 78')} today.")
    assert kinds == ["phone"] and "[REDACTED:phone]" in cleaned
    cleaned, kinds = redact(f"password: {_wide('Hunter2024')}")
    assert kinds == ["secret"] and "\uff28" not in cleaned


def test_nfkc_map_points_back_to_the_original() -> None:
    text = "a\uff20b\u200bc e\u0301"
    form, starts, ends = nfkc_map(text)
    assert form == "a@bc \u00e9"
    assert [text[starts[i]:ends[i]] for i in range(len(form))][-1] == "e\u0301"


@pytest.mark.parametrize("ch", ["\u2066", "\u00ad", "\U000e0041"])
def test_a_lesson_with_a_hidden_character_is_held(tmp_path, ch: str) -> None:
    who = Principal(tenant="t", roles=frozenset({"support"}))
    with Memory(tmp_path / "m.db") as mem:
        rec = mem.add(LESSON.replace("refund", f"re{ch}fund"), principal=who,
                      state=State("annual subscriber, day 60", facts={"plan": "annual"}))
        assert rec.state is LifecycleState.PROPOSED
