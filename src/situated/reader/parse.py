"""The reader: a situation's or a lesson's text -> a `Reading` of typed facts with spans.

It knows English grammar, not a domain: a clause's subject (the noun phrase before its verb),
its predicate (a copula's state, adjective or participle; a verb with its particle, object or
quantity; a place after a locative preposition), negation ("no backup was running", "will
not start"), quantities with units and the direction a threshold states ("over 90% full"),
codes and versions ("E24", "2.3.1"), labelled values ("washer status: running"), the
conditional clauses of a lesson (if / when / while / unless / only when / before / after /
until) with their polarity, and the order of the actions it names. Words are looked up in
`lexicon` (LemmInflect for lemmas and parts of speech); nothing is tuned to one environment.

`read` is cached per text. The same text always gives the same reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from situated.reader import lexicon as lx
from situated.reader.tokens import Clause, Token, clauses, tokenize
from situated.reader.types import (
    AMOUNT,
    ASPECT,
    CODE,
    GOAL,
    HAS,
    IS,
    NAME,
    ORDER,
    STATE,
    WHERE,
    Fact,
    Reading,
)

_NOT_STATES = frozenset(
    "last next first second third other same own such main whole new old entire".split()
)
"""Adjectives that place or pick a thing rather than describe its state."""
_PARTICLES = frozenset("on off out up down over away back in".split())
_RELATIVE = frozenset("that which who whom whose where".split())
_NOUNISH = ("NOUN", "PROPN")
_POSITIVE_MARKERS = frozenset("if when whenever while provided only".split())
_NEGATIVE_MARKERS = frozenset({"unless"})
"""Clauses that state where a lesson applies. Temporal clauses (before, after, until, once)
order a procedure's steps ("water until it drains"): they are not conditions."""
_SUBJECTLESS = frozenset({"you", "we", "i"})
_PLENTY = frozenset("plenty lots lot enough some".split())
MAX_FACTS = 96
MAX_ACTIONS = 48
"""A text's reading keeps at most this many facts and actions, in order (comparing two
readings is quadratic in them; a situation says far fewer)."""
_HAVE = frozenset({"has", "have", "had"})
_CLOCK = frozenset({"am", "pm", "a.m", "p.m", "o'clock"})
_ORDINAL = frozenset({"st", "nd", "rd", "th"})
_NAMING = frozenset({"called", "named", "known"})
_PURPOSES = frozenset("task goal objective aim mission job purpose assignment".split())
"""Nouns whose "is to <verb>" says what the situation is for."""
"""Participles that give a thing's name ("this room is called the kitchen")."""
_ASPECTS = frozenset("stage phase state mode condition level setting position".split())
"""Nouns whose modifier is the value ("in the seedling stage": stage = seedling)."""
REPORTING = frozenset(
    "say tell report claim mention note complain explain state write add confirm insist "
    "think believe".split()
)
"""Verbs whose object is a clause of its own ("the customer says they were charged twice")."""
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


def _is_verb(toks: Sequence[Token], j: int, in_pp: bool) -> bool:
    """Is toks[j] the verb of a clause whose subject comes before it?"""
    t = toks[j]
    if t.kind != "word" or not _content(t) or not lx.can_be(t.low, "VERB"):
        return False
    prev = toks[j - 1]
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
        measure = verb or AMOUNT
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
        elif not fragment and k >= 2 and toks[k - 1].low in ("with", "at") and (
            toks[k - 2].kind == "code" or _nounish(toks[k - 2].low)
        ) and subject is not None and toks[k - 2].low != subject.head:
            # "the dashboard shows checkout-api with 6 replicas": checkout-api's replicas
            noun = toks[k - 2].low if toks[k - 2].kind == "code" else _noun_lemma(
                toks[k - 2].low)
            owner = _Subject(noun, (), False, toks[k - 2].start, toks[k - 2].end)
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


_SPEAKERS = frozenset({"i", "we"})


def _opens_with_it(toks: Sequence[Token]) -> bool:
    """A sentence about the thing the previous one named: "It is ...", "It's ...", "It has"."""
    return len(toks) > 1 and toks[0].low == "it" and (
        toks[1].low in lx.COPULAS or toks[1].low in lx.AUXILIARIES or toks[1].low in lx.LINKING)


def _speaker_state(toks: Sequence[Token], v: int) -> _Subject | None:
    """The speaker as a clause's subject when the clause states what the speaker is ("I'm
    vegetarian", "we are out of milk", "I am no longer in Denver"): a first-person pronoun
    and a copula. What the speaker does or is doing ("I moved", "I'm reading Dune") stays an
    action."""
    if v != 1 or toks[0].low not in _SPEAKERS or toks[1].low not in lx.COPULAS:
        return None
    k = 2
    while k < len(toks) and (toks[k].low in lx.NEGATORS or toks[k].low in lx.ADVERBS):
        k += 1
    if k >= len(toks) or (toks[k].low.endswith("ing") and lx.can_be(toks[k].low, "VERB")):
        return None
    return _Subject(toks[0].low, (), False, toks[0].start, toks[0].end)


def _placed_in_order(rest: Sequence[Token]) -> list[Fact]:
    """Where the things an order goes to or comes from are, as its noun phrases say ("move
    it to the red box in the kitchen": the red box is in the kitchen; "take the mug from the
    shelf in the hall"). The object's own place is where it is to go, not where it is."""
    out: list[Fact] = []
    for i, t in enumerate(rest):
        if i and t.low in lx.PREPOSITIONS:  # not the object's own ("put the mug in the
            _, extra = _noun_phrase(rest[i + 1:])  # microwave" is where it is to go)
            out += [f for f in extra if f.attribute == WHERE and f not in out]
    return out


def _purpose(subject: _Subject, rest: Sequence[Token]) -> bool:
    """Whether a copula's complement says what the subject is for ("task" ... "is to boil
    water")."""
    return subject.head in _PURPOSES and len(rest) > 1 and rest[0].low == "to" and lx.can_be(
        rest[1].low, "VERB")


def _clause_facts(
    clause: Clause, carried: _Subject | None
) -> tuple[list[Fact], _Subject | None, str | None]:
    """What one clause states, its subject, and the action it orders (a verb-first clause)."""
    toks = clause.tokens
    facts: list[Fact] = []
    label_subject = None
    if clause.label and clause.label[0].low not in lx.LOCATIVE and _find_verb(
        clause.label, False
    ) is None:  # "washer status:" names a thing; "you see:" does not
        label_subject, extra = _noun_phrase(
            [t for t in clause.label if t.low not in lx.COPULAS])
        facts.extend(extra)
    # "there is / are (no) X"
    if len(toks) >= 2 and toks[0].low == "there" and toks[1].low in lx.COPULAS:
        rest = toks[2:]
        neg = bool(rest) and rest[0].low in ("no", "not", "none")
        thing, extra = _noun_phrase(rest)
        if thing is not None:
            facts.append(Fact(thing.head, HAS, (), negated=neg or thing.negated,
                              qualifiers=thing.quals, start=toks[0].start, end=thing.end))
            facts.extend(extra)
        return facts, thing or carried, None
    v = _find_verb(toks, verb_first=label_subject is None)
    if v is None:
        return _fragment(toks, label_subject, carried, facts,
                         coordinated=clause.marker in ("and", "or", "but"),
                         place_label=clause.label)
    subject, extra = _noun_phrase(toks[:v]) if v else (None, [])
    facts.extend(extra)
    # a clause that starts with its verb is an order, unless it goes on the previous one's
    # subject: coordinated ("and holds the lock") or a participle ("containing a tree")
    imperative = v == 0 and (carried is None or (
        clause.marker not in ("and", "or", "but") and not toks[0].low.endswith("ing")
        and not clause.aside))
    speaker = _speaker_state(toks, v)
    if speaker is not None:
        subject, imperative = speaker, False  # "I'm vegetarian": a state of the speaker
    elif v and all(t.low in _SUBJECTLESS for t in toks[:v]):
        imperative = True  # "you move to the kitchen": what the agent did, an action
    if subject is None or (subject.head in lx.PRONOUNS and subject.head not in _SUBJECTLESS):
        subject = label_subject or (None if imperative else carried)
    if subject is not None and subject.head in _SUBJECTLESS and speaker is None:
        imperative, subject = True, None
    negated = bool(subject and subject.negated)
    k = v
    linking = False
    verb: str | None = None
    while k < len(toks) and (
        toks[k].low in lx.COPULAS or toks[k].low in lx.AUXILIARIES or toks[k].low in lx.NEGATORS
        or toks[k].low in lx.ADVERBS or (toks[k].low in lx.LINKING and v > 0)
    ):
        low = toks[k].low
        if low in _HAVE and not linking and (k + 1 == len(toks) or not (
            (toks[k + 1].low in lx.NEGATORS and toks[k + 1].low != "no")
            or _participle(toks[k + 1]) or toks[k + 1].low in lx.LINKING
        )):
            verb = "have"  # "has no membership", "has a card": the main verb
            k += 1
            break
        if low in lx.NEGATORS:
            negated = not negated if low != "no" else True
        if low in lx.COPULAS or low in lx.LINKING:
            linking = True
        k += 1
    if verb is not None:
        pass
    elif not linking and k < len(toks) and toks[k].kind == "word" and lx.can_be(toks[k].low,
                                                                                 "VERB"):
        verb = lx.lemma(toks[k].low, "VERB")
        k += 1
    elif linking and k < len(toks) and toks[k].low.endswith("ing") and lx.can_be(
        toks[k].low, "VERB"
    ):
        verb = lx.lemma(toks[k].low, "VERB")  # progressive: "is running a long cycle"
    action = None
    if imperative or subject is None:
        if verb is not None:
            rest = toks[k:]
            if rest and rest[0].low in lx.PREPOSITIONS and rest[0].low not in _PARTICLES:
                rest = rest[1:]  # "deploy to production": where to
            obj, _ = _noun_phrase(rest)
            action = " ".join([verb, *((obj.head,) if obj else ())])
            facts.extend(_placed_in_order(rest))
        return facts, carried, action
    if verb in REPORTING and len(toks) - k > 1:
        said = toks[k + 1:] if toks[k].low == "that" else toks[k:]
        inner, _, _ = _clause_facts(Clause(tuple(said), "", clause.sentence), subject)
        facts.extend(inner)  # "the label says the beans cost 15 dollars": what it says
        return facts, subject, None
    # "Your task is to focus on the 4 life stages of the dove": a number in a purpose belongs
    # to the goal (read below), it is not an amount of the task
    purpose = linking and _purpose(subject, toks[k:])
    quantities, used = ([], set()) if purpose else _quantities(
        toks[k:], subject, verb if not linking else None, negated)
    if v and not quantities and not purpose and _noun_phrase(toks[:v])[0] is None:
        quantities, used = _quantities(toks[:v], subject, None, negated)  # "of which 20% is"
    facts.extend(quantities)
    facts.extend(_codes(toks, subject, used | set(range(v))))
    if quantities:
        return facts, subject, None
    rest = toks[k:]
    head, quals = subject.head, subject.quals
    if linking:
        if purpose:
            # "Your task is to boil water": what the situation is for
            # the goal's words: its verb, then what it names up to the clause's end ("to use
            # chemistry to create the substance 'salt water'": the target is at the end)
            goal = (lx.lemma(rest[1].low, "VERB"), *(
                lx.lemma(t.low, "NOUN") for t in rest[2:]
                if t.kind in ("word", "code") and _content(t) and t.low != "to"))[:10]
            facts.append(Fact(head, GOAL, goal, negated=negated, qualifiers=quals,
                              start=subject.start, end=rest[-1].end))
            return facts, subject, " ".join(goal[:2])
        if rest and rest[0].low in _NAMING and len(rest) > 1:
            name, _ = _noun_phrase(rest[1:])  # "this room is called the kitchen"
            if name is not None:
                facts.append(Fact(head, NAME, (name.head, *name.quals), negated=negated,
                                  qualifiers=quals, start=subject.start, end=name.end))
                return facts, subject, None
        if rest and rest[0].low in lx.LOCATIVE and len(rest) > 1 and (
            rest[1].low in lx.DETERMINERS or rest[1].low in lx.PRONOUNS
        ):
            place, _ = _noun_phrase(rest[1:])
            if place is not None:
                facts.append(Fact(head, WHERE, (place.head, *place.quals), negated=negated,
                                  qualifiers=quals, start=subject.start, end=place.end))
                return facts, subject, None
        if len(rest) > 1 and rest[0].low in ("a", "an", "the") and not any(
            t.kind == "number" for t in rest
        ):
            what, _ = _noun_phrase(rest)  # "Priya is the lead": what she is
            if what is not None and _nounish(what.head.split()[-1]):
                facts.append(Fact(head, IS, (what.head, *what.quals), negated=negated,
                                  qualifiers=quals, start=subject.start, end=what.end))
                return facts, subject, None
        if rest and rest[0].low in _PARTICLES and len(rest) > 1 and rest[1].low == "of":
            rest = (rest[0], *rest[2:])  # "out of stock" -> out stock
        if rest and rest[0].low in _PARTICLES and len(rest) > 1 and rest[1].kind == "word" and (
            rest[1].low not in lx.DETERMINERS
        ):
            words = [rest[0].low, _noun_lemma(rest[1].low)]
            facts.append(Fact(head, STATE, tuple(words), negated=negated, qualifiers=quals,
                              start=subject.start, end=rest[1].end))
            return facts, subject, None
        age = _bare_amount(rest)
        if age is not None:  # "the deploy is hours old": at least an hour
            facts.append(Fact(head, age[0], (), age[1], age[2], ">=", negated, quals,
                              subject.start, rest[-1].end))
            return facts, subject, None
        words, neg2, end = _state_words(rest, 0)
        if words:
            facts.append(Fact(head, STATE, tuple(words), negated=negated != neg2,
                              qualifiers=quals, start=subject.start,
                              end=rest[end - 1].end if end else subject.end))
            if end < len(rest) - 1 and rest[end].low in lx.LOCATIVE:
                place, _ = _noun_phrase(rest[end + 1:])  # "is standing on the counter"
                if place is not None:
                    facts.append(Fact(head, WHERE, (place.head, *place.quals),
                                      negated=negated, qualifiers=quals, start=subject.start,
                                      end=place.end))
            if _participle(rest[0]) and rest[0].low.endswith("ed") and len(words) > 1:
                # "the metal pot is picked up": something was done to it, an event
                return facts, subject, f"{lx.lemma(rest[0].low, 'VERB')} {head}"
        elif rest and rest[0].low in ("no", "none"):
            facts.append(Fact(head, HAS, (), negated=True, qualifiers=quals,
                              start=subject.start, end=rest[0].end))
        return facts, subject, None
    if verb is None:
        return facts, subject, None
    end_tok = toks[k - 1]
    if rest and rest[0].low in _PARTICLES and (len(rest) == 1 or rest[1].kind == "punct"):
        facts.append(Fact(head, STATE, (rest[0].low,), negated=negated, qualifiers=quals,
                          start=subject.start, end=rest[0].end))
        return facts, subject, None
    if rest and (rest[0].low in lx.LOCATIVE or (rest[0].low == "next" and len(rest) > 1
                                                and rest[1].low == "to")):
        place, _ = _noun_phrase(rest[2:] if rest[0].low == "next" else rest[1:])
        if place is not None:
            facts.append(Fact(head, STATE, (end_tok.low,), negated=negated, qualifiers=quals,
                              start=subject.start, end=end_tok.end))
            facts.append(Fact(head, WHERE, (place.head, *place.quals), negated=negated,
                              qualifiers=quals, start=subject.start, end=place.end))
            return facts, subject, None
    if verb in ("have", "own", "hold", "contain", "carry") and rest:
        neg = negated or rest[0].low in ("no", "none")
        thing, extra = _noun_phrase(rest)
        if thing is not None:
            facts.append(Fact(thing.head, HAS, (head,), negated=neg or thing.negated,
                              qualifiers=thing.quals, start=subject.start, end=thing.end))
            if verb == "contain":  # "a pot containing a tree": the tree is in the pot
                facts.append(Fact(thing.head, WHERE, (head, *quals), negated=neg,
                                  qualifiers=thing.quals, start=subject.start, end=thing.end))
            elif verb != "have":
                facts.append(Fact(thing.head, f"{verb} by", (head, *quals), negated=neg,
                                  qualifiers=thing.quals, start=subject.start, end=thing.end))
            facts.extend(extra)
            return facts, subject, None
    if verb in ("call", "name") and toks[k - 1].low in _NAMING and rest:
        name, _ = _noun_phrase(rest)  # "a substance called soap"
        if name is not None:
            facts.append(Fact(head, NAME, (name.head, *name.quals), negated=negated,
                              qualifiers=quals, start=subject.start, end=name.end))
            return facts, subject, None
    obj = None
    if rest and (rest[0].low in lx.DETERMINERS or (
        rest[0].kind == "word" and _content(rest[0]) and lx.can_be(rest[0].low, "NOUN")
    )):
        obj, extra = _noun_phrase(rest)
        facts.extend(extra)
    if obj is not None:
        facts.append(Fact(head, verb, (obj.head, *obj.quals), negated=negated, qualifiers=quals,
                          start=subject.start, end=obj.end))
    else:
        facts.append(Fact(head, STATE, (end_tok.low,), negated=negated, qualifiers=quals,
                          start=subject.start, end=end_tok.end))
    return facts, subject, None


def _fragment(
    toks: Sequence[Token], label: _Subject | None, carried: _Subject | None,
    facts: list[Fact], coordinated: bool = False, place_label: Sequence[Token] = (),
) -> tuple[list[Fact], _Subject | None, str | None]:
    """A clause with no verb: "Microwave: broken", "primary CPU 88%", "no room left"."""
    if not toks:
        return facts, label or carried, None
    quantities, used = _quantities(toks, label, None, False, fragment=True)
    facts.extend(quantities)
    facts.extend(_codes(toks, label, used))
    if quantities:
        at = next((i for i, t in enumerate(toks) if t.kind == "number"), len(toks))
        phrase, _ = _noun_phrase(toks[:at])  # "a flower pot 3 (containing ...)"
        return facts, label or phrase or carried, None
    first = toks[0].low
    owner = label or carried
    if first == "not" and len(toks) > 2 and toks[1].low in lx.LOCATIVE and owner is not None:
        place, _ = _noun_phrase(toks[2:])  # "..., not in the fridge"
        if place is not None:
            facts.append(Fact(owner.head, WHERE, (place.head, *place.quals), negated=True,
                              qualifiers=owner.quals, start=toks[0].start, end=place.end))
            return facts, owner, None
    if first in ("no", "none", "without") or first in _PLENTY or (
        first in lx.YES or first in lx.NO
    ):
        rest = toks[1:]
        if rest and rest[0].low == "of":
            rest = rest[1:]
        if rest and rest[-1].low in _POSTPOSED:
            rest = rest[:-1]
        thing, _ = _noun_phrase(rest)
        neg = first in ("no", "none", "without") or first in lx.NO
        if thing is not None:
            facts.append(Fact(thing.head, HAS, (), negated=neg, qualifiers=thing.quals,
                              start=toks[0].start, end=thing.end))
            return facts, label or carried, None
        if label is not None and first in (lx.YES | lx.NO | {"none"}):
            facts.append(Fact(label.head, HAS, (), negated=neg, qualifiers=label.quals,
                              start=toks[0].start, end=toks[0].end))
        return facts, label or carried, None
    if len(toks) >= 2 and toks[-1].low in _POSTPOSED and toks[-1].low != "done":
        thing, _ = _noun_phrase(toks[:-1])
        if thing is not None:
            facts.append(Fact(thing.head, HAS, (), negated=thing.negated, qualifiers=thing.quals,
                              start=toks[0].start, end=toks[-1].end))
            return facts, label or carried, None
    owner = label or (carried if coordinated else None)
    if owner is not None:
        words, neg, end = _state_words(toks, 0)
        if words and (label is not None or end == len(toks)):
            facts.append(Fact(owner.head, STATE, tuple(words), negated=neg,
                              qualifiers=owner.quals, start=toks[0].start,
                              end=toks[end - 1].end))
            return facts, owner, None
    if (len(toks) >= 2 and toks[-1].kind == "word" and toks[-1].low not in lx.PREPOSITIONS and (
        lx.can_be(toks[-1].low, "ADJ") or _participle(toks[-1])
    ) and not _nounish(toks[-1].low)) or (len(toks) >= 2 and toks[-1].low == "done"):
        thing, _ = _noun_phrase(toks[:-1])  # "load done", "kit muddy"
        if thing is not None:
            facts.append(Fact(thing.head, STATE, (toks[-1].low,), qualifiers=thing.quals,
                              start=toks[0].start, end=toks[-1].end))
            return facts, thing, None
    phrase, extra = _noun_phrase(toks)
    facts.extend(extra)
    if phrase is not None and (phrase.head in _NOT_STATES or phrase.head in lx.TEMPORAL):
        phrase = None  # "First," "Then," open a clause; they are not a thing
    if phrase is not None:  # a thing named on its own ("a battery" in a list) is there
        facts.append(Fact(phrase.head, HAS, (), qualifiers=phrase.quals, start=phrase.start,
                          end=phrase.end, weak=True))
    place = clause_place(place_label)
    if phrase is not None and place is not None:
        # "On the counter is: a bowl": the bowl is there
        facts.append(Fact(phrase.head, WHERE, (place.head, *place.quals),
                          qualifiers=phrase.quals, start=phrase.start, end=phrase.end))
    return facts, phrase or label or carried, None


def clause_place(label: Sequence[Token]) -> _Subject | None:
    """The place a label names ("On the counter is:"), or None."""
    if not label or label[0].low not in lx.LOCATIVE:
        return None
    place, _ = _noun_phrase([t for t in label[1:] if t.low not in lx.COPULAS])
    return place


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """Read `text` once: its facts, its conditional clauses' requirements, its content
    lemmas and its ordered actions (cached per text)."""
    toks = tokenize(text)
    facts: list[Fact] = []
    conditions: list[Fact] = []
    actions: list[tuple[str, str]] = []
    carried: _Subject | None = None
    last: _Subject | None = None  # the thing last named: what "it" opens the next sentence on
    events: list[str] = []
    steps = 0  # "first", "then", "after that", "finally": how often the text marks a sequence
    sentence = -1
    for clause in clauses(toks):
        steps += _marks_a_step(clause)
        if clause.sentence != sentence:
            sentence, carried = clause.sentence, None
            if last is not None and _opens_with_it(clause.tokens):
                carried = last  # "You see a chest. It is closed.": the chest is closed
        found, subject, action = _clause_facts(clause, carried)
        marker = clause.marker
        if marker in _POSITIVE_MARKERS or marker in _NEGATIVE_MARKERS:
            flip = marker in _NEGATIVE_MARKERS
            for f in found:
                if f.weak:
                    continue
                conditions.append(_negate(f) if flip else f)
        else:
            facts.extend(found)
            events.extend(f"{f.subject}={'not ' if f.negated else ''}{' '.join(f.words)}"
                          for f in found if not f.weak and f.number is None and f.words
                          and f.attribute in (STATE, WHERE))
        if action is not None:
            actions.append((action, marker))
            events.append(action)
        if subject is not None and not clause.aside:
            carried = last = subject
        if action is not None and " " in action:
            # an action's object is named after its subject ("you see a chest")
            verb, head = action.split(" ", 1)
            if head != verb:
                last = _Subject(head, (), False, clause.tokens[0].start, clause.tokens[-1].end)
    lemmas = sorted({f for t in toks if _content(t) and t.kind == "word" for f in lx.forms(t.low)}
                    | {t.low for t in toks if t.kind == "code"})
    ordered = _order(actions)
    return Reading(
        facts=tuple(facts[:MAX_FACTS]), conditions=tuple(conditions[:MAX_FACTS]),
        lemmas=tuple(lemmas), actions=tuple(ordered[:MAX_ACTIONS]), question=_question(toks),
        events=tuple(events[:MAX_ACTIONS]) if steps >= 2 else (),
    )


_STEPS = frozenset("first then next finally later afterwards afterward".split())


def _marks_a_step(clause: Clause) -> bool:
    """A clause opened by a word of sequence ("then ...", "First,", "After that,")."""
    if clause.marker in _STEPS:
        return True
    words = [t.low for t in clause.tokens[:2]]
    return bool(words) and (words[0] in _STEPS or (
        clause.marker == "after" and words == ["that"]))


_WH = frozenset("what when where who whom whose which how why".split())
_ASKING = frozenset("is are was were do does did can could will would has have should".split())
_CHOICE = frozenset(
    "should recommend suggest prefer prefers like want choose pick best favorite favourite "
    "rather".split()
)


def _question(toks: Sequence[Token]) -> str:
    """Whether the text asks something, and if so whether it asks a fact or a choice."""
    words = [t.low for t in toks if t.kind == "word"]
    if not words:
        return ""
    asks = toks[-1].low == "?" or words[0] in _WH or (
        words[0] in _ASKING and len(words) > 2 and toks[-1].low != ".")
    if not asks:
        return ""
    return "choice" if any(w in _CHOICE for w in words) else "fact"


def _negate(f: Fact) -> Fact:
    if f.number is not None and f.op != "==":
        flipped = {">": "<=", ">=": "<", "<": ">=", "<=": ">"}[f.op]
        return Fact(f.subject, f.attribute, f.words, f.number, f.dimension, flipped, f.negated,
                    f.qualifiers, f.start, f.end, f.weak)
    return Fact(f.subject, f.attribute, f.words, f.number, f.dimension, f.op, not f.negated,
                f.qualifiers, f.start, f.end, f.weak)


def _order(actions: list[tuple[str, str]]) -> list[str]:
    """Actions in the order they are to happen: "after X, Y" and "Y after X" put X first;
    "before X, Y" puts Y first."""
    out: list[str] = []
    pending_before: str | None = None
    for action, marker in actions:
        if marker in ("after", "once") and out and not pending_before:
            out.insert(len(out) - 1, action)
        elif marker == "before" and not out:
            pending_before = action
            continue
        else:
            out.append(action)
        if pending_before is not None:
            out.append(pending_before)
            pending_before = None
    if pending_before is not None:
        out.append(pending_before)
    return out


def order_facts(reading: Reading) -> tuple[Fact, ...]:
    """Order in time as facts: each action before the next one."""
    acts = reading.actions
    return tuple(Fact(acts[i], ORDER, (acts[i + 1],)) for i in range(len(acts) - 1))


__all__ = ["order_facts", "read"]
