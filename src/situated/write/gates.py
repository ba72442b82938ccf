"""Write gates: every proposal passes them, in a fixed order, before it can be promoted.

Each gate is a small plugin with a name, a version and a verdict with reasons. A gate may
redact (the proposal continues with the cleaned text), hold it for review, or reject it. Results
are recorded in the ledger with the `proposed` event; redacted values never are.

Secrets are found with Yelp's `detect-secrets` plugins plus a few token shapes it misses
(`sk-...` API keys, `password: ...` pairs); phone numbers with `phonenumbers` (Google's
libphonenumber); e-mail addresses and payment cards (Luhn-checked) with patterns.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol

from situated.models import Authority, Classification, MemoryRecord, State
from situated.safety import disallowed_tools
from situated.screen.surfaces import refused_links, sensitive_surfaces, view_findings


class GateVerdict(StrEnum):
    """What a gate decided."""

    PASS = "pass"
    REDACTED = "redacted"
    HOLD = "hold"
    REJECT = "reject"


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict on one proposal, as recorded in the ledger."""

    gate: str
    version: str
    verdict: GateVerdict
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class WritePolicy:
    """What a namespace requires of a proposal.

    Args:
        allowed_tools: tools a lesson may name; None means no allow-list.
        require_consent: a proposal must carry a consent reference.
        review_authority: proposals claiming this authority or higher are held for review.
        max_content_chars: size limit for content.
    """

    allowed_tools: frozenset[str] | None = None
    require_consent: bool = False
    review_authority: Authority = Authority.EXTERNALLY_VERIFIED
    max_content_chars: int = 4000


@dataclass(frozen=True)
class GateContext:
    """What gates may consult besides the proposal itself."""

    policy: WritePolicy
    source_classification: Classification | None = None
    near_duplicates: Callable[[MemoryRecord], Sequence[tuple[MemoryRecord, float]]] = (
        lambda rec: ()
    )
    extra: dict[str, Any] = field(default_factory=dict)


class Gate(Protocol):
    """A write gate: returns the (possibly redacted) proposal and its verdict."""

    name: str
    version: str

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]: ...


# -- schema --------------------------------------------------------------------------------


class SchemaGate:
    """Size limits beyond the model's own validation."""

    name = "schema"
    version = "1"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        problems = []
        if len(rec.content) > ctx.policy.max_content_chars:
            problems.append(f"content longer than {ctx.policy.max_content_chars} characters")
        if len(rec.conditions) > 20:
            problems.append("more than 20 conditions")
        if len(rec.source.evidence) > 50:
            problems.append("more than 50 evidence references")
        verdict = GateVerdict.REJECT if problems else GateVerdict.PASS
        return rec, GateResult(self.name, self.version, verdict, tuple(problems))


# -- secrets and PII -----------------------------------------------------------------------

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")
_EXTRA_SECRETS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\b(?:xox[abpr]|ghp|gho|ghs|glpat)[-_][A-Za-z0-9_\-]{10,}\b"),
    re.compile(
        r"(?i)\b(pass(?:word|wd)?|pwd|secret|api[_ -]?key|access[_ -]?token|token)\b"
        r"(\s*(?:is|[:=])\s*)(\"[^\"]+\"|'[^']+'|\S+)"
    ),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
]


def _luhn(digits: str) -> bool:
    total, alt = 0, False
    for ch in reversed(digits):
        d = int(ch)
        if alt:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
        alt = not alt
    return total % 10 == 0


@lru_cache(maxsize=1)
def _secret_plugins() -> list[Any]:
    with _host_warnings_kept():
        from detect_secrets.settings import default_settings, get_plugins

        with default_settings():
            return [
                p for p in get_plugins()
                if type(p).__name__ not in ("Base64HighEntropyString", "HexHighEntropyString")
            ]


@contextmanager
def _host_warnings_kept() -> Iterator[None]:
    """Undo a `logging.captureWarnings(True)` made inside: detect-secrets' logger module
    turns it on when first imported (by its plugins, not by the package itself), which would
    send every warning of the host program (ours included) to logging from then on. The host
    program's own choice, made before, stays as it was."""
    import logging
    import warnings

    shown = warnings.showwarning
    try:
        yield
    finally:
        if warnings.showwarning is not shown:
            logging.captureWarnings(False)


@lru_cache(maxsize=1)
def _secret_screen() -> tuple[tuple[re.Pattern[str] | None, tuple[Any, ...]], ...]:
    """The detect-secrets plugins in groups, each with a pattern that a line must match for
    any plugin of the group to find a value in it (None: always run).

    A `RegexBasedDetector` finds a value only where one of its `denylist` patterns matches:
    those plugins share one alternation of all their patterns. Every pattern the
    `KeywordDetector` applies to a `.txt` line contains its keyword list (`password`,
    `secret`, `api_?key`, ...): it runs only on a line holding one of the keywords. A line
    that matches neither gives those plugins nothing to find, so skipping them changes no
    result (`tests/test_write_fast.py` checks it against running every plugin)."""
    with _host_warnings_kept():
        import detect_secrets.core.log  # noqa: F401
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.util.filetype import determine_file_type

    gated: list[Any] = []
    rest: list[Any] = []
    parts: list[str] = []
    groups: list[tuple[re.Pattern[str] | None, tuple[Any, ...]]] = []
    keyword_patterns = keyword.REGEX_BY_FILETYPE.get(
        determine_file_type("memory.txt"), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    )
    for plugin in _secret_plugins():
        patterns = getattr(plugin, "denylist", None)
        if (
            isinstance(plugin, RegexBasedDetector) and patterns
            and not any(re.search(r"\\\d|\(\?P=", p.pattern) for p in patterns)
        ):
            gated.append(plugin)
            parts.extend(_scoped(p) for p in patterns)
        elif isinstance(plugin, keyword.KeywordDetector) and all(
            keyword.DENYLIST_REGEX in p.pattern for p in keyword_patterns
        ):  # a case-insensitive search for the keywords: a superset of every pattern's
            groups.append((re.compile("|".join(keyword.DENYLIST), re.IGNORECASE), (plugin,)))
        else:
            rest.append(plugin)
    try:
        groups.append((re.compile("|".join(parts)) if parts else None, tuple(gated)))
    except re.error:
        groups.append((None, tuple(gated)))
    groups.append((None, tuple(rest)))
    return tuple(groups)


_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))


def _scoped(p: re.Pattern[str]) -> str:
    """`p` as a group carrying its own flags, to join into one alternation."""
    letters = "".join(c for flag, c in _FLAG_LETTERS if p.flags & flag)
    return f"(?{letters}:{p.pattern})" if letters else f"(?:{p.pattern})"


def _plugin_values(text: str) -> list[tuple[str, str]]:
    """(value, type) of every detect-secrets finding in `text`, line by line."""
    found = []
    for line in text.splitlines() or [text]:
        for gate, plugins in _secret_screen():
            if gate is not None and not gate.search(line):
                continue
            for plugin in plugins:
                for secret in plugin.analyze_line(
                    filename="memory.txt", line=line, line_number=1
                ):
                    found.append((secret.secret_value or "", secret.type))
    return found


def find_sensitive(text: str) -> list[tuple[int, int, str]]:
    """Spans (start, end, kind) of secrets and PII in `text`."""
    return list(_find_sensitive(text))


@lru_cache(maxsize=16_384)
def _find_sensitive(text: str) -> tuple[tuple[int, int, str], ...]:
    """`find_sensitive`, remembered for the texts seen last: a pure function of the text,
    and the short ones (fact values, actions) recur from one memory to the next."""
    spans: list[tuple[int, int, str]] = []
    for value, kind in _plugin_values(text):
        if len(value) < 4:
            continue
        for m in re.finditer(re.escape(value), text):
            # widen to the whole whitespace-delimited token
            s, e = m.start(), m.end()
            while s > 0 and not text[s - 1].isspace() and text[s - 1] not in "\"'=:":
                s -= 1
            while e < len(text) and not text[e].isspace() and text[e] not in "\"',;":
                e += 1
            spans.append((s, e, kind))
    for rx in _EXTRA_SECRETS:
        for m in rx.finditer(text):
            if m.lastindex and m.lastindex >= 3:
                if _looks_secret(m.group(2), m.group(3)):
                    spans.append((m.start(3), m.end(3), "secret"))
            else:
                spans.append((m.start(), m.end(), "secret"))
    for m in _EMAIL.finditer(text):
        spans.append((m.start(), m.end(), "email"))
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            spans.append((m.start(), m.end(), "card"))
    spans.extend(_phones(text))
    return tuple(_merge(spans))


def _looks_secret(separator: str, value: str) -> bool:
    """Whether the value after `password:` / `token is` is a secret, not prose.

    A quoted value is. Otherwise (markdown emphasis and trailing punctuation stripped) a value
    shaped like a credential (a digit, a symbol or mixed case) of 4 or more characters after
    `:` or `=`, 6 or more after `is`; or, after `:` or `=`, any word of 8 or more. So
    "password: hunter2" is redacted, "the token is valid" and "secret: keep calm" are kept."""
    if value[:1] in "\"'":
        return len(value) > 2
    core = value.strip("*_`~.,;:!?()[]{}")
    shaped = (
        any(c.isdigit() for c in core) or not core.isalnum()
        or (core.lower() != core and core.upper() != core and not core.istitle())
    )
    if separator.strip() in (":", "="):
        return len(core) >= 8 or (len(core) >= 4 and shaped)
    return len(core) >= 6 and shaped


_PHONE_CUE = re.compile(
    r"(?i)\b(phone|tel|telephone|mobile|cell|call|text|sms|whatsapp|fax|dial|ring|contact|"
    r"reach|number|no|nr|tél|téléphone|telefon|teléfono|handy|portable|móvil)\b\W{0,3}"
    r"(?:\w+\W+){0,3}$"
)
_PHONE_FORMAT = re.compile(r"^\+|\(\d|\d[\s.\-/]\d")
MIN_PHONE_DIGITS = 7
"""Fewer digits than this are never a phone number (`case 1645`, `Lesson 1690`, years)."""


def _phones(text: str) -> list[tuple[int, int, str]]:
    """Phone numbers with context: 7+ digits, and a phone-like format (`+`, `(`, digit
    groups) or a cue word just before (`phone`, `call`, `tel` ...). A bare run of digits
    (an order or case number, a year, a decimal) is not redacted."""
    if sum(map(str.isdigit, text)) < MIN_PHONE_DIGITS:
        return []  # every match is a part of the text: none could have enough digits
    import phonenumbers

    out = []
    for region in ("US", "GB", "FR", "DE"):
        for m in phonenumbers.PhoneNumberMatcher(text, region):
            raw = m.raw_string
            if sum(c.isdigit() for c in raw) < MIN_PHONE_DIGITS:
                continue
            before = text[max(0, m.start - 40):m.start]
            if _PHONE_FORMAT.search(raw) or _PHONE_CUE.search(before):
                out.append((m.start, m.end, "phone"))
    return out


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    spans.sort()
    merged: list[tuple[int, int, str]] = []
    for s, e, k in spans:
        if merged and s <= merged[-1][1]:
            ps, pe, pk = merged[-1]
            merged[-1] = (ps, max(pe, e), pk)
        else:
            merged.append((s, e, k))
    return merged


def redact(text: str) -> tuple[str, list[str]]:
    """Replace secrets and PII with `[REDACTED:<kind>]`; returns the text and the kinds found."""
    spans = find_sensitive(text)
    if not spans:
        return text, []
    out, last = [], 0
    for s, e, kind in spans:
        out.append(text[last:s])
        out.append(f"[REDACTED:{kind}]")
        last = e
    out.append(text[last:])
    return "".join(out), [k for _, _, k in spans]


REDACTION_RULES: dict[str, str] = defaultdict(
    lambda: "detect-secrets plugin",
    secret="a credential-shaped value after password/secret/token/api key, or a key format",
    email="an e-mail address",
    card="13-19 digits passing the Luhn check",
    phone=f"{MIN_PHONE_DIGITS}+ digits in a phone format or after a phone cue",
)
"""Why each kind of span is redacted, as the gate's reasons state it."""


class SecretsGate:
    """Redacts secrets and PII in content, source state, action and evidence.

    Each redacted span becomes `[REDACTED:<kind>]` in the stored text; the gate's reasons (in
    the `proposed` event, and a `RedactionWarning` to the writer) say in which fields, which
    kinds and by which rule, never the value."""

    name = "secrets"
    version = "2"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        kinds: list[str] = []
        where: dict[str, list[str]] = {}

        def clean(text: str | None, field: str) -> str | None:
            if text is None:
                return None
            cleaned, found = redact(text)
            kinds.extend(found)
            if found:
                where.setdefault(field, []).extend(found)
            return cleaned

        content = clean(rec.content, "content") or ""
        src = rec.source
        state = src.state
        if state is not None:
            facts = {
                k: (clean(v, f"state fact {k}") if isinstance(v, str) else v)
                for k, v in state.facts.items()
            }
            state = State(clean(state.text, "source state") or "", facts)
        source = src.model_copy(
            update={
                "state": state,
                "action": clean(src.action, "action"),
                "evidence": tuple(clean(e, "evidence") or "" for e in src.evidence),
            }
        )
        value = clean(rec.value, "value") if isinstance(rec.value, str) else rec.value
        if not kinds:
            return rec, GateResult(self.name, self.version, GateVerdict.PASS)
        cleaned = rec.model_copy(update={"content": content, "source": source, "value": value})
        summary = sorted(set(kinds))
        detail = "; ".join(
            f"{field}: {', '.join(f'{k} ({REDACTION_RULES[k]})' for k in sorted(set(found)))}"
            for field, found in where.items()
        )
        return cleaned, GateResult(
            self.name, self.version, GateVerdict.REDACTED,
            (f"redacted {len(kinds)} value(s): {', '.join(summary)}", detail),
        )


# -- poisoning -----------------------------------------------------------------------------


class PoisoningGate:
    """Holds text that instructs the agent, widens tools, claims authority or hides content.

    Besides the patterns of `situated.safety`, the content, the action and the source state's
    text are screened by the injection classifier (`situated.screen`, trained on outside
    corpora): a text it holds is held for review, with a reason that names the classifier and
    its version and never quotes the text.

    A lesson proposed by an agent (authority `inferred`) that touches a sensitive surface
    (`situated.screen.surfaces`) is held for review whatever the promotion policy; a link that
    could carry context out (a URL with a query or template, a markdown image) is refused.
    """

    name = "poisoning"
    version = "2"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        reasons: list[str] = []
        texts = [rec.content, rec.source.action or ""]
        for text in texts:
            reasons.extend(view_findings(text))
        state_text = rec.source.state.text if rec.source.state is not None else ""
        reasons.extend(classifier_reasons(
            {"content": rec.content, "action": rec.source.action or "",
             "source state": state_text}
        ))
        allowed = ctx.policy.allowed_tools
        if allowed is not None:
            bad = set().union(*(disallowed_tools(t, allowed) for t in texts))
            if bad:
                # how many, not which: a gate's reason is kept in the ledger, which erasure
                # cannot rewrite, so it never quotes the memory's text
                reasons.append(f"names {len(bad)} tool(s) outside the allow-list")
        if rec.authority >= ctx.policy.review_authority:
            reasons.append(f"claims authority {rec.authority.label}, which needs review")
        refused = [r for t in texts for r in refused_links(t)]
        if refused:
            return rec, GateResult(
                self.name, self.version, GateVerdict.REJECT, tuple(dict.fromkeys(refused))
            )
        if rec.authority is Authority.INFERRED:
            touched = sensitive_surfaces(" \n".join(texts), allowed)
            if touched:
                # held whatever the promotion policy: a held proposal is never promoted
                reasons.append(f"inferred, touches {'/'.join(touched)}")
        verdict = GateVerdict.HOLD if reasons else GateVerdict.PASS
        return rec, GateResult(self.name, self.version, verdict, tuple(dict.fromkeys(reasons)))


def classifier_reasons(fields: dict[str, str]) -> list[str]:
    """One reason per field whose text the injection classifier holds (named, never quoted)."""
    from situated.screen import load_model

    model = load_model()
    out = []
    for name, text in fields.items():
        if text.strip():
            found = model.screen(text)
            if found.held:
                out.append(
                    f"{name} held by the injection classifier injection-lr {model.version} "
                    f"(score {found.score:.3f} >= {found.threshold:.3f}, view {found.view})"
                )
    return out


# -- consent and classification ------------------------------------------------------------


class ConsentGate:
    """Requires a consent reference where the policy says so; never lowers classification."""

    name = "consent"
    version = "1"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        reasons = []
        if ctx.policy.require_consent and not rec.scope.consent:
            reasons.append("this namespace requires a consent reference")
        src = ctx.source_classification
        if src is not None and rec.scope.classification < src:
            reasons.append(
                f"classification {rec.scope.classification.label} is lower than its source "
                f"trace ({src.label})"
            )
        verdict = GateVerdict.REJECT if reasons else GateVerdict.PASS
        return rec, GateResult(self.name, self.version, verdict, tuple(reasons))


# -- dedupe --------------------------------------------------------------------------------


class DedupeGate:
    """Flags a near-duplicate of a memory retired for poor utility (it should not come back
    silently). Plain near-duplicates are merged by `Memory.add` as reinforcement."""

    name = "dedupe"
    version = "1"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        retired = [
            (twin, sim) for twin, sim in ctx.near_duplicates(rec)
            if twin.state.value in ("LOW_VALUE", "ARCHIVED")
        ]
        if retired:
            twin, sim = retired[0]
            return rec, GateResult(
                self.name, self.version, GateVerdict.HOLD,
                (f"resembles {twin.id} ({sim:.2f}), retired as {twin.state.value} "
                 f"after {twin.counters.uses} uses at utility {twin.utility:.2f}",),
            )
        return rec, GateResult(self.name, self.version, GateVerdict.PASS)


DEFAULT_GATES: tuple[Gate, ...] = (
    SchemaGate(), SecretsGate(), PoisoningGate(), ConsentGate(), DedupeGate()
)


@dataclass(frozen=True)
class GateReport:
    """All gate results for one proposal and the overall outcome."""

    record: MemoryRecord
    results: tuple[GateResult, ...]

    @property
    def rejected(self) -> bool:
        return any(r.verdict is GateVerdict.REJECT for r in self.results)

    @property
    def held(self) -> bool:
        return any(r.verdict is GateVerdict.HOLD for r in self.results)

    def reasons(self) -> list[str]:
        return [
            f"{r.gate}: {reason}" for r in self.results
            if r.verdict in (GateVerdict.HOLD, GateVerdict.REJECT) for reason in r.reasons
        ]

    def to_data(self) -> list[dict[str, Any]]:
        return [
            {"gate": r.gate, "version": r.version, "verdict": r.verdict.value,
             "reasons": list(r.reasons)}
            for r in self.results
        ]


def run_gates(
    rec: MemoryRecord, ctx: GateContext, gates: Iterable[Gate] = DEFAULT_GATES
) -> GateReport:
    """Run every gate in order; a rejecting gate stops the run."""
    results = []
    for gate in gates:
        rec, result = gate.check(rec, ctx)
        results.append(result)
        if result.verdict is GateVerdict.REJECT:
            break
    return GateReport(rec, tuple(results))
