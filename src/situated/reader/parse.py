"""The reader: a situation's or a lesson's text -> a `Reading` of typed facts with spans.

It knows English grammar, not a domain: a clause's subject (the noun phrase before its verb),
its predicate (a copula's state, adjective or participle; a verb with its particle, object or
quantity; a place after a locative preposition), negation ("no backup was running", "will
not start"), quantities with units and the direction a threshold states ("over 90% full"),
codes and versions ("E24", "2.3.1"), labelled values ("washer status: running"), the
conditional clauses of a lesson (if / when / while / unless / only when / before / after /
until) with their polarity, and the order of the actions it names. Words are looked up in
`lexicon` (LemmInflect for lemmas and parts of speech); the phrases a clause is made of (its
verb, noun phrases, amounts, codes) are found by `phrases`. Nothing is tuned to one
environment.

`read` is cached per text. The same text always gives the same reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from situated.reader import lexicon as lx
from situated.reader.order import event, marks_a_step, order
from situated.reader.phrases import (
    _NOT_STATES,
    _PARTICLES,
    _POSTPOSED,
    _bare_amount,
    _codes,
    _content,
    _find_verb,
    _noun_lemma,
    _noun_phrase,
    _nounish,
    _participle,
    _quantities,
    _state_words,
    _Subject,
)
from situated.reader.tokens import Clause, Token, clauses, tokenize
from situated.reader.types import (
    GOAL,
    HAS,
    HOLDER,
    IS,
    NAME,
    STATE,
    WHERE,
    Fact,
    Reading,
)

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
_NAMING = frozenset({"called", "named", "known"})
"""Participles that give a thing's name ("this room is called the kitchen")."""
_PURPOSES = frozenset("task goal objective aim mission job purpose assignment".split())
"""Nouns whose "is to <verb>" says what the situation is for."""
REPORTING = frozenset(
    "say tell report claim mention note complain explain state write add confirm insist "
    "think believe".split()
)
"""Verbs whose object is a clause of its own ("the customer says they were charged twice")."""


def _opens_with_it(toks: Sequence[Token]) -> bool:
    """A sentence about the thing the previous one named: "It is ...", "It's ...", "It has"."""
    return len(toks) > 1 and toks[0].low == "it" and (
        toks[1].low in lx.COPULAS or toks[1].low in lx.AUXILIARIES or toks[1].low in lx.LINKING)


def _speaker_state(toks: Sequence[Token], v: int) -> _Subject | None:
    """The speaker as a clause's subject when the clause states what the speaker is ("I'm
    vegetarian", "we are out of milk", "I am no longer in Denver"): a first-person pronoun
    and a copula. What the speaker does or is doing ("I moved", "I'm reading Dune") stays an
    action."""
    if v != 1 or toks[0].low not in lx.SPEAKERS or toks[1].low not in lx.COPULAS:
        return None
    k = 2
    while k < len(toks) and (toks[k].low in lx.NEGATORS or toks[k].low in lx.ADVERBS):
        k += 1
    if k >= len(toks) or (toks[k].low.endswith("ing") and lx.can_be(toks[k].low, "VERB")):
        return None
    return _Subject(toks[0].low, (), False, toks[0].start, toks[0].end)


_GOT = frozenset({"got", "get", "gets", "gotten"})


def _speaker_place(actor: str, verb: str, rest: Sequence[Token]) -> list[Fact]:
    """Where the speaker is after a verb that moves or keeps its subject ("I moved to Denver
    last month", "we live in Portland"): WordNet's class of the verb's frequent senses decides,
    so "I talked to Sam" places nobody."""
    if len(rest) < 2 or not (
        (rest[0].low in ("to", "into") and {lx.MOTION, lx.CHANGE} & set(lx.verb_kinds(verb)))
        or (rest[0].low in ("in", "at") and {lx.MOTION, lx.CHANGE, lx.STATIVE} & set(
            lx.verb_kinds(verb, 1)))):
        return []
    place, _ = _noun_phrase(rest[1:])
    if place is None or place.head in lx.PRONOUNS:
        return []
    return [Fact(actor, WHERE, (place.head, *place.quals), start=rest[0].start, end=place.end)]


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
    before = [t.low for t in toks[:v] if t.low not in lx.ADVERBS]
    actor = before[0] if len(before) == 1 and before[0] in lx.SPEAKERS else None  # "I moved"
    if subject is not None and subject.head in _SUBJECTLESS and speaker is None:
        imperative, subject = True, None
    negated = bool(subject and subject.negated)
    k = v
    linking = False
    verb: str | None = None
    while k < len(toks) and (
        toks[k].low in lx.COPULAS or toks[k].low in lx.AUXILIARIES or toks[k].low in lx.NEGATORS
        or toks[k].low in lx.ADVERBS or (toks[k].low in lx.LINKING and v > 0)
        or (toks[k].low == "longer" and toks[k - 1].low in ("no", "not"))  # "no longer"
    ):
        low = toks[k].low
        if low in _GOT and not linking and k + 1 < len(toks) and (
                toks[k + 1].low in lx.DETERMINERS):
            verb = "get"  # "I got a new phone number": got one, not got cold
            k += 1
            break
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
            if actor is not None:
                facts.extend(_speaker_place(actor, verb, toks[k:]))
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
                if rest[0].low == "the" and toks[0].low not in lx.DETERMINERS and (
                        toks[0].low not in lx.PRONOUNS):  # one holder: the lead is Priya
                    facts.append(Fact(what.head, HOLDER, (head, *quals), negated=negated,
                                      qualifiers=what.quals, start=subject.start, end=what.end))
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
    if phrase is not None and (phrase.head in _NOT_STATES or phrase.head in lx.TEMPORAL or all(
            lx.can_be(t.low, "ADV", "INTJ") and not lx.can_be(t.low, "NOUN") for t in toks)):
        phrase = None  # "First," "Then," "Sadly," open a clause; they are not a thing
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
        steps += marks_a_step(clause)
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
            events.append(event(action, clause.tokens))
        if subject is not None and not clause.aside:
            carried = last = subject
        if action is not None and " " in action:
            # an action's object is named after its subject ("you see a chest")
            verb, head = action.split(" ", 1)
            if head != verb:
                last = _Subject(head, (), False, clause.tokens[0].start, clause.tokens[-1].end)
    lemmas = sorted({f for t in toks if _content(t) and t.kind == "word" for f in lx.forms(t.low)}
                    | {t.low for t in toks if t.kind == "code"})
    ordered = order(actions)
    return Reading(
        facts=tuple(facts[:MAX_FACTS]), conditions=tuple(conditions[:MAX_FACTS]),
        lemmas=tuple(lemmas), actions=tuple(ordered[:MAX_ACTIONS]), question=_question(toks),
        events=tuple(events[:MAX_ACTIONS]) if steps >= 2 else (),
    )


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


__all__ = ["read"]
