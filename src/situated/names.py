"""One rule for the names that draw security boundaries: tenants, namespaces and roles.

A tenant is a security boundary and a namespace or a role narrows one, so a name must mean one
thing to the store and look like one thing to a person. `canonical_name` applies the rule:

1. **NFKC.** A name that NFKC changes is accepted in its NFKC form: full-width `ａｃｍｅ` and
   mathematical bold `𝐚𝐜𝐦𝐞` become `acme`, the ligature `ﬁ` becomes `fi`. This is safe because
   NFKC only merges spellings that Unicode declares to be the same text (compatibility
   equivalents) onto the one form that is then stored, compared and printed: the folded input
   names exactly the tenant its plain spelling names, never a second one that looks like it.
   And a name grants nothing by itself (who may act for a tenant is decided where the
   `Principal` is built, e.g. by an API key), so reaching `acme` by typing `ａｃｍｅ` gives no
   more than typing `acme`.
2. **Refused, never stripped or repaired**, wherever it stands, in the input or in its NFKC
   form: whitespace (categories Zs, Zl, Zp: space, no-break space, U+2028...), control
   characters (Cc: tab, newline, DEL, the C1 controls), format characters (Cf: zero-width
   spaces and joiners, bidi overrides and isolates, the BOM, the soft hyphen, tag characters),
   private-use (Co), unassigned (Cn, in the Unicode version of the running Python,
   `unicodedata.unidata_version`) and surrogate (Cs) code points, and the other characters
   that print as nothing or as blank space (the combining grapheme joiner, variation selectors,
   Hangul fillers, the braille blank: what `disarm.strip_format` removes or blanks).
3. **No leading combining mark** (category M*): it would draw itself onto whatever is printed
   before the name.
4. **1 to `MAX_NAME_CHARS` (100) code points**, in the input and in its NFKC form (NFKC can
   lengthen text): room for any slug, a UUID or a DNS label (63), and one line of `--plain`
   output.

Names stay case-sensitive and may be written in any script. The rule cannot see two different
valid names that look alike (`acme` and `аcme` with a Cyrillic `а`): the store refuses the later
one when it would be created, by comparing `skeleton`s (`situated.store.names`).

Actor names (`Principal.name`, the actor of ledger events) follow a looser rule,
`canonical_actor`: the same NFKC, refused characters and length bound, except that single
spaces (U+0020, no other whitespace) are allowed between words: none at either end, never two
in a row.

This module imports nothing of the package but its errors.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import disarm

from situated.errors import InvalidInput

MAX_NAME_CHARS = 100
"""The longest tenant, namespace, role or actor name, in code points of its NFKC form."""

SKELETON_VERSION = (
    f"disarm {disarm.__version__}; key schema {disarm.KEY_SCHEMA_VERSION}; "
    f"confusables {disarm.CONFUSABLES_VERSION}"
)
"""What `skeleton` is computed with: a store recomputes the skeletons it keeps when it changes."""

_REFUSED = {
    "Zs": "whitespace",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Cs": "a surrogate (not valid Unicode)",
}


def skeleton(text: str) -> str:
    """The confusable skeleton of `text`: texts a reader could take for one another share it.

    Unicode TR39 (confusable detection), computed by `disarm.skeleton_key` from Unicode's
    `confusables.txt` (the release is in `SKELETON_VERSION`), with TR39's digit classes
    (`1`/`l`/`I`, `0`/`O`). Besides TR39's mapping it strips invisible and bidi characters,
    applies NFKC and folds case, so `Acme`, `acme`, `аcme` (Cyrillic `а`) and `𝐚𝐜𝐦𝐞` all share
    the skeleton `acme`. Unlike TR39 it keeps `m` apart from `rn` (disarm leaves that fold out).

    A comparison key, never a name: do not display or store it as one.
    """
    return disarm.skeleton_key(text, digit_policy="tr39")


def canonical_name(value: object, field: str = "name") -> str:
    """`value` as a tenant, namespace or role name, in NFKC form (the module's rule).

    Raises:
        InvalidInput: naming `field`, if the rule refuses the name.
    """
    return _canonical(value, field, spaces=False)


def canonical_actor(value: object, field: str = "name") -> str:
    """`value` as an actor name: the name rule, but single spaces between words are allowed.

    Raises:
        InvalidInput: naming `field`, if the rule refuses the name.
    """
    return _canonical(value, field, spaces=True)


def _canonical(value: object, field: str, spaces: bool) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidInput(field, f"longer than {MAX_NAME_CHARS} characters")
    _refuse_characters(value, field, spaces)
    name = unicodedata.normalize("NFKC", value)
    if name != value:
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInput(field, f"longer than {MAX_NAME_CHARS} characters in NFKC form")
        _refuse_characters(name, field, spaces)
    if unicodedata.category(name[0]).startswith("M"):
        raise InvalidInput(field, f"must not begin with a combining mark ({_show(name[0])})")
    if spaces and (name[0] == " " or name[-1] == " " or "  " in name):
        raise InvalidInput(
            field, "spaces go only between words, one at a time (refused, never stripped)"
        )
    return name


def _refuse_characters(text: str, field: str, spaces: bool) -> None:
    for ch in text:
        if spaces and ch == " ":
            continue
        why = _refusal(ch)
        if why is not None:
            raise InvalidInput(field, f"holds {_show(ch)}, {why} (refused, never stripped)")


@lru_cache(maxsize=4096)
def _refusal(ch: str) -> str | None:
    """Why a name may not hold `ch`, or None."""
    why = _REFUSED.get(unicodedata.category(ch))
    if why is None and disarm.strip_format(ch) != ch:
        why = "a character that prints as nothing or as blank space"
    return why


def _show(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} {name}" if name else f"U+{ord(ch):04X}"
