"""The registry of every screen that reads caller text, and the adversarial texts they are timed
on (`tests/test_linear_screens.py`): known backtracking shapes, each a prefix and a unit
repeated to the size under test.

A new reader of caller text registers here (`SCREENS[name] = callable(text)`), and the tests
time it at the content limit against the same screen on an eighth of the text.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from situated import conditions, names, safety
from situated.cli_common import parse_value
from situated.models import (
    MAX_CONTENT_CHARS,
    Authority,
    Kind,
    LifecycleState,
    MemoryRecord,
    Scope,
    Source,
    State,
    Validity,
)
from situated.reader import read
from situated.reader.compare import judge
from situated.reader.identity import differs
from situated.reader.present import contradiction
from situated.reader.subjects import key_of
from situated.recall import analysis, reading
from situated.screen import surfaces
from situated.screen.classifier import load_model
from situated.screen.normalise import decoded_views, normalise
from situated.write import conversation, gates, secret_scan
from situated.write.writer import forget_texts

LIMIT = MAX_CONTENT_CHARS
"""The size every screen is timed at: a memory's content limit (a state's is the same)."""

SHAPES: dict[str, tuple[str, str]] = {
    # the issue's: a name before `(` read cubically by the third alternative of tool mentions
    "call-run": ("(", ".a_"),
    "dotted-underscored": ("", "a.b_"),
    "dotted": ("", "a."),
    "word": ("", "a"),
    "snake": ("", "a_"),
    "open-parens": ("", "a("),
    "at-signs": ("", "a@"),
    "at-dots": ("", "a@a."),
    "local-part": ("", "ab-"),
    "digits-spaced": ("", "1 "),
    "digits-dashed": ("", "1-"),
    "digits-dotted": ("", "1."),
    "decimals": ("", "1.1."),
    "minus-ones": ("", "-1"),
    "letter-digit": ("", "A-1-"),
    "hex-spaced": ("0x", "ab "),
    "hex-escaped": ("", "\\x41"),
    "percent": ("", "%41"),
    "entities": ("", "&#1"),
    "account": ("account 1", " 1"),
    "braces": ("", "{"),
    "placeholders": ("", "${a"),
    "ignore": ("ignore ", "a "),
    "policy-version": ("policy version ", "a."),
    "pseudo-header": ("[system ", "a "),
    "curl": ("curl ", "a"),
    "whitespace": ("", " \t"),
    "newlines": ("", "\n"),
    "sentences": ("", ". "),
    "base64": ("", "A"),
    "keyword-spaces": ("password", " "),
    "keyword-is": ("password ", "is "),
    "private-key": ("-----BEGIN PRIVATE KEY-----", "a"),
    "sk": ("sk-", "a-"),
    "sk-repeated": ("", "sk-"),
    "cloud-iam": ("ibm_cloud_iam_key", " "),
    "npm": ("", "//"),
    "jwt": ("", "eyJa"),
    "slack": ("xoxb-", "1-"),
    "url": ("http://", "/"),
    "www": ("", "www.a"),
    "send": ("send ", "a "),
    "delete": ("delete ", "a "),
    "call-words": ("call", " "),
    "backticks": ("", "`a"),
    "phone-cue": ("", "phone 1 "),
    "conditions": ("", "when a is 1 and "),
    "numbers-words": ("", "1 a "),
    "assignments": ("", "a=1 "),
    "unicode-letters": ("", "é_"),
}


def adversarial(prefix: str, unit: str, size: int = LIMIT) -> str:
    """`prefix` then `unit` repeated, `size` characters in all."""
    body = prefix + unit * ((size - len(prefix)) // max(len(unit), 1) + 1)
    return body[:size]


def _record(text: str) -> MemoryRecord:
    return MemoryRecord(
        id="mem_" + "0" * 16, content=text, kind=Kind.LESSON,
        source=Source(state=State(text, facts={"plan": "annual"}), action=text[:200]),
        scope=Scope(tenant="acme"), authority=Authority.INFERRED,
        validity=Validity(valid_from=0.0, valid_until=2e9, recorded_at=0.0),
        state=LifecycleState.ACTIVE, fingerprint="f" * 32, proposed_by="test",
    )


def _conversation(text: str) -> object:
    turns = [{"speaker": "alice", "content": text[i:i + 400]} for i in range(0, len(text), 400)]
    return conversation.parse_conversation(json.dumps({"messages": turns}), None, None)


_MODEL = load_model()

SCREENS: dict[str, Callable[[str], object]] = {
    "safety.injection_findings": safety.injection_findings,
    "safety.tool_mentions": safety.tool_mentions,
    "safety.code_like": safety.code_like,
    "safety.denied_tools": lambda t: safety.denied_tools(safety.tool_mentions(t), None),
    "safety.prohibited_effects": lambda t: safety.prohibited_effects(t, ["delete", "wire"]),
    "gates.find_sensitive": gates.find_sensitive,
    "gates.redact": gates.redact,
    "secret_scan.values": secret_scan.values,
    "surfaces.view_findings": surfaces.view_findings,
    "surfaces.sensitive_surfaces": surfaces.sensitive_surfaces,
    "surfaces.refused_links": surfaces.refused_links,
    "surfaces.tool_names": lambda t: surfaces.tool_names(t, None),
    "screen.decoded_views": lambda t: decoded_views(normalise(t)),
    "screen.classifier": _MODEL.screen,
    "names.skeleton": names.skeleton,
    "conditions.parse_condition": conditions.parse_condition,
    "cli.parse_value": parse_value,
    "conversation.parse": _conversation,
    # the reader (situation and lesson text -> typed facts) and the reading every stage uses
    "reader.read": read,
    "reader.judge": lambda t: judge(read(t), read(t[::-1]), read(t)),
    "reader.contradiction": lambda t: contradiction(read(t), read(t[::-1])),
    "reader.differs": lambda t: differs(t, t[::-1]),
    "reader.key_of": lambda t: key_of(t, "fact"),
    "reading.sentences": reading.sentences,
    "reading.claims": reading.claims,
    "reading.numbers_in": reading.numbers_in,
    "reading.number_strings": reading.number_strings,
    "reading.stems": reading.stems,
    "reading.screen": lambda t: reading.screen(t, frozenset({"send_email"}),
                                               frozenset({"delete"})),
    "reading.names_text": lambda t: reading.names_text(t, "annual plan"),
    "analysis.analyze": lambda t: analysis.analyze(_record(t)),
}
"""name -> a callable that screens one text (what a write or a recall runs on caller text)."""


KNOWN_SUPERLINEAR: dict[str, tuple[str, str]] = {}
"""Screens known to grow super-linearly: name -> (the shape that shows it, why). Their tests
are strict xfails on that shape alone, so a fix turns the suite red until the entry goes."""


def screened(fn: Callable[[str], object], text: str) -> object:
    """`fn(text)`, or the `UsageError` it refuses the text with (bad input is an answer)."""
    from situated.errors import UsageError

    try:
        return fn(text)
    except UsageError as exc:
        return exc


def fresh() -> None:
    """Forget every cached screening (each timing reads its text for the first time)."""
    forget_texts()
    conditions.clear_parse_cache()
