"""Heuristics for memory that tries to act as instruction: used at write (gates) and at read
(validation). Memory is data; text that commands the agent, widens its tools or claims
authority is suspect wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

_INJECTION = [
    (r"\b(ignore|disregard|forget|override)\b.{0,40}\b(instruction|prompt|rule|polic|guideline)",
     "tells the agent to ignore its instructions"),
    (r"\b(you are now|from now on,? you|act as|pretend to be)\b", "redefines the agent's role"),
    (r"\bsystem prompt\b|\bdeveloper message\b|<\s*/?\s*system\s*>", "addresses the system prompt"),
    (r"\b(you (are|have been|were) (now )?(authori[sz]ed|allowed|permitted|granted))\b",
     "claims to grant a permission"),
    (r"\b(grant|give|escalate|elevate)\b.{0,30}\b(admin|root|sudo|privilege|permission|access)",
     "tries to raise privileges"),
    (r"\b(admin|root|superuser) (access|rights|mode)\b", "claims elevated access"),
    (r"\b(always|must|never fail to)\s+(call|invoke|run|use|execute|send|email|post)\b",
     "commands a tool call"),
    (r"\b(send|upload|post|forward|exfiltrate|email)\b.{0,60}"
     r"(https?://|\S+@\S+\.\w+|\[REDACTED:email\])",
     "sends data to an external destination"),
    (r"\b(verified|approved|authori[sz]ed) by (the )?(admin|security|system|owner)",
     "claims authority it was not given"),
    (r"\bdo not (tell|inform|log|report)\b", "asks to hide actions"),
]
_UNSAFE = [
    (r"\b(disable|turn off|switch off|bypass|skip|silence|mute|remove|deactivate)\b.{0,40}"
     r"\b(audit|logging|logs?|monitor\w*|alarms?|alerts?|detectors?|2fa|mfa|two.factor|"
     r"firewall|antivirus|backups?|encryption|safety|security|verification|identity check\w*)",
     "recommends disabling a safety or security control"),
    (r"\b(store|save|write down|log|record|paste|copy|email|send)\b.{0,40}\b(card numbers?|cvv|"
     r"passwords?|credentials|secrets?|api keys?|ssn|social security numbers?)\b(?!\s*polic)",
     "recommends storing secrets or card data"),
    (r"\b(delete|drop|wipe|purge|truncate|rm -rf)\b.{0,30}(\b(all|every|entire|whole)\b|"
     r"\b(database|tables?|backups?)\b)", "recommends a destructive bulk operation"),
    (r"\bchmod\s+777\b|\bcurl\b[^|]*\|\s*(ba)?sh\b", "recommends an unsafe shell command"),
]
_INJECTION.extend(_UNSAFE)
_COMPILED = [(re.compile(p, re.IGNORECASE), why) for p, why in _INJECTION]
_HIDDEN = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_ENCODED = re.compile(r"(?:[A-Za-z0-9+/]{40,}={0,2})|(?:\\x[0-9a-fA-F]{2}){8,}")

_TOOL_MENTION = re.compile(
    r"`([A-Za-z_][\w.\-]{1,63})`"
    r"|\b(?:call|invoke|use|run|execute)\s+(?:the\s+)?([A-Za-z_][\w.\-]{1,63})(?:\s+tool)?\b"
    r"|\b([A-Za-z_][\w.]*_[\w.]+|[A-Za-z_]\w*)\s*\(",
    re.IGNORECASE,
)
_STOP = frozenset(
    "the a an it this that them to and or of with for on in at by again first then".split()
)


@dataclass(frozen=True)
class Finding:
    """One suspicious pattern in a text."""

    reason: str
    excerpt: str


@lru_cache(maxsize=8192)
def injection_findings(text: str) -> tuple[Finding, ...]:
    """Instruction-like, authority-claiming, hidden or encoded content in `text` (cached:
    recall re-validates the same immutable memory texts)."""
    found = []
    for rx, why in _COMPILED:
        m = rx.search(text)
        if m:
            found.append(Finding(why, m.group(0)[:80]))
    if _HIDDEN.search(text):
        found.append(Finding("contains hidden (zero-width or bidi) characters", ""))
    m = _ENCODED.search(text)
    if m:
        found.append(Finding("embeds an encoded blob", m.group(0)[:40]))
    return tuple(found)


def tool_mentions(text: str) -> set[str]:
    """Names the text presents as tools: `backticked`, `call X`, or `name(`."""
    names: set[str] = set()
    for m in _TOOL_MENTION.finditer(text):
        name = next((g for g in m.groups() if g), "")
        if name and name.lower() not in _STOP:
            names.add(name)
    return names


def disallowed_tools(text: str, allowed: Iterable[str]) -> set[str]:
    """Tool names mentioned in `text` that the allow-list does not contain."""
    ok = {a.lower() for a in allowed}
    return {t for t in tool_mentions(text) if t.lower() not in ok}


def prohibited_effects(text: str, prohibited: Iterable[str]) -> set[str]:
    """Prohibited effects named in `text` (whole-word, case-insensitive)."""
    return {
        e for e in prohibited if re.search(rf"\b{re.escape(e)}\w*\b", text, re.IGNORECASE)
    }
