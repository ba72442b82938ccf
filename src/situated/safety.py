"""Heuristics for memory that tries to act as instruction: used at write (gates) and at read
(validation). Memory is data; text that commands the agent, widens its tools or claims
authority is suspect wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from situated.textforms import hidden_controls

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
    (r"[\[<]\s*/?\s*(system|admin\w*|developer|operator|policy|priority|important|verified|"
     r"override|root|security)\b[^\]>\n]{0,40}[\]>]", "carries a pseudo-system header"),
    (r"\b(outranks?|outweighs?|takes? precedence over|(has|have|with) (priority|precedence) "
     r"over|higher priority than|more authority than|overrides?)\b.{0,60}"
     r"\b(users?|operators?|instructions?|system|developers?|polic\w*|prompts?)\b",
     "claims precedence over the run's instructions"),
    (r"\bpolicy\s+(version\s+|v)\s*[\w.\-]+.{0,40}\b(replaces|supersedes|overrides|is now in "
     r"effect|now applies|takes effect)\b", "claims a policy version of its own"),
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
HIDDEN_REASON = "contains hidden format characters (zero-width, bidi, soft hyphen or tags)"
"""Unicode category Cf after NFKC (`situated.textforms.hidden_controls`), not a hand-listed
range."""
_ENCODED = re.compile(r"(?:[A-Za-z0-9+/]{40,}={0,2})|(?:\\x[0-9a-fA-F]{2}){8,}")
_ENCODED_RUN = 40
"""The shortest run of base64 characters `_ENCODED` reports."""

_NAMED_TOOL_PATTERN = (
    r"`([A-Za-z_][\w.\-]{1,63})`"
    r"|\b(?:call|invoke|use|run|execute)\s+(?:the\s+)?([A-Za-z_][\w.\-]{1,63})(?:\s+tool)?\b"
)
"""Two ways a text presents a tool: `backticked`, or `call X`; the third, a name before `(`,
is read by `_CALL_RUN` (see `tool_mentions`)."""
_CALL_RUN = re.compile(r"(?<![\w.])[\w.]++\s*+\(")
"""A whole run of word characters and dots, then `(`: read once, without backtracking."""
_CALL_TAIL = re.compile(r"[\w.]++\s*+\(")
_NAME_HEAD = re.compile(r"[A-Za-z_]", re.IGNORECASE)
"""What may start a name, as the case-insensitive pattern reads it (`ſ` and the Kelvin sign
fold to ASCII letters)."""
"""The same from inside a run (where a match of `_NAMED_TOOL_PATTERN` ended)."""
_STOP = frozenset(
    "the a an it this that them to and or of with for on in at by again first then".split()
)


def ascii_lower(text: str) -> str | None:
    """`text` lower-cased when it is ASCII (what a `Gated` pattern's gate reads), else None."""
    return text.lower() if text.isascii() else None


class Gated:
    """A compiled pattern that is searched only when the text holds the literals every match
    of it needs.

    The literals are derived from the pattern itself (`required_literals`), so the gate cannot
    drift from the pattern. A substring test is far cheaper than the regex engine's
    case-insensitive scan, and most texts hold none of a pattern's words. The gate is exact:
    it only skips texts the pattern cannot match, and it applies only to ASCII texts (for
    which case-insensitive matching is plain ASCII lower-casing); any other text is searched.
    """

    __slots__ = ("clauses", "regex")

    def __init__(self, pattern: str, flags: int = re.IGNORECASE) -> None:
        self.regex = re.compile(pattern, flags)
        self.clauses = required_literals(pattern, flags)

    def may_match(self, lowered: str | None) -> bool:
        """False only when the text (as `ascii_lower` gives it) cannot match."""
        if lowered is None:
            return True
        for clause in self.clauses:
            for literal in clause:
                if literal in lowered:
                    break
            else:
                return False
        return True

    def search(self, text: str, lowered: str | None) -> re.Match[str] | None:
        """`regex.search(text)`; `lowered` is `ascii_lower(text)`."""
        return self.regex.search(text) if self.may_match(lowered) else None


def required_literals(pattern: str, flags: int = 0) -> tuple[tuple[str, ...], ...]:
    """Clauses of lower-cased ASCII literals: every match of `pattern` contains, ignoring
    ASCII case, at least one literal of each clause. Empty when nothing is required (or the
    pattern cannot be analysed: then nothing is skipped)."""
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]

        clauses = _needs(list(_parser.parse(pattern, flags)), _constants)
    except (ImportError, AttributeError, TypeError, ValueError, IndexError, re.error):
        return ()
    # most selective first: all clauses must hold, so the likeliest to fail is tried first
    ordered = sorted(set(clauses), key=lambda c: (-min(map(len, c)), len(c), sorted(c)))
    return tuple(tuple(sorted(c, key=lambda lit: (-len(lit), lit))) for c in ordered)


def _needs(items: list[tuple[Any, Any]], c: Any) -> list[frozenset[str]]:
    """The clauses a sequence of parsed regex items requires (each clause is necessary)."""
    clauses: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            clauses.append(frozenset({"".join(run)}))
            run.clear()

    for op, av in items:
        if op is c.LITERAL and av < 128:
            run.append(chr(av).lower())
            continue
        if op is c.AT:
            continue  # zero-width (\\b, ^, $): the literals on either side stay adjacent
        flush()
        if op is c.SUBPATTERN:
            clauses.extend(_needs(list(av[-1]), c))
        elif op is c.BRANCH:
            alternatives = [_needs(list(a), c) for a in av[1]]
            if all(alternatives):
                clauses.append(frozenset().union(*(_best(a) for a in alternatives)))
        elif op in _repeats(c) and av[0] >= 1:
            clauses.extend(_needs(list(av[2]), c))
        # anything else (classes, any char, lookarounds, references) needs no literal
    flush()
    return clauses


def _repeats(c: Any) -> tuple[Any, ...]:
    return tuple(getattr(c, name) for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
                 if hasattr(c, name))


def _best(clauses: list[frozenset[str]]) -> frozenset[str]:
    return max(clauses, key=lambda cl: (min(map(len, cl)), -len(cl), sorted(cl)))


_COMPILED = [(Gated(p), why) for p, why in _INJECTION]
_NAMED_TOOL = Gated(_NAMED_TOOL_PATTERN)
_TOOL_MENTION = Gated(_NAMED_TOOL_PATTERN + r"|\(")
"""Only its gate is used: a text lacking every literal of it mentions no tool."""


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
    lowered = ascii_lower(text)
    for gated, why in _COMPILED:
        m = gated.search(text, lowered)
        if m:
            found.append(Finding(why, m.group(0)[:80]))
    if lowered is None and hidden_controls(text):  # an ASCII text holds no such character
        found.append(Finding(HIDDEN_REASON, ""))
    m = _ENCODED.search(text) if _may_be_encoded(text) else None
    if m:
        found.append(Finding("embeds an encoded blob", m.group(0)[:40]))
    return tuple(found)


def may_hold_injection(text: str) -> bool:
    """False only when neither `text` nor any part of it has `injection_findings`: an ASCII
    text lacking every pattern's literals and any long word (each part lacks them too)."""
    lowered = ascii_lower(text)
    if lowered is None or _may_be_encoded(text):
        return True
    return any(gated.may_match(lowered) for gated, _ in _COMPILED)


def _may_be_encoded(text: str) -> bool:
    """False only when `_ENCODED` cannot match: a base64 run has no whitespace, so it lies in
    one whitespace-separated word; the other form starts with a literal `\\x`."""
    return "\\x" in text or max(map(len, text.split()), default=0) >= _ENCODED_RUN


def tool_mentions(text: str) -> set[str]:
    """Names the text presents as tools: `backticked`, `call X`, or `name(`.

    What `finditer` of the one pattern `` `name` | call name | \\b(<name>)\\s*\\( `` gives
    (leftmost match first, matches never overlapping, the first two forms before the third at
    one start), where `<name>` is `[A-Za-z_][\\w.]*_[\\w.]+|[A-Za-z_]\\w*`; but that pattern
    backtracked cubically on `(.a_.a_...` (seconds for 2 KB). Here the third form reads each
    run of word characters and dots once (`_CALL_RUN`) and `_called` picks the name in it, so a
    search is linear in the text."""
    names: set[str] = set()
    if not _TOOL_MENTION.may_match(ascii_lower(text)):
        return names
    named = _NAMED_TOOL.regex
    pos, end = 0, len(text)
    m12 = named.search(text)
    m3 = _next_call(text, 0)
    while pos < end:  # a search is repeated only when its match was passed (none stays none)
        if m12 is not None and m12.start() < pos:
            m12 = named.search(text, pos)
        if m3 is not None and m3[0] < pos:
            m3 = _next_call(text, pos)
        if m12 is not None and (m3 is None or m12.start() <= m3[0]):
            name, pos = m12.group(1) or m12.group(2), m12.end()
        elif m3 is not None:
            name, pos = m3[2], m3[1]
        else:
            break
        if name and name.lower() not in _STOP:
            names.add(name)
    return names


def _next_call(text: str, pos: int) -> tuple[int, int, str] | None:
    """(start, end, name) of the leftmost `name(` at or after `pos`."""
    m = _CALL_TAIL.match(text, pos) if pos and _in_run(text[pos - 1]) else None
    while True:
        if m is None:
            m = _CALL_RUN.search(text, pos)
            if m is None:
                return None
        run = m.group(0).rstrip("(").rstrip()
        at = _called(run, text[m.start() - 1] if m.start() else " ")
        if at is not None:
            return m.start() + at, m.end(), run[at:]
        pos, m = m.end(), None


def _in_run(c: str) -> bool:
    return c == "." or c.isalnum() or c == "_"


def _called(run: str, before: str) -> int | None:
    """Where `\\b([A-Za-z_][\\w.]*_[\\w.]+|[A-Za-z_]\\w*)` starts a match in a run of word
    characters and dots followed by `(` (`before`: the character before the run): the leftmost
    word start (the run's start after a non-word character, or just after a dot) at a letter
    or `_`, with `_` in what follows it (short of the last character), or else with only word
    characters after it; the match runs to the run's end. One pass over the run."""
    last_dot = run.rfind(".")
    last_underscore = run.rfind("_", 0, len(run) - 1)
    for start, head in enumerate(run):
        previous = run[start - 1] if start else before
        if previous != "." and (previous.isalnum() or previous == "_"):
            continue  # no word boundary inside a run of word characters
        if not _NAME_HEAD.match(head):
            continue
        if last_underscore > start or start > last_dot:
            return start
    return None


_CODE_LIKE = re.compile(
    r"[A-Za-z_](?=[\w.]*?[_.][A-Za-z0-9])(?:\w|\.(?=[A-Za-z0-9]))*+"
    r"|[a-z]++[A-Z]\w*+"
)
r"""`snake_case` or `dotted.name` (`[A-Za-z_]\w*(?:[_.][A-Za-z0-9]\w*)+`) or `camelCase`
(`[a-z]+[A-Z]\w*`), written so that a full match never backtracks (that form of the first
was quadratic): every dot is followed by a letter or digit, and a `_` or `.` followed by one
occurs after the first character."""


def code_like(name: str) -> bool:
    """True for a name shaped like code (`snake_case`, `dotted.name`, `camelCase`): what a
    tool mention must look like to be denied where no allow-list is declared."""
    return _CODE_LIKE.fullmatch(name) is not None


def denied_tools(names: Iterable[str], allowed: frozenset[str] | None) -> set[str]:
    """The tool names a run may not see named: outside `allowed` (from `allow_list`); with no
    allow-list (None), deny-by-default: every code-like name."""
    if allowed is None:
        return {n for n in names if code_like(n)}
    return not_allowed(names, allowed)


def disallowed_tools(text: str, allowed: Iterable[str]) -> set[str]:
    """Tool names mentioned in `text` that the allow-list does not contain."""
    return not_allowed(tool_mentions(text), allow_list(allowed))


def allow_list(allowed: Iterable[str]) -> frozenset[str]:
    """An allow-list of tool names as `not_allowed` compares them (case-insensitively)."""
    return frozenset(a.lower() for a in allowed)


def not_allowed(names: Iterable[str], allowed: frozenset[str]) -> set[str]:
    """The tool names `allowed` (from `allow_list`) does not contain."""
    return {n for n in names if n.lower() not in allowed}


def prohibited_effects(text: str, prohibited: Iterable[str]) -> set[str]:
    """Prohibited effects named in `text` (whole-word, case-insensitive)."""
    lowered = ascii_lower(text)
    return {
        e for e in prohibited
        # an ASCII effect absent from an ASCII text (ignoring case) cannot match
        if (lowered is None or not e.isascii() or e.lower() in lowered)
        and re.search(rf"\b{re.escape(e)}\w*\b", text, re.IGNORECASE)
    }
