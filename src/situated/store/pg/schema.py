"""Named, ordered migrations of the PostgreSQL store (like `store.migrations` for SQLite).

Each runs once, in one transaction, under an advisory lock (two processes opening a new
database at once migrate it once), and is recorded in `_migrations`.

Layout, so the schema can be distributed by tenant unchanged (Citus: `tenant` is the
distribution column of every table below but `meta`, `names`, `secrets` and `_migrations`,
which are small store-wide reference tables):

- `secrets` (the doors' store-wide secrets, `store.secrets`) is read by `secret()` only;
- every per-tenant table carries `tenant`, and every primary key and unique constraint starts
  with it; row ids (`rid`, `seq`) are identity columns, unique in the store;
- `memories` holds the record, its two vectors (`content_vec`, `state_vec`, pgvector, added
  with their HNSW indexes when the store binds its embedder: the dimension is the model's) and
  its lexical row: `lex` (a `tsvector` of the memory's tokens, GIN-indexed), `lex_tf` (each
  token's count) and `lex_len` (tokens), so BM25 is scored with the tenant's own statistics
  (`lexicon_stats`), as `store.lexical` does for SQLite, and `lexicon_postings` holds each
  term's rows with their counts (what a search reads);
- roles are kept twice: `roles` (JSON text, as the record reads it back) and `role_set`
  (`text[]`, what the scope gate compares: `role_set <@ held roles`);
- the ledger is append-only (a trigger refuses UPDATE and DELETE).
"""

from __future__ import annotations

MIGRATION_LOCK = 0x5175_7473_0001
"""The advisory lock key migrations run under."""

POSTINGS_OF = (
    "INSERT INTO lexicon_postings (tenant, term, rid, tf, length) "
    "SELECT m.tenant, e.key, m.rid, e.value::int, m.lex_len "
    "FROM memories m CROSS JOIN LATERAL jsonb_each_text(m.lex_tf) e "
    "WHERE m.lex_tf IS NOT NULL AND m.state <> 'ERASED'"
)
"""The postings of memories rows (a WHERE clause narrows them: `AND ...`)."""

MIGRATIONS: list[tuple[str, str]] = [
    ("m001_create_tables", """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (
    tenant TEXT NOT NULL,
    rid BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    state_text TEXT,
    state_facts TEXT,
    state_unknown INTEGER NOT NULL DEFAULT 0,
    action TEXT,
    success INTEGER,
    reward DOUBLE PRECISION,
    episode_id TEXT,
    step BIGINT,
    evidence TEXT NOT NULL DEFAULT '[]',
    conditions TEXT NOT NULL DEFAULT '[]',
    entity TEXT,
    attribute TEXT,
    value TEXT,
    multi_valued INTEGER NOT NULL DEFAULT 0,
    roles TEXT NOT NULL DEFAULT '[]',
    role_key TEXT NOT NULL DEFAULT '',
    role_set TEXT[] NOT NULL DEFAULT '{}',
    classification INTEGER NOT NULL,
    consent TEXT,
    authority INTEGER NOT NULL,
    valid_from DOUBLE PRECISION NOT NULL,
    valid_until DOUBLE PRECISION NOT NULL,
    recorded_at DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL,
    uses BIGINT NOT NULL DEFAULT 0,
    successes BIGINT NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0,
    exposures BIGINT NOT NULL DEFAULT 0,
    policy_version TEXT,
    supersedes TEXT,
    superseded_by TEXT,
    fingerprint TEXT NOT NULL,
    proposed_by TEXT NOT NULL,
    analysis BYTEA,
    analysis_version INTEGER NOT NULL DEFAULT 0,
    lex TSVECTOR,
    lex_tf JSONB,
    lex_len INTEGER,
    PRIMARY KEY (tenant, rid),
    UNIQUE (tenant, id)
);
CREATE INDEX memories_id ON memories (id);
CREATE INDEX memories_rid ON memories (rid);
CREATE INDEX memories_scope ON memories (tenant, namespace, state);
CREATE INDEX memories_fingerprint ON memories (tenant, fingerprint);
CREATE INDEX memories_key ON memories (tenant, entity, attribute);
CREATE INDEX memories_consent ON memories (tenant, consent);
CREATE INDEX memories_analysis_version ON memories (analysis_version) WHERE state <> 'ERASED';
CREATE INDEX memories_lex ON memories USING gin (lex);
CREATE TABLE lexicon_stats (
    tenant TEXT PRIMARY KEY,
    docs BIGINT NOT NULL,
    length BIGINT NOT NULL
);
CREATE TABLE ledger (
    tenant TEXT NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    at DOUBLE PRECISION NOT NULL,
    event TEXT NOT NULL,
    memory_id TEXT,
    recall_id TEXT,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL DEFAULT '{}',
    role_set TEXT[] NOT NULL DEFAULT '{admin}',
    clearance INTEGER NOT NULL DEFAULT 3,
    PRIMARY KEY (tenant, seq)
);
CREATE INDEX ledger_memory ON ledger (tenant, memory_id, seq);
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the ledger is append-only'; END $$;
CREATE TRIGGER ledger_no_change BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TABLE recalls (
    tenant TEXT NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    namespace TEXT,
    state_hash TEXT NOT NULL,
    mode TEXT NOT NULL,
    served TEXT NOT NULL,
    payload TEXT NOT NULL,
    role_key TEXT NOT NULL,
    role_set TEXT[] NOT NULL,
    clearance INTEGER NOT NULL,
    actor TEXT NOT NULL DEFAULT '',
    rejected INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, seq),
    UNIQUE (tenant, id)
);
CREATE TABLE feedback (
    tenant TEXT NOT NULL,
    recall_id TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    success INTEGER NOT NULL,
    used TEXT NOT NULL,
    reward DOUBLE PRECISION,
    digest TEXT NOT NULL,
    inferred INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, recall_id)
);
CREATE TABLE memory_utility (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    uses BIGINT NOT NULL DEFAULT 0,
    successes BIGINT NOT NULL DEFAULT 0,
    inferred_uses BIGINT NOT NULL DEFAULT 0,
    inferred_successes BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, memory_id, namespace)
);
CREATE TABLE maintenance_failures (
    tenant TEXT NOT NULL DEFAULT '',
    id BIGINT GENERATED ALWAYS AS IDENTITY,
    at DOUBLE PRECISION NOT NULL,
    component TEXT NOT NULL,
    error TEXT NOT NULL,
    role_set TEXT[] NOT NULL DEFAULT '{}',
    classification INTEGER NOT NULL DEFAULT 3,
    PRIMARY KEY (tenant, id)
);
CREATE TABLE names (
    kind TEXT NOT NULL CHECK (kind IN ('tenant', 'namespace', 'role')),
    scope TEXT NOT NULL,
    skeleton TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (kind, scope, name)
);
CREATE INDEX names_skeleton ON names (kind, scope, skeleton);
CREATE TABLE api_keys (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    roles TEXT NOT NULL,
    clearance INTEGER NOT NULL,
    actor TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    created_at DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL,
    revoked_at DOUBLE PRECISION,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX api_keys_id ON api_keys (id);
CREATE INDEX api_keys_secret ON api_keys (secret_hash);
"""),
    # SQLite's m012: the learned attribute schema (`learning.schema`), evidence per tenant,
    # role set, classification and attribute; `role_set` renders the scope rule (`<@`)
    ("m002_attribute_schema", """
CREATE TABLE attribute_schema (
    tenant TEXT NOT NULL,
    role_key TEXT NOT NULL,
    role_set TEXT[] NOT NULL,
    classification INTEGER NOT NULL,
    attribute TEXT NOT NULL,
    single INTEGER NOT NULL DEFAULT 0,
    multi INTEGER NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, role_key, classification, attribute)
);
CREATE INDEX memories_attribute ON memories (tenant, attribute);
"""),
    # a memory's row whole in its page while it fits (toast_tuple_target: the largest there
    # is; the vectors kept in the row (MAIN) over pgvector's default, EXTERNAL): an exact scan
    # of a tenant's vectors and a lexical read of `lex_tf` then touch no TOAST pages. Rows
    # written earlier move when rewritten (VACUUM FULL memories)
    ("m003_rows_inline", """
ALTER TABLE memories SET (toast_tuple_target = 8160);
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
               AND table_name = 'memories' AND column_name = 'content_vec') THEN
        ALTER TABLE memories ALTER COLUMN content_vec SET STORAGE MAIN,
            ALTER COLUMN state_vec SET STORAGE MAIN;
    END IF;
END $$;
"""),    # each term's rows with their counts (SQLite's `lexicon_postings`): a lexical search reads
    # this index only, not every matching row of `memories`; filled from `lex_tf`
    ("m004_lexicon_postings", """
CREATE TABLE lexicon_postings (
    tenant TEXT NOT NULL,
    term TEXT NOT NULL,
    rid BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (tenant, term, rid) INCLUDE (tf, length)
);
""" + POSTINGS_OF + """;
"""),
    # store-wide secrets of the doors (`store.secrets`), read by `secret()` only
    ("m005_secrets", """
CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""),
    # SQLite's m014: the dashboard's browser sessions (`store.keys`), ended at logout
    ("m006_browser_sessions", """
CREATE TABLE browser_sessions (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX browser_sessions_age ON browser_sessions (created_at);
"""),
    # SQLite's m015: the proposals that wait for review, per tenant (a partial index, as small
    # as the queue): every recall counts those its principal may read (`count_pending`)
    ("m007_pending_index", """
CREATE INDEX memories_pending ON memories (tenant) WHERE state = 'PROPOSED';
"""),
]

VECTOR_INDEX_NAMES = ("memories_content_hnsw", "memories_state_hnsw")
VECTOR_INDEXES = """
CREATE INDEX memories_content_hnsw ON memories USING hnsw (content_vec vector_cosine_ops);
CREATE INDEX memories_state_hnsw ON memories USING hnsw (state_vec vector_cosine_ops);
"""
"""The HNSW indexes of both vector fields (cosine), built with the columns or after a load
(`PgBase.indexes_deferred`)."""


def vector_columns(dim: int) -> str:
    """The two vector columns of `memories` and their HNSW indexes (cosine), for a model of
    `dim` dimensions: run once, when the store binds its embedder. Kept in the row (storage
MAIN) while it fits in a page."""
    d = int(dim)
    return f"""
ALTER TABLE memories ADD COLUMN content_vec vector({d}), ADD COLUMN state_vec vector({d});
ALTER TABLE memories ALTER COLUMN content_vec SET STORAGE MAIN,
    ALTER COLUMN state_vec SET STORAGE MAIN;
""" + VECTOR_INDEXES

