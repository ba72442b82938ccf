"""Named, ordered migrations. Each runs once, inside one transaction, and is recorded."""

from __future__ import annotations

import json
from collections.abc import Callable

import apsw

from situated.store import lexical, names

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
def m005_scoped_events(db: apsw.Connection) -> None:
    """Recalls, their events and maintenance failures carry the scope they describe
    (`situated.store.scope`): a recall the roles and clearance of the principal that made it,
    a ledger event about no single memory the same. Recalls recorded before this migration
    take the narrowest scope their served memories imply (every role those required, their
    highest classification); their events and other events about no memory are shown to
    restricted-cleared admins only."""
    db.execute(
        """
        ALTER TABLE recalls ADD COLUMN role_key TEXT NOT NULL DEFAULT 'admin';
        ALTER TABLE recalls ADD COLUMN clearance INTEGER NOT NULL DEFAULT 3;
        ALTER TABLE ledger ADD COLUMN role_key TEXT NOT NULL DEFAULT 'admin';
        ALTER TABLE ledger ADD COLUMN clearance INTEGER NOT NULL DEFAULT 3;
        ALTER TABLE maintenance_failures ADD COLUMN tenant TEXT;
        CREATE INDEX recalls_scope ON recalls (tenant, role_key);
        """
    )
    rows = db.execute("SELECT id, served FROM recalls").fetchall()
    for recall_id, served in rows:
        ids = json.loads(str(served))
        scopes = db.execute(
            f"SELECT roles, classification FROM memories WHERE id IN ({','.join('?' * len(ids))})",
            tuple(ids),
        ).fetchall() if ids else []
        roles = sorted({r for roles_json, _ in scopes for r in json.loads(str(roles_json))})
        level = max((int(str(c)) for _, c in scopes), default=0)
        db.execute(
            "UPDATE recalls SET role_key = ?, clearance = ? WHERE id = ?",
            ("\x1f".join(roles), level, recall_id),
        )


@migration
def m008_recalls_apart(db: apsw.Connection) -> None:
    """Recall records move to their own file (`situated.store.recall_log`): the table here is
    kept as `recalls_legacy` until the store copies its rows over; feedback no longer
    references it. FTS5 removes erased terms from its index (`secure-delete`)."""
    db.execute(
        """
        ALTER TABLE recalls RENAME TO recalls_legacy;
        CREATE TABLE feedback_new (
            recall_id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            at REAL NOT NULL,
            success INTEGER NOT NULL,
            used TEXT NOT NULL,
            reward REAL,
            digest TEXT NOT NULL
        );
        INSERT INTO feedback_new SELECT recall_id, tenant, at, success, used, reward, digest
            FROM feedback;
        DROP TABLE feedback;
        ALTER TABLE feedback_new RENAME TO feedback;
        INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1);
        """
    )


@migration
def m007_names(db: apsw.Connection) -> None:
    """The registry of tenant, namespace and role names with their confusable skeletons
    (`situated.store.names`), filled from the memories already stored. Names in it that
    already look alike are all kept (refusing them would lock their owners out, and the
    migration never fails on them); only look-alikes created from now on are refused."""
    db.execute(
        """
        CREATE TABLE names (
            kind TEXT NOT NULL CHECK (kind IN ('tenant', 'namespace', 'role')),
            scope TEXT NOT NULL,
            skeleton TEXT NOT NULL,
            name TEXT NOT NULL,
            PRIMARY KEY (kind, scope, name)
        );
        CREATE INDEX names_skeleton ON names (kind, scope, skeleton);
        """
    )
    names.record(db, [
        *(("tenant", "", t) for (t,) in db.execute("SELECT DISTINCT tenant FROM memories")),
        *(("namespace", t, n)
          for t, n in db.execute("SELECT DISTINCT tenant, namespace FROM memories")),
        *(("role", t, r) for t, r in db.execute(
            "SELECT DISTINCT m.tenant, j.value FROM memories m, json_each(m.roles) j")),
    ])


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


@migration
def m009_scoped_failures(db: apsw.Connection) -> None:
    """A maintenance failure about a memory carries that memory's scope, so `stats` shows it
    only to principals who may read the memory. Failures recorded before keep their tenant and
    are shown to its restricted-cleared principals."""
    db.execute(
        """
        ALTER TABLE maintenance_failures ADD COLUMN role_key TEXT NOT NULL DEFAULT '';
        ALTER TABLE maintenance_failures ADD COLUMN classification INTEGER NOT NULL DEFAULT 3;
        """
    )


@migration
def m010_api_keys(db: apsw.Connection) -> None:
    """API keys for the HTTP and MCP doors (`situated.store.keys`): each bound to exactly one
    principal (tenant, roles, clearance, actor name); only a SHA-256 of the secret is kept."""
    db.execute(
        """
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY,
            secret_hash TEXT NOT NULL UNIQUE,
            tenant TEXT NOT NULL,
            roles TEXT NOT NULL,
            clearance INTEGER NOT NULL,
            actor TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            created_by TEXT NOT NULL,
            revoked_at REAL
        );
        CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
        """
    )


@migration
def m011_inferred_feedback(db: apsw.Connection) -> None:
    """Inferred outcomes (a correction blamed on the corrected fact, a recall that was not
    corrected) are counted apart from explicit feedback, per memory and recall namespace: they
    weigh less in the namespace's utility and never move a memory's lifecycle."""
    db.execute(
        """
        ALTER TABLE memory_utility ADD COLUMN inferred_uses INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE memory_utility ADD COLUMN inferred_successes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE feedback ADD COLUMN inferred INTEGER NOT NULL DEFAULT 0;
        """
    )


@migration
def m012_attribute_schema(db: apsw.Connection) -> None:
    """The learned attribute schema (`situated.learning.schema`): evidence that an attribute
    holds one value, and counter-evidence, per tenant, role set, classification and attribute.
    Each piece of evidence is also a `schema` ledger event on the memory that gave it."""
    db.execute(
        """
        CREATE TABLE attribute_schema (
            tenant TEXT NOT NULL,
            role_key TEXT NOT NULL,
            classification INTEGER NOT NULL,
            attribute TEXT NOT NULL,
            single INTEGER NOT NULL DEFAULT 0,
            multi INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            PRIMARY KEY (tenant, role_key, classification, attribute)
        );
        CREATE INDEX memories_attribute ON memories (tenant, attribute);
        """
    )


@migration
def m013_secrets(db: apsw.Connection) -> None:
    """Store-wide secrets of the doors (`situated.store.secrets`: the dashboard's signing key),
    read by `Store.secret` only."""
    db.execute("CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)")


@migration
def m014_browser_sessions(db: apsw.Connection) -> None:
    """The dashboard's browser sessions (`situated.store.keys`): a login makes one, a logout
    ends it, and a cookie naming an ended one is refused (`Keys.session_live`)."""
    db.execute(
        """
        CREATE TABLE browser_sessions (
            id TEXT PRIMARY KEY,
            key_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            created_at REAL NOT NULL,
            ended_at REAL
        );
        CREATE INDEX browser_sessions_age ON browser_sessions (created_at);
        """
    )


@migration
def m015_pending_index(db: apsw.Connection) -> None:
    """The proposals that wait for review, per tenant and role set (a partial index, as small
    as the queue): every recall counts those its principal may read (`Store.count_pending`)."""
    db.execute(
        "CREATE INDEX memories_pending ON memories (tenant, role_key) WHERE state = 'PROPOSED'"
    )
