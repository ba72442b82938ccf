"""Text normalisation before screening: one canonical form, plus decoded views.

Screening reads what a person or a model would read, not the code points an attacker chose:

1. Unicode NFKC (full-width letters, ligatures, compatibility forms folded);
2. invisible format characters removed and counted: zero-width spaces and joiners, bidi
   embeddings, overrides and isolates, the byte order mark, soft hyphens, Unicode tag
   characters (category Cf); tag characters that spell ASCII text ("ASCII smuggling") and
   variation-selector payloads are decoded first (`disarm.decode_smuggled`) and screened as a
   view of their own;
3. confusables folded with the Unicode TR39 confusables data (through `disarm`, a maintained
   library): a word is folded to Latin when it mixes writing systems (Latin `g` beside Cyrillic
   `о`), or when the text is mostly Latin and the whole word reads as Latin once folded (an
   all-Cyrillic look-alike word inside English). A text written in another script keeps its
   letters: Russian stays Russian.

`decoded_views` then yields the text as it reads after decoding what looks encoded: base64
runs, hex bytes (`\\x69...`, `69 67 6e...`), percent-encoding, HTML entities, rot13 and
leetspeak (`1gn0r3`: digits and symbols read as the letters they stand for; each kept when the
result reads more like words than the original), and smuggled payloads. A screen scores
the original and every view and keeps the highest score.

`skeleton` is the project's one TR39 skeleton, `situated.names.skeleton` (a comparison key, not a
text to read); it is re-exported here so screening and names cannot drift apart.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote

import disarm

from situated.names import skeleton as skeleton

MAX_VIEWS = 6
"""Decoded views screened per text at most (the original not counted)."""
_MAX_DEPTH = 2
"""Decoding is applied to decoded views once more (base64 of hex, ...), no deeper."""

_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"[^\S\n]+")
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/_=-])")
_HEX_ESCAPED = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){4,}")
_HEX_SPACED = re.compile(r"\b(?:0x)?[0-9A-Fa-f]{2}(?:[ :,]+(?:0x)?[0-9A-Fa-f]{2}){5,}\b")
_HEX_RUN = re.compile(r"\b(?:0x)?((?:[0-9A-Fa-f]{2}){8,})\b")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]{2,7}|#[xX][0-9A-Fa-f]{2,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_COMMON = frozenset(
    """the be to of and a in that have i it for not on with he as you do at this but his by
    from they we say her she or an will my one all would there their what so up out if about
    who get which go me when make can like time no just him know take people into year your
    good some could them see other than then now look only come its over think also back
    after use two how our work first well way even new want because any these give day most
    us is are was were been has had did does said must should always never ignore previous
    instructions instruction rules prompt system user assistant please tell send call every
    following above below reveal secret password data email print output answer respond
    message only don't do not anything everything forget disregard task new important""".split()
)
"""Frequent English words: how word-like a rot13 candidate reads (not a screening list)."""


@dataclass(frozen=True)
class Normalised:
    """A text in canonical form, with what normalisation found."""

    text: str
    hidden_controls: int
    """Invisible format characters removed (zero-width, bidi, tags, BOM, soft hyphen)."""
    folded_words: int
    """Words whose confusable letters were folded to Latin."""
    smuggled: tuple[str, ...] = ()
    """Text hidden in tag characters or variation selectors, decoded before they were removed."""


@dataclass(frozen=True)
class View:
    """One reading of a text: `original` or the decoding that produced it."""

    name: str
    text: str


def normalise(text: str) -> Normalised:
    """NFKC, invisible format characters removed, confusables folded, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text)
    hidden = 0
    smuggled: tuple[str, ...] = ()
    if not text.isascii():
        found = (p.text or "" for p in disarm.decode_smuggled(text))
        smuggled = tuple(t for t in found if t.strip())
        kept = []
        for ch in text:
            if unicodedata.category(ch) == "Cf":
                hidden += 1
            else:
                kept.append(ch)
        text = "".join(kept)
    folded = 0
    if not text.isascii():
        text, folded = _fold_confusables(text)
    text = _SPACES.sub(" ", text).strip()
    return Normalised(text, hidden, folded, smuggled)


def _fold_confusables(text: str) -> tuple[str, int]:
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum(1 for ch in letters if ch.isascii() or _is_latin(ch))
    mostly_latin = bool(letters) and latin >= 0.6 * len(letters)
    count = 0

    def fold(match: re.Match[str]) -> str:
        nonlocal count
        word = match.group(0)
        if word.isascii():
            return word
        mixed = disarm.is_mixed_script(word)
        if not mixed and not mostly_latin:
            return word
        folded = disarm.normalize_confusables(word)
        if folded == word or not (mixed or folded.isascii()):
            return word
        count += 1
        return folded

    return _WORD.sub(fold, text), count


def _is_latin(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith("LATIN")


def decoded_views(norm: Normalised) -> list[View]:
    """The readings of a normalised text after decoding what looks encoded, original first.

    At most `MAX_VIEWS` decoded views; a decoding is kept only when it yields readable text
    different from its input. Each view is normalised as the original was. Smuggled payloads
    (`Normalised.smuggled`) make a view of the text followed by what it hid.
    """
    text = norm.text
    views = [View("original", text)]
    seen = {text}
    if norm.smuggled:
        hidden = normalise(" ".join([text, *norm.smuggled])).text
        views.append(View("smuggled", hidden))
        seen.add(hidden)
    frontier = list(views)
    for _ in range(_MAX_DEPTH):
        found: list[View] = []
        for view in frontier:
            for name, decoded in _decodings(view.text):
                decoded = normalise(decoded).text
                if decoded and decoded not in seen and len(views) <= MAX_VIEWS:
                    seen.add(decoded)
                    label = name if view.name == "original" else f"{view.name}+{name}"
                    found.append(View(label, decoded))
                    views.append(found[-1])
        frontier = found
    return views


def _decodings(text: str) -> Iterator[tuple[str, str]]:
    if _ENTITY.search(text):
        yield "html", html.unescape(text)
    if len(_PERCENT.findall(text)) >= 2:
        yield "percent", unquote(text)
    spans = _replace(text, _BASE64, _b64)
    if spans is not None:
        yield "base64", spans
    for pattern, decode in ((_HEX_ESCAPED, _hex), (_HEX_SPACED, _hex), (_HEX_RUN, _hex)):
        replaced = _replace(text, pattern, decode)
        if replaced is not None:
            yield "hex", replaced
            break
    leet = _LEET_WORD.sub(_unleet, text)
    if leet != text and _wordlike(leet) >= 0.25 and _wordlike(leet) > _wordlike(text) + 0.1:
        yield "leetspeak", leet
    rotated = codecs.encode(text, "rot13")
    score = _wordlike(rotated)
    if score >= 0.25 and score > _wordlike(text) + 0.2:
        yield "rot13", rotated


def _replace(
    text: str, pattern: re.Pattern[str], decode: Callable[[str], str | None]
) -> str | None:
    """`text` with every match that decodes to readable text replaced by its decoding; None
    when nothing decoded."""
    changed = False

    def sub(match: re.Match[str]) -> str:
        nonlocal changed
        decoded = decode(match.group(0))
        if decoded is None:
            return match.group(0)
        changed = True
        return f" {decoded} "

    out = pattern.sub(sub, text)
    return out if changed else None


def _b64(span: str) -> str | None:
    body = span.rstrip("=")
    if len(body) < 16 or body.isalpha() or body.isdigit():
        return None
    padded = body + "=" * (-len(body) % 4)
    for alt in (None, b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        decoded = _readable(raw)
        if decoded is not None:
            return decoded
    return None


def _hex(span: str) -> str | None:
    digits = re.sub(r"\\x|0x|[ :,]", "", span)
    if len(digits) % 2:
        return None
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        return None
    return _readable(raw)


def _readable(raw: bytes) -> str | None:
    """`raw` as UTF-8 text when it reads as text: printable, with letters."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or sum(ch.isprintable() or ch in "\n\t" for ch in text) < 0.95 * len(text):
        return None
    if sum(ch.isalpha() for ch in text) < 0.5 * len(text.replace(" ", "")):
        return None
    return text


_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b",
                       "@": "a", "$": "s", "!": "i", "|": "l", "+": "t"})
_LEET_WORD = re.compile(r"(?<![\w@$!|+])(?=[\w@$!|+]*[A-Za-z])(?=[\w@$!|+]*[013457@$!|+])"
                        r"[A-Za-z0-9@$!|+]{3,24}(?![\w@$!|+])")
"""A word of letters mixed with digits or symbols that stand for letters (`1gn0r3`, `p@ss`)."""


def _unleet(match: re.Match[str]) -> str:
    word = match.group(0)
    return word if word.isdigit() else word.translate(_LEET)


def _wordlike(text: str) -> float:
    words = [w.lower() for w in _WORD.findall(text) if w.isalpha()]
    if len(words) < 2:
        return 0.0
    return sum(w in _COMMON for w in words) / len(words)
