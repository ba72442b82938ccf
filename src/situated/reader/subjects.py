"""What a preference or a fact written as text is about: (entity, attribute, value) read from
its words, the ReMem way, so that a newer value about the same subject by the same principal
replaces the older one without the writer naming a key.

- A preference: who holds it (the subject of "prefer", "like", "want", ...; "user" for I,
  we and unnamed holders), what it is about (the head noun of what is preferred, or the verb
  of "prefers to be called") and the preferred value (the words of that phrase).
  "The customer prefers answers by e-mail" -> (customer, prefers:answer, answer by e-mail).
  Only "prefer" and "favourite" choose one value (a newer one replaces the older); "like",
  "love", "enjoy" may hold several, and replace only with replacement wording ("now",
  "instead", `learning.schema`).
- A fact: the place, code, name or holder its reading states about a thing, else its first
  amount, what a thing is, or a state ("The spare keys are kept in the key box" -> (spare
  key, where, key box)).

`key_of` returns None when the text gives no such key; nothing is guessed.
"""

from __future__ import annotations

from typing import NamedTuple

from situated.reader import lexicon as lx
from situated.reader.parse import read
from situated.reader.tokens import Token, tokenize
from situated.reader.types import AMOUNT, CODE, HOLDER, IS, NAME, STATE, WHERE, Fact

PREFERENCE_VERBS = {
    "prefer": True, "favor": True, "favour": True,
    "like": False, "love": False, "enjoy": False, "want": False, "hate": False,
    "dislike": False, "avoid": False,
}
"""Verbs that state a preference, and whether they choose one value (True) or may hold
several (False)."""
_HOLDERS_UNNAMED = frozenset({"i", "we", "me", "us", "you", ""})
_SKIP = frozenset({"to", "be", "being", "get", "have", "it", "them", "that"})


class Key(NamedTuple):
    """The subject a text states a value of."""

    entity: str
    attribute: str
    value: str
    exclusive: bool
    """One value at a time: a newer value replaces the older without replacement wording."""


def key_of(text: str, kind: str) -> Key | None:
    """(entity, attribute, value) of a preference or a fact written as text, or None."""
    if kind == "preference":
        return _preference(tokenize(text))
    if kind == "fact":
        return _fact(text)
    return None


def _preference(toks: tuple[Token, ...]) -> Key | None:
    words = [t for t in toks if t.kind in ("word", "code")]
    for i, t in enumerate(words):
        verb = lx.lemma(t.low, "VERB")
        if t.low in ("favorite", "favourite") and i + 1 < len(words):
            return _favourite(toks, t)
        if verb not in PREFERENCE_VERBS or not lx.can_be(t.low, "VERB"):
            continue
        before = [w.low for w in words[:i] if w.low not in lx.DETERMINERS
                  and w.low not in lx.ADVERBS and w.low not in lx.AUXILIARIES
                  and w.low not in lx.NEGATORS]
        holder = lx.lemma(before[-1], "NOUN") if before else ""
        holder = "user" if holder in _HOLDERS_UNNAMED or holder in lx.PRONOUNS else holder
        after = [w for w in words[i + 1:] if w.low not in lx.DETERMINERS]
        while after and after[0].low in _SKIP:
            after = after[1:]
        if not after:
            return None
        phrase: list[str] = []
        for w in after:
            if w.low in lx.CONJUNCTIONS or w.low in lx.NEGATORS or w.low in (
                "over", "rather", "instead", "than"
            ):
                break
            phrase.append(w.low)
        if not phrase:
            return None
        head_i = 0
        for j, word in enumerate(phrase):
            if word in lx.PREPOSITIONS:
                break
            head_i = j
        first = phrase[0]
        if lx.can_be(first, "VERB") and not lx.can_be(first, "NOUN"):
            topic = lx.lemma(first, "VERB")  # "prefers to be called Sam": how to be called
        else:
            topic = lx.lemma(phrase[head_i], "NOUN")
        negated = any(w.low in lx.NEGATORS for w in words[max(0, i - 2):i])
        value = ("not " if negated else "") + " ".join(phrase)
        return Key(holder, f"prefers:{topic}", value, PREFERENCE_VERBS[verb] and not negated)
    return None


def _favourite(toks: tuple[Token, ...], at: Token) -> Key | None:
    """"My favourite language is Java" / "Rust is now my favourite language": the topic is
    the noun after favourite, the value the other side of the copula (one sentence)."""
    sentence: list[Token] = []
    for t in toks:
        if t.kind == "punct" and t.low in ".;!?\n":
            if at in sentence:
                break
            sentence = []
            continue
        sentence.append(t)
    i = sentence.index(at)
    after = [t for t in sentence[i + 1:] if t.kind in ("word", "code")]
    cop = next((j for j, t in enumerate(after) if t.low in lx.COPULAS), None)
    topic_words = after[:cop] if cop is not None else after[:1]
    if not topic_words:
        return None
    topic = lx.lemma(topic_words[-1].low, "NOUN")
    if cop is not None:  # "favourite language is Java"
        value = [t.low for t in after[cop + 1:] if t.low not in lx.DETERMINERS
                 and t.low not in lx.ADVERBS]
    else:  # "Rust is now my favourite language"
        before = sentence[:i]
        c = next((j for j, t in enumerate(before) if t.low in lx.COPULAS), len(before))
        value = [t.low for t in before[:c] if t.kind in ("word", "code")
                 and t.low not in lx.DETERMINERS]
    return Key("user", f"prefers:{topic}", " ".join(value[:6]) or topic, True)


def _fact(text: str) -> Key | None:
    """The key of the fact the text states most definitely: a place, code, name or holder
    first, then an amount, then what a thing is, then a state ("Leadership changed. Sam is
    now the lead." is about who the lead is)."""
    keys = [k for k in map(_fact_key, read(text).facts) if k is not None]
    return min(keys, key=lambda k: k[0])[1] if keys else None


def _fact_key(f: Fact) -> tuple[int, Key] | None:
    """(rank, key) of one fact: the lower the rank, the more definitely it keys the text."""
    if f.weak:
        return None
    if f.subject in lx.SPEAKERS and f.attribute == WHERE and f.words:
        # "we moved to Porto": where the user is, one place at a time (what the user is, "I'm
        # tired" / "I'm vegetarian", is not one value of one key)
        return 0, Key("user", WHERE, " ".join(f.words), True)
    if f.subject in lx.PRONOUNS:
        return None
    entity = " ".join((*f.qualifiers[-1:], f.subject))
    if f.attribute in (WHERE, CODE, NAME) and f.words:
        return 0, Key(entity, f.attribute, " ".join(f.words), True)
    if f.attribute == HOLDER and f.words:
        return 0, Key(entity, "who", " ".join(f.words), True)  # "who", as IS keys it
    if f.number is not None:
        return 1, Key(entity, f.attribute if f.attribute != AMOUNT else f.dimension,
                      f.value_text(), True)
    if f.attribute == IS and f.words:
        return 2, Key(f.words[0], "who", entity, True)  # "Priya is a lead": who the lead is
    if f.attribute == STATE and f.words:
        return 3, Key(entity, STATE, " ".join(f.words), True)
    return None


__all__ = ["PREFERENCE_VERBS", "Key", "key_of"]
