"""Storage failures (I/O error, full disk, corruption) as `StoreFailure`, on every statement of
a connection of the store: the main file's and the recall file's (`recall_log`)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from situated.errors import StoreBusy, StoreFailure

STORAGE_ERRORS = (
    apsw.IOError, apsw.FullError, apsw.CorruptError, apsw.NotADBError, apsw.CantOpenError
)


def failure(path: str, exc: apsw.Error) -> StoreFailure:
    code: int = getattr(exc, "extendedresult", 0) or getattr(exc, "result", 0) or 0
    name = str(
        apsw.mapping_extended_result_codes.get(code)
        or apsw.mapping_result_codes.get(code)
        or type(exc).__name__
    )
    return StoreFailure(f"database {path}: {exc} ({name})", name)


@contextmanager
def stored(path: str) -> Iterator[None]:
    """SQLite's storage failures (I/O error, disk full, corruption) as `StoreFailure`."""
    try:
        yield
    except STORAGE_ERRORS as exc:
        raise failure(path, exc) from exc


class Cursor(apsw.Cursor):
    """Every statement of a store connection (main file, recall file): storage failures
    become `StoreFailure` wherever SQLite reports them (preparing, stepping, fetching)."""

    def execute(
        self, statements: str, bindings: apsw.Bindings | None = None, **kw: Any
    ) -> apsw.Cursor:
        try:
            return super().execute(statements, bindings, **kw)
        except STORAGE_ERRORS as exc:
            raise failure(self.connection.filename, exc) from exc

    def executemany(
        self, statements: str, sequenceofbindings: Iterable[apsw.Bindings], **kw: Any
    ) -> apsw.Cursor:
        try:
            return super().executemany(statements, sequenceofbindings, **kw)
        except STORAGE_ERRORS as exc:
            raise failure(self.connection.filename, exc) from exc

    def fetchall(self) -> list[apsw.SQLiteValues]:
        try:
            return super().fetchall()
        except STORAGE_ERRORS as exc:
            raise failure(self.connection.filename, exc) from exc

    def fetchone(self) -> Any | None:
        try:
            return super().fetchone()
        except STORAGE_ERRORS as exc:
            raise failure(self.connection.filename, exc) from exc

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except STORAGE_ERRORS as exc:
            raise failure(self.connection.filename, exc) from exc


BUSY_RETRIES = 8
"""Attempts at the write lock beyond the busy timeout, with jittered exponential backoff."""


def begin_immediate(db: apsw.Connection, label: str) -> None:
    """Take `db`'s write lock up front (`BEGIN IMMEDIATE`), retried while another writer holds
    it; `StoreBusy` naming `label` when it stays locked."""
    for attempt in range(BUSY_RETRIES):
        try:
            db.execute("BEGIN IMMEDIATE")
            return
        except apsw.BusyError:
            if attempt == BUSY_RETRIES - 1:
                raise StoreBusy(f"{label} stayed locked") from None
            time.sleep(0.05 * (2**attempt) * (0.5 + random.random()))
