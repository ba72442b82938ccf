"""The PII gate redacts what is PII and keeps what is not (issue 13), and says what it did.

Benign numbers are generated (identifiers of cases, lessons, orders, tickets; years; decimals;
prices; versions) in sentence templates; phone numbers are generated in formats and regions
with and without a cue. Real benign text (LoCoMo turns) is measured too.
"""

from __future__ import annotations

import itertools
import random
import warnings
from pathlib import Path

import pytest

from situated import Memory, Principal, State
from situated.errors import RedactionWarning
from situated.write.gates import find_sensitive, redact

rng = random.Random(11)
IDENTIFIERS = ["case", "Case", "lesson", "Lesson", "order", "ticket", "invoice", "step", "run",
               "PR", "issue", "SKU", "room", "flight", "batch", "build", "episode"]
TEMPLATES = [
    "See {name} {n} for the details.",
    "{name} {n}: refund the duplicate charge.",
    "As in {name} #{n}, ask for the receipt first.",
    "Closed {name} {n} after the customer confirmed.",
    "{name} {n} and {name} {m} had the same cause.",
]
NUMBERS = [str(rng.randint(10, 99_999)) for _ in range(12)] + [
    "1645", "1690", "20231104", "4471-2231", "12.50", "1877.12", "v2.3.1", "2024-05-19",
]
PROSE = [
    "Between 1618 and 1648 the war changed the region.",
    "The plan costs 1299.00 a year or 129.90 a month.",
    "Version 10.4.2 fixed the export bug.",
    "The token is valid for 30 days.",
    "The password is required at sign-in.",
    "I'll share a secret: **dry brining** works.",
    "Your secret: keep calm and re-read the policy.",
]


def benign_texts() -> list[str]:
    out = list(PROSE)
    for template, name in itertools.product(TEMPLATES, IDENTIFIERS):
        n, m = rng.sample(NUMBERS, 2)
        out.append(template.format(name=name, n=n, m=m))
    return out


PHONES = ["415-555-0132", "(415) 555-0132", "+1 415 555 0132", "+44 20 7946 0958",
          "020 7946 0958", "+33 1 42 68 53 00", "+49 30 901820", "415.555.0132"]
CUED = ["call 4155550132 today", "phone: 4155550132", "reach her on 02079460958",
        "tel 0142685300"]


def test_benign_numbers_and_prose_are_not_redacted() -> None:
    texts = benign_texts()
    redacted = [t for t in texts if find_sensitive(t)]
    assert len(texts) > 80
    assert redacted == []


@pytest.mark.parametrize("phone", PHONES)
def test_phone_shaped_numbers_are_redacted(phone: str) -> None:
    for template in ("Call the customer at {p}.", "Their number is {p}", "{p} is the desk line"):
        text, kinds = redact(template.format(p=phone))
        assert kinds == ["phone"], text
        assert phone not in text


def test_a_bare_digit_run_is_a_phone_only_after_a_cue() -> None:
    for text in CUED:
        assert [k for *_, k in find_sensitive(text)] == ["phone"], text
    for text in ("invoice 4155550132 paid", "ref 02079460958 closed"):
        assert find_sensitive(text) == [], text


def test_credentials_are_still_redacted() -> None:
    for text in ("password: hunter2", "password is hunter2!", "api key = abcd1234efgh",
                 "the token is 'tok-42'", "secret=Sup3rS3cret"):
        assert "secret" in redact(text)[1], text


def test_every_redaction_is_shown_to_the_writer(tmp_path: Path) -> None:
    with Memory(tmp_path / "r.db", embedder="hash") as mem:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rec = mem.add("Call the customer at 415-555-0132 about case 1645.",
                          principal=Principal(tenant="acme"),
                          state=State("callback", facts={"desk": "+44 20 7946 0958"}))
        assert rec.content == "Call the customer at [REDACTED:phone] about case 1645."
        assert rec.source.state is not None
        assert rec.source.state.facts["desk"] == "[REDACTED:phone]"
        shown = [str(w.message) for w in caught if issubclass(w.category, RedactionWarning)]
        assert len(shown) == 1
        assert "content: phone" in shown[0] and "state fact desk: phone" in shown[0]
        assert "415" not in shown[0] and "7946" not in shown[0]
        proposed = mem.history(rec.id, principal=Principal(tenant="acme"))[0]
        secrets = next(g for g in proposed.data["gates"] if g["gate"] == "secrets")
        assert secrets["verdict"] == "redacted"
        assert any("content: phone" in r for r in secrets["reasons"])


def test_locomo_turns_lose_nothing_to_redaction() -> None:
    from situated.eval.conversations import load_locomo

    turns = [u.text for c in load_locomo() for u in c.units]
    redacted = [t for t in turns if find_sensitive(t)]
    print(f"\nLoCoMo turns redacted: {len(redacted)}/{len(turns)}")
    assert redacted == []
