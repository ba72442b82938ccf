"""Recall records in a file of their own, so a recall never waits for the writers' lock.

Every recall persists a record (inputs, versions, every reconstruction, the output, ~25 kB)
that feedback and audits read later. In the main file that insert queued behind every memory
write (one SQLite file has one write lock): under four writers, recall p95 rose from 31 to
637 ms. Here the records live in `<store>-recalls`, a second SQLite file (WAL) written through
its own connection, so recalls contend only with each other; the store ATTACHes it read-only
in spirit (`recall_log`) to join recalls with feedback and to list their events.

Durability is what it was: a record commits to this file's WAL without waiting for the disk
(`synchronous = NORMAL`): it survives a crash of the process; on power loss only the last
records can be lost, whole. A record is also the `recalled` event of the ledger: `Store.ledger`
lists the rows here beside the main ledger's events, under the same scope rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import apsw

from situated.errors import StoreFailure
from situated.store.failures import Cursor, begin_immediate, stored

BUSY_TIMEOUT_MS = 10_000
ALIAS = "recall_log"
"""The schema name under which the store's connection sees this file."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS recalls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    at REAL NOT NULL,
    namespace TEXT,
    state_hash TEXT NOT NULL,
    mode TEXT NOT NULL,
    served TEXT NOT NULL,
    payload TEXT NOT NULL,
    role_key TEXT NOT NULL,
    clearance INTEGER NOT NULL,
    actor TEXT NOT NULL DEFAULT '',
    rejected INTEGER NOT NULL DEFAULT 0,
    legacy INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS recalls_scope ON recalls (tenant, role_key);
CREATE INDEX IF NOT EXISTS recalls_at ON recalls (tenant, at);
"""


def path_for(store_path: str) -> str:
    """Where the recall records of the store at `store_path` live."""
    return f"{store_path}-recalls"


class RecallLog:
    """The writer of the recall file (one connection, its own lock)."""

    def __init__(self, store_path: str) -> None:
        self.path = path_for(store_path)
        with stored(self.path):
            self.db = apsw.Connection(self.path)
        self.db.cursor_factory = Cursor  # storage failures raise StoreFailure, like the store's
        try:
            self.db.setbusytimeout(BUSY_TIMEOUT_MS)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self.db.execute("PRAGMA secure_delete = ON")
            with self.transaction():
                self.db.execute(SCHEMA)
        except BaseException:
            with suppress(StoreFailure):  # the first failure is the one raised
                self.close()
            raise

    def close(self) -> None:
        """Close the connection (closed even when this raises: its checkpoint of the WAL
        failed, and the next open recovers it)."""
        with stored(self.path):
            self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """An IMMEDIATE transaction on the recall file, retried while busy."""
        begin_immediate(self.db, f"recall file {self.path}")
        try:
            yield
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:  # an I/O error or a full disk may have ended it
                self.db.execute("ROLLBACK")
            raise

    def save(self, row: tuple[Any, ...]) -> None:
        """Insert one recall row (columns as in `COLUMNS`)."""
        with self.transaction():
            self.db.execute(
                f"INSERT INTO recalls ({', '.join(COLUMNS)}) "
                f"VALUES ({','.join('?' * len(COLUMNS))})",
                row,
            )

    def scrub(
        self, tenant: str, memory_id: str, scrub: Callable[[dict[str, Any]], dict[str, Any]],
        encode: Callable[[dict[str, Any]], str],
    ) -> int:
        """Pass the payload of every record of `tenant` that mentions `memory_id` through
        `scrub` (its id stays in the served list: ids are not content). Returns how many
        records changed."""
        with self.transaction():
            rows = self.db.execute(
                "SELECT id, payload FROM recalls WHERE tenant = ? AND instr(payload, ?) > 0",
                (tenant, memory_id),
            ).fetchall()
            for recall_id, payload in rows:
                self.db.execute(
                    "UPDATE recalls SET payload = ? WHERE id = ?",
                    (encode(scrub(json.loads(str(payload)))), recall_id),
                )
        return len(rows)


COLUMNS = (
    "id", "tenant", "at", "namespace", "state_hash", "mode", "served", "payload", "role_key",
    "clearance", "actor", "rejected", "legacy",
)
