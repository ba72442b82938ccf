"""Named, ordered migrations. Each runs once, inside one transaction, and is recorded."""

from __future__ import annotations

from collections.abc import Callable

import apsw

from situated.store import lexical

Migration = Callable[[apsw.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    """Register a migration; its function name (`m001_...`) orders it."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_create_tables(db: apsw.Connection) -> None:
    db.execute(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE memories (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            tenant TEXT NOT NULL,
            namespace TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            state_text TEXT,
            state_facts TEXT,
            state_unknown INTEGER NOT NULL DEFAULT 0,
            action TEXT,
            success INTEGER,
            reward REAL,
            episode_id TEXT,
            step INTEGER,
            evidence TEXT NOT NULL DEFAULT '[]',
            conditions TEXT NOT NULL DEFAULT '[]',
            entity TEXT,
            attribute TEXT,
            value TEXT,
            multi_valued INTEGER NOT NULL DEFAULT 0,
            roles TEXT NOT NULL DEFAULT '[]',
            role_key TEXT NOT NULL DEFAULT '',
            classification INTEGER NOT NULL,
            consent TEXT,
            authority INTEGER NOT NULL,
            valid_from REAL NOT NULL,
            valid_until REAL NOT NULL,
            recorded_at REAL NOT NULL,
            state TEXT NOT NULL,
            uses INTEGER NOT NULL DEFAULT 0,
            successes INTEGER NOT NULL DEFAULT 0,
            failures INTEGER NOT NULL DEFAULT 0,
            exposures INTEGER NOT NULL DEFAULT 0,
            policy_version TEXT,
            supersedes TEXT,
            superseded_by TEXT,
            fingerprint TEXT NOT NULL,
            proposed_by TEXT NOT NULL
        );
        CREATE INDEX memories_scope ON memories (tenant, namespace, state);
        CREATE INDEX memories_roles ON memories (tenant, role_key);
        CREATE INDEX memories_fingerprint ON memories (tenant, fingerprint);
        CREATE INDEX memories_key ON memories (tenant, entity, attribute);
        CREATE INDEX memories_consent ON memories (tenant, consent);

        CREATE TABLE ledger (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            event TEXT NOT NULL,
            tenant TEXT NOT NULL,
            memory_id TEXT,
            recall_id TEXT,
            actor TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX ledger_memory ON ledger (memory_id, seq);
        CREATE INDEX ledger_tenant ON ledger (tenant, seq);
        CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
            BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
        CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
            BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

        CREATE TABLE recalls (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            at REAL NOT NULL,
            namespace TEXT,
            state_hash TEXT NOT NULL,
            mode TEXT NOT NULL,
            served TEXT NOT NULL,
            payload TEXT NOT NULL
        );
        CREATE INDEX recalls_tenant ON recalls (tenant, at);

        CREATE TABLE feedback (
            recall_id TEXT PRIMARY KEY REFERENCES recalls (id),
            tenant TEXT NOT NULL,
            at REAL NOT NULL,
            success INTEGER NOT NULL,
            used TEXT NOT NULL,
            reward REAL,
            digest TEXT NOT NULL
        );

        CREATE TABLE maintenance_failures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            component TEXT NOT NULL,
            error TEXT NOT NULL
        );

        CREATE VIRTUAL TABLE memories_fts USING fts5 (
            content, state_text, tokenize = 'porter unicode61'
        );
        """
    )


@migration
def m002_namespace_utility(db: apsw.Connection) -> None:
    db.execute(
        """
        CREATE TABLE memory_utility (
            memory_id TEXT NOT NULL,
            namespace TEXT NOT NULL,
            uses INTEGER NOT NULL DEFAULT 0,
            successes INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (memory_id, namespace)
        );
        """
    )


@migration
def m003_vector_rows(db: apsw.Connection) -> None:
    """Vectors by row id in a plain table: sqlite-vec cannot look rows up by a list of ids
    without scanning, and recall fetches the candidates' vectors several times."""
    db.execute(
        "CREATE TABLE vectors (rid INTEGER PRIMARY KEY, content BLOB NOT NULL, "
        "state BLOB NOT NULL)"
    )
    has_vec = db.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('vec_content', 'vec_state')"
    ).fetchone()
    if has_vec and has_vec[0] == 2:
        db.execute(
            "INSERT INTO vectors (rid, content, state) SELECT c.rid, c.embedding, s.embedding "
            "FROM vec_content c JOIN vec_state s ON s.rid = c.rid"
        )


@migration
def m004_memory_analysis(db: apsw.Connection) -> None:
    """What each memory's own text says, read once at write (`situated.recall.analysis`):
    derived data, so existing rows start without it and are filled in by `Memory`."""
    db.execute("ALTER TABLE memories ADD COLUMN analysis BLOB")
    db.execute("ALTER TABLE memories ADD COLUMN analysis_version INTEGER NOT NULL DEFAULT 0")
    db.execute(
        "CREATE INDEX memories_analysis_version ON memories (analysis_version) "
        "WHERE state != 'ERASED'"
    )


@migration
def m006_tenant_lexicon(db: apsw.Connection) -> None:
    """Per-tenant BM25 statistics for the SQLite search path (`situated.store.lexical`):
    FTS5's `bm25()` counts every tenant's rows together. Existing memories are indexed here."""
    db.execute(
        """
        CREATE TABLE lexicon_postings (
            tenant TEXT NOT NULL,
            term TEXT NOT NULL,
            rid INTEGER NOT NULL,
            tf INTEGER NOT NULL,
            length INTEGER NOT NULL,
            PRIMARY KEY (tenant, term, rid)
        ) WITHOUT ROWID;
        CREATE TABLE lexicon_docs (
            rid INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            length INTEGER NOT NULL,
            terms INTEGER NOT NULL
        );
        CREATE TABLE lexicon_stats (
            tenant TEXT PRIMARY KEY,
            docs INTEGER NOT NULL,
            length INTEGER NOT NULL
        );
        """
    )
    lexical.reindex(db)
