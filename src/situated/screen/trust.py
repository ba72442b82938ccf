"""Trust earned, not assumed: what the write gate does with an agent's lesson on a sensitive
surface, and whether recall serves it as proven guidance or on probation.

A lesson an agent inferred (authority `inferred`) that touches a control, money, credentials,
identity, safety, permissions or other tenants' data (`surfaces.sensitive_surfaces`, or a control
that `advice.read_advice` finds acted on) is:

- **held** for review when it touches a surface (`surfaces.sensitive_surfaces`: a strong word,
  or a weak one with a cue) and its reading weakens a control or does not strengthen one (a
  surface word says nothing of what the lesson does to it), or when the surface carries data
  out, calls tools or persists itself (`tools`, `outbound`, `memory`);
- **on probation** when it touches a surface and keeps or strengthens a control, weakening none
  ("verify the account e-mail before changing the payout card", "never ask for the password");
  or touches none but names one without a cue (`surfaces.mentioned_surfaces`: a link or an
  account number, a command line, a word of harmful intent; a weak word alone, `refund`, is
  no mention: "annual plans within 14 days get a full refund" is trusted); or reads like
  an instruction to the agent (the injection classifier's score at or above
  `PROBATION_SCORE`, its decision boundary, below its hold threshold):
  promoted, but served marked *unproven* and never as the only guidance on its surface
  (`recall.pipeline` marks it; the briefing says so), until it is corroborated by successes
  credited by `CORROBORATING_SUCCESSES` recalls' feedback. A reviewer's path is the hold: a
  held lesson a reviewer promotes is trusted.

The decision is a pure function of the memory's immutable texts, so recall recomputes it (cached
per text) instead of storing it: what the gate put on probation, recall finds on probation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from situated.screen.advice import Advice, read_advice
from situated.screen.surfaces import mentioned_surfaces, sensitive_surfaces

PROBATION_SCORE = 0.5
"""An injection-classifier score at or above this (the logistic model's own decision boundary;
on its source-grouped validation split: recall 0.83 at a false-positive rate of 9.3%,
`model/report.json`) puts an inferred lesson on probation; its hold threshold is far higher."""
CORROBORATING_SUCCESSES = 2
"""Successes (each credited by one recall's feedback) that end a lesson's probation."""
ALWAYS_HELD = frozenset({"tools", "outbound", "memory"})
"""Surfaces that carry data out, call tools or persist the memory: never on probation."""


class Trust(StrEnum):
    """What an inferred lesson on a sensitive surface earns at write."""

    PASS = "pass"
    """Touches no sensitive surface: the namespace's promotion policy decides."""
    PROBATION = "probation"
    HOLD = "hold"


@dataclass(frozen=True)
class TrustDecision:
    """The decision, the surfaces it is about and the reading behind it."""

    trust: Trust
    surfaces: tuple[str, ...]
    advice: Advice
    reasons: tuple[str, ...] = ()


def decide(texts: Iterable[str], allowed_tools: Iterable[str] | None = None) -> TrustDecision:
    """The decision for an inferred lesson whose texts (content, action) are `texts`."""
    allowed = None if allowed_tools is None else tuple(sorted(allowed_tools))
    return _decide(tuple(t for t in texts if t.strip()), allowed)


@lru_cache(maxsize=4096)
def _decide(texts: tuple[str, ...], allowed: tuple[str, ...] | None) -> TrustDecision:
    text = " \n".join(texts)
    advice = read_advice(text)
    touched = sensitive_surfaces(text, allowed)
    if advice.weakens:
        touched = (*touched, "control")
    if not touched:
        from situated.screen.classifier import load_model

        mentioned = mentioned_surfaces(text)
        if mentioned:
            return TrustDecision(
                Trust.PROBATION, mentioned, advice,
                (f"inferred, mentions {'/'.join(mentioned)}: on probation (served unproven, "
                 f"never alone on that surface, until {CORROBORATING_SUCCESSES} recalls credit "
                 "it with a success)",))
        # each field as the write path screened it (one batch): no text is classified twice
        if texts and max(s.score for s in load_model().screen_many(list(texts))) \
                >= PROBATION_SCORE:
            return TrustDecision(
                Trust.PROBATION, ("instruction",), advice,
                (f"inferred, reads like an instruction to the agent (injection classifier at "
                 f"or above {PROBATION_SCORE}): on probation (served unproven until "
                 f"{CORROBORATING_SUCCESSES} recalls credit it with a success)",))
        return TrustDecision(Trust.PASS, (), advice)
    named = "/".join(touched)
    if advice.weakens:
        return TrustDecision(Trust.HOLD, touched, advice,
                             (f"inferred, touches {named} and weakens a control",))
    kept_out = [s for s in touched if s in ALWAYS_HELD]
    if kept_out or not advice.strengthens:
        return TrustDecision(Trust.HOLD, touched, advice, (f"inferred, touches {named}",))
    return TrustDecision(
        Trust.PROBATION, touched, advice,
        (f"inferred, touches {named} and keeps or strengthens a control: on probation (served "
         f"unproven, never alone on that surface, until {CORROBORATING_SUCCESSES} recalls "
         "credit it with a success)",))


def probation_surfaces(content: str, action: str | None, inferred: bool,
                       successes: int) -> tuple[str, ...]:
    """The surfaces a served memory is unproven on (empty: proven guidance)."""
    if not inferred or successes >= CORROBORATING_SUCCESSES:
        return ()
    found = decide((content, action or ""))
    return found.surfaces if found.trust is Trust.PROBATION else ()


def trust_cache() -> list[Any]:
    """The caches keyed by memory text (erasure empties them)."""
    from situated.screen import advice

    return [_decide, advice._read, advice._read_claims]
