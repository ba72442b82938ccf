"""`Service`: the typed operations every door calls (CLI, HTTP, MCP).

Each operation takes the principal the door established and one request document, calls
`Memory`, and returns a response document (`situated.service.models`). Nothing here checks a
value `Memory` checks itself: a rule lives once, in `situated.arguments`.

A `Service` holds a small pool of `Memory` objects over one file (a `Memory` serves one thread
at a time; the HTTP door runs requests in threads), or exactly one for the CLI.
"""

from __future__ import annotations

import builtins
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from typing import Any

from situated import arguments as args
from situated.errors import InvalidInput, NotFound, PermissionDenied, SituatedWarning
from situated.memory import Memory
from situated.models import MemoryRecord, Principal, State, validate_input
from situated.notices import collected, lines
from situated.recall.reconstruct import Policy
from situated.service.inferred import Sessions
from situated.service.models import (
    AddManyRequest,
    AddRequest,
    BriefingDoc,
    ConversationDoc,
    ConversationRequest,
    ErasedDoc,
    EventDoc,
    FeedbackDoc,
    FeedbackRequest,
    FindQuery,
    GatedDoc,
    HealthDoc,
    KeyCreate,
    KeyDoc,
    LearnRequest,
    ListQuery,
    MaintenanceDoc,
    MemoryDoc,
    NewKeyDoc,
    PendingDoc,
    RecallDoc,
    RecallPartDoc,
    RecallRequest,
    RecallSummaryDoc,
    RevokedDoc,
    RevokeRequest,
    _state,
)
from situated.store.contract import StoreContract, open_store
from situated.store.keys import ApiKey
from situated.store.scope import SYSTEM

FeedbackCall = Callable[[str, "builtins.list[str]"], str]
"""A door's feedback call for a recall: (recall id, served ids) -> the call as a model makes it
through that door."""

OPERATOR_ROLE = "operator"
"""The role a key needs for the file-wide operations `health` and `maintain`: they read and
change every tenant's rows, so no tenant's own roles reach them."""
MAX_FIND_SCAN = 20_000
"""How many memories `Service.find` reads through at most for one page of matches."""
FIND_PAGE = 500


class Pool:
    """Up to `size` `Memory` objects over one file, opened when first needed."""

    def __init__(self, factory: Callable[[], Memory], size: int = 2) -> None:
        self._factory = factory
        self._size = args.integer(size, "pool", 1, 64)
        self._idle: queue.Queue[Memory] = queue.Queue()
        self._opened = 0
        self._all: list[Memory] = []
        self._lock = threading.Lock()

    @classmethod
    def of(cls, mem: Memory) -> Pool:
        """A pool of exactly this one `Memory` (the CLI's)."""
        pool = cls(lambda: mem, 1)
        return pool

    @contextmanager
    def use(self) -> Iterator[Memory]:
        mem = self._take()
        try:
            yield mem
        finally:
            self._idle.put(mem)

    def _take(self) -> Memory:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            opening = self._opened < self._size
            if opening:
                self._opened += 1
        if not opening:
            return self._idle.get()
        try:
            mem = self._factory()
        except BaseException:
            with self._lock:
                self._opened -= 1
            raise
        self._all.append(mem)
        return mem

    def close(self) -> None:
        for mem in self._all:
            mem.close()
        self._all.clear()


def key_doc(key: ApiKey) -> KeyDoc:
    return KeyDoc.model_validate({
        "id": key.id, "tenant": key.tenant, "roles": list(key.roles),
        "clearance": key.clearance.label, "actor": key.actor, "label": key.label,
        "created_at": key.created_at, "created_by": key.created_by,
        "revoked_at": key.revoked_at,
    })


class Service:
    """The operations of situated, each as the principal a door names.

    Args:
        pool: where `Memory` objects come from.
        inferred_feedback: infer outcomes in sessions whose client never calls `feedback`
            (`situated.service.inferred`); False turns it off.
    """

    def __init__(self, pool: Pool, *, inferred_feedback: bool = True) -> None:
        self.pool = pool
        self.sessions = Sessions(enabled=inferred_feedback)
        self._key_store: StoreContract | None = None
        self._key_lock = threading.Lock()

    def close(self) -> None:
        with self._key_lock:
            if self._key_store is not None:
                self._key_store.close()
                self._key_store = None
        self.pool.close()

    # -- writing ----------------------------------------------------------------------------

    def add(self, who: Principal, req: AddRequest, session: str | None = None) -> GatedDoc:
        with self.pool.use() as mem, collected() as notices:
            rec = mem.add(principal=who, **req.arguments())
            self.sessions.after_add(mem, who, session, rec)
            return _gated(mem, who, rec, lines(notices))

    def add_many(self, who: Principal, req: AddManyRequest) -> list[GatedDoc]:
        with self.pool.use() as mem, collected() as notices:
            records = mem.add_many([i.arguments() for i in req.items], principal=who)
            return _each_gated(mem, who, records, notices)

    def learn(self, who: Principal, req: LearnRequest) -> list[GatedDoc]:
        with self.pool.use() as mem, collected() as notices:
            records = mem.learn(req.trajectory, principal=who, distiller=req.distiller)
            return _each_gated(mem, who, records, notices)

    def add_conversation(self, who: Principal, req: ConversationRequest) -> ConversationDoc:
        with self.pool.use() as mem, collected() as notices:
            done = mem.add_conversation(
                req.messages, principal=who, session=req.session, namespace=req.namespace,
                extractor=req.extractor,
            )
        return ConversationDoc(
            session=done.session, notes=[MemoryDoc.of(r) for r in done.notes],
            proposals=[MemoryDoc.of(r) for r in done.proposals], extractor=done.extractor,
            extractor_error=done.extractor_error, warnings=lines(notices),
        )

    # -- recall and feedback ----------------------------------------------------------------

    def recall(self, who: Principal, req: RecallRequest, session: str | None = None,
               feedback: FeedbackCall | None = None) -> BriefingDoc:
        """Compile guidance; `feedback` spells the feedback call in the door's own syntax
        for the rendered text (given the recall id and the served ids)."""
        present = _state(req.state) if (req.state.text.strip() or req.state.facts) else None
        policy = Policy(
            allowed_tools=None if req.allowed_tools is None else frozenset(req.allowed_tools),
            prohibited_effects=frozenset(req.prohibited_effects),
            version=req.policy_version,
        )
        with self.pool.use() as mem, collected():  # its notices are the briefing's warnings
            briefing = mem.recall(
                present or State(""), principal=who, intent=req.intent,
                namespace=req.namespace, k=req.k, budget_tokens=req.budget_tokens,
                as_of=req.as_of, known_at=req.known_at, policy=policy,
            )
            self.sessions.after_recall(mem, who, session, briefing)
        call = None if feedback is None else feedback(
            briefing.recall_id, [i.memory_id for i in briefing.items])
        return BriefingDoc.of(briefing, explain=req.explain, feedback=call)

    def feedback(self, who: Principal, req: FeedbackRequest) -> FeedbackDoc:
        with self.pool.use() as mem:
            result = mem.feedback(req.recall_id, principal=who, success=req.success,
                                  used=req.used, reward=req.reward, cited=req.cited)
        self.sessions.after_feedback(who, req.recall_id)
        return FeedbackDoc.model_validate(asdict(result))

    # -- reads ------------------------------------------------------------------------------

    def inspect(self, who: Principal, memory_id: str, as_of: Any = None,
                known_at: Any = None) -> MemoryDoc:
        with self.pool.use() as mem:
            return MemoryDoc.of(mem.inspect(memory_id, principal=who, as_of=as_of,
                                            known_at=known_at))

    def history(self, who: Principal, memory_id: str) -> list[EventDoc]:
        with self.pool.use() as mem:
            return [EventDoc.of(e) for e in mem.history(memory_id, principal=who)]

    def ledger(self, who: Principal, limit: int = 100, offset: int = 0) -> list[EventDoc]:
        with self.pool.use() as mem:
            return [EventDoc.of(e) for e in mem.ledger(principal=who, limit=limit,
                                                       offset=offset)]

    def list(self, who: Principal, q: ListQuery) -> list[MemoryDoc]:
        with self.pool.use() as mem:
            records = mem.list(principal=who, namespace=q.namespace, states=q.states,
                               limit=q.limit, offset=q.offset)
        return [MemoryDoc.of(r) for r in records]

    def export(self, who: Principal, namespace: str | None = None) -> Iterator[MemoryDoc]:
        """Every memory the principal may read, in pages (arguments checked at the call)."""
        args.principal(who)
        with self.pool.use() as mem:
            mem.export(principal=who, namespace=namespace)  # checks the arguments now
        return self._export(who, namespace)

    def _export(self, who: Principal, namespace: str | None) -> Iterator[MemoryDoc]:
        offset = 0
        while True:
            with self.pool.use() as mem:
                page = mem.list(principal=who, namespace=namespace, limit=500, offset=offset)
            if not page:
                return
            yield from (MemoryDoc.of(r) for r in page)
            offset += len(page)

    def stats(self, who: Principal) -> Any:
        from situated.service.models import StatsDoc

        with self.pool.use() as mem:
            return StatsDoc.model_validate(asdict(mem.stats(principal=who)))

    def find(self, who: Principal, q: FindQuery) -> builtins.list[MemoryDoc]:
        """Memories the principal may read whose content or source state holds `q.text`
        (case-insensitive) and whose kind and authority are among those asked, oldest
        first: a scan of the principal's own listing (`Memory.list`), at most
        `MAX_FIND_SCAN` memories deep."""
        needle = args.text(q.text, "text", args.MAX_LABEL_CHARS).casefold().strip()
        args.integer(q.limit, "limit", 1, 500)
        args.integer(q.offset, "offset", 0, args.MAX_OFFSET)
        kinds = set(q.kinds or ())
        authorities = set(q.authorities or ())
        found: builtins.list[MemoryDoc] = []
        scanned = 0
        while scanned < MAX_FIND_SCAN and len(found) < q.offset + q.limit:
            with self.pool.use() as mem:
                page = mem.list(principal=who, namespace=q.namespace, states=q.states,
                                limit=FIND_PAGE, offset=scanned)
            for rec in page:
                if kinds and rec.kind.value not in kinds:
                    continue
                if authorities and rec.authority.label not in authorities:
                    continue
                state = rec.source.state.text if rec.source.state is not None else ""
                if needle and needle not in f"{rec.content}\n{state}".casefold():
                    continue
                found.append(MemoryDoc.of(rec))
            scanned += len(page)
            if len(page) < FIND_PAGE:
                break
        return found[q.offset:q.offset + q.limit]

    def recalls(self, who: Principal, limit: int = 50, offset: int = 0
                ) -> builtins.list[RecallSummaryDoc]:
        """Recent recalls the principal may see, newest first (open one: `recall_record`)."""
        with self.pool.use() as mem:
            views = mem.recalls(principal=who, limit=limit, offset=offset)
        return [RecallSummaryDoc.of(v) for v in views]

    def recall_outcomes(self, who: Principal, limit: int = 500
                        ) -> builtins.list[tuple[datetime, builtins.list[str]]]:
        """(time, served verdicts and rejection reasons) of recent recalls, newest first."""
        with self.pool.use() as mem:
            return mem.recall_outcomes(principal=who, limit=limit)

    def utilities(self, who: Principal, most: int = 10_000) -> builtins.list[float]:
        """The measured utility of each memory the principal may read (up to `most`)."""
        with self.pool.use() as mem:
            return mem.utilities(principal=who, limit=most)

    def recall_record(self, who: Principal, recall_id: str) -> RecallDoc:
        with self.pool.use() as mem:
            return RecallDoc.of(mem.recall_record(recall_id, principal=who))

    def recalls_of(self, who: Principal, memory_id: str, limit: int = 50
                   ) -> builtins.list[RecallPartDoc]:
        """Recalls in which this memory was a candidate, newest first, each with what it
        decided about the memory: served (verdict, scores) or rejected (reason, stage)."""
        with self.pool.use() as mem:
            views = mem.recalls_of(memory_id, principal=who, limit=limit)
        return [RecallPartDoc.of(v, memory_id) for v in views]

    # -- review -----------------------------------------------------------------------------

    def pending(self, who: Principal, namespace: str | None = None) -> builtins.list[PendingDoc]:
        with self.pool.use() as mem:
            pending = mem.pending(reviewer=who, namespace=namespace)
        return [PendingDoc.of_gates(r, g) for r, g in pending]

    def promote(self, who: Principal, memory_id: str, reason: str = "approved") -> MemoryDoc:
        with self.pool.use() as mem:
            return MemoryDoc.of(mem.promote(memory_id, reviewer=who, reason=reason))

    def reject(self, who: Principal, memory_id: str, reason: str) -> MemoryDoc:
        with self.pool.use() as mem:
            return MemoryDoc.of(mem.reject(memory_id, reviewer=who, reason=reason))

    # -- consent, erasure, maintenance ------------------------------------------------------

    def revoke(self, who: Principal, req: RevokeRequest) -> RevokedDoc:
        with self.pool.use() as mem:
            n = mem.revoke_consent(req.consent, principal=who, reason=req.reason)
        return RevokedDoc(consent=req.consent, revoked=n)

    def erase(self, who: Principal, memory_id: str, reason: str) -> ErasedDoc:
        with self.pool.use() as mem:
            mem.erase(memory_id, principal=who, reason=reason)
        return ErasedDoc(erased=memory_id)

    def health(self, who: Principal | None = None) -> HealthDoc:
        """The file's health (`who`: a door's principal, which needs the operator role)."""
        _operator(who)
        with self.pool.use() as mem:
            return HealthDoc.model_validate(asdict(mem.health()))

    def maintain(self, who: Principal | None = None) -> MaintenanceDoc:
        _operator(who)
        with self.pool.use() as mem:
            report = mem.maintain(actor=who.name if who else "maintenance")
        return MaintenanceDoc.model_validate(asdict(report))

    # -- keys -------------------------------------------------------------------------------

    def create_key(self, req: KeyCreate, *, actor: str) -> NewKeyDoc:
        """A new API key bound to one principal; the secret is in the result and nowhere else."""
        who = validate_input("principal", lambda: Principal(
            req.tenant, frozenset(req.roles), req.clearance, req.actor or f"key:{req.tenant}"
        ))
        label = args.text(req.label, "label", args.MAX_LABEL_CHARS)
        args.label(actor, "actor")
        with self.pool.use() as mem:
            key, secret = mem.store.keys.create(who, actor=actor, label=label, scope=SYSTEM)
        return NewKeyDoc.model_validate(key_doc(key).model_dump() | {"secret": secret})

    def list_keys(self, tenant: str | None = None) -> builtins.list[KeyDoc]:
        if tenant is not None:
            args.label(tenant, "tenant")
        with self.pool.use() as mem:
            return [key_doc(k) for k in mem.store.keys.list(SYSTEM, tenant)]

    def revoke_key(self, key_id: str, *, actor: str, reason: str = "") -> KeyDoc:
        args.identifier(key_id, "key_id")
        args.label(actor, "actor")
        args.text(reason, "reason", args.MAX_REASON_CHARS)
        with self.pool.use() as mem:
            return key_doc(mem.store.keys.revoke(key_id, actor=actor, reason=reason,
                                                 scope=SYSTEM))

    def principal_for(self, secret: str) -> Principal | None:
        """The principal an API key's secret stands for; None if unknown or revoked (read at
        every call: a revoked key is refused from the next request). Through a store of its
        own, so a door may call it without waiting for a pooled `Memory` (one indexed read)."""
        key = self.key_for(secret)
        return None if key is None else key.principal

    def key_for(self, secret: str) -> ApiKey | None:
        """The live key whose secret this is (unknown, malformed or revoked: None)."""
        with self._key_lock:
            return self._keys().keys.resolve(secret)

    def live_key(self, key_id: str) -> ApiKey | None:
        """The key with this id while it is not revoked (a browser session holds a key's id,
        never its secret, and asks at every request: revoking the key ends the session)."""
        if not isinstance(key_id, str) or not key_id.startswith("key_") or len(key_id) > 64:
            return None
        with self._key_lock:
            store = self._keys()
            try:
                key = store.keys.get(key_id, SYSTEM)
            except NotFound:
                return None
        return key if key.revoked_at is None else None

    def begin_browser_session(self, key: ApiKey) -> str:
        """A new dashboard session of a live key (a login); returns its id."""
        with self._key_lock:
            return self._keys().keys.begin_session(key)

    def live_browser_session(self, key_id: str, session_id: str) -> ApiKey | None:
        """The key of a dashboard session while both are live (not revoked, not logged out);
        asked at every page."""
        key = self.live_key(key_id)
        if key is None or not isinstance(session_id, str) or len(session_id) > 64:
            return None
        with self._key_lock:
            return key if self._keys().keys.session_live(key, session_id) else None

    def end_browser_session(self, key_id: str, session_id: str) -> None:
        """End a dashboard session (a logout): its cookie is refused from now on."""
        if not isinstance(key_id, str) or not key_id.startswith("key_") or len(key_id) > 64:
            return
        with self._key_lock:
            store = self._keys()
            try:
                key = store.keys.get(key_id, SYSTEM)
            except NotFound:
                return
            store.keys.end_session(key, session_id)

    def dashboard_secret(self) -> bytes:
        """The store's signing key for dashboard cookies (`store.secrets`: kept in the store,
        on either backend, made on first use)."""
        with self.pool.use() as mem:
            return mem.store.secret("dashboard")

    def _keys(self) -> StoreContract:
        if self._key_store is None:
            with self.pool.use() as mem:
                location = mem.store.location  # may hold a password: never shown
            self._key_store = open_store(location, resident_mb=0)
        return self._key_store


def _gated(mem: Memory, who: Principal, rec: MemoryRecord, warnings: list[str] | None = None
           ) -> GatedDoc:
    """A written memory with its proposal's gate results (read as the writer, who may read
    what it just wrote) and what the write told the writer."""
    return GatedDoc.of_gates(rec, mem.gate_results(rec.id, principal=who), warnings)


def _each_gated(mem: Memory, who: Principal, records: builtins.list[MemoryRecord],
                notices: builtins.list[SituatedWarning]) -> builtins.list[GatedDoc]:
    """Each written memory's document with the notices about it (by the id it came back
    with); a notice about no memory in particular goes to every document."""
    about: dict[str | None, builtins.list[SituatedWarning]] = {}
    for n in notices:
        about.setdefault(n.memory_id, []).append(n)
    general = about.get(None, [])
    return [_gated(mem, who, r, lines(about.get(r.id, []) + general)) for r in records]


def _operator(who: Principal | None) -> None:
    if who is not None and OPERATOR_ROLE not in who.roles:
        raise PermissionDenied(f"this operation reads every tenant: it needs the "
                               f"{OPERATOR_ROLE!r} role")


__all__ = ["OPERATOR_ROLE", "InvalidInput", "Pool", "Service"]
