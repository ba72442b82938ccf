"""Stage 3, dedupe: collapse near-duplicate memories and keep the best-evidenced one; a
newer statement replaces an older one it contradicts.

One implementation serves both read (candidates of a recall) and write (a new proposal against
what is stored): `near_duplicate` decides, `collapse` applies it to a candidate list.
`replaced` finds, among the facts and notes one author wrote in one namespace, the older ones
a newer one contradicts by the reader's readings ("the meeting is at 2pm" / later "the meeting
moved to 3pm"): text written without an entity and attribute is superseded at recall as keyed
facts are at write, and `as_of` before the newer one still serves the older.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from situated.embed.base import Vector
from situated.models import Kind, MemoryRecord, normalise_text
from situated.reader import Reading
from situated.reader.identity import differs
from situated.reader.present import contradiction
from situated.recall.reading import number_strings

NEAR_DUPLICATE = 0.95
"""Cosine between lesson vectors above which two memories say the same thing."""

T = TypeVar("T")




def near_duplicate(a: MemoryRecord, b: MemoryRecord, similarity: float | None) -> bool:
    """Do two memories say the same thing?

    Never when they differ in what makes them distinct: kind, (entity, attribute, value),
    conditions, or the numbers in their text ("above 100 USD" vs "above 250 USD" embed almost
    identically but are a change, not a restatement). Otherwise: the same normalised content,
    or lesson vectors closer than `NEAR_DUPLICATE` (cosine `similarity`; None when unknown)
    whose readings do not differ (`reader.identity.differs`: the order of the same steps,
    negation, a value, a swapped word).
    """
    if a.kind != b.kind or (a.entity, a.attribute) != (b.entity, b.attribute):
        return False
    if a.entity is not None and normalise_text(str(a.value)) != normalise_text(str(b.value)):
        return False
    if sorted(a.conditions) != sorted(b.conditions):
        return False
    if number_strings(a.content) != number_strings(b.content):
        return False
    if normalise_text(a.content) == normalise_text(b.content):
        return True
    if similarity is None or similarity < NEAR_DUPLICATE:
        return False
    # close vectors; the same meaning only if the readings agree (order of steps, negation,
    # values, a swapped word)
    return differs(a.content, b.content) is None


def cosine(va: Vector | None, vb: Vector | None) -> float | None:
    return None if va is None or vb is None else float(np.dot(va, vb))


def evidence_rank(rec: MemoryRecord) -> tuple[float, int, int, int]:
    """Better evidenced first: more credited use, then stronger authority, then older."""
    c = rec.counters
    return (-c.successes, -c.uses, -int(rec.authority), int(rec.validity.recorded_at_ts))


def collapse(
    items: Sequence[T],
    record_of: dict[int, MemoryRecord],
    vector_of: dict[int, Vector],
    key: list[int],
) -> tuple[list[T], list[tuple[T, T]]]:
    """Keep one item per near-duplicate group; returns (kept, [(dropped, kept_instead)]).

    `key[i]` is the rid of `items[i]`; records and vectors are looked up by rid.
    """
    n = len(items)
    order = sorted(range(n), key=lambda i: evidence_rank(record_of[key[i]]))
    norm = [normalise_text(record_of[key[i]].content) for i in range(n)]
    have = np.array([key[i] in vector_of for i in range(n)], dtype=bool)
    # which pairs may be duplicates: the same normalised text, or lesson vectors this close
    # (`near_duplicate` then decides each such pair; most candidates have none)
    close = np.zeros((n, n), dtype=bool)
    sims = np.zeros((n, n), dtype=np.float32)
    if have.any():
        dim = next(vector_of[key[i]] for i in range(n) if have[i]).shape[0]
        mat = np.stack([vector_of[key[i]] if have[i] else np.zeros(dim, np.float32)
                        for i in range(n)])
        sims = mat @ mat.T
        close = (sims >= np.float64(NEAR_DUPLICATE)) & have[:, None] & have[None, :]
    same_text: dict[str, list[int]] = {}
    for i, t in enumerate(norm):
        same_text.setdefault(t, []).append(i)
    for group in same_text.values():
        if len(group) > 1:
            close[np.ix_(group, group)] = True
    kept: list[int] = []
    dropped: list[tuple[int, int]] = []
    is_kept = np.zeros(n, dtype=bool)
    for i in order:
        twin = None
        near = close[i] & is_kept
        if near.any():
            for j in kept:  # in the order kept, as the first twin found wins
                if not near[j]:
                    continue
                sim = float(sims[i, j]) if have[i] and have[j] else None
                if near_duplicate(record_of[key[i]], record_of[key[j]], sim):
                    twin = j
                    break
        if twin is None:
            kept.append(i)
            is_kept[i] = True
        else:
            dropped.append((i, twin))
    kept.sort()
    return [items[i] for i in kept], [(items[i], items[j]) for i, j in dropped]


STATEMENTS = (Kind.FACT, Kind.NOTE)
"""Kinds that state something of the world, which a later statement can replace."""

MAX_STATEMENTS = 16
"""At most this many statements of a recall are compared pairwise (the best ranked)."""


def replaced(
    records: Sequence[MemoryRecord], reading_of: dict[str, Reading | None]
) -> list[tuple[MemoryRecord, MemoryRecord, str]]:
    """(older, newer, what differs) for each stored statement a newer statement of the same
    author and namespace contradicts (by their readings, made once at write: `reading_of`, by
    memory id). Keyed facts with one key are superseded at write; this finds what their keys
    do not tell ("the meeting is at 2pm" read as (meeting, clock), "the meeting moved to 3pm"
    as (meeting, move))."""
    mine = [r for r in records if r.kind in STATEMENTS
            and reading_of.get(r.id) is not None][:MAX_STATEMENTS]
    if len(mine) < 2:
        return []
    mine.sort(key=lambda r: (r.validity.valid_from_ts, r.validity.recorded_at_ts))
    out: list[tuple[MemoryRecord, MemoryRecord, str]] = []
    for i, old in enumerate(mine):
        for new in reversed(mine[i + 1:]):  # the newest that contradicts it
            if (new.proposed_by != old.proposed_by or new.scope.namespace != old.scope.namespace
                    or new.validity.valid_from_ts <= old.validity.valid_from_ts):
                continue
            then, now = reading_of[old.id], reading_of[new.id]
            assert then is not None and now is not None
            said = contradiction(then, now, same_speaker=True, other="the newer")
            if said:
                out.append((old, new, said))
                break
    return out
