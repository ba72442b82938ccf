"""`Memory.add_conversation`: notes for the turns, then the extractor's proposals.

The notes go through `add_many` (every gate; one transaction per batch). The extracted facts
and preferences are proposed one by one, in turn order, so a later value supersedes an earlier
one as the conversation did; each carries its extractor's provenance in its `proposed` event,
and one said to replace an earlier value counts as evidence for the attribute schema
(`situated.learning.schema`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from situated.errors import InvalidInput, ModelError
from situated.models import Authority, Classification, MemoryRecord, Principal
from situated.write.conversation import (
    Extractor,
    extracted_items,
    note_items,
    parse_conversation,
)
from situated.write.writers import record_model_failure, run_extractor

if TYPE_CHECKING:
    from situated.memory import Memory


@dataclass(frozen=True)
class ConversationResult:
    """What `add_conversation` stored."""

    session: str
    notes: tuple[MemoryRecord, ...]
    """One per turn, in order (an existing twin reinforced for a repeated turn)."""
    proposals: tuple[MemoryRecord, ...]
    """The extracted facts and preferences, in turn order."""
    extractor: str
    extractor_error: str | None = None
    """Why the extractor proposed nothing (a model failure, counted in `health`)."""


def ingest_conversation(
    mem: Memory, messages: Any, principal: Principal, session: str | None,
    namespace: str | None, extractor: Extractor, classification: Classification | str | None,
    consent: str | None,
) -> ConversationResult:
    from situated import arguments as args

    args.principal(principal)
    if session is not None:
        args.label(session, "session")
    conv, sid = parse_conversation(messages, session, namespace)
    scope = {"classification": classification, "consent": consent}
    notes = [n | scope for n in note_items(conv, sid)]
    for n in notes:  # the caller's mistakes are found before a model is asked or counted
        mem._build(principal=principal, **_args(n))
    items, error = run_extractor(mem.store, extractor, conv)
    items = sorted(items, key=lambda i: i.turn)
    planned = []
    try:  # a model's item that does not validate is the model's failure, not the caller's
        for (kw, trace), item in zip(extracted_items(conv, sid, items), items, strict=True):
            rec = mem._build(principal=principal, **_args(kw | scope))
            planned.append((rec.model_copy(
                update={"authority": min(rec.authority, Authority.INFERRED)}), trace, item))
    except InvalidInput as exc:
        failure = ModelError(f"extractor {extractor.name} proposed an invalid item: {exc}")
        planned, error = [], record_model_failure(
            mem.store, f"extractor:{extractor.name}", failure)
    stored_notes = mem.add_many(notes, principal=principal)  # validates every note first
    proposals = []
    for rec, trace, item in planned:
        stored = mem._propose(rec, principal, None, f"extracted by {extractor.name}", trace)
        if item.replaces:
            mem.schema.replacement_stated(stored, principal)
        proposals.append(stored)
    return ConversationResult(sid, tuple(stored_notes), tuple(proposals),
                              getattr(extractor, "name", "custom"), error)


def _args(kw: dict[str, Any]) -> dict[str, Any]:
    """`add` keyword arguments with their defaults, for `Memory._build`."""
    from situated.write.items import ADD_DEFAULTS

    return {"content": kw["content"]} | {k: kw.get(k, v) for k, v in ADD_DEFAULTS.items()}
