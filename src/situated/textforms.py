"""Unicode forms every text screen reads: NFKC with offsets back to the original, and the
invisible format characters (category Cf) a person does not see.

A screen that finds a span (an e-mail address, a phone number, a secret) in the NFKC form of a
text must redact the characters of the original it came from: `nfkc_map` gives, for each
character of the normalised form, the original span it came from. The original is cut into
clusters (a starter and the combining marks after it), each cluster normalised alone, so a
full-width `ｊｏｓé＠ｅｘｅｍｐｌｅ．ｆｒ` or `ｅ` + a combining accent maps back whole; format
characters are dropped from the form (a zero-width space inside an address does not split it).

`hidden_controls` counts the format characters of a text by their Unicode category, not by a
hand-listed range: zero-width spaces and joiners, bidi embeddings, overrides and isolates,
the soft hyphen, the byte order mark, tag characters. A zero-width joiner or non-joiner that
joins as the IDNA CONTEXTJ rules allow (RFC 5892, through the `idna` package: after a virama,
or between Arabic-script joining letters), and a joiner inside an emoji sequence, are part of
ordinary writing and are not counted.

Imports nothing of the package (the write gates, `safety` and `screen` all read it).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

_ZWNJ, _ZWJ = "\u200c", "\u200d"


@lru_cache(maxsize=4096)
def nfkc_map(text: str) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """(form, starts, ends): the NFKC form of `text` without format characters, and for each
    of its characters the start and end offsets in `text` of the cluster it came from."""
    if text.isascii():
        n = len(text)
        return text, tuple(range(n)), tuple(range(1, n + 1))
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        cluster = "".join(ch for ch in text[i:j] if unicodedata.category(ch) != "Cf")
        for ch in unicodedata.normalize("NFKC", cluster):
            if unicodedata.category(ch) != "Cf":
                out.append(ch)
                starts.append(i)
                ends.append(j)
        i = j
    return "".join(out), tuple(starts), tuple(ends)


def hidden_controls(text: str) -> int:
    """Invisible format characters (category Cf) in the NFKC form of `text`, joiners that
    join as ordinary writing does excepted (see the module's docstring)."""
    if text.isascii():
        return 0
    form = unicodedata.normalize("NFKC", text)
    count = 0
    for pos, ch in enumerate(form):
        if unicodedata.category(ch) != "Cf":
            continue
        if ch in (_ZWNJ, _ZWJ) and _joins(form, pos):
            continue
        count += 1
    return count


def _joins(form: str, pos: int) -> bool:
    """A ZWJ/ZWNJ at `pos` that IDNA's CONTEXTJ rule accepts within its word, or a ZWJ
    between two symbols (an emoji sequence)."""
    if form[pos] == _ZWJ and 0 < pos < len(form) - 1 and _symbol(form[pos - 1]) \
            and _symbol(form[pos + 1]):
        return True
    start = pos
    while start > 0 and not form[start - 1].isspace():
        start -= 1
    end = pos + 1
    while end < len(form) and not form[end].isspace():
        end += 1
    try:
        from idna.core import valid_contextj

        return bool(valid_contextj(form[start:end], pos - start))
    except (ImportError, ValueError, IndexError):
        return False


def _symbol(ch: str) -> bool:
    # an emoji, its variation selector (U+FE0F) or a skin-tone modifier (category Sk)
    return unicodedata.category(ch) in ("So", "Sk") or ch == "\ufe0f"
