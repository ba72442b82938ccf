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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol

from situated.models import Authority, Classification, MemoryRecord, State
from situated.safety import disallowed_tools
from situated.screen.advice import describe, read_claims
from situated.screen.surfaces import refused_links, view_findings
from situated.screen.trust import Trust, decide
from situated.textforms import nfkc_map
from situated.write import secret_scan


class GateVerdict(StrEnum):
    """What a gate decided."""

    PASS = "pass"
    PROBATION = "probation"
    """Passes, on probation: an inferred lesson on a sensitive surface, served unproven until
    corroborated (`situated.screen.trust`)."""
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

_EMAIL = re.compile(r"(?<![\w.%+\-])[\w.%+\-]{1,64}@[\w\-]{1,63}(?:\.[\w\-]{1,63}){1,8}")
"""An e-mail address in any script, read on the NFKC form (full-width `＠` is `@` there); its
last label must be letters (`_email_spans`). Runs are bounded as RFC 5321 and DNS bound them
(64 before the `@`, labels of 63) and a match starts only at the start of a run, so a search
is linear."""
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")
_EXTRA_SECRETS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,512}\b"),  # bounded: `sk-sk-sk-...` was quadratic
    re.compile(r"\b(?:xox[abpr]|ghp|gho|ghs|glpat)[-_][A-Za-z0-9_\-]{10,512}\b"),
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


def find_sensitive(text: str) -> list[tuple[int, int, str]]:
    """Spans (start, end, kind) of secrets and PII in `text`.

    Every screen reads the NFKC form without format characters (`textforms.nfkc_map`:
    full-width digits and `＠`, a zero-width space inside an address), and each span found
    there is mapped back to the characters of `text` it came from."""
    if text.isascii():  # its own NFKC form, without format characters
        return list(_find_sensitive(text))
    form, starts, ends = nfkc_map(text)
    if form == text:
        return list(_find_sensitive(text))
    spans = [(starts[s], ends[e - 1], k) for s, e, k in _find_sensitive(form) if e > s]
    return _merge(spans)


@lru_cache(maxsize=16_384)
def _find_sensitive(text: str) -> tuple[tuple[int, int, str], ...]:
    """`find_sensitive`, remembered for the texts seen last: a pure function of the text,
    and the short ones (fact values, actions) recur from one memory to the next."""
    spans: list[tuple[int, int, str]] = []
    for value, kind in secret_scan.values(text):
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
    spans.extend(_email_spans(text))
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            spans.append((m.start(), m.end(), "card"))
    spans.extend(_phones(text))
    return tuple(_merge(spans))


def _email_spans(text: str) -> list[tuple[int, int, str]]:
    """E-mail addresses: `_EMAIL`, cut after the last label that is two letters or more
    (`a@b.fr.2024` is `a@b.fr`); none when no label after the first qualifies."""
    out = []
    for m in _EMAIL.finditer(text):
        local, _, domain = m.group(0).partition("@")
        labels = domain.split(".")
        while len(labels) > 1 and not (len(labels[-1]) >= 2 and labels[-1].isalpha()):
            labels.pop()
        if len(labels) > 1:
            out.append((m.start(), m.start() + len(local) + 1 + len(".".join(labels)), "email"))
    return out


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
    """Holds text that instructs the agent, widens tools, claims authority or a policy, hides
    content or weakens a control; refuses what asks to decode and run something.

    Besides the patterns of `situated.safety`, the content, the action and the source state's
    text are screened by the injection classifier (`situated.screen`, trained on outside
    corpora): a text it holds is held for review, with a reason that names the classifier and
    its version and never quotes the text. The fields are also screened joined (a payload
    split between the content and the action or state reads whole).

    `situated.screen.advice` reads what the advice does to a control: a lesson that weakens
    one, or claims a policy, a policy version, an exemption or a permission (policy comes from
    the run's `Policy`), is held for a reviewer, whoever wrote it; one that asks the agent to
    decode and run something is refused. A lesson proposed by an agent (authority `inferred`)
    that touches a sensitive surface is held or put on probation (`situated.screen.trust`); a
    link that could carry context out (a URL with a query or template, a markdown image) is
    refused.
    """

    name = "poisoning"
    version = "3"

    def check(self, rec: MemoryRecord, ctx: GateContext) -> tuple[MemoryRecord, GateResult]:
        reasons: list[str] = []
        state_text = rec.source.state.text if rec.source.state is not None else ""
        texts = [rec.content, rec.source.action or ""]
        joined = " ".join(t for t in (*texts, state_text) if t)
        for text in (*texts, joined):
            reasons.extend(view_findings(text))
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
        decision = decide(texts, allowed)  # what the lesson (content, action) does to controls
        advice = decision.advice
        claims, runs_decoded = read_claims(joined)  # every field together: a split payload
        if runs_decoded or advice.runs_decoded:
            refused.append("asks the agent to decode something and run or follow it")
        if refused:
            return rec, GateResult(
                self.name, self.version, GateVerdict.REJECT, tuple(dict.fromkeys(refused))
            )
        claims = tuple(dict.fromkeys((*advice.claims, *claims)))
        if claims:
            # policy comes from the run's Policy, never from memory: a reviewer may read it,
            # recall never serves it as guidance (`validate.never_guidance`)
            reasons.append(f"claims {' and '.join(claims)}: policy is never memory")
        if advice.weakens:
            reasons.append(f"weakens a control: {describe(advice)}")
        probation: tuple[str, ...] = ()
        if rec.authority is Authority.INFERRED:
            if decision.trust is Trust.HOLD:
                # held whatever the promotion policy: a held proposal is never promoted
                reasons.extend(r for r in decision.reasons if not advice.weakens
                               or "weakens" not in r)
            elif decision.trust is Trust.PROBATION:
                probation = decision.reasons
        if reasons:
            verdict = GateVerdict.HOLD
        elif probation:
            verdict, reasons = GateVerdict.PROBATION, list(probation)
        else:
            verdict = GateVerdict.PASS
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
