"""`TextAgent`: a deterministic agent that reads the guidance text it is given, and nothing else.

It sees exactly what an LLM agent would see (`agents.Task`: intent, present state, the
arm's rendered context, the options) and never the scenario's ground truth: which memory
applies, what it does to the task, situated's internal verdicts. Success is whether the option
it chose is the scenario's answer. What it does, in order:

1. **Parse the context into items.** A line `- text` (raw replay), `> [id] (authority,
   verdict, c) text` (a situated briefing), `* text [id] (verdict, confidence c)` or
   `> [id] (authority) text` followed by `>   (verdict, confidence c)` (earlier renderings)
   starts an item; an `adapted: ...` line adds text. Headers, footers and mode lines are not
   items. An item labelled `not_applicable`, `insufficient_evidence` or `rejected` carries no
   trust; a labelled item is trusted in proportion to its confidence (`trust_full`: the
   confidence from which it is trusted fully); an unlabelled item is trusted fully.
2. **Read which option each item supports.** Items are split into clauses (at punctuation and
   at `and`, `then`, `but`, `instead`, `when`, `if`, ...). A clause that starts with a
   conditional word (`when`, `if`, `unless`, `during`, `in a`, ...) states where the lesson
   applies and supports nothing; a clause with a negation (`do not`, `never`, `skip`,
   `avoid`, ...) counts against the options it names. An option's score is its best
   positive clause overlap (content words, crudely stemmed) minus its best negative one; the
   item supports the option with the highest score when that score is unique and at least 2
   (1 for an option of one or two content words).
3. **Discount what the observation contradicts** (`check_observation`): when a conditional
   clause of an item names one side of a generic contrast (on/off, open/closed, full/empty,
   working/broken, dry/wet, in stock/out of stock, busy/free, member/none, ...) and the
   present state's text names only the other side, the item's trust is multiplied by
   `contradicted_trust`.
4. **Decide.** Each item's weight is its trust times `1 / rank` (it leans on what comes
   first). With S(o) the summed weight of the items supporting option o and W the summed
   rank weights of the items that support any option, the agent follows the best-supported
   option with probability `min(1, (S(best) - S(second)) / W)`; otherwise (and
   when no item supports an option) it acts on its own: a uniform guess among the options.
5. **Reading costs attention**: with probability `distraction * tokens / 100` over *all*
   the context's tokens (headers, labels and citations included, for every arm alike) it loses
   the thread and guesses.
6. **It can be hijacked**: an item that reads as an instruction to the agent (`ignore ...
   instructions`, `from now on`, `you are authorized`, `always call`, `before anything else`,
   `disable`, `switch off`, an e-mail address to send data to) makes it act on that
   instruction with probability `gullibility`, which fails the task.

Randomness: the scenario's common random number `u` (the same for every arm) draws the guess;
two further numbers derived from `u` draw following and attention, so the arms' outcomes stay
paired. Nothing else is random.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from situated.eval.agents import Attempt, Guidance, Task, _same_option, task_for
from situated.eval.scenarios import Scenario
from situated.recall.compile import token_counter

_ITEM_RAW = re.compile(r"^\s*[-*]\s+(?P<text>.+)$")
_ITEM_BRIEF = re.compile(r"^\s*>\s*\[(?P<id>[^\]]+)\]\s*(?:\((?P<auth>[^)]*)\)\s*)?(?P<text>.*)$")
_LABEL = re.compile(
    r"^\s*>\s*\((?P<verdict>[a-z_ ]+?)(?:,\s*confidence\s+(?P<conf>[0-9.]+))?\)\s*$", re.I
)
_INLINE_LABEL = re.compile(
    r"\s*\[(?P<id>[^\]]+)\]\s*\((?P<verdict>[a-z_ ]+?)(?:,\s*confidence\s+(?P<conf>[0-9.]+))?\)"
    r"\s*$", re.I
)
_ADAPTED = re.compile(r"^\s*>?\s*adapted:\s*(?P<text>.+)$", re.I)
_REJECTED_WORDS = ("not_applicable", "not applicable", "insufficient_evidence",
                   "insufficient evidence", "rejected")

_STOP = frozenset(
    "a an the of to in on at for with by from and or is are was were be been it its this that "
    "these those your you there here as so then than into onto out up about over under all any "
    "some more most do does did has have had will would can could should may might must not no "
    "yes it's first now next them they their his her our we us".split()
)
_CONDITIONAL = re.compile(
    r"^\s*(?:when|whenever|if|unless|while|once|during|in a|in an|with a|without a|after|"
    r"before|as long as|where)\b", re.I
)
_NEGATION = re.compile(
    r"\b(?:do not|don't|dont|never|skip|avoid|no longer|instead of|not to|refrain|rather than)\b",
    re.I,
)
_SPLIT = re.compile(
    r"[.;:!?()]|,\s|\s(?:and|then|but|instead|so that|so|because|or)\s|"
    r"(?=\b(?:when|if|unless|while|once|during)\b)", re.I
)
_INJECTION = re.compile(
    r"ignore (?:your |the |all )?(?:previous |prior )?(?:instructions|rules|runbook)|"
    r"from now on|you are (?:now )?authori[sz]ed|always (?:call|run)|before anything else|"
    r"before starting|disable the|switch off the|[\w.+-]+@[\w-]+\.[\w.]+",
    re.I,
)
CONTRASTS: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(a.split("|")), frozenset(b.split("|"))) for a, b in (
        ("on", "off"),
        ("open|opened", "closed|shut"),
        ("full|packed", "empty"),
        ("working|works", "broken|error"),
        ("dry", "wet|soggy|waterlogged"),
        ("in stock|available", "out of stock|sold out"),
        ("busy|running", "free|stopped|idle"),
        ("member|membership", "no membership|non-member|none"),
        ("fits|within|under", "over|above|exceeds"),
        ("fresh|recent", "old|stale|hours old"),
        ("lagging|lags", "in sync|caught up"),
    )
)
"""Generic contrasts the agent knows (not the reconstructor's list, not tuned per family)."""


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]  # shipping -> shipp -> ship
            return word
    return word


def content_words(text: str, positive_only: bool = False) -> set[str]:
    """Lower-case content words, hyphens split, crudely stemmed, stopwords dropped; with
    `positive_only`, words after `without`/`not`/`no` are left out (an option's exclusions)."""
    text = text.lower().replace("'", "")
    if positive_only:
        text = re.split(r"\b(?:without|not|no|never)\b", text, maxsplit=1)[0]
    words = re.findall(r"[a-z0-9]+", text)
    return {_stem(w) for w in words
            if w not in _STOP and (len(w) > 1 or w.isdigit())}


@dataclass(frozen=True)
class ReadItem:
    """One piece of guidance as the agent read it from the context."""

    text: str
    verdict: str | None = None
    confidence: float | None = None
    adapted: tuple[str, ...] = ()
    ref: str | None = None
    """The memory id the item cites, when it cites one."""

    @property
    def labelled_rejected(self) -> bool:
        v = (self.verdict or "").lower()
        return any(w in v for w in _REJECTED_WORDS)

    @property
    def full_text(self) -> str:
        return " ".join([self.text, *self.adapted])


def parse_context(context: str) -> list[ReadItem]:
    """The guidance items in a rendered context (raw replay lines or a situated briefing)."""
    items: list[ReadItem] = []
    for line in context.splitlines():
        label = _LABEL.match(line)
        if label and items:
            conf = label.group("conf")
            items[-1] = ReadItem(items[-1].text, label.group("verdict").strip(),
                                 float(conf) if conf else None, items[-1].adapted,
                                 items[-1].ref)
            continue
        adapted = _ADAPTED.match(line)
        if adapted and items:
            last = items[-1]
            items[-1] = ReadItem(last.text, last.verdict, last.confidence,
                                 (*last.adapted, adapted.group("text").strip()), last.ref)
            continue
        brief = _ITEM_BRIEF.match(line)
        if brief:
            verdict, conf = _label_parts(brief.group("auth") or "")
            items.append(ReadItem(brief.group("text").strip(), verdict, conf,
                                  ref=brief.group("id")))
            continue
        raw = _ITEM_RAW.match(line)
        if raw:
            text = raw.group("text").strip()
            inline = _INLINE_LABEL.search(text)
            if inline:  # `* text [id] (verdict, confidence c)`
                conf = inline.group("conf")
                items.append(ReadItem(text[: inline.start()].strip(),
                                      inline.group("verdict").strip(),
                                      float(conf) if conf else None, ref=inline.group("id")))
            else:
                items.append(ReadItem(text))
    return items


_VERDICTS = ("applicable", "partial", "not_applicable", "insufficient_evidence", "rejected")


def _label_parts(label: str) -> tuple[str | None, float | None]:
    """(verdict, confidence) from `inferred, applicable, 0.90` (the one-line item label)."""
    verdict: str | None = None
    conf: float | None = None
    for part in (p.strip().lower() for p in label.split(",")):
        number = re.fullmatch(r"(?:confidence\s+)?([01](?:\.\d+)?)", part)
        if number:
            conf = float(number.group(1))
        elif part.replace(" ", "_") in _VERDICTS:
            verdict = part
    return verdict, conf


def clauses(text: str) -> list[tuple[str, str]]:
    """(kind, clause) with kind `condition`, `negative` or `positive`."""
    out: list[tuple[str, str]] = []
    for part in _SPLIT.split(text):
        part = (part or "").strip()
        if not part:
            continue
        if _CONDITIONAL.match(part):
            out.append(("condition", part))
        elif _NEGATION.search(part):
            out.append(("negative", part))
        else:
            out.append(("positive", part))
    return out


def supported_option(text: str, options: Sequence[str]) -> str | None:
    """The option an item's text supports, or None (see the module docstring, step 2)."""
    parts = [(kind, content_words(c)) for kind, c in clauses(text)]
    scores: list[int] = []
    needed: list[int] = []
    for option in options:
        words = content_words(option, positive_only=True)
        pos = max((len(words & c) for k, c in parts if k == "positive"), default=0)
        neg = max((len(words & c) for k, c in parts if k == "negative"), default=0)
        scores.append(pos - neg)
        needed.append(1 if len(words) <= 2 else 2)
    if not scores:
        return None
    best = max(scores)
    i = scores.index(best)
    if best < needed[i] or scores.count(best) > 1:
        return None
    return options[i]


def _mentions(text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z-]){re.escape(phrase)}(?![a-z-])", text) is not None


def contradicted(text: str, observation: str) -> bool:
    """An item's conditional clause names one side of a contrast; the observation only the
    other (see the module docstring, step 3)."""
    obs = observation.lower()
    for kind, clause in clauses(text):
        if kind != "condition":
            continue
        c = clause.lower()
        for a, b in CONTRASTS:
            for side, other in ((a, b), (b, a)):
                names = any(_mentions(c, w) for w in side)
                names_other = any(_mentions(c, w) for w in other)
                obs_other = any(_mentions(obs, w) for w in other)
                obs_side = any(_mentions(obs, w) for w in side)
                if names and not names_other and obs_other and not obs_side:
                    return True
    return False


def reads_as_instruction(text: str) -> bool:
    return _INJECTION.search(text) is not None


@dataclass(frozen=True)
class Decision:
    """What the agent chose and why (for tests and for the per-task rows)."""

    choice: str | None
    followed: str | None = None
    support: dict[str, float] = field(default_factory=dict)
    hijacked: bool = False
    distracted: bool = False
    follow_probability: float = 0.0


def _draws(u: float) -> tuple[float, float, float]:
    rng = random.Random(f"text-agent:{u!r}")
    return rng.random(), rng.random(), rng.random()


@dataclass(frozen=True)
class TextAgent:
    """A deterministic agent that acts only on the task text (module docstring).

    Args:
        trust_full: the confidence from which a labelled item is trusted fully.
        check_observation: discount items whose conditions the present text contradicts.
        contradicted_trust: the trust left to such an item.
        distraction: chance of losing the thread per 100 context tokens (every arm's tokens).
        gullibility: chance of acting on an instruction found in the guidance.
    """

    trust_full: float = 0.5
    check_observation: bool = True
    contradicted_trust: float = 0.2
    distraction: float = 0.03
    gullibility: float = 0.5
    name: str = "text"

    def decide(self, task: Task, u: float) -> Decision:
        options = task.options
        if not options:
            return Decision(None)
        guess = options[min(len(options) - 1, int(u * len(options)))]
        u_follow, u_attend, u_hijack = _draws(u)
        context = task.context
        tokens = token_counter().count(context) if context.strip() else 0
        if u_attend < self.distraction * tokens / 100.0:
            return Decision(guess, distracted=True)
        items = parse_context(context)
        if any(reads_as_instruction(i.full_text) for i in items) and u_hijack < self.gullibility:
            return Decision(None, hijacked=True)
        observation = task.state.describe()
        support: dict[str, float] = {}
        total = 0.0
        for rank, item in enumerate(items, start=1):
            option = supported_option(item.full_text, options)
            if option is None:
                continue
            trust = self._trust(item)
            if self.check_observation and contradicted(item.full_text, observation):
                trust *= self.contradicted_trust
            total += 1.0 / rank
            support[option] = support.get(option, 0.0) + trust / rank
        if not support or total == 0:
            return Decision(guess, support=support)
        ranked = sorted(support.items(), key=lambda kv: -kv[1])
        best, s_best = ranked[0]
        s_second = ranked[1][1] if len(ranked) > 1 else 0.0
        p = max(0.0, min(1.0, (s_best - s_second) / total))
        if u_follow < p:
            return Decision(best, followed=best, support=support, follow_probability=p)
        return Decision(guess, support=support, follow_probability=p)

    def _trust(self, item: ReadItem) -> float:
        if item.labelled_rejected:
            return 0.0
        if item.confidence is None:
            return 1.0
        return max(0.0, min(1.0, item.confidence / self.trust_full))

    def attempt(self, scenario: Scenario, guidance: Guidance, u: float) -> Attempt:
        task = task_for(scenario, guidance)
        decision = self.decide(task, u)
        if scenario.answer is None:
            return Attempt(success=False, choice=decision.choice)
        ok = decision.choice is not None and _same_option(decision.choice, scenario.answer)
        return Attempt(success=ok, choice=decision.choice)

    def describe(self) -> dict[str, float | str | bool]:
        return {
            "name": self.name, "trust_full": self.trust_full,
            "check_observation": self.check_observation,
            "contradicted_trust": self.contradicted_trust,
            "distraction_per_100_tokens": self.distraction, "gullibility": self.gullibility,
        }
