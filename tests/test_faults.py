"""I/O errors and a full disk injected under the store, in the spirit of SQLite's own fault tests.

A VFS shim (`FaultVFS`, an `apsw.VFS` inheriting the default one) fails the Nth xWrite, xSync,
xTruncate or xRead of the main database file or its WAL with SQLITE_IOERR or SQLITE_FULL, once
(a transient fault) or from then on (a persistent one: the disk stays full until disarmed).
The -shm file never reaches Python (apsw hands the xShm methods to the C VFS, which maps the
file), so its faults are injected one level lower: `ShmHook` replaces the unix VFS's system
calls that size and map it (`xSetSystemCall`) for the armed run only.

Every write path of the public API (and opening, creating and closing a store) runs with the
fault at N = 1, 2, 3 ... until a run completes without reaching it; long paths run a spread of
Ns instead, and `test_faults_dense` (slow) adds denser and harsher cells. For each faulted run:

- the call that hit the fault raises `StoreFailure` (a `SituatedRuntimeError`), or, when SQLite
  absorbed the fault (a checkpoint after the commit), returns and counts as acknowledged;
- the connection holds no transaction afterwards;
- a crash image (the files as they are on disk right then, copied without the -shm), then the
  store itself (opened by another reader while the faulted `Memory` is still open, and again
  after that one closed) pass, without the shim: full `PRAGMA integrity_check`,
  `health().ok`, `rebuild().mismatched == ()`, the row-by-row invariants of `_invariants`,
  every write acknowledged before the fault readable through `inspect`, the faulted write
  wholly present or wholly absent, and the store still writable;
- the same `Memory`, with the fault disarmed, stays healthy, writes, and reads what a fresh
  one reads, through its resident index and through SQLite (no cache holding a rolled-back
  change).

`test_summary` prints the totals quoted in the README; `SITUATED_FAULTS=all` runs every cell
at every N.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import pytest

from situated import Briefing, LifecycleState, Memory, NotFound, Principal, State
from situated.errors import SituatedRuntimeError, StoreFailure
from situated.write.promotion import ReviewAll

BASE_VFS = apsw.vfs_names()[0]
"""The default VFS (`unix`), captured before any shim registers: the shim inherits from it and
every reopen uses it."""

ERRORS: dict[str, type[apsw.Error]] = {"ioerr": apsw.IOError, "full": apsw.FullError}
INJECTED = "injected:"
ERRNOS = {"ioerr": errno.EIO, "full": errno.ENOSPC}
CODES = {"read": apsw.SQLITE_IOERR_READ, "write": apsw.SQLITE_IOERR_WRITE,
         "sync": apsw.SQLITE_IOERR_FSYNC, "truncate": apsw.SQLITE_IOERR_TRUNCATE}
"""The extended codes the unix VFS returns for these failures."""

WRITER = Principal(tenant="acme", name="writer", roles={"support"}, clearance="internal")
ADMIN = Principal(
    tenant="acme", name="admin", roles={"support", "admin", "reviewer"}, clearance="restricted"
)


# -- the shim ----------------------------------------------------------------------------------


@dataclass
class Fault:
    """Fail the `nth` `op` on `file` (`any`: every file, as a full disk does) with `error`;
    persistent: every matching call from the nth on fails too, until disarmed."""

    file: str
    op: str
    error: str
    nth: int
    persistent: bool = False
    seen: int = 0
    hits: int = 0

    def due(self, file: str, op: str) -> bool:
        if op != self.op or self.file not in (file, "any"):
            return False
        self.seen += 1
        if self.seen == self.nth or (self.persistent and self.seen > self.nth):
            self.hits += 1
            return True
        return False

    @property
    def label(self) -> str:
        return f"{self.error} on {self.op} #{self.nth} of {self.file}" + (
            " (persistent)" if self.persistent else ""
        )


RECALLS = "-recalls"
"""The recall file is `<store>-recalls` (`situated.store.recall_log`); its kinds are prefixed `r`:
`rdb`, `rwal`, `rshm`, `rjournal`."""


def _file_kind(name: Any, flags: int) -> str:
    path = name.filename() if isinstance(name, apsw.URIFilename) else str(name or "")
    recall = path.endswith((RECALLS, f"{RECALLS}-wal", f"{RECALLS}-journal"))
    if flags & apsw.SQLITE_OPEN_MAIN_DB:
        kind = "db"
    elif flags & apsw.SQLITE_OPEN_WAL:
        kind = "wal"
    elif flags & apsw.SQLITE_OPEN_MAIN_JOURNAL:
        kind = "journal"
    else:
        return "temp"
    return f"r{kind}" if recall else kind


class FaultVFS(apsw.VFS):
    """The default VFS with faults on demand; counts every call it sees per (file, op)."""

    def __init__(self) -> None:
        self.fault: Fault | None = None
        self.calls: Counter[tuple[str, str]] = Counter()
        super().__init__("situated-faults", base=BASE_VFS, makedefault=True)

    def xOpen(self, name: Any, flags: list[int]) -> FaultFile:
        return FaultFile(self, name, flags)

    def trip(self, file: str, op: str) -> None:
        self.calls[file, op] += 1
        f = self.fault
        if f is not None and f.due(file, op):
            exc = ERRORS[f.error](f"{INJECTED} {f.label}")
            exc.result = exc.extendedresult = (  # type: ignore[attr-defined]
                CODES[op] if f.error == "ioerr" else apsw.SQLITE_FULL
            )
            raise exc


class FaultFile(apsw.VFSFile):
    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]) -> None:
        self.vfs = vfs
        self.file = _file_kind(name, flags[0])
        super().__init__(BASE_VFS, name, flags)

    def xRead(self, amount: int, offset: int) -> bytes:
        self.vfs.trip(self.file, "read")
        data: bytes = super().xRead(amount, offset)
        return data

    def xWrite(self, data: Any, offset: int) -> None:
        self.vfs.trip(self.file, "write")
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        self.vfs.trip(self.file, "sync")
        super().xSync(flags)

    def xTruncate(self, newsize: int) -> None:
        self.vfs.trip(self.file, "truncate")
        super().xTruncate(newsize)


_PWRITE = ctypes.CFUNCTYPE(
    ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64,
    use_errno=True,
)
_FTRUNCATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int64, use_errno=True)
_MMAP = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ctypes.c_int64, use_errno=True,
)
_MAP_FAILED = ctypes.c_void_p(-1).value


class ShmHook:
    """-shm faults, one level below the VFS: while installed, the unix VFS's `pwrite64` (the
    one-byte writes that size the file as the WAL index grows), `ftruncate` (at the first open)
    and `mmap` go through here; calls on a -shm file count as its write / truncate / map and
    fail with EIO or ENOSPC when due. Calls on other files pass straight through."""

    def __init__(self, vfs: FaultVFS) -> None:
        self.vfs = vfs
        self.real = {
            "pwrite64": _PWRITE(vfs.xGetSystemCall("pwrite64")),
            "ftruncate": _FTRUNCATE(vfs.xGetSystemCall("ftruncate")),
            "mmap": _MMAP(vfs.xGetSystemCall("mmap")),
        }
        self.hooks = {
            "pwrite64": _PWRITE(self._pwrite),
            "ftruncate": _FTRUNCATE(self._ftruncate),
            "mmap": _MMAP(self._mmap),
        }

    def _due(self, fd: int, op: str) -> bool:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        if not target.endswith("-shm"):
            return False
        file = "rshm" if target.endswith(f"{RECALLS}-shm") else "shm"
        self.vfs.calls[file, op] += 1
        f = self.vfs.fault
        if f is not None and f.due(file, op):
            ctypes.set_errno(ERRNOS[f.error])
            return True
        return False

    def _pwrite(self, fd: int, buf: int, n: int, offset: int) -> int:
        if self._due(fd, "write"):
            return -1
        out: int = self.real["pwrite64"](fd, buf, n, offset)
        return out

    def _ftruncate(self, fd: int, size: int) -> int:
        if self._due(fd, "truncate"):
            return -1
        out: int = self.real["ftruncate"](fd, size)
        return out

    def _mmap(self, addr: int, n: int, prot: int, flags: int, fd: int, offset: int) -> int:
        if self._due(fd, "map"):
            return _MAP_FAILED  # type: ignore[return-value]
        out: int = self.real["mmap"](addr, n, prot, flags, fd, offset)
        return out

    @contextmanager
    def installed(self) -> Iterator[None]:
        for name, hook in self.hooks.items():
            self.vfs.xSetSystemCall(name, ctypes.cast(hook, ctypes.c_void_p).value or 0)
        try:
            yield
        finally:
            for name in self.hooks:
                self.vfs.xSetSystemCall(name, 0)  # 0: back to the default


@contextmanager
def armed(vfs: FaultVFS, shm: ShmHook, fault: Fault) -> Iterator[Fault]:
    vfs.fault = fault
    try:
        if fault.file in ("shm", "rshm", "any"):
            with shm.installed():
                yield fault
        else:
            yield fault
    finally:
        vfs.fault = None


@dataclass
class Faulty:
    """A `Memory` whose connection runs on a `FaultVFS`; every other open uses the real VFS."""

    mem: Memory
    vfs: FaultVFS
    shm: ShmHook

    def armed(self, fault: Fault) -> AbstractContextManager[Fault]:
        return armed(self.vfs, self.shm, fault)


@contextmanager
def injected_unraisables_ignored() -> Iterator[None]:
    """apsw reports a fault it could not raise (a second one while a first is pending, one in
    a statement finalized by a close) as unraisable; injected ones are expected here."""
    previous = sys.unraisablehook

    def hook(u: Any) -> None:
        if not str(u.exc_value).startswith(INJECTED):
            previous(u)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def open_faulty(path: Path, fault: Fault | None = None, **options: Any) -> Faulty:
    """Open `path` on a fresh shim (armed with `fault` during the open when given)."""
    vfs = FaultVFS()
    shm = ShmHook(vfs)
    try:
        if fault is None:
            mem = Memory(path, embedder="hash", **options)
        else:
            with armed(vfs, shm, fault):
                mem = Memory(path, embedder="hash", **options)
    finally:
        vfs.unregister()  # the store's connection keeps its VFS; later opens get the real one
    assert apsw.vfs_names()[0] == BASE_VFS
    return Faulty(mem, vfs, shm)


# -- write paths -------------------------------------------------------------------------------


@dataclass
class Ctx:
    """What a path's setup left in its template store, and what a run adds to it."""

    acked: dict[str, str] = field(default_factory=dict)
    """Memory id -> content of every memory acknowledged before the fault."""
    recalls: dict[str, Principal] = field(default_factory=dict)
    """Recall id -> reader of every recall acknowledged (its Briefing returned)."""
    ids: dict[str, Any] = field(default_factory=dict)
    before: dict[str, int] = field(default_factory=dict)
    """Row counts just before the armed call."""

    def copy(self) -> Ctx:
        return Ctx(dict(self.acked), dict(self.recalls), dict(self.ids), dict(self.before))


def _count(mem: Memory, sql: str, params: tuple[object, ...] = ()) -> int:
    return int(mem.store._all(sql, params)[0][0])


def _events(mem: Memory, memory_id: str, event: str) -> int:
    return _count(
        mem, "SELECT COUNT(*) FROM ledger WHERE memory_id = ? AND event = ?", (memory_id, event)
    )


def _ids_with(mem: Memory, content: str) -> list[str]:
    return [str(r[0]) for r in mem.store._all("SELECT id FROM memories WHERE content = ?",
                                              (content,))]


def _state(mem: Memory, memory_id: str) -> str:
    return str(mem.store._all("SELECT state FROM memories WHERE id = ?", (memory_id,))[0][0])


def _indexed(mem: Memory, memory_id: str) -> tuple[bool, bool]:
    """(has its FTS row, has its vectors in all three vector tables)."""
    rid = mem.store._rid(memory_id)
    fts = _count(mem, "SELECT COUNT(*) FROM memories_fts WHERE rowid = ?", (rid,)) == 1
    vec = all(
        _count(mem, f"SELECT COUNT(*) FROM {t} WHERE rid = ?", (rid,)) == 1
        for t in ("vectors", "vec_content", "vec_state")
    )
    return fts, vec


def _stored_lesson(mem: Memory, content: str) -> bool:
    """Whether an auto-promoted lesson with this text is stored, checking it is whole."""
    ids = _ids_with(mem, content)
    assert len(ids) <= 1, ids
    if not ids:
        return False
    (mid,) = ids
    assert _events(mem, mid, "proposed") == 1
    assert _events(mem, mid, "promoted") == 1
    assert _state(mem, mid) == "ACTIVE"
    assert _indexed(mem, mid) == (True, True)
    return True


def _ack(ctx: Ctx, rec: Any) -> None:
    ctx.acked[rec.id] = rec.content


def _recall(mem: Memory, ctx: Ctx, **kw: Any) -> Briefing:
    """A recall whose Briefing returned: its record must be in the recall file from now on."""
    kw.setdefault("principal", WRITER)
    b = mem.recall(QUERY, **kw)
    ctx.recalls[b.recall_id] = kw["principal"]
    return b


def _base(mem: Memory, ctx: Ctx) -> None:
    """Acknowledged writes every path starts from: lessons (two under consent c1) and a fact."""
    for i, (text, consent) in enumerate([
        ("Annual plans past 30 days get a prorated refund, not a full one.", "c1"),
        ("Ask for the order number before looking up a shipment.", "c1"),
        ("Escalate a chargeback to billing within one day.", None),
    ]):
        _ack(ctx, mem.add(text, principal=WRITER, consent=consent, namespace="refunds",
                          state=State(f"customer case {i}", facts={"plan": "annual", "case": i}),
                          action="answered", success=True))
    fact = mem.add("The premium plan costs 10 euros a month.", principal=WRITER, kind="fact",
                   entity="premium plan", attribute="price", value=10, namespace="refunds")
    _ack(ctx, fact)
    ctx.ids["fact"] = fact.id


QUERY = State("Annual subscriber asks for a refund after 60 days",
              facts={"plan": "annual", "case": 0})


@dataclass(frozen=True)
class WritePath:
    """One write path of the public API: how to set it up, the call under fault, and how to
    tell (on a fresh reopen) whether that call's write is wholly present or wholly absent."""

    name: str
    run: Callable[[Memory, Ctx], None]
    applied: Callable[[Memory, Ctx], bool]
    setup: Callable[[Memory, Ctx], None] = _base
    options: dict[str, Any] = field(default_factory=dict)
    wal_frames: int = 0
    """Leave this many frames in the template's WAL (a checkpoint or -shm growth is due)."""
    recall_wal_frames: int = 0
    """... in the recall file's WAL."""
    opens: bool = False
    """The call under fault is opening the store."""
    creates: bool = False
    """... a store that does not exist yet."""
    closes: bool = False
    """The call under fault is closing the store (the checkpoint of its WAL)."""
    prelude: Callable[[Memory, Ctx], None] | None = None
    """Run on the opened store before the fault is armed."""
    warm: bool = True
    """Recall twice before the fault (loads the resident slice, fills the caches). Off where
    the template's WAL is measured for the faulted call (a recall record adds frames)."""


def _run_add(mem: Memory, ctx: Ctx) -> None:
    _ack(ctx, mem.add(ctx.ids["new"], principal=WRITER, namespace="refunds",
                      state=State("a new case", facts={"plan": "monthly"})))


def _setup_add(mem: Memory, ctx: Ctx) -> None:
    _base(mem, ctx)
    ctx.ids["new"] = "Offer a callback when the queue is longer than ten minutes."


def _applied_add(mem: Memory, ctx: Ctx) -> bool:
    return _stored_lesson(mem, ctx.ids["new"])


BATCHES = (("Batch one: check the plan first.", "Batch one: quote the policy page."),
           ("Batch two: confirm the refund amount.", "Batch two: log the ticket number."))


def _run_add_many(mem: Memory, ctx: Ctx) -> None:
    for rec in mem.add_many([{"content": c, "namespace": "ops"} for b in BATCHES for c in b],
                            principal=WRITER, batch_size=2):
        _ack(ctx, rec)


def _applied_add_many(mem: Memory, ctx: Ctx) -> bool:
    whole = [all(_stored_lesson(mem, c) for c in b) for b in BATCHES]
    for b, w in zip(BATCHES, whole, strict=True):
        assert w or not any(_ids_with(mem, c) for c in b), "a batch is half stored"
    assert whole[0] or not whole[1], "the second batch committed before the first"
    return all(whole)


def _setup_first_add(mem: Memory, ctx: Ctx) -> None:
    ctx.ids["new"] = "The first lesson of an empty store."


def _run_supersede(mem: Memory, ctx: Ctx) -> None:
    _ack(ctx, mem.add("The premium plan costs 12 euros a month.", principal=WRITER, kind="fact",
                      entity="premium plan", attribute="price", value=12, namespace="refunds"))


def _applied_supersede(mem: Memory, ctx: Ctx) -> bool:
    new = _stored_lesson(mem, "The premium plan costs 12 euros a month.")
    old = ctx.ids["fact"]
    superseded = _events(mem, old, "superseded")
    assert superseded == int(new)
    assert (_state(mem, old) == "INVALIDATED") == new
    link = mem.store._all("SELECT superseded_by, valid_until FROM memories WHERE id = ?", (old,))
    assert (link[0][0] is not None) == new
    return new


def _counts(mem: Memory) -> dict[str, int]:
    return {t: _count(mem, f"SELECT COUNT(*) FROM {t}")
            for t in ("recall_log.recalls", "feedback", "ledger", "memories")}


def _run_recall(mem: Memory, ctx: Ctx) -> None:
    _recall(mem, ctx, namespace="refunds")


def _applied_recall(mem: Memory, ctx: Ctx) -> bool:
    added = _count(mem, "SELECT COUNT(*) FROM recall_log.recalls") - ctx.before[
        "recall_log.recalls"]
    assert added in (0, 1)
    return added == 1


def _setup_feedback(mem: Memory, ctx: Ctx) -> None:
    _base(mem, ctx)
    b = _recall(mem, ctx, namespace="refunds")
    assert b.items, "the feedback path needs a recall that served something"
    ctx.ids["recall"] = b.recall_id
    ctx.ids["served"] = [i.memory_id for i in b.items]


def _run_feedback(mem: Memory, ctx: Ctx) -> None:
    mem.feedback(ctx.ids["recall"], principal=WRITER, success=True,
                 used=ctx.ids["served"][:1])


def _applied_feedback(mem: Memory, ctx: Ctx) -> bool:
    rid = ctx.ids["recall"]
    given = _count(mem, "SELECT COUNT(*) FROM feedback WHERE recall_id = ?", (rid,))
    events = _count(mem, "SELECT COUNT(*) FROM ledger WHERE recall_id = ? AND event = 'feedback'",
                    (rid,))
    assert events == given * len(ctx.ids["served"])
    used = ctx.ids["served"][0]
    assert _count(mem, "SELECT COUNT(*) FROM memory_utility WHERE memory_id = ?", (used,)) == given
    return given == 1


def _setup_review(mem: Memory, ctx: Ctx) -> None:
    _base(mem, ctx)
    held = mem.add("Refund shipping when the parcel arrived damaged.", principal=WRITER)
    assert held.state is LifecycleState.PROPOSED
    _ack(ctx, held)
    ctx.ids["held"] = held.id


def _run_promote(mem: Memory, ctx: Ctx) -> None:
    mem.promote(ctx.ids["held"], reviewer=ADMIN)


def _applied_promote(mem: Memory, ctx: Ctx) -> bool:
    mid = ctx.ids["held"]
    done = _events(mem, mid, "promoted")
    assert done in (0, 1) and (_state(mem, mid) == "ACTIVE") == bool(done)
    return done == 1


def _run_reject(mem: Memory, ctx: Ctx) -> None:
    mem.reject(ctx.ids["held"], reviewer=ADMIN, reason="not our policy")


def _applied_reject(mem: Memory, ctx: Ctx) -> bool:
    mid = ctx.ids["held"]
    done = _events(mem, mid, "rejected")
    assert done in (0, 1) and (_state(mem, mid) == "REJECTED") == bool(done)
    return done == 1


def _run_revoke(mem: Memory, ctx: Ctx) -> None:
    assert mem.revoke_consent("c1", principal=ADMIN, reason="withdrawn") == 2


def _applied_revoke(mem: Memory, ctx: Ctx) -> bool:
    under = [str(r[0]) for r in mem.store._all("SELECT id FROM memories WHERE consent = 'c1'")]
    done = [_events(mem, m, "revoked") == 1 and _state(mem, m) == "REVOKED" for m in under]
    assert len(under) == 2 and len(set(done)) == 1, "a consent half revoked"
    return done[0]


def _setup_erase(mem: Memory, ctx: Ctx) -> None:
    _setup_feedback(mem, ctx)
    ctx.ids["target"] = ctx.ids["served"][0]
    assert _count(mem, "SELECT COUNT(*) FROM recall_log.recalls WHERE instr(payload, ?) > 0",
                  (ctx.acked[ctx.ids["target"]],)), "the erase path needs a recall quoting it"


def _run_erase(mem: Memory, ctx: Ctx) -> None:
    mem.erase(ctx.ids["target"], principal=ADMIN, reason="asked to forget")


def _applied_erase(mem: Memory, ctx: Ctx) -> bool:
    """The main file's part is whole or absent. The recall file is scrubbed in its own
    transactions, before the main file's commit and again after it: a failed erasure may have
    scrubbed the recalls already (the memory itself intact); a committed one has scrubbed them
    (no recall here is made between the two scrubs)."""
    mid = ctx.ids["target"]
    text = ctx.acked[mid]
    done = _events(mem, mid, "erased")
    row = mem.store._all("SELECT content, state FROM memories WHERE id = ?", (mid,))[0]
    fts, vec = _indexed(mem, mid)
    quoted = _count(mem, "SELECT COUNT(*) FROM recall_log.recalls WHERE instr(payload, ?) > 0",
                    (text,))
    erasures = int(mem.store.meta("erasures").get("erasures", 0))
    whole = (row == ("", "ERASED"), not fts, not vec, erasures == 1)
    assert done in (0, 1) and whole == ((bool(done),) * 4), whole
    assert quoted == 0 or not done, "an erased memory's text is still quoted by a recall"
    return done == 1


def _small_cache(mem: Memory, ctx: Ctx) -> None:
    """A page cache of 5 pages: a transaction spills dirty pages into the WAL before its
    commit, and a fault there makes SQLite cancel the whole transaction mid-way."""
    mem.store.db.execute("PRAGMA cache_size = 5")


def _prelude_close(mem: Memory, ctx: Ctx) -> None:
    for i in range(3):  # acknowledged, still in the WAL when the store closes
        _ack(ctx, mem.add(f"Written just before closing, number {i}.", principal=WRITER))


PATHS = [
    WritePath("add", _run_add, _applied_add, _setup_add),
    WritePath("add_many", _run_add_many, _applied_add_many),
    WritePath("add_many spilling its cache", _run_add_many, _applied_add_many,
              prelude=_small_cache),
    WritePath("add superseding a fact", _run_supersede, _applied_supersede),
    WritePath("first add of a new store", _run_add, _applied_add, _setup_first_add,
              warm=False),
    WritePath("recall", _run_recall, _applied_recall),
    WritePath("feedback", _run_feedback, _applied_feedback, _setup_feedback),
    WritePath("promote", _run_promote, _applied_promote, _setup_review,
              {"promotion": ReviewAll()}),
    WritePath("reject", _run_reject, _applied_reject, _setup_review, {"promotion": ReviewAll()}),
    WritePath("revoke_consent", _run_revoke, _applied_revoke),
    WritePath("erase", _run_erase, _applied_erase, _setup_erase),
    WritePath("add with a checkpoint due", _run_add, _applied_add, _setup_add, wal_frames=990,
              warm=False),
    WritePath("add growing the -shm", _run_add, _applied_add, _setup_add, wal_frames=4040,
              warm=False),
    WritePath("recall with a checkpoint due", _run_recall, _applied_recall, _setup_feedback,
              recall_wal_frames=998, warm=False),
    WritePath("open", lambda m, c: None, lambda m, c: True, opens=True),
    WritePath("create", lambda m, c: None, lambda m, c: True, opens=True, creates=True),
    WritePath("close", lambda m, c: m.close(), lambda m, c: True, closes=True,
              prelude=_prelude_close),
]


# -- templates, runs and checks ----------------------------------------------------------------


@dataclass
class Template:
    """A path's store after its setup, copied afresh for every run."""

    dir: Path
    ctx: Ctx

    def copy_to(self, where: Path) -> Path:
        where.mkdir(parents=True)
        for f in self.dir.iterdir():
            shutil.copyfile(f, where / f.name)
        return where / "store.db"


def _fill_wal(db: Path, frames: int, into: Path, recalls: bool = False) -> None:
    """Leave `frames` frames in the WAL of `db` (commits of one meta row the store does not
    read, never checkpointed; `recalls`: of the recall file, toggling a space after the actor
    of its first record, left as it was) and copy the files, as a crash would leave them,
    into `into`."""
    file = Path(f"{db}{RECALLS}") if recalls else db
    conn = apsw.Connection(str(file), vfs=BASE_VFS)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA synchronous = OFF")
    wal = Path(f"{file}-wal")
    n = 0
    toggle = "UPDATE recalls SET actor = ? WHERE seq = (SELECT MIN(seq) FROM recalls)"
    actor = str(conn.execute("SELECT actor FROM recalls ORDER BY seq").fetchall()[0][0]
                ) if recalls else ""
    while not wal.exists() or (wal.stat().st_size - 32) // (4096 + 24) < frames or n % 2:
        n += 1
        if recalls:
            conn.execute(toggle, (actor + " " * (n % 2),))
        else:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('test_filler', ?)",
                         (n,))
    into.mkdir()
    for f in (db, Path(f"{db}{RECALLS}"), wal):
        shutil.copyfile(f, into / f.name)
    conn.close()


_TEMPLATES: dict[str, Template] = {}


def template(wp: WritePath, root: Path) -> Template:
    if wp.name not in _TEMPLATES:
        d = root / f"template-{len(_TEMPLATES)}"
        d.mkdir()
        ctx = Ctx()
        if not wp.creates:
            mem = Memory(d / "store.db", embedder="hash", **wp.options)
            wp.setup(mem, ctx)
            mem.close()
        if wp.wal_frames or wp.recall_wal_frames:
            _fill_wal(d / "store.db", wp.wal_frames or wp.recall_wal_frames,
                      root / f"template-{len(_TEMPLATES)}-wal", recalls=bool(wp.recall_wal_frames))
            d = root / f"template-{len(_TEMPLATES)}-wal"
        assert sorted(p.name for p in d.iterdir()) in (
            [], ["store.db", "store.db-recalls"], ["store.db", "store.db-recalls", "store.db-wal"],
            ["store.db", "store.db-recalls", "store.db-recalls-wal"],
        )
        _TEMPLATES[wp.name] = Template(d, ctx)
    return _TEMPLATES[wp.name]


@dataclass
class Tally:
    """Totals over every run of this module, for `test_summary` and the README."""

    runs: int = 0
    injected: int = 0
    raised: int = 0
    absorbed: int = 0
    applied: int = 0
    reopened: int = 0
    acked_checked: int = 0
    acked_recalls: int = 0
    """... of them recalls (a recall record whose Briefing returned)."""
    lost: int = 0
    kept_working: int = 0
    crash_kept_unacked: int = 0
    """Runs whose call raised, yet whose crash image held the write (whole)."""
    calls: int = 0
    cells: set[tuple[str, str, str, str]] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)


TALLY = Tally()


def crash_image(db: Path, where: Path) -> Path:
    """The store's files, main and recall file, as a crash of the process right now would
    leave them (no -shm: the next open recovers the WAL index)."""
    where.mkdir()
    for file in ("", RECALLS):
        for suffix in ("", "-journal", "-wal"):
            src = Path(f"{db}{file}{suffix}")
            if src.exists():
                shutil.copyfile(src, where / src.name)
    return where / db.name


def _invariants(mem: Memory) -> None:
    """Ledger, records, full-text rows, vectors and the recall file agree, row by row."""
    checks = {
        "memory without its proposed event": """SELECT COUNT(*) FROM memories m WHERE NOT EXISTS
            (SELECT 1 FROM ledger l WHERE l.memory_id = m.id AND l.event = 'proposed')""",
        "event of a memory not stored": """SELECT COUNT(*) FROM ledger l WHERE l.memory_id IS
            NOT NULL AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = l.memory_id)""",
        "FTS row without its memory": """SELECT COUNT(*) FROM memories_fts f WHERE NOT EXISTS
            (SELECT 1 FROM memories m WHERE m.rid = f.rowid AND m.state != 'ERASED')""",
        "memory without its FTS row": """SELECT COUNT(*) FROM memories m WHERE m.state !=
            'ERASED' AND m.rid NOT IN (SELECT rowid FROM memories_fts)""",
        "erased memory with content": """SELECT COUNT(*) FROM memories WHERE state = 'ERASED'
            AND (content != '' OR state_text IS NOT NULL)""",
        "recalled event in the main ledger": """SELECT COUNT(*) FROM ledger WHERE
            event = 'recalled'""",  # a recall row in the recall file is its event
        "feedback without its recall": """SELECT COUNT(*) FROM feedback f WHERE NOT EXISTS
            (SELECT 1 FROM recall_log.recalls r WHERE r.id = f.recall_id)""",
        "feedback event without its feedback": """SELECT COUNT(*) FROM ledger l WHERE
            l.event = 'feedback' AND NOT EXISTS (SELECT 1 FROM feedback f
            WHERE f.recall_id = l.recall_id)""",
        "erasures miscounted": """SELECT (SELECT COUNT(*) FROM ledger WHERE event = 'erased')
            != COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'erasures'), 0)""",
    }
    if mem.store.vectors._ready():
        for t in ("vectors", "vec_content", "vec_state"):
            checks[f"{t} row without its memory"] = f"""SELECT COUNT(*) FROM {t} v WHERE NOT
                EXISTS (SELECT 1 FROM memories m WHERE m.rid = v.rid AND m.state != 'ERASED')"""
            checks[f"memory without its {t} row"] = f"""SELECT COUNT(*) FROM memories m WHERE
                m.state != 'ERASED' AND m.rid NOT IN (SELECT rid FROM {t})"""
    else:
        assert _count(mem, "SELECT COUNT(*) FROM memories") == 0
    bad = {what: n for what, sql in checks.items() if (n := _count(mem, sql))}
    assert not bad, bad


def verify(
    db: Path, wp: WritePath, ctx: Ctx, returned: bool, last: bool = False, was: bool = False
) -> bool:
    """Reopen `db` without the shim and check everything; True if the faulted write is there
    (`last`: later writes followed it; its own check and the write after reopening are
    skipped, `was` tells whether it was applied)."""
    mem = Memory(db, embedder="hash", resident_mb=0, **wp.options)
    try:
        assert mem.store._all("PRAGMA integrity_check") == [("ok",)]
        health = mem.health()
        assert health.ok, health
        assert mem.rebuild().mismatched == ()
        _invariants(mem)
        applied = was if last else wp.applied(mem, ctx)
        assert applied or not returned, "an acknowledged write is missing"
        erased = ctx.ids.get("target") if applied and wp.run is _run_erase else None
        for mid, content in ctx.acked.items():
            if mid == erased:
                with pytest.raises(NotFound):
                    mem.inspect(mid, principal=ADMIN)
                continue
            try:
                rec = mem.inspect(mid, principal=ADMIN)
            except NotFound:
                TALLY.lost += 1
                raise
            assert rec.content == content
            TALLY.acked_checked += 1
        for rid, reader in ctx.recalls.items():
            if not mem.store._one("SELECT 1 FROM recall_log.recalls WHERE id = ?", (rid,)):
                TALLY.lost += 1
                raise AssertionError(f"an acknowledged recall is missing: {rid}")
            assert mem.store.get_recall(rid, reader).id == rid  # as feedback reads it
            TALLY.acked_checked += 1
            TALLY.acked_recalls += 1
        if not last:
            rec = mem.add(f"Written after reopening: {uuid.uuid4().hex}", principal=WRITER)
            assert mem.inspect(rec.id, principal=ADMIN).content == rec.content
            _recall(mem, ctx)
        TALLY.reopened += 1
        return applied
    finally:
        mem.close()


def _view(mem: Memory, ctx: Ctx) -> tuple[Any, ...]:
    """What a reader sees: every record's state and counters, and one recall's outcome."""
    records = [(r.id, r.state, r.counters) for r in mem.list(principal=ADMIN, limit=1000)]
    b = _recall(mem, ctx, principal=ADMIN, k=10)
    return (records, [i.memory_id for i in b.items],
            sorted((r.memory_id, r.reason) for r in b.rejected))


def keep_working(f: Faulty, wp: WritePath, ctx: Ctx, db: Path) -> None:
    """The `Memory` that saw the fault, disarmed: no transaction left open, healthy, writable,
    and its caches (resident index, role keys, vector table state) agree with a fresh reader."""
    mem = f.mem
    assert not mem.store.db.in_transaction
    assert not mem.store.recall_log.db.in_transaction
    health = mem.health()
    assert health.ok, health
    _ack(ctx, mem.add(f"Written by the same Memory after the fault: {uuid.uuid4().hex}",
                      principal=WRITER, state=State("after the fault", facts={"plan": "annual"})))
    fresh = Memory(db, embedder="hash", resident_mb=0, **wp.options)
    try:
        assert _view(mem, ctx) == _view(fresh, ctx)  # through the resident index (loaded before)
        budget, mem.store.resident.budget = mem.store.resident.budget, 0
        assert _view(mem, ctx) == _view(fresh, ctx)  # through sqlite-vec and FTS5 here
        mem.store.resident.budget = budget
    finally:
        fresh.close()
    TALLY.kept_working += 1


def _warm(mem: Memory, ctx: Ctx) -> None:
    """Two recalls: the tenant's resident slice is loaded, role keys cached."""
    for _ in range(2):
        _recall(mem, ctx)


def one_run(wp: WritePath, tpl: Template, fault: Fault, where: Path) -> int:
    """One run with `fault` armed over the path's call, checked; returns how many matching
    calls it saw (0 if the fault was never reached, i.e. the run completed without it)."""
    with injected_unraisables_ignored():
        try:
            return _one_run(wp, tpl, fault, where)
        except BaseException as exc:
            exc.add_note(f"path {wp.name!r}, fault: {fault.label}, files kept in {where}")
            raise


def _one_run(wp: WritePath, tpl: Template, fault: Fault, where: Path) -> int:
    db = tpl.copy_to(where / "store")
    ctx = tpl.ctx.copy()
    TALLY.runs += 1
    f: Faulty | None = None
    returned = True
    try:
        if wp.opens:
            f = open_faulty(db, fault, **wp.options)
        else:
            f = open_faulty(db, **wp.options)
            if wp.warm:
                _warm(f.mem, ctx)
            if wp.prelude is not None:
                wp.prelude(f.mem, ctx)
            ctx.before = _counts(f.mem)
            with f.armed(fault):
                wp.run(f.mem, ctx)
    except SituatedRuntimeError as exc:
        assert isinstance(exc, StoreFailure), repr(exc)
        returned = False
    TALLY.calls += f.vfs.calls.total() if f is not None else 0
    if not fault.hits:
        assert returned
        if f is not None and not wp.closes:
            f.mem.close()
        shutil.rmtree(where)
        return 0 if fault.nth < 10**9 else fault.seen
    TALLY.injected += 1
    TALLY.raised += not returned
    TALLY.absorbed += returned
    TALLY.cells.add((wp.name, fault.file, fault.op, fault.error))
    TALLY.paths.add(wp.name)
    alive = f is not None and not wp.closes
    if alive:
        assert f is not None
        assert not f.mem.store.db.in_transaction, "a transaction was left open"
        assert not f.mem.store.recall_log.db.in_transaction, "a recall file transaction was left"
    crashed = verify(crash_image(db, where / "crash"), wp, ctx.copy(), returned)
    applied = verify(db, wp, ctx, returned)  # another reader, the faulted Memory still open
    # a commit can fail after its commit frame reached the WAL (the sector padding behind it
    # did not): this process rolled back and overwrites those frames, a crash at that moment
    # would have recovered them. Either way the unacknowledged write is whole or absent.
    assert crashed or not applied, "a rolled-back write appeared later"
    TALLY.applied += applied
    TALLY.crash_kept_unacked += crashed and not applied
    if alive:
        assert f is not None
        keep_working(f, wp, ctx, db)
        f.mem.close()
        verify(db, wp, ctx, returned, last=True, was=applied)  # after its close (and checkpoint)
    shutil.rmtree(where)  # kept when a check failed
    return fault.seen


MAX_N = 2000
EVERY_N_ALWAYS = os.environ.get("SITUATED_FAULTS") == "all"
"""`SITUATED_FAULTS=all`: every cell at every N (thousands of faults, an hour or more)."""


@dataclass(frozen=True)
class Cell:
    """One column of the matrix: which calls fail, how, and how densely N is swept."""

    file: str
    op: str
    error: str = "ioerr"
    persistent: bool = False
    samples: int = 0
    """Run this many Ns spread over the matching calls (and the last); 0: every N."""

    def __str__(self) -> str:
        return f"{self.error} {self.op} {self.file}" + (" persistent" if self.persistent else "")


def sweep(wp: WritePath, root: Path, tmp: Path, cell: Cell) -> int:
    """Fail the 1st, 2nd, 3rd ... matching call of `wp` until a run completes without reaching
    it. A first run counts the matching calls (and checks a fault-free run completes); with
    `samples`, only that many Ns are spread over them. Returns how many runs hit the fault."""
    tpl = template(wp, root)
    name = f"{PATHS.index(wp)}-{cell.file}-{cell.op}-{cell.error}-{int(cell.persistent)}"

    def run(n: int) -> int:
        fault = Fault(cell.file, cell.op, cell.error, n, cell.persistent)
        return one_run(wp, tpl, fault, tmp / f"{name}-{n}")

    calls = run(10**9)
    step = max(1, -(-calls // cell.samples)) if cell.samples and not EVERY_N_ALWAYS else 1
    hit = 0
    for n in sorted({*range(1, calls + 1, step), calls} - {0}):
        if not run(n):
            return hit  # fewer calls than the counting run saw: this run completed
        hit += 1
    n = calls + 1
    while run(n):
        hit, n = hit + 1, n + 1
        assert n < MAX_N, f"{wp.name}: {cell} still failing at N={n}"
    return hit


def _sweep_all(wp: WritePath, cells: list[Cell], root: Path, scratch: Path) -> None:
    for cell in cells:
        sweep(wp, root, scratch / "runs", cell)


COMMON = [
    Cell("wal", "write", "ioerr", samples=3),
    Cell("wal", "write", "full", persistent=True, samples=1),
    Cell("wal", "sync", "ioerr"),
]
"""Every path: the WAL is where a commit writes (its frames, then one sync)."""

EXTRA: dict[str, list[Cell]] = {
    "add with a checkpoint due": [
        Cell("db", "write", "ioerr", samples=2), Cell("db", "write", "full", True, samples=1),
        Cell("db", "sync", "ioerr"), Cell("db", "truncate", "full"),
        Cell("wal", "read", "ioerr", samples=2),
    ],
    "add growing the -shm": [
        Cell("shm", "write", "full", samples=2), Cell("shm", "map", "ioerr"),
    ],
    "recall": [
        Cell("rwal", "write", "ioerr", samples=3), Cell("rwal", "write", "full", True, samples=1),
    ],
    "recall with a checkpoint due": [
        Cell("rwal", "write", "ioerr", samples=2), Cell("rwal", "read", "ioerr", samples=2),
        Cell("rdb", "write", "ioerr", samples=2), Cell("rdb", "write", "full", True, samples=1),
        Cell("rdb", "sync", "ioerr"), Cell("rwal", "sync", "ioerr"),
    ],
    "feedback": [
        Cell("rdb", "read", "ioerr"), Cell("rwal", "read", "ioerr", samples=3),
    ],
    "erase": [
        Cell("rwal", "write", "ioerr", samples=3), Cell("rwal", "write", "full", True, samples=1),
        Cell("rwal", "read", "ioerr", samples=2), Cell("rdb", "read", "ioerr"),
        Cell("rdb", "write", "ioerr", samples=2), Cell("rdb", "sync", "ioerr"),
        Cell("rwal", "truncate", "ioerr"), Cell("wal", "truncate", "ioerr"),
    ],
    "open": [
        Cell("shm", "truncate", "ioerr"), Cell("shm", "write", "full", True, samples=2),
        Cell("shm", "map", "ioerr"), Cell("db", "read", "ioerr", samples=3),
        Cell("rshm", "truncate", "ioerr"), Cell("rshm", "write", "full", True, samples=1),
        Cell("rshm", "map", "ioerr"), Cell("rdb", "read", "ioerr", samples=2),
    ],
    "close": [
        Cell("db", "write", "full", True, samples=2), Cell("db", "write", "ioerr", samples=2),
        Cell("db", "sync", "ioerr"), Cell("db", "truncate", "ioerr"),
        Cell("wal", "read", "ioerr", samples=2),
        Cell("rdb", "write", "ioerr", samples=2), Cell("rdb", "sync", "ioerr"),
        Cell("rdb", "truncate", "ioerr"), Cell("rwal", "read", "ioerr", samples=2),
    ],
    "create": [
        Cell("journal", "write", "ioerr"), Cell("journal", "sync", "full"),
        Cell("db", "write", "full", True, samples=3), Cell("db", "sync", "ioerr"),
        Cell("rjournal", "write", "ioerr"), Cell("rdb", "write", "full", True, samples=2),
        Cell("rwal", "write", "ioerr", samples=2),
    ],
}
"""Where a path does other I/O: checkpoints write the database file, the first open of a
file in a process sizes and maps the -shm, a new file starts with a rollback journal; the
recall file (`r` kinds) takes recall records (`recall`), is read by `feedback`, scrubbed and
checkpointed by `erase`, opened, created and checkpointed at close like the main file."""

SLOW = [
    Cell("any", "write", "full", persistent=True, samples=3),
    Cell("wal", "write", "full", samples=3),
    Cell("wal", "write", "ioerr", persistent=True, samples=2),
    Cell("wal", "sync", "full", persistent=True),
    Cell("db", "read", "ioerr", samples=2),
    Cell("wal", "read", "ioerr", samples=2),
]
"""Denser: a full disk on every file at once, persistent I/O errors, read errors."""

EVERY_N = {"recall": Cell("rwal", "write", "ioerr"), "feedback": Cell("wal", "write", "ioerr")}
"""Paths swept at every N of the WAL writes of their call (slow)."""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the stores live: memory-backed when the machine has /dev/shm (the runs' fsyncs
    then cost nothing; the shim sees every call all the same)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        d = Path(tempfile.mkdtemp(prefix="situated-faults-", dir=shm))
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def root(scratch: Path) -> Path:
    (scratch / "templates").mkdir()
    return scratch / "templates"


@pytest.mark.parametrize("wp", PATHS, ids=[p.name for p in PATHS])
def test_faults(wp: WritePath, root: Path, scratch: Path) -> None:
    _sweep_all(wp, COMMON + EXTRA.get(wp.name, []), root, scratch)


@pytest.mark.slow
@pytest.mark.parametrize("wp", PATHS, ids=[p.name for p in PATHS])
def test_faults_dense(wp: WritePath, root: Path, scratch: Path) -> None:
    checkpoint_due = wp.wal_frames or wp.recall_wal_frames
    cells = SLOW[:1] if checkpoint_due else [*SLOW]  # their cells above are the point
    if wp.name in EVERY_N:
        cells.append(EVERY_N[wp.name])
    _sweep_all(wp, cells, root, scratch)


def test_health_after_another_connection_wrote(tmp_path: Path) -> None:
    """Found by the fault runs: `health()` of a long-lived `Memory` reported an FTS5 checksum
    mismatch after another connection had added a memory (FTS5's check used the index
    structure it had cached; a fresh reader saw no fault)."""
    a = Memory(tmp_path / "s.db", embedder="hash")
    a.add("A lesson written by the first process.", principal=WRITER)
    b = Memory(tmp_path / "s.db", embedder="hash")
    b.add("A lesson written by the second process.", principal=WRITER)
    b.close()
    assert a.health().integrity == "ok"
    a.close()


def test_first_write_of_a_store_failing_leaves_it_writable(tmp_path: Path) -> None:
    """Found by the fault runs: when the first write to a new store failed, the `Memory`
    remembered the vector tables its rolled-back transaction had created; its next `add`
    committed the embedder binding without them, and from then on no process could add
    (`no such table: vec_content`)."""
    f = open_faulty(tmp_path / "new.db")
    with f.armed(Fault("wal", "write", "ioerr", 1)) as fault, pytest.raises(StoreFailure):
        f.mem.add("The first lesson of an empty store.", principal=WRITER)
    assert fault.hits == 1
    rec = f.mem.add("The first lesson of an empty store.", principal=WRITER)
    f.mem.close()
    with Memory(tmp_path / "new.db", embedder="hash") as mem:
        assert mem.inspect(rec.id, principal=ADMIN).content == rec.content
        mem.add("A second process adds another lesson.", principal=WRITER)
        assert mem.health().ok


def test_fts_after_a_failure_inside_its_write(root: Path, scratch: Path) -> None:
    """Found by the fault runs: when a fault struck while FTS5 wrote (a transaction spilling
    its page cache), SQLite cancelled the transaction but FTS5 kept its view of it on that
    connection: bm25() returned NULL (the SQL-path recall then failed) and health reported a
    malformed index, while the file itself was sound. The early calls of this path include
    such faults (the 3rd and 4th WAL writes land in the first FTS insert today)."""
    wp = next(p for p in PATHS if p.name == "add_many spilling its cache")
    tpl = template(wp, root)
    for n in range(1, 9):
        assert one_run(wp, tpl, Fault("wal", "write", "ioerr", n), scratch / "runs" / f"fts-{n}")


def test_erase_failing_to_read_the_recall_file_raises_store_failure(tmp_path: Path) -> None:
    """Found by the fault runs on the recall file: a read error while erasure scrubbed the
    recall records ended the recall file's transaction (SQLite rolls back on an I/O error),
    and the ROLLBACK after it raised `SQLError: cannot rollback - no transaction is active`,
    hiding the `StoreFailure`. The recall file's transaction now rolls back only if still
    open, as the main file's does."""
    db = tmp_path / "s.db"
    ctx = Ctx()
    with Memory(db, embedder="hash") as mem:
        _setup_erase(mem, ctx)  # a recall quotes the memory to erase
    target, text = ctx.ids["target"], ctx.acked[ctx.ids["target"]]
    f = open_faulty(db)
    with f.armed(Fault("rdb", "read", "ioerr", 1)) as fault, pytest.raises(StoreFailure):
        f.mem.erase(target, principal=ADMIN, reason="asked to forget")
    assert fault.hits == 1
    assert not f.mem.store.recall_log.db.in_transaction
    f.mem.erase(target, principal=ADMIN, reason="asked to forget")
    f.mem.close()
    with Memory(db, embedder="hash") as mem:
        assert mem.health().ok
        with pytest.raises(NotFound):
            mem.inspect(target, principal=ADMIN)
        assert text not in str(mem.store.get_recall(ctx.ids["recall"], WRITER).payload)


def test_recall_file_failures_raise_store_failure(tmp_path: Path) -> None:
    """Pinned: a recall record failing to commit (the recall file's WAL write) raises
    `StoreFailure`, leaves no transaction open, and the next recall is stored; a new recall
    file failing at its creation raises `StoreFailure` (the recall file's connection
    translates its own failures, from its first statement)."""
    f = open_faulty(tmp_path / "s.db")
    f.mem.add("Ask for the order number before looking up a shipment.", principal=WRITER)
    with f.armed(Fault("rwal", "write", "ioerr", 1)) as fault, pytest.raises(StoreFailure):
        f.mem.recall(QUERY, principal=WRITER)
    assert fault.hits == 1
    assert not f.mem.store.recall_log.db.in_transaction
    b = f.mem.recall(QUERY, principal=WRITER)
    f.mem.close()
    with Memory(tmp_path / "s.db", embedder="hash") as mem:
        assert mem.store.get_recall(b.recall_id, WRITER).id == b.recall_id
    fault = Fault("rwal", "write", "ioerr", 1)
    with pytest.raises(StoreFailure):
        open_faulty(tmp_path / "new.db", fault)
    assert fault.hits == 1

def test_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """The totals over this module's runs (the numbers quoted in the README)."""
    t = TALLY
    assert t.lost == 0
    assert t.injected == t.raised + t.absorbed
    with capsys.disabled():
        print(
            f"\nfault injection: {t.injected} injected faults ({t.raised} raised StoreFailure, "
            f"{t.absorbed} absorbed by SQLite) over {len(t.paths)} write paths and "
            f"{len(t.cells)} (path, file, call, error) cells, {t.runs} runs; "
            f"{t.reopened} reopens checked, {t.acked_checked} acknowledged writes checked "
            f"({t.acked_recalls} of them recalls), "
            f"{t.lost} lost; {t.kept_working} times the faulted Memory kept working; "
            f"{t.crash_kept_unacked} crash images kept a write whose call had failed (whole)"
        )
