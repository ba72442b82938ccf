"""Bulk import of history: JSON lines of memories through the batch write path.

One line is one JSON object with the fields of `Memory.add` (`content` required; `state` a
string or `{"text": ..., "facts": {...}}`; `kind`, `namespace`, `action`, `success`, `reward`,
`episode_id`, `step`, `evidence`, `conditions`, `entity`, `attribute`, `value`,
`multi_valued`, `roles`, `classification`, `consent`, `authority`, `valid_from`,
`valid_until`, `policy_version`, `source_classification`), plus `recorded_at` (ISO time or
epoch seconds) for an admin importing a memory's original time; blank lines are skipped.

Every gate runs on every line; lines are committed in batches, one durable transaction each.
A bad line stops the import with `ImportStopped`: it names the line and the field, and the
batches before it stay committed; the lines of the batch it was in are not written.
`ImportReport.next_line` (or `ImportStopped.next_line`) is where to resume (`start_line`).
Importing a line again does not add a copy: an exact duplicate of a stored memory of the same
scope reinforces it (a `reinforced` event), as `add` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from situated.errors import InvalidInput, SituatedWarning, UsageError
from situated.models import MemoryRecord, Principal, as_state
from situated.notices import MAX_EACH, collected, more, notify
from situated.write.items import IMPORT_FIELDS, proposal
from situated.write.writer import Proposal

if TYPE_CHECKING:
    from situated.memory import Memory

MAX_LINE_CHARS = 1_000_000


@dataclass(frozen=True)
class ImportReport:
    """What an import committed."""

    lines: int
    """Lines read (from `start_line`), blank ones included."""
    committed: int
    """Memories committed: new ones plus duplicates that reinforced a stored memory."""
    created: int
    """Of those, memories stored as new rows (any state: active, held for review, rejected)."""
    batches: int
    next_line: int
    """The first line not read: where a later import resumes."""


class ImportStopped(UsageError):
    """A line could not be imported; the batches before it are committed, nothing of the
    batch it was in is written."""

    def __init__(self, error: InvalidInput | UsageError, line: int, report: ImportReport):
        self.error = error
        self.line = line
        self.report = report
        self.next_line = report.next_line
        super().__init__(
            f"{error} ({report.committed} memories committed in {report.batches} batches; "
            f"resume at line {report.next_line})"
        )


def import_lines(
    mem: Memory, lines: Iterable[str], principal: Principal, *, batch_size: int = 1000,
    start_line: int = 1, progress: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    """Import JSON lines (numbered from 1; those before `start_line` are skipped)."""
    state = _Progress(start_line)
    batch: list[Proposal] = []
    first = start_line  # the first line of the pending batch
    mem.store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
    n = 0
    try:
        for n, line in _numbered(lines):
            if n < start_line:
                continue
            try:
                if isinstance(line, InvalidInput):
                    raise line
                item = _parse(line, n)
                if item is not None:
                    batch.append(proposal(mem, item, principal, f"line {n}", IMPORT_FIELDS))
            except UsageError as exc:
                raise ImportStopped(exc, n, state.report(first)) from None
            if len(batch) >= batch_size:
                state.commit(mem, batch, principal, first)
                batch, first = [], n + 1
                if progress is not None:
                    progress(state.report(first))
        if batch:
            state.commit(mem, batch, principal, first)
        return state.report(max(n + 1, start_line))
    finally:  # what the committed batches told the writer: the first few of each kind
        for notice in state.kept:
            notify(notice)
        for kind, seen in state.seen.items():
            if seen > MAX_EACH:
                notify(more(kind, seen - MAX_EACH))


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str | InvalidInput]]:
    """(number, line), or the error of a line that cannot be read as text; then it stops."""
    it = iter(lines)
    n = 0
    while True:
        n += 1
        try:
            line = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            yield n, InvalidInput(f"line {n}", f"not UTF-8 text: {exc.reason}")
            return
        if not isinstance(line, str):
            yield n, InvalidInput(f"line {n}", "must be a text line")
            return
        yield n, line


class _Progress:
    def __init__(self, start: int) -> None:
        self.start = start
        self.committed = 0
        self.created = 0
        self.batches = 0
        self.kept: list[SituatedWarning] = []
        self.seen: dict[type[SituatedWarning], int] = {}

    def commit(
        self, mem: Memory, batch: list[Proposal], principal: Principal, first: int
    ) -> None:
        """One batch, one transaction (a name refused at insert rolls all of it back)."""
        writer = mem._writer
        try:
            with collected() as notices:
                prepared = writer.prepare(batch, principal, "imported")
                with mem.store.transaction():
                    stored: list[MemoryRecord] = writer.commit(prepared)
        except UsageError as exc:
            raise ImportStopped(exc, first, self.report(first)) from None
        for notice in notices:  # bounded over any number of lines: the first few of a kind
            kind = type(notice)
            self.seen[kind] = self.seen.get(kind, 0) + 1
            if self.seen[kind] <= MAX_EACH:
                self.kept.append(notice)
        self.committed += len(stored)
        self.created += sum(s.id == p.record.id for s, p in zip(stored, prepared, strict=True))
        self.batches += 1

    def report(self, next_line: int) -> ImportReport:
        return ImportReport(next_line - self.start, self.committed, self.created,
                            self.batches, next_line)


def _parse(line: str, n: int) -> dict[str, Any] | None:
    """One line's object (None for a blank line), its `state` read into a `State`."""
    if not line.strip():
        return None
    if len(line) > MAX_LINE_CHARS:
        raise InvalidInput(f"line {n}", f"longer than {MAX_LINE_CHARS} characters")
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"line {n}", f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(item, dict):
        raise InvalidInput(f"line {n}", "must be a JSON object of add() fields")
    st = item.get("state")
    if isinstance(st, Mapping):
        item["state"] = as_state(st, f"line {n}.state")
    return item
