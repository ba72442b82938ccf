"""What a memory's own text says, read once when it is written (an input of stages 4 and 5).

Applicability compares a memory (then) with the present (now). Part of that comparison depends
on the memory alone: its conditions parsed, its sentences and their safety screen, which source
values and subjects its lesson names, the contrasts and numbers in its source-state text, its
source state's hash, the tokens of its guidance line. `analyze` reads all of it once; the store
keeps it with the row (`memories.analysis`, MessagePack decoded straight into the struct by
msgspec), and recall compares it with the present instead of re-reading the text for every
candidate of every recall.

The analysis is derived data, like the FTS row: a row without one, or with one of another
`VERSION`, is judged from its text with the same result (only slower), and `Memory` fills such
rows in when it opens a store. Erasure clears it with the content. Outputs are the same with or
without it (pinned by `tests/test_analysis.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from situated.conditions import Condition, clear_parse_cache, parse_condition
from situated.embed.hashing import feature_bucket
from situated.errors import ConditionSyntaxError
from situated.models import FactValue, MemoryRecord, normalise_text
from situated.reader import Reading, clear_reader_caches, read
from situated.recall import reading
from situated.recall.briefing import Claim, compute_unsafe, forget_known_unsafe, unsafe_text
from situated.recall.compile import render_line, token_counter
from situated.recall.reconstruct import prechecks
from situated.recall.reconstruct.base import digest_of, state_fingerprint
from situated.safety import injection_findings, tool_mentions
from situated.screen import surfaces
from situated.screen.classifier import clear_screen_cache, load_model

VERSION = 17
"""Bump when `analyze` would read a text differently, and on any change to `Analysis`'s fields
(order, type, addition: the stored form is positional). Stored analyses of another version are
ignored, and recomputed when a store is opened."""


class Analysis(msgspec.Struct, frozen=True, omit_defaults=True, array_like=True):
    """A memory's reading of itself (what stages 4-5 need from it alone)."""

    version: int
    """`VERSION` of the `analyze` that wrote it."""
    sentences: tuple[str, ...]
    """The lesson's sentences (`content`), as validation splits guidance."""
    conditions: tuple[Condition, ...] = ()
    """The memory's conditions, parsed (an unparsable one of an old row is left out)."""
    findings: dict[int, str] = {}
    """Sentence index -> the first injection finding's reason, for sentences with one."""
    tools: dict[int, tuple[str, ...]] = {}
    """Sentence index -> tool names the sentence mentions, for sentences with any."""
    lesson_reading: Reading | None = None
    """The reader's reading of the lesson (`content`): its conditional clauses, statements,
    content words and ordered actions."""
    then_reading: Reading | None = None
    """The reader's reading of the source state's text (None without a source state)."""
    source_hash: str | None = None
    """The source state's fingerprint (None without a source state)."""
    named: tuple[str, ...] = ()
    """Source facts whose text value the lesson names (adapted when they differ now)."""
    mentions: tuple[str, ...] = ()
    """Source facts whose subject (a word of the key) the lesson talks about."""
    numbers: tuple[float, ...] = ()
    """Numbers the lesson states (thresholds a numeric fact may cross)."""
    line_tokens: tuple[str, int] | None = None
    """(token counter `ref`, tokens) of the lesson as a guidance line (`compile.render_line`):
    compile counts only guidance that was adapted or rewritten, or under another tokenizer."""
    unsafe: tuple[str, bool] | None = None
    """(injection classifier version, `briefing.unsafe_text(content)`): what `render` asks of a
    lesson served as written, so a recall does not classify it again."""

    def claims(self) -> tuple[Claim, ...]:
        """Each sentence of the lesson as a transferable claim."""
        return tuple(Claim(s) for s in self.sentences)

    def screen(
        self, allowed_tools: frozenset[str] | None, prohibited: frozenset[str]
    ) -> tuple[tuple[str, ...], tuple[Claim, ...]]:
        """(kept sentences, rejected claims) of the lesson under a policy: what
        `reading.screen(content, ...)` gives, from the stored screen."""
        if not self.findings and not self.tools and not prohibited:
            return self.sentences, ()
        return reading.screen_sentences(
            self.sentences, lambda i, _: self.findings.get(i),
            lambda i, _: self.tools.get(i, ()), allowed_tools, prohibited,
        )

    def readings(self, record: MemoryRecord) -> tuple[Reading, Reading | None]:
        """(lesson reading, source-state reading), from the analysis when it holds them."""
        src = record.source.state
        lesson = self.lesson_reading or read(record.content)
        if src is None:
            return lesson, None
        return lesson, self.then_reading or read(src.text)

    def encode(self) -> bytes:
        """What the store keeps: MessagePack, fields in order (decoded in a few µs)."""
        return _ENCODER.encode(self)


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Analysis)


def analyze(record: MemoryRecord) -> Analysis:
    """Read a memory's text once: everything stages 4-5 need from it alone."""
    content = record.content
    counter = token_counter()
    conditions = []
    for text in record.conditions:
        try:
            conditions.append(parse_condition(text))
        except ConditionSyntaxError:
            continue  # validated at write; an old unparsable row is skipped, not trusted
    sentences = reading.sentences(content)
    findings: dict[int, str] = {}
    tools: dict[int, tuple[str, ...]] = {}
    for i, sentence in enumerate(sentences):
        found = injection_findings(sentence)
        if found:
            findings[i] = found[0].reason
        names = tool_mentions(sentence)
        if names:
            tools[i] = tuple(sorted(names))
    src = record.source.state
    facts: Mapping[str, FactValue] = {}
    then_reading = None
    if src is not None:
        then_reading = read.__wrapped__(src.text)  # that cache is for present texts
        facts = src.facts
    return Analysis(
        version=VERSION,
        conditions=tuple(conditions),
        sentences=sentences,
        findings=findings,
        tools=tools,
        lesson_reading=read.__wrapped__(content),
        then_reading=then_reading,
        source_hash=state_fingerprint(src) if src is not None else None,
        named=tuple(k for k, v in facts.items() if reading.names_value(content, v)),
        mentions=tuple(k for k in facts if reading.mentions(content, k)),
        numbers=reading.numbers_in(content),
        line_tokens=(counter.ref, counter.count(render_line(content, record.id))),
        unsafe=(load_model().version, compute_unsafe(content)),
    )


def stored_form(record: MemoryRecord) -> bytes | None:
    """`analyze(record)` as the store keeps it, or None when it cannot be stored exactly (a
    lone surrogate or an integer beyond 64 bits cannot be encoded): such a memory is judged
    from its text, as a memory without an analysis is."""
    a = analyze(record)
    try:
        text = a.encode()
    except (UnicodeEncodeError, OverflowError, msgspec.EncodeError):
        return None  # a lone surrogate; an integer beyond 64 bits
    return text if decode(text) == a else None


def decode(stored: bytes | None) -> Analysis | None:
    """A stored analysis, or None when there is none, it is of another version or it cannot
    be read (derived data: the stages then read the memory itself, with the same result)."""
    if not stored or not isinstance(stored, bytes):
        return None  # none, or an older version's JSON text
    try:
        a = _DECODER.decode(stored)
    except msgspec.DecodeError:  # another version's shape, or a damaged value
        return None
    return a if a.version == VERSION else None


def clear_text_caches() -> None:
    """Empty every in-process cache that holds memory text (parsed, screened, split, counted
    texts), as erasure requires: erased text must not stay in this process."""
    for cached in (
        reading.sentences, reading.claims,
        reading.names_text, reading.stems, reading.numbers_in, reading.key_stems,
        reading.screen, reading.number_strings, injection_findings, normalise_text, digest_of,
        feature_bucket, token_counter()._count, unsafe_text, surfaces.views_cache(),
    ):
        cached.cache_clear()
    clear_parse_cache()
    clear_reader_caches()
    clear_screen_cache()
    forget_known_unsafe()
    prechecks.clear_caches()


__all__ = ["VERSION", "Analysis", "analyze", "clear_text_caches", "decode", "stored_form"]
