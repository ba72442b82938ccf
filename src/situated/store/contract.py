"""The store contract: what `Memory`, the recall pipeline, learning, the service doors and
`rebuild` use from a store, as one typed protocol. Two backends implement it: `store.sqlite`
(one file, the default) and `store.pg` (PostgreSQL + pgvector); `open_store` picks one from the
location, and nothing above the store imports a backend module.

Every read takes an `Eligibility` (or, for maintenance, `SYSTEM`); every change goes through
`append_event`, which writes the ledger row and applies `ledger.fold` in the same transaction.

Where the contract still shows SQLite (left so, to keep `store/sqlite.py` unchanged):
- `path` is a file path for SQLite and the connection string (password removed) for
  PostgreSQL; `health` prints it, the key store of the HTTP door reopens it.
- `resident` is SQLite's in-process index; PostgreSQL searches in the server and reports an
  empty one (`ResidentView`).
- `keys` (`store.keys.Keys`) reaches into `Store.db`, `_one`, `_all` and `_ledger`; PostgreSQL
  has its own `pg.keys.Keys` with the same methods (`KeysContract`).
- rids are SQLite rowids; PostgreSQL rids are an identity column: both are opaque integers
  unique within the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from situated.embed.base import Vector
from situated.models import Counters, MemoryRecord, Principal
from situated.store.ann import DEFAULT_ROWS as DEFAULT_ANN_ROWS
from situated.store.keys import ApiKey
from situated.store.ledger import EventType, Folded, LedgerEvent
from situated.store.resident import Rankings
from situated.store.scope import Eligibility, System
from situated.store.values import RebuildReport, RecallRow, StoredRecall

if TYPE_CHECKING:
    from situated.store.bulk import NewRow

AttributeKey = tuple[str, str, int, str]
"""(tenant, role key, classification, attribute): one scope's evidence row of an attribute."""

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""A location starting with one of these is a PostgreSQL connection string."""


class ResidentView(Protocol):
    """What `health` reads of an in-process search index."""

    def describe(self) -> dict[str, Any]: ...
    def verify(self) -> int: ...


class KeysContract(Protocol):
    """The API keys of a store (`store.keys`)."""

    def create(
        self, principal: Principal, *, actor: str, label: str, scope: System
    ) -> tuple[ApiKey, str]: ...
    def get(self, key_id: str, scope: System) -> ApiKey: ...
    def list(self, scope: System, tenant: str | None = None) -> list[ApiKey]: ...
    def revoke(self, key_id: str, *, actor: str, reason: str, scope: System) -> ApiKey: ...
    def resolve(self, secret: str) -> ApiKey | None: ...
    def begin_session(self, key: ApiKey) -> str: ...
    def session_live(self, key: ApiKey, session_id: str) -> bool: ...
    def end_session(self, key: ApiKey, session_id: str) -> None: ...


class StoreContract(Protocol):
    """A store backend. Writes are called inside `transaction()` unless they say otherwise
    (`erase` runs its own); reads are safe anywhere."""

    path: str
    """Where the store is, as shown (a file path; a connection string without password)."""

    @property
    def location(self) -> str:
        """What `open_store` reopens the store from (may hold a password: never shown)."""
    @property
    def keys(self) -> KeysContract: ...
    @property
    def resident(self) -> ResidentView: ...

    # -- lifecycle, transactions, identity ---------------------------------------------------
    def close(self) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def snapshot(self) -> AbstractContextManager[None]: ...
    def migrations(self) -> list[str]: ...
    def bind_embedder(self, model_ref: str, dim: int) -> None: ...
    def embedder_ref(self) -> str | None: ...
    def secret(self, name: str) -> bytes:
        """A store-wide secret of the doors (`store.secrets`), made once, atomically, on first
        use; no other read path returns it."""
    def meta(self, *keys: str) -> dict[str, str]: ...
    def erasures(self) -> int: ...
    def bump_generation(self) -> None: ...

    # -- writes -------------------------------------------------------------------------------
    def insert(
        self,
        rec: MemoryRecord,
        writer: Principal,
        vectors: dict[str, Vector],
        reason: str,
        extra: dict[str, Any] | None = None,
        analysis: tuple[int, bytes | None] | None = None,
    ) -> int: ...
    def append_event(
        self,
        memory_id: str,
        scope: Eligibility | System,
        event: EventType,
        actor: str,
        reason: str,
        data: dict[str, Any] | None = None,
        recall_id: str | None = None,
    ) -> Folded: ...
    def supersede(
        self, old_id: str, new_id: str, valid_until: float, scope: Eligibility, actor: str,
        reason: str,
    ) -> None: ...
    def revoke(self, consent: str, elig: Eligibility, actor: str, reason: str) -> int: ...
    def erase(
        self,
        memory_id: str,
        elig: Eligibility,
        actor: str,
        reason: str,
        scrub: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None: ...
    def insert_many(self, rows: Sequence[NewRow]) -> list[int]:
        """`insert` and the events of each row (SQLite: set-based, `store.bulk`); returns
        the rids in order. Every writer must be allowed to write its row's scope."""
    def set_analysis(self, rid: int, version: int, analysis: bytes | None) -> None: ...
    def record_failure(
        self, component: str, error: str, memory_id: str | None = None
    ) -> None: ...

    # -- scoped reads ---------------------------------------------------------------------------
    def get(self, memory_id: str, elig: Eligibility) -> MemoryRecord: ...
    def by_rids(self, rids: Sequence[int], elig: Eligibility) -> dict[int, MemoryRecord]: ...
    def with_analyses(
        self, rids: Sequence[int], elig: Eligibility, version: int | None
    ) -> dict[int, tuple[MemoryRecord, bytes | None]]: ...
    def situational(self, rids: Sequence[int], elig: Eligibility) -> dict[int, bool]: ...
    def page(
        self, elig: Eligibility, limit: int = 100, offset: int = 0
    ) -> list[MemoryRecord]: ...
    def count(self, elig: Eligibility) -> dict[str, int]: ...
    def count_pending(self, elig: Eligibility) -> int: ...
    def history(
        self, memory_id: str, elig: Eligibility, known_at: float | None = None
    ) -> list[LedgerEvent]: ...
    def ledger(
        self, elig: Eligibility, limit: int = 100, offset: int = 0
    ) -> list[LedgerEvent]: ...
    def count_events(self, elig: Eligibility) -> int: ...
    def visible_ids(self, memory_ids: Iterable[str], elig: Eligibility) -> set[str]: ...
    def by_fingerprint(self, fingerprint: str, elig: Eligibility) -> MemoryRecord | None: ...
    def same_key(
        self, entity: str, attribute: str, elig: Eligibility
    ) -> list[MemoryRecord]: ...
    def namespace_counters(
        self, memory_ids: Sequence[str], namespace: str, elig: Eligibility
    ) -> dict[str, tuple[float, float]]: ...
    def fingerprints_among(self, fingerprints: Sequence[str], elig: Eligibility) -> set[str]:
        """Which of these exact-duplicate keys `elig` reaches (`by_fingerprint` not None)."""
    def fact_keys_among(
        self, keys: Sequence[tuple[str, str]], elig: Eligibility
    ) -> set[tuple[str, str]]:
        """Which of these (entity, attribute) keys `elig` reaches (`same_key` not empty)."""
    def same_attribute(self, attribute: str, elig: Eligibility) -> list[MemoryRecord]:
        """Memories `elig` reaches with this attribute (any entity), oldest first."""
    def utilities(self, elig: Eligibility, limit: int) -> list[float]:
        """The measured utility of up to `limit` eligible memories, oldest first."""
    def recall_rows(
        self, rids: Sequence[int], elig: Eligibility, version: int
    ) -> dict[int, RecallRow]:
        """`with_analyses` with both stored vectors of each row, in one gated read."""

    # -- the attribute schema (`learning.schema`; the caller's scope is the key's) -------------
    def attribute_counts(self, key: AttributeKey) -> tuple[int, int]: ...
    def save_attribute_counts(self, key: AttributeKey, single: int, multi: int) -> None: ...
    def visible_attributes(self, principal: Principal) -> list[tuple[str, str, int, int, int]]:
        """(attribute, role key, classification, single, multi) of the scopes `principal`
        may read."""

    # -- search (stage 2 of recall) -------------------------------------------------------------
    def dense(
        self, field: str, query: Vector, k: int, elig: Eligibility
    ) -> list[tuple[int, float]]: ...
    def lexical(self, text: str, k: int, elig: Eligibility) -> list[tuple[int, float]]: ...
    def dense_many(
        self, field: str, queries: Vector, k: int, elig: Eligibility
    ) -> list[list[tuple[int, float]]]:
        """`dense` for each row of `queries` (SQLite: one matrix product over the resident
        slice when there is one)."""
    def search(self, query: Vector, text: str, k: int, elig: Eligibility) -> Rankings: ...
    def vectors_of(
        self, field: str, rids: Sequence[int], elig: Eligibility
    ) -> dict[int, Vector]: ...

    # -- recalls and feedback -----------------------------------------------------------------
    def save_recall(self, rec: StoredRecall, reader: Principal) -> None: ...
    def get_recall(self, recall_id: str, reader: Principal) -> StoredRecall: ...
    def feedback_digest(self, recall: StoredRecall) -> str | None: ...
    def save_feedback(
        self, recall: StoredRecall, success: bool, used: Sequence[str],
        reward: float | None, digest: str, inferred: bool = False,
    ) -> None: ...
    def drop_inferred_feedback(self, recall: StoredRecall) -> None: ...
    def count_recalls(self, reader: Principal) -> tuple[int, int]: ...
    def recall_records(
        self, reader: Principal, limit: int, offset: int = 0,
        recall_id: str | None = None, mentioning: str | None = None,
    ) -> list[tuple[Any, ...]]:
        """(id, at, actor, namespace, mode, served JSON, payload JSON) of the recalls the
        reader may see, newest first: one id, or those whose payload mentions a memory id,
        when asked (`store.recall_reads` cuts what they say about memories)."""
    def recall_briefings(
        self, reader: Principal, limit: int
    ) -> list[tuple[float, str | None, str | None]]:
        """(time, served items JSON, rejections JSON) of the recalls the reader may see,
        newest first."""
    def labelled_recalls_of(
        self, reader: Principal, namespace: str | None = None, inferred: bool = False
    ) -> list[tuple[str, dict[str, Any], bool, tuple[str, ...]]]:
        """(recall id, payload, success, used) of the recalls with feedback the reader may
        see, oldest first; inferred outcomes only when asked."""

    # -- maintenance (SYSTEM scope: never handed to a caller) ---------------------------------
    def unanalysed(
        self, version: int, limit: int, scope: System
    ) -> list[tuple[int, MemoryRecord]]: ...
    def count_unanalysed(self, version: int, scope: System) -> int: ...
    def failures(self, scope: Principal | System) -> dict[str, int]: ...
    def recent_failures(self, since: float, scope: System) -> dict[str, tuple[int, float, str]]: ...
    def lifecycle_candidates(self, scope: System) -> list[tuple[str, str, str, Counters]]: ...
    def low_value_since(self, memory_id: str, scope: System) -> float | None: ...
    def labelled_recalls(self, tenant: str, scope: System) -> list[tuple[str, int, str]]: ...
    def count_labelled_recalls(self, tenant: str, scope: System) -> int: ...
    def feedback_tenants(self, scope: System) -> list[str]: ...
    def count_labelled(self, tenant: str, scope: System) -> int: ...
    def rebuild(self, repair: bool = False) -> RebuildReport: ...
    def build_graphs(self, scope: System, min_rows: int | None = None) -> list[str]: ...
    def integrity(self) -> str: ...
    def orphans(self) -> int: ...


def is_postgres(location: str) -> bool:
    """Whether a store location names a PostgreSQL database (else it is a SQLite file)."""
    return location.startswith(POSTGRES_SCHEMES)


def open_store(
    location: str, resident_mb: float, ann_rows: int = DEFAULT_ANN_ROWS
) -> StoreContract:
    """The store at `location`: a PostgreSQL connection string (`postgresql://...`, needs the
    `postgres` extra) or a SQLite file path. `resident_mb` and `ann_rows` size SQLite's
    in-process index and the rows from which a tenant is searched approximately; PostgreSQL
    searches in the server and ignores both."""
    if is_postgres(location):
        from situated.extras import require

        require("a PostgreSQL store", "psycopg", "psycopg_pool", "pgvector")
        from situated.store.pg.store import PostgresStore

        return PostgresStore(location)
    from situated.store.sqlite import Store

    return Store(location, resident_mb=resident_mb, ann_rows=ann_rows)
