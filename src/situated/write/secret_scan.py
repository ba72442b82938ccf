"""Yelp's `detect-secrets` plugins as the secrets gate runs them, in time linear in the text.

Several of the plugins' patterns backtrack super-linearly under Python's `re` (the IBM Cloud
IAM one, `(?: *)(?:=|:|:=|=>| +|::)(?: *)`, takes seconds on a keyword followed by a thousand
spaces). Every `RegexBasedDetector` whose patterns RE2 can run (after `re2_form` rewrites their
zero-width look-arounds at a pattern's edges into the character they test) is run by RE2
(`google-re2`, linear time); the values it finds are the plugin's own (`findall`, each
non-empty group of a match, then the plugin's `is_formally_valid` where it has one). The
others stay with the plugin, which `tests/test_linear_screens.py` times on adversarial lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_EDGES = (
    (re.compile(r"\(\?:\(\?<=\\W\)\|\(\?<=\^\)\)"), r"(?:^|\\W)"),
    (re.compile(r"\(\?!(\[[^\]]+\])\)\)"), lambda m: f")(?:[^{m.group(1)[1:-1]}]|$)"),
    (re.compile(r"\(\?!(\[[^\]]+\])\)"), lambda m: f"(?:[^{m.group(1)[1:-1]}]|$)"),
    (re.compile(r"\(\?!\\w\)"), r"(?:\\W|$)"),
)
"""Look-arounds at a pattern's start or end (`(?<=\\W)`, `(?![a-f0-9])` closing its group),
and the consuming forms RE2 runs instead: the captured value is the same (only where the
match starts or ends moves by the character tested)."""
_LONG_REPEAT = re.compile(r"(\[[^\]]+\])\{(\d+),(\d+)\}")
"""A class repeated `{m,n}`: RE2 counts at most 1000, so `{50,1024}` becomes
`{50,1000}` then `{0,24}`."""
FILENAME = "memory.txt"
"""detect-secrets picks per-filetype rules by name: a memory is plain text."""


@lru_cache(maxsize=1)
def plugins() -> list[Any]:
    """The detect-secrets plugins the gate runs (every default one but the entropy ones)."""
    import logging
    import warnings

    shown = warnings.showwarning
    from detect_secrets.settings import default_settings, get_plugins

    if warnings.showwarning is not shown:
        # detect-secrets turns on logging.captureWarnings at import, which would send every
        # warning of the host program (ours included) to logging instead of to its filters
        logging.captureWarnings(False)

    with default_settings():
        return [
            p for p in get_plugins()
            if type(p).__name__ not in ("Base64HighEntropyString", "HexHighEntropyString")
        ]


def re2_form(p: re.Pattern[str]) -> str | None:
    """`p` as RE2 runs it (its flags inline, look-arounds at its edges rewritten), or None
    when RE2 cannot run it the same way (other look-arounds, back references, verbose)."""
    import re2

    source = p.pattern
    for around, consuming in _EDGES:
        source = around.sub(consuming, source)
    source = _LONG_REPEAT.sub(_split_repeat, source)
    verbose = p.flags & re.VERBOSE and re.search(r"\s|#", source)
    if verbose or re.search(r"\(\?<?[=!]|\\\d|\(\?P=", source):
        return None
    if p.flags & re.IGNORECASE:
        source = "(?i)" + source
    try:
        re2.compile(source, _options())
    except re2.error:
        return None
    return source


def _split_repeat(m: re.Match[str]) -> str:
    cls, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
    if hi <= 1000 or lo > 1000:
        return m.group(0)
    return f"{cls}{{{lo},1000}}{cls}{{0,{hi - 1000}}}"


@lru_cache(maxsize=1)
def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # a pattern RE2 cannot run stays with its plugin, quietly
    options.max_mem = 64 << 20
    return options


@dataclass(frozen=True)
class Linear:
    """A `RegexBasedDetector` run by RE2."""

    plugin: Any
    patterns: tuple[Any, ...]

    def values(self, line: str) -> list[str]:
        valid = getattr(self.plugin, "is_formally_valid", None)
        out = []
        for rx in self.patterns:
            for found in rx.findall(line):
                for value in (found if isinstance(found, tuple) else (found,)):
                    if value and (valid is None or valid(value)):
                        out.append(value)
        return out


@dataclass(frozen=True)
class Screen:
    """The plugins in the groups the gate runs them in."""

    linear: tuple[Linear, ...]
    gate: Any
    """One RE2 alternation of every `linear` pattern: a line it does not match gives none of
    them anything to find."""
    keyword: tuple[re.Pattern[str], Any] | None
    """The `KeywordDetector` and a case-insensitive search for its keywords: every pattern it
    applies to a `.txt` line contains one, so a line without any gives it nothing to find."""
    rest: tuple[Any, ...]


@lru_cache(maxsize=1)
def screen() -> Screen:
    """The plugins grouped (`tests/test_write_fast.py` checks the groups find what running
    every plugin on every line finds)."""
    import re2
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.util.filetype import determine_file_type

    linear: list[Linear] = []
    rest: list[Any] = []
    found_keyword = None
    keyword_patterns = keyword.REGEX_BY_FILETYPE.get(
        determine_file_type(FILENAME), keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP
    )
    for plugin in plugins():
        patterns = getattr(plugin, "denylist", None)
        forms = [re2_form(p) for p in patterns or ()]
        overrides = type(plugin).analyze_string is not RegexBasedDetector.analyze_string
        if (isinstance(plugin, RegexBasedDetector) and forms and None not in forms
                and (not overrides or hasattr(plugin, "is_formally_valid"))):
            linear.append(Linear(plugin, tuple(re2.compile(f, _options()) for f in forms if f)))
        elif isinstance(plugin, keyword.KeywordDetector) and all(
            keyword.DENYLIST_REGEX in p.pattern for p in keyword_patterns
        ):
            found_keyword = (re.compile("|".join(keyword.DENYLIST), re.IGNORECASE), plugin)
        else:
            rest.append(plugin)
    sources = [rx.pattern for lin in linear for rx in lin.patterns]
    gate = re2.compile("|".join(f"(?:{s})" for s in sources), _options()) if sources else None
    return Screen(tuple(linear), gate, found_keyword, tuple(rest))


def values(text: str) -> list[tuple[str, str]]:
    """(value, type) of every detect-secrets finding in `text`, line by line."""
    s = screen()
    found: list[tuple[str, str]] = []
    for line in text.splitlines() or [text]:
        if s.gate is not None and s.gate.search(line):
            for lin in s.linear:
                found.extend((v, lin.plugin.secret_type) for v in lin.values(line))
        run = list(s.rest)
        if s.keyword is not None and s.keyword[0].search(line):
            run.append(s.keyword[1])
        for plugin in run:
            for secret in plugin.analyze_line(filename=FILENAME, line=line, line_number=1):
                found.append((secret.secret_value or "", secret.type))
    return found
