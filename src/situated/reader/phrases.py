"""Phrases of a clause: which token is its verb, what a noun phrase names (its head, its
modifiers, its negation and the place its prepositional phrase gives), amounts with their units
and the direction a threshold states, codes, and the words of a state.

`parse` puts these together into a clause's facts; nothing here reads a whole text.
"""

from __future__ import annotations

from collections.abc import Sequence

from situated.reader import lexicon as lx
from situated.reader.tokens import Token
from situated.reader.types import (
    AMOUNT,
    ASPECT,
    CODE,
    STATE,
    WHERE,
    Fact,
)

_NOT_STATES = frozenset(
    "last next first second third other same own such main whole new old entire".split()
)
"""Adjectives that place or pick a thing rather than describe its state."""
_PARTICLES = frozenset("on off out up down over away back in".split())
_RELATIVE = frozenset("that which who whom whose where".split())
_NOUNISH = ("NOUN", "PROPN")
_CLOCK = frozenset({"am", "pm", "a.m", "p.m", "o'clock"})
_ORDINAL = frozenset({"st", "nd", "rd", "th"})
_ASPECTS = frozenset("stage phase state mode condition level setting position".split())
"""Nouns whose modifier is the value ("in the seedling stage": stage = seedling)."""
_POSTPOSED = frozenset("left remaining available ago done free".split())
"""Words after a noun that say how much of it there is or whether it is there ("no room
left"): not verbs there."""


def _participle(t: Token) -> bool:
    return t.kind == "word" and t.low.endswith(("ed", "en", "wn", "ne")) and lx.can_be(
        t.low, "VERB")


_FUNCTION_WORDS = (lx.DETERMINERS | lx.PREPOSITIONS | lx.CONJUNCTIONS | lx.COPULAS
                   | lx.AUXILIARIES | lx.NEGATORS | lx.PRONOUNS | lx.SUBORDINATORS
                   | lx.ADVERBS)


def _content(t: Token) -> bool:
    return (t.kind == "word" or t.kind == "code") and t.low not in _FUNCTION_WORDS


def _noun_lemma(word: str) -> str:
    return lx.lemma(word, "NOUN")


def _inflected(word: str) -> bool:
    """Whether a verb-capable word is inflected (-s, -ed, -ing, or an irregular form)."""
    lemmas = lx.tags(word).get("VERB", ())
    return bool(lemmas) and word not in lemmas


def _nounish(word: str) -> bool:
    """Can the word be a noun? A word the lexicon does not know is taken for a name."""
    tags = lx.tags(word)
    return any(p in tags for p in _NOUNISH) or not tags


_PERSONAL = frozenset({"i", "we", "you", "they", "he", "she"})


def _is_verb(toks: Sequence[Token], j: int, in_pp: bool) -> bool:
    """Is toks[j] the verb of a clause whose subject comes before it?"""
    t = toks[j]
    if t.kind != "word" or not _content(t) or not lx.can_be(t.low, "VERB"):
        return False
    prev = toks[j - 1]
    if prev.low in _PERSONAL and t.low not in _POSTPOSED:
        return True  # "we live in Lisbon": after a subject pronoun, a verb
    if prev.low in lx.DETERMINERS or prev.low in lx.PREPOSITIONS or prev.kind in ("number",
                                                                                  "sym"):
        return False
    if all(x.low in lx.DETERMINERS or x.low in _NOT_STATES or (
            lx.can_be(x.low, "ADJ") and not _nounish(x.low)) for x in toks[:j]):
        return False  # "the last deploy was": a noun phrase still waiting for its head
    last = j + 1 >= len(toks)
    nxt = None if last else toks[j + 1]
    if t.low in _POSTPOSED and (nxt is None or nxt.kind == "punct"):
        return False
    if nxt is not None and (nxt.low in lx.COPULAS or nxt.low in lx.AUXILIARIES
                            or nxt.low in lx.NEGATORS):
        return False  # "the spare keys are kept": the noun before a copula is its subject
    if nxt is not None and nxt.kind == "word" and _content(nxt) and lx.can_be(
        nxt.low, "VERB"
    ) and not _nounish(nxt.low):
        return False  # two verbs in a row: this one is the subject's head ("plate sits")
    # a base form that can be a noun after a noun is a compound ("name brand"), unless the
    # noun before it is plural ("the logs take")
    if _nounish(t.low) and not _inflected(t.low) and _nounish(prev.low) and _content(
        prev
    ) and not (prev.kind == "word" and prev.low.endswith("s")) and not (
        in_pp and nxt is not None and (nxt.kind == "number" or nxt.low in lx.DETERMINERS)
    ):  # (after a place, "beans at CornerMart cost 12 dollars": the verb)
        return False
    if lx.can_be(t.low, "ADJ") and not _inflected(t.low) and (
        last or (nxt is not None and (nxt.kind == "punct" or nxt.low in lx.PREPOSITIONS))
    ):
        return False  # "filesystem 96% full", "the room is left open"
    if in_pp and (last or nxt is None or not (
        nxt.low in lx.DETERMINERS or nxt.kind in ("number", "code") or nxt.low in _PARTICLES
    )):
        return False
    if last or nxt is None:
        return True
    if nxt.kind in ("number", "sym", "code") or not _content(nxt):
        return True
    return not _nounish(nxt.low) or _inflected(t.low)


def _verb_first(toks: Sequence[Token]) -> bool:
    """Does the clause start with its verb (an imperative, or a verb sharing the previous
    clause's subject)?"""
    t = toks[0]
    if t.kind != "word" or not _content(t) or not lx.can_be(t.low, "VERB"):
        return False
    if len(toks) == 1:
        return (not _nounish(t.low) and not lx.can_be(t.low, "ADJ")) or _inflected(t.low)
    if any(x.low in lx.COPULAS for x in toks[1:]) or any(
        x.low in lx.AUXILIARIES and (toks[j].kind == "code" or _nounish(toks[j].low))
        for j, x in enumerate(toks[1:-1], start=0) if j
    ):
        return False  # "Host web-03 disk is ...", "Order ORTAND-88 has shipped"
    nxt = toks[1]
    if not _nounish(t.low) and not lx.can_be(t.low, "ADJ") and not _inflected(t.low):
        return True  # "apply patch A": a base-form verb that cannot be a noun
    if not _inflected(t.low) and nxt.kind == "word" and nxt.low.endswith("s") and _nounish(
        nxt.low
    ) and not lx.can_be(t.low, "ADJ"):
        return True  # "keep reads on the primary": a singular noun takes no base-form verb
    if _is_verb(toks, 1, False):
        return False  # "logs take 70 percent"
    if nxt.low in lx.DETERMINERS or nxt.low in lx.PRONOUNS or nxt.kind == "code" or (
        nxt.low in _PARTICLES) or (nxt.text[:1].isupper() and len(nxt.text) == 1):
        return True  # "wash the kit", "patch A", "turn it off": an adjective is not followed
        # by a determiner
    if lx.can_be(t.low, "ADJ") and not t.low.endswith("ing"):
        return False  # "muddy kit waiting"
    if nxt.low in lx.PREPOSITIONS and nxt.low != "of" and not _inflected(t.low) and not (
        nxt.low == "to" and len(toks) > 2 and lx.can_be(toks[2].low, "VERB")
        and not _nounish(toks[2].low)
    ):
        return True  # "go to the kitchen", "deal with the door" (not "plate to clean")
    return not _nounish(t.low) or _inflected(t.low)


def _find_verb(toks: Sequence[Token], verb_first: bool) -> int | None:
    """The index of the clause's verb (or its first auxiliary or copula), or None."""
    if verb_first and _verb_first(toks):
        return 0
    in_pp = False
    for j, t in enumerate(toks):
        if t.kind != "word":
            continue
        low = t.low
        if low in lx.COPULAS or low in lx.AUXILIARIES:
            return j
        if not j:
            continue
        if low in lx.LINKING and toks[j - 1].low not in lx.DETERMINERS:
            return j
        if low in ("n't", "not", "never"):
            return j
        if low in lx.SUBORDINATORS:
            return None
        if low in lx.PREPOSITIONS:
            in_pp = True
            continue
        if _is_verb(toks, j, in_pp):
            return j
    return None


_WHEN = frozenset({"today", "yesterday", "tomorrow", "tonight", "ago"})
_RELATIVE_TIME = frozenset({"this", "last", "next", "every"})
_AFTER_HEAD = frozenset({"first", "then", "later", "again", "afterwards", "afterward"})
"""Words of sequence after a noun say when ("deal with the water first"); before one they
modify it ("the first door")."""


def _time_from(toks: Sequence[Token], i: int) -> bool:
    """Whether a time expression starts at toks[i] ("this week", "last month", "today",
    "first" after a noun)."""
    if toks[i].low in _WHEN or toks[i].low in _AFTER_HEAD:
        return True
    if toks[i].low not in _RELATIVE_TIME or i + 1 >= len(toks):
        return False
    nxt = toks[i + 1].low
    found = lx.unit(nxt)
    return (found is not None and found[0] == "time") or nxt in lx.WEEKDAYS or nxt in lx.MONTHS


class _Subject:
    __slots__ = ("end", "head", "negated", "quals", "start")

    def __init__(self, head: str, quals: tuple[str, ...], negated: bool, start: int,
                 end: int) -> None:
        self.head, self.quals, self.negated = head, quals, negated
        self.start, self.end = start, end


def _noun_phrase(toks: Sequence[Token]) -> tuple[_Subject | None, list[Fact]]:
    """The head, modifiers and negation of a noun phrase, and what its modifiers and its
    prepositional phrase say (attributive states, location)."""
    negated = False
    core: list[Token] = []
    rest: Sequence[Token] = ()
    if toks and toks[0].low in lx.PREPOSITIONS:
        # a leading place or time ("At PaperCo the paper"): the noun phrase after it
        dets = [i for i, t in enumerate(toks) if i and t.low in lx.DETERMINERS]
        if not dets:
            return None, []
        toks = toks[dets[0]:]
    for i, t in enumerate(toks):
        if t.text in ("A", "I") and i == len(toks) - 1:
            core.append(t)  # a name: "patch A"
            continue
        if t.low in ("no", "none", "neither", "not") and not core:
            negated = True
            continue
        if t.low in lx.DETERMINERS and not core:
            continue
        if t.low in lx.PREPOSITIONS or t.low in _RELATIVE or t.low in lx.CONJUNCTIONS:
            rest = toks[i:]
            break
        if core and _time_from(toks, i):
            break  # "the on-call engineer this week": the week is when, not what
        if t.kind in ("word", "code") and t.low not in lx.ADVERBS:
            core.append(t)
    if not core:
        return None, []
    if len(core) == 1 and core[0].low in lx.PRONOUNS:
        return None, []
    words = [t.low for t in core]
    head_i = len(core) - 1
    while head_i > 0 and words[head_i] in lx.GENERIC_NOUNS:
        head_i -= 1
    head = _noun_lemma(words[head_i]) if core[head_i].kind == "word" else words[head_i]
    if head_i > 0 and lx.is_compound(f"{words[head_i - 1]} {head}"):
        head = f"{words[head_i - 1]} {head}"
        head_i -= 1
    quals = tuple(_noun_lemma(w) for w in words[:head_i] if w not in _NOT_STATES)
    subject = _Subject(head, quals, negated, core[0].start, core[-1].end)
    extra: list[Fact] = []
    for t in core[:head_i]:
        if t.kind == "word" and t.low not in _NOT_STATES and lx.can_be(t.low, "ADJ") and not (
            lx.can_be(t.low, "NOUN") and not t.low.endswith(("ed", "y", "ful", "less"))
        ):
            extra.append(Fact(head, STATE, (t.low,), qualifiers=(), start=t.start, end=t.end,
                              weak=True))
    if rest and rest[0].low in lx.LOCATIVE:
        place, _ = _noun_phrase(rest[1:])
        if place is not None and place.head in _ASPECTS and place.quals:
            # "a tree in the seedling stage": its stage is seedling
            extra.append(Fact(head, ASPECT + place.head, place.quals, qualifiers=quals,
                              start=rest[0].start, end=place.end))
        elif place is not None:
            extra.append(Fact(head, WHERE, (place.head, *place.quals), qualifiers=quals,
                              start=rest[0].start, end=place.end))
    elif rest and rest[0].low == "with" and len(rest) > 1:
        part, _ = _noun_phrase(rest[1:])
        if part is not None and part.quals:
            # "a plane with a cloth surface": its surface is cloth
            extra.append(Fact(head, ASPECT + part.head, part.quals, qualifiers=quals,
                              start=rest[0].start, end=part.end))
    elif len(rest) > 1 and rest[0].low in ("to", "of", "for") and (
        rest[1].low in lx.DETERMINERS or (rest[0].low == "of" and _nounish(rest[1].low)
                                          and rest[1].low.endswith("s"))
    ):
        # "the door to the hallway", "the bottle of water": which one
        which, _ = _noun_phrase(rest[1:])
        if which is not None:
            subject.quals = (*quals, which.head)
            for i, f in enumerate(extra):
                if f.subject == head and f.qualifiers == quals:
                    extra[i] = Fact(f.subject, f.attribute, f.words, f.number, f.dimension,
                                    f.op, f.negated, subject.quals, f.start, f.end, f.weak)
    return subject, extra


def _unit_after(toks: Sequence[Token], k: int) -> tuple[str, float, int]:
    """(dimension, factor, tokens used) of the unit after a number at toks[k-1]."""
    if k < len(toks):
        t = toks[k]
        if t.low == "°" and k + 1 < len(toks):
            found = lx.unit("°" + toks[k + 1].low)
            if found:
                return found[0], found[1], 2
        if t.low in ("degree", "degrees") and k + 1 < len(toks):
            found = lx.unit(toks[k + 1].low)  # "6 degrees celsius"
            if found and found[0].startswith("temperature"):
                return found[0], found[1], 2
        if t.low in _CLOCK:
            return "clock", 1.0, 1  # "2pm", "9 am": a time of day
        if t.low in _ORDINAL:
            return "number", 1.0, 1  # "15th"
        found = lx.unit(t.low) if t.kind in ("word", "sym") else None
        if found:
            return found[0], found[1], 1
        if t.kind == "word" and _content(t) and lx.can_be(t.low, "NOUN") and not lx.can_be(
            t.low, "ADJ"
        ) and not t.text[:1].isupper():  # "42 Birch Street" is a name, not 42 birches
            return f"count:{_noun_lemma(t.low)}", 1.0, 1
    return "number", 1.0, 0


def _bare_amount(toks: Sequence[Token]) -> tuple[str, float, str] | None:
    """A plural unit with no number before a measure word ("hours old", "days late",
    "minutes ago"): (measure, one unit in base units, dimension), an at-least bound."""
    words = [t.low for t in toks if t.low not in lx.ADVERBS]
    if len(words) < 2 or not words[0].endswith("s"):
        return None
    found = lx.unit(words[0])
    if found is None or words[1] not in ("old", "ago", "late", "long", "away", "left"):
        return None
    return ("ago" if words[1] in ("old", "ago") else words[1]), found[1], found[0]


def _comparator(toks: Sequence[Token], k: int) -> str:
    """The threshold direction words just before toks[k] state ("over", "more than", "at
    least", "up to", "no more than"), or "==" for a plain value."""
    words = [t.low for t in toks[max(0, k - 3):k]]
    op = "=="
    for w in words:
        if w in lx.COMPARATIVES:
            op = lx.COMPARATIVES[w]
    if words[-2:] == ["at", "least"]:
        op = ">="
    if words[-2:] == ["at", "most"] or words[-2:] == ["up", "to"]:
        op = "<="
    if words[-3:-1] in (["no", "more"], ["not", "more"]):
        op = "<="
    if words[-3:-1] in (["no", "less"], ["not", "less"]):
        op = ">="
    return op


def _date(toks: Sequence[Token], k: int, n: int) -> tuple[int, int, int] | None:
    """(month, tokens used after the number, index of the date's first token) when the
    number at `k` is a day of a month named before it ("August 15th") or after it ("15th of
    August"), or None."""
    day = toks[k].value
    if day is None or not 1 <= day <= 31 or day != int(day):
        return None
    if k > 0 and toks[k - 1].low in lx.MONTHS:
        return lx.MONTHS[toks[k - 1].low], n, k - 1
    j = k + 1 + n
    if j + 1 < len(toks) and toks[j].low == "of" and toks[j + 1].low in lx.MONTHS:
        return lx.MONTHS[toks[j + 1].low], n + 2, k
    if j < len(toks) and toks[j].low in lx.MONTHS:
        return lx.MONTHS[toks[j].low], n + 1, k
    return None


def _reaches(toks: Sequence[Token], k: int) -> bool:
    """Whether the verb before `toks` says its subject now has the amount at `k` ("moved to
    3pm", "rose to 95%", "was pushed back to 40"), not an amount of the verb ("rose by 5%")."""
    j = k - 1
    while j >= 0 and toks[j].kind == "sym":  # "rose to $40"
        j -= 1
    if j < 0 or toks[j].low != "to":
        return False
    j -= 1  # back to the verb: only particles and adverbs between ("pushed back to")
    while j >= 0 and (toks[j].low in _PARTICLES or toks[j].low in lx.ADVERBS):
        j -= 1
    return j < 0


def _quantities(toks: Sequence[Token], subject: _Subject | None, verb: str | None,
                negated: bool, fragment: bool = False) -> tuple[list[Fact], set[int]]:
    """Every number in `toks` as a quantity: of the clause's subject, or in a fragment of
    the noun next to it ("a 40 dollar limit", "primary CPU 88%", "name brand at 32 dollars");
    and the indices of the tokens used."""
    out: list[Fact] = []
    used: set[int] = set()
    for k, t in enumerate(toks):
        if t.kind != "number" or t.value is None:
            continue
        value = t.value
        dim, factor, n = _unit_after(toks, k + 1)
        if dim == "number" and k > 0 and toks[k - 1].low in ("$", "€", "£", "¥"):
            found = lx.unit(toks[k - 1].low)
            if found:
                dim, factor = found
        if dim == "clock" and toks[k + 1].low.startswith("p") and value < 12:
            value += 12  # "2pm" is 14 h
        first = k
        date = _date(toks, k, n) if dim == "number" else None
        if date is not None:  # "August 15th", "15 August": a day of the year
            dim, value, n, first = "date", date[0] * 100 + value, date[1], date[2]
        measure = AMOUNT if verb is None or _reaches(toks, first) else verb
        after = k + 1 + n
        noun_after: _Subject | None = None
        if after < len(toks) and toks[after].kind == "word" and _content(toks[after]):
            word = toks[after].low
            if word in _POSTPOSED or word in _PARTICLES or (
                lx.can_be(word, "ADJ", "ADV") and not _nounish(word)) or (
                word in ("old", "late", "full", "used")
            ):
                measure = "ago" if word == "ago" else lx.lemma(word, "ADJ")
                used.add(after)
            elif _nounish(word) and not dim.startswith("count"):
                noun_after = _Subject(_noun_lemma(word), (), False, toks[after].start,
                                      toks[after].end)
                if not fragment:
                    measure = noun_after.head  # "shows 12 percent errors"
        owner = subject
        if k >= 2 and toks[k - 1].low == "of" and toks[k - 2].kind == "word" and _nounish(
            toks[k - 2].low
        ) and toks[k - 2].low not in lx.DETERMINERS:
            # "measures a temperature of 6 degrees": the amount is the temperature's
            noun = _noun_lemma(toks[k - 2].low)
            owner = _Subject(noun, (subject.head,) if subject else (), False,
                             toks[k - 2].start, toks[k - 2].end)
            measure = AMOUNT
        elif not fragment and first >= 2 and (toks[first - 1].low in ("with", "at") or (
            toks[first - 1].low == "to" and not dim.startswith("count:"))) and (
            toks[first - 2].kind == "code" or _nounish(toks[first - 2].low)
        ) and subject is not None and toks[first - 2].low != subject.head and (
            toks[first - 2].low not in _PARTICLES):  # "pushed back to": back is no thing
            # "the dashboard shows checkout-api with 6 replicas": checkout-api's replicas;
            # "agreed to push the deadline to April 1": the deadline's new date
            noun = toks[first - 2].low if toks[first - 2].kind == "code" else _noun_lemma(
                toks[first - 2].low)
            owner = _Subject(noun, (), False, toks[first - 2].start, toks[first - 2].end)
            measure = AMOUNT
        elif fragment:
            owner = noun_after if noun_after is not None and (
                k == 0 or toks[k - 1].low in lx.DETERMINERS or toks[k - 1].low in lx.PREPOSITIONS
                or toks[k - 1].kind == "sym"
            ) else None
            if owner is None:
                j = k - 1
                while j >= 0 and (toks[j].kind == "sym" or toks[j].low in lx.COMPARATIVES
                                  or toks[j].low in ("than", "least", "most")
                                  or toks[j].low in lx.ADVERBS):
                    j -= 1
                if j >= 0 and toks[j].low in lx.PREPOSITIONS:
                    j -= 1  # "name brand at 32 dollars", "basket of 5 items"
                stop = j
                while stop >= 0 and toks[stop].kind in ("word", "code") and _content(toks[stop]):
                    stop -= 1
                if j > stop:
                    owner, _ = _noun_phrase(toks[stop + 1:j + 1])
            owner = owner or noun_after or subject
        op = _comparator(toks, k)
        used.update(range(k, k + 1 + n))
        start = t.start if owner is None else min(owner.start, t.start)
        out.append(Fact(
            owner.head if owner else "situation", measure, (), round(value * factor, 9),
            dim, op, negated, owner.quals if owner else (),
            start, toks[k + n].end if n else t.end,
        ))
    return out, used


def _codes(toks: Sequence[Token], subject: _Subject | None, used: set[int]) -> list[Fact]:
    out = []
    for k, t in enumerate(toks):
        if t.kind != "code" or k in used:
            continue
        prev = toks[k - 1] if k else None
        if prev is not None and prev.kind == "word" and _content(prev):
            owner = _noun_lemma(prev.low)
        elif subject is not None and subject.head != t.low:
            owner = subject.head
        else:
            owner = "".join("#" if c.isdigit() else c for c in t.text.upper())
        out.append(Fact(owner, CODE, (t.text.upper(),), start=t.start, end=t.end))
    return out


def _state_words(toks: Sequence[Token], k: int) -> tuple[list[str], bool, int]:
    """(state words, negated, end index) of a predicate starting at toks[k]: adjectives,
    participles and particles up to a preposition, conjunction or the clause's end."""
    words: list[str] = []
    negated = False
    j = k
    while j < len(toks):
        t = toks[j]
        low = t.low
        if low in lx.NEGATORS:
            negated = True
        elif low in lx.DETERMINERS and words:
            break
        elif (low in lx.ADVERBS and low not in lx.LOCATIVE) or low in lx.DETERMINERS:
            pass  # "around" is a place before a noun ("located around the bathroom")
        elif low in _PARTICLES and (j + 1 == len(toks) or toks[j + 1].kind == "punct"):
            words.append(low)
        elif low in lx.PREPOSITIONS or low in lx.CONJUNCTIONS or t.kind != "word":
            break
        elif _content(t):
            if words and lx.can_be(low, "NOUN") and not lx.can_be(low, "ADJ", "VERB"):
                break
            words.append(low)
            if len(words) >= 3:
                j += 1
                break
        j += 1
    return words, negated, j
