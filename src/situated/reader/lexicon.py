"""What the reader knows about English words: closed word classes, lemmas, parts of speech,
units, and which words mean the same state or opposite states.

Nothing here belongs to one domain. Open-class knowledge comes from two general resources:
LemmInflect (lemmas and the parts of speech a word can take) and WordNet 3.0 (adjective
clusters and their antonyms, verb and adverb antonyms, noun synsets), derived once by
`scripts/build_lexicon.py` into `data/lexicon.msgpack` and loaded on first use. The closed
classes below (determiners, copulas, prepositions, negators, subordinators, units) are English
grammar, not vocabulary of a field.
"""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path

import msgspec

DETERMINERS = frozenset(
    "a an the this that these those my your his her its our their some any each every all "
    "both another other either neither much many few several".split()
)
NEGATORS = frozenset("not no never none nothing nobody nowhere without cannot n't".split())
COPULAS = frozenset("is are was were be been being am 's 're 'm".split())
LINKING = frozenset(
    "seem seems seemed look looks looked feel feels felt appear appears appeared become "
    "becomes became remain remains remained stay stays stayed sound sounds sounded smell "
    "smells smelled taste tastes tasted get gets got gotten go goes went gone grow grows grew "
    "grown turn turns turned keep keeps kept".split()
)
"""Verbs that link a subject to a state, like a copula ("the soil feels dry")."""
AUXILIARIES = frozenset(
    "do does did will would can could shall should may might must has have had wo ca "
    "'ll 'd 've".split()
)
PREPOSITIONS = frozenset(
    "in on at by for with from to into onto of off out over under above below behind near "
    "inside outside between through during after before since until till against per via "
    "across around beside beneath within upon toward towards along among past than".split()
)
LOCATIVE = frozenset(
    "in on at inside into onto under above below behind near beside beneath within upon "
    "outside around".split()
)
"""Prepositions that place a thing somewhere: "the key is in the box" is where the key is."""
CONJUNCTIONS = frozenset("and or but nor so yet then plus".split())
SUBORDINATORS = frozenset(
    "if when whenever while unless once until till before after because since whereas "
    "although though provided".split()
)
CONDITIONAL = frozenset("if when whenever while unless once provided only".split())
"""Words that open a clause stating where a lesson applies."""
TEMPORAL = frozenset("before after until till then first finally next later".split())
SPEAKERS = frozenset({"i", "we"})
"""First-person subjects: the same person in two statements of one author."""
PRONOUNS = frozenset(
    "i you he she it we they me him us them this that there here what which who whom whose "
    "something anything everything someone anyone everyone one".split()
)
ADVERBS = frozenset(
    "still now already currently normally usually always often sometimes again also just "
    "very really quite fully completely totally partly partially almost nearly mostly "
    "slightly barely only even too so rather pretty somewhat half right approximately "
    "about roughly around exactly precisely currently presently anymore".split()
)
"""Degree and time adverbs: they do not change which state a predicate names."""
GENERIC_NOUNS = frozenset(
    "status state check level reading condition value mode setting result estimate "
    "indicator light stage phase".split()
)
"""Nouns that name an aspect of a thing ("washer status: running"): the thing is the
subject, not the aspect."""
MONTH_NAMES = ("january february march april may june july august september october "
               "november december").split()
MONTHS = {**{m: i for i, m in enumerate(MONTH_NAMES, 1)},
          **{m[:3]: i for i, m in enumerate(MONTH_NAMES, 1) if m != "may"}, "sept": 9}
"""Months by name and abbreviation: "August 15th" is a day of the year, not 15 of something."""
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday weekend "
                     "morning afternoon evening night".split())
"""Days and parts of a day: "this Friday", "last night" say when."""
YES = frozenset("yes true on enabled".split())
NO = frozenset("no none false off disabled".split())
COMPARATIVES: dict[str, str] = {
    "over": ">", "above": ">", "exceeds": ">", "exceed": ">", "exceeding": ">",
    "exceeded": ">", "beyond": ">", "past": ">", "more": ">", "greater": ">", "higher": ">",
    "larger": ">", "longer": ">", "older": ">", "under": "<", "below": "<", "less": "<",
    "fewer": "<", "lower": "<", "smaller": "<", "shorter": "<", "younger": "<", "within": "<=",
    "least": ">=", "most": "<=", "up": "<=", "max": "<=", "min": ">=", "maximum": "<=",
    "minimum": ">=",
}
"""Words that state a threshold's direction ("over 90%", "less than 5", "at least 3")."""

# -- units: (dimension, factor to the dimension's base unit) ------------------------------
_TIME = {"ms": 0.001, "millisecond": 0.001, "s": 1.0, "sec": 1.0, "second": 1.0,
         "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0,
         "d": 86400.0, "day": 86400.0, "week": 604800.0, "wk": 604800.0,
         "month": 2629800.0, "year": 31557600.0, "yr": 31557600.0}
_DATA = {"b": 1.0, "byte": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
         "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3, "tib": 1024.0**4}
_LENGTH = {"mm": 0.001, "cm": 0.01, "meter": 1.0, "metre": 1.0, "km": 1000.0,
           "inch": 0.0254, "foot": 0.3048, "feet": 0.3048, "ft": 0.3048, "yard": 0.9144,
           "mile": 1609.344}
_MASS = {"mg": 0.001, "g": 1.0, "gram": 1.0, "kg": 1000.0, "kilogram": 1000.0,
         "lb": 453.592, "pound": 453.592, "oz": 28.3495, "ounce": 28.3495, "ton": 1e6,
         "tonne": 1e6}
_VOLUME = {"ml": 0.001, "l": 1.0, "liter": 1.0, "litre": 1.0, "gallon": 3.785}
_MONEY = {"$": "usd", "dollar": "usd", "usd": "usd", "buck": "usd", "€": "eur", "euro": "eur",
          "eur": "eur", "£": "gbp", "gbp": "gbp", "¥": "jpy", "yen": "jpy", "cent": "usd"}
_TEMPERATURE = {"°c": "celsius", "celsius": "celsius", "c": "celsius", "°f": "fahrenheit",
                "fahrenheit": "fahrenheit", "f": "fahrenheit", "kelvin": "kelvin", "k": "kelvin"}
_RATE = {"%": 1.0, "percent": 1.0, "pct": 1.0, "percentage": 1.0}


@lru_cache(maxsize=4096)
def unit(word: str) -> tuple[str, float] | None:
    """(dimension, factor to its base unit) of a unit word, or None: `minutes` -> ('time',
    60.0), `GB` -> ('data', 1e9), `dollars` -> ('money:usd', 1.0), `%` -> ('%', 1.0)."""
    w = word.lower().rstrip(".")
    candidates = [w]
    if len(w) > 2 and w.endswith("s"):
        candidates.append(w[:-1])
    for c in candidates:
        if c in _RATE:
            return "%", _RATE[c]
        if c in _TIME and (len(c) > 1 or c == "s"):
            return "time", _TIME[c]
        if c in _DATA:
            return "data", _DATA[c]
        if c in _LENGTH:
            return "length", _LENGTH[c]
        if c in _MASS and len(c) > 1:
            return "mass", _MASS[c]
        if c in _VOLUME and len(c) > 1:
            return "volume", _VOLUME[c]
        if c in _MONEY:
            return f"money:{_MONEY[c]}", 0.01 if c == "cent" else 1.0
        if c in _TEMPERATURE and (len(c) > 1):
            return f"temperature:{_TEMPERATURE[c]}", 1.0
    return None


# -- open classes: LemmInflect ------------------------------------------------------------


@lru_cache(maxsize=65536)
def tags(word: str) -> dict[str, tuple[str, ...]]:
    """Parts of speech `word` can take, with its lemma for each (LemmInflect's lexicon):
    `works` -> {'NOUN': ('work',), 'VERB': ('work',)}; {} for a word it does not know."""
    from lemminflect import getAllLemmas

    w = word.lower()
    found: dict[str, tuple[str, ...]] = dict(getAllLemmas(w))
    if "NOUN" not in found and w.isalpha():
        # LemmInflect misses some nouns ("log"): WordNet's noun index has them
        nouns = _lexicon().nouns
        plural = len(w) > 3 and w.endswith("s") and not w.endswith("ss")
        for base in (w, w[:-1] if plural else "", w[:-2] if plural and w.endswith("es") else ""):
            if base and (base in nouns or "NOUN" in getAllLemmas(base)):
                found["NOUN"] = (base,)
                break
    return found


@lru_cache(maxsize=65536)
def _parts(word: str) -> frozenset[str]:
    return frozenset(tags(word))


def can_be(word: str, *pos: str) -> bool:
    """Whether `word` can be any of the parts of speech `pos` ("VERB", "ADJ", "NOUN")."""
    return not _parts(word).isdisjoint(pos)


@lru_cache(maxsize=65536)
def lemma(word: str, pos: str | None = None) -> str:
    """The word's lemma, as the part of speech `pos` when given and possible (`running` as a
    verb: 'run'); a word the lexicon does not know is its own lemma."""
    w = word.lower()
    t = tags(w)
    if not t:
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            return w[:-1]
        return w
    order = ((pos,) if pos else ()) + ("VERB", "ADJ", "NOUN", "ADV", "AUX")
    for p in order:
        if t.get(p):
            return t[p][0]
    return next(iter(t.values()))[0] if t else w


# -- WordNet relations ---------------------------------------------------------------------

_DATA_FILE = Path(__file__).parent / "data" / "lexicon.msgpack"

EXTRA_OPPOSITES: tuple[tuple[str, str], ...] = (
    ("on", "off"), ("in", "out"), ("up", "down"), ("yes", "no"), ("true", "false"),
    ("run", "stop"), ("running", "stopped"), ("running", "idle"), ("busy", "free"),
    ("working", "broken"), ("work", "broken"), ("online", "offline"), ("present", "absent"),
    ("visible", "hidden"), ("active", "inactive"), ("pass", "fail"), ("passing", "failing"),
    ("healthy", "unhealthy"), ("healthy", "degraded"), ("up", "broken"), ("allowed", "denied"),
    ("approved", "rejected"), ("done", "pending"), ("finished", "running"),
    ("complete", "incomplete"), ("connected", "disconnected"), ("lit", "unlit"),
    ("clean", "dirty"), ("full", "empty"), ("start", "stop"), ("succeed", "fail"),
)
"""Opposite states WordNet does not link (its antonyms join only head adjectives, and
states of machines and processes are mostly participles): general English, not one field."""


_Table = dict[str, tuple[int, ...]]
_Words = dict[str, tuple[str, ...]]


class _Tables(msgspec.Struct):
    """The file's tables, decoded into tuples: a tuple of numbers is not tracked by the
    garbage collector (a list is), so 170k entries do not slow every collection."""

    adjective_clusters: _Table
    adjective_synsets: _Table
    adjective_antonyms: _Table
    verbs: _Table
    nouns: _Table
    verb_antonyms: _Words
    adverb_antonyms: _Words
    verb_files: _Table


class _Lexicon:
    """The WordNet-derived tables (loaded once, on first use)."""

    def __init__(self, data: _Tables) -> None:
        self.adjective_clusters = data.adjective_clusters
        self.adjective_synsets = data.adjective_synsets
        self.adjective_antonyms = data.adjective_antonyms
        self.verbs = data.verbs
        self.nouns = data.nouns
        self.verb_files = data.verb_files
        lexical: dict[str, set[str]] = {}
        for table in (data.verb_antonyms, data.adverb_antonyms):
            for word, others in table.items():
                for other in others:
                    lexical.setdefault(word, set()).add(other)
                    lexical.setdefault(other, set()).add(word)
        for a, b in EXTRA_OPPOSITES:
            lexical.setdefault(a, set()).add(b)
            lexical.setdefault(b, set()).add(a)
        self.lexical_antonyms = lexical


@cache
def _lexicon() -> _Lexicon:
    return _Lexicon(msgspec.msgpack.decode(_DATA_FILE.read_bytes(), type=_Tables))


MOTION, CHANGE, STATIVE = 38, 30, 42
"""WordNet's lexicographer files of verbs that move, change or keep their subject where it is."""


def verb_kinds(verb: str, senses: int = 2) -> tuple[int, ...]:
    """The lexicographer files of the verb's `senses` most frequent senses (`MOTION`, ...)."""
    return _lexicon().verb_files.get(lemma(verb, "VERB"), ())[:senses]


@lru_cache(maxsize=65536)
def forms(word: str) -> tuple[str, ...]:
    """The word and its lemmas (as adjective, verb, noun): the forms relations are looked up
    under (`stopped`: stopped, stop)."""
    w = word.lower()
    out = [w]
    for lemmas in tags(w).values():
        for item in lemmas:
            if item not in out:
                out.append(item)
    return tuple(out)


@lru_cache(maxsize=65536)
def opposite(a: str, b: str) -> bool:
    """Whether two state words are antonyms: head adjectives WordNet opposes (satellites
    through their heads: soggy / dry), verb and adverb antonyms, or a general pair
    (`EXTRA_OPPOSITES`)."""
    if a == b:
        return False
    lex = _lexicon()
    fa, fb = forms(a), forms(b)
    for x in fa:
        others = lex.lexical_antonyms.get(x)
        if others and any(y in others for y in fb):
            return True
    ca = {c for x in fa for c in lex.adjective_clusters.get(x, ())}
    cb = {c for y in fb for c in lex.adjective_clusters.get(y, ())}
    if not ca or not cb or ca & cb:
        return False
    return any(o in cb for c in ca for o in lex.adjective_antonyms.get(str(c), ()))


@lru_cache(maxsize=65536)
def alike(a: str, b: str) -> bool:
    """Whether two state words name the same state: one lemma, or a shared adjective or verb
    synset among their frequent senses (soggy / waterlogged; not red / blue, which only share
    the cluster "chromatic")."""
    fa, fb = forms(a), forms(b)
    if set(fa) & set(fb):
        return True
    lex = _lexicon()
    sa = {c for x in fa for c in lex.adjective_synsets.get(x, ())}
    if sa & {c for y in fb for c in lex.adjective_synsets.get(y, ())}:
        return not opposite(a, b)
    va = {s for x in fa for s in lex.verbs.get(x, ())[:2]}
    return bool(va & {s for y in fb for s in lex.verbs.get(y, ())[:2]})


@lru_cache(maxsize=65536)
def same_thing(a: str, b: str) -> bool:
    """Whether two nouns (or noun phrases) can name the same thing: one lemma, or a shared
    synset among their frequent senses (washer / washing machine)."""
    if a == b:
        return True
    la, lb = lemma(a, "NOUN"), lemma(b, "NOUN")
    if la == lb:
        return True
    nouns = _lexicon().nouns
    sa = set(nouns.get(a, ()) or nouns.get(la, ()))
    return bool(sa & set(nouns.get(b, ()) or nouns.get(lb, ())))


def is_compound(words: str) -> bool:
    """Whether WordNet knows `words` (with spaces) as one noun ("washing machine")."""
    return words in _lexicon().nouns
