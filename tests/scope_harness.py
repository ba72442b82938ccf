"""The machinery of the adversarial scope suite (`test_scope_suite.py`): principals and tenants,
a frozen world (clock and ids), a ground-truth reader of the raw database, and a runner that
executes one operation at a time and checks everything it returned and everything it changed.

The ground truth never goes through the scope layer: it reads every table of the file with
plain SQL and decides in Python what a principal may read, from the rules of
`situated.store.scope` restated here (same tenant, every required role held, classification at
most the clearance; a recall is visible to a principal holding every role the recaller held and
at least its clearance).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import sys
import uuid
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel
from typer.testing import CliRunner

import situated.learning.maintenance
import situated.memory
import situated.models
import situated.recall.pipeline
import situated.store.attributes
import situated.store.bulk
import situated.store.pg.attributes
import situated.store.pg.base
import situated.store.pg.keys
import situated.store.pg.recalls
import situated.store.pg.writes
import situated.store.scope
import situated.store.sqlite
from situated import (
    Authority,
    Briefing,
    InvalidInput,
    Memory,
    Principal,
    SituatedError,
    State,
)
from situated.cli import app
from situated.errors import SupersessionWarning
from situated.learning.lifecycle import LifecycleRules
from situated.names import skeleton
from situated.write.gates import WritePolicy

ROLES = ("support", "billing", "admin", "reviewer")
NAMESPACES = ("default", "refunds", "held")
"""`held` holds every proposal for review (its write policy reviews every authority)."""
POLICIES = {"held": WritePolicy(review_authority=Authority.INFERRED)}
RULES = LifecycleRules(min_uses=1, floor=0.4)
"""One failed use retires a memory as LOW_VALUE; a credited use revives it."""
CONSENTS = (None, "c1", "c2")
KEYS = (("acct-7", "tier"), ("acct-7", "limit"), ("acct-9", "tier"))
WORDS = ("refund", "invoice", "shipping", "outage", "merger", "payroll", "renewal", "ledger")
T0 = 1_700_000_000.0
STEP = 10.0

_ID = re.compile(r"\b(?:mem|rc)_[0-9a-f]{16}\b")
_MARKER = re.compile(r"zq[bp]\d{4}[a-z]")
"""Distinctive text: every text a write carries holds one, owned by the memory written."""


def _principal(tenant: str, roles: Sequence[str], level: str, name: str) -> Principal | None:
    try:
        return Principal(tenant=tenant, roles=set(roles), clearance=level, name=name)
    except InvalidInput:
        return None  # a name the model refuses is not a tenant anyone can act for


ACME = [
    ("pub", (), "public"),
    ("sup", ("support",), "internal"),
    ("supc", ("support",), "confidential"),
    ("anyr", (), "restricted"),
    ("bil", ("billing",), "confidential"),
    ("sb", ("support", "billing"), "restricted"),
    ("rev", ("reviewer", "support"), "internal"),
    ("revhi", ("reviewer", "billing", "support"), "restricted"),
    ("adm", ("admin",), "internal"),
    ("ops", ("admin", "reviewer", "support"), "internal"),
    ("root", ROLES, "restricted"),
]
ADVERSARIAL_TENANTS = (
    "Acme", "ACME", "acme-", "acme.", "acme_", "acme2", "a cme", "acmé", "ａｃｍｅ", "асме",
    "acme\u200b", " acme", "acme\u00a0", "\u202eemca",
)
"""Look-alikes of `acme`: case, punctuation, spaces, accents, full-width and Cyrillic letters,
a zero-width space, a right-to-left override. The name rule (`situated.names`) refuses the
spaces and the invisible characters (no principal), folds the full-width one into `acme`
itself; of the rest, those with `acme`'s confusable skeleton (`Acme`, `ACME`, Cyrillic) are
refused at their first write when another tenant of that skeleton wrote first (the expected
outcome: `Snap.tenant_taken`), and `acme-`, `acme.`, `acme_`, `acme2`, `acmé` are tenants of
their own."""


def build_principals() -> list[Principal]:
    out = [p for n, r, lv in ACME if (p := _principal("acme", r, lv, f"acme:{n}"))]
    for i, t in enumerate(ADVERSARIAL_TENANTS):
        for n, r, lv in (("hi", ROLES, "restricted"), ("lo", ("support",), "internal")):
            p = _principal(t, r, lv, f"t{i}:{n}")
            if p is not None:
                out.append(p)
    return out


PRINCIPALS = build_principals()


def dominates(p: Principal, q: Principal) -> bool:
    """p may read everything q may read."""
    return p.tenant == q.tenant and q.roles <= p.roles and q.clearance <= p.clearance


# -- a frozen world: the clock and the ids ---------------------------------------------------


class World:
    """A clock set per operation and ids derived from a label, so that the same script run
    twice gives the same ids and times whatever else was interleaved."""

    def __init__(self) -> None:
        self.now = T0
        self.label = "init"
        self.count = 0

    def at(self, now: float, label: str) -> None:
        self.now, self.label, self.count = now, label, 0

    def clock(self) -> float:
        return self.now

    def uuid4(self) -> uuid.UUID:
        self.count += 1
        digest = hashlib.sha256(f"{self.label}/{self.count}".encode()).digest()
        return uuid.UUID(bytes=digest[:16])


_CLOCKED = (
    situated.models, situated.memory, situated.store.sqlite, situated.store.scope,
    situated.recall.pipeline, situated.learning.maintenance, situated.store.pg.writes,
    situated.store.pg.recalls, situated.store.pg.base, situated.store.pg.keys,
    situated.store.bulk, situated.store.attributes, situated.store.pg.attributes,
)


@contextlib.contextmanager
def frozen(world: World) -> Iterator[None]:
    shim = type("uuid_shim", (), {"uuid4": staticmethod(world.uuid4), "UUID": uuid.UUID})
    saved: list[tuple[Any, str, Any]] = []
    real_now = situated.models.utcnow
    # every loaded situated module that reads the clock or makes uuids, not a fixed list: a
    # module added later (a batch writer, the attribute schema) is frozen with the rest
    loaded = [m for name, m in sorted(sys.modules.items())
              if name.startswith("situated.") and m is not None]
    for mod in {*_CLOCKED, *(m for m in loaded if getattr(m, "utcnow", None) is real_now)}:
        saved.append((mod, "utcnow", mod.utcnow))
        mod.utcnow = world.clock  # type: ignore[attr-defined]
    for mod in [m for m in loaded if getattr(m, "uuid", None) is uuid]:
        saved.append((mod, "uuid", mod.uuid))
        mod.uuid = shim  # type: ignore[attr-defined]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SupersessionWarning)
            yield
    finally:
        for mod, name, value in reversed(saved):
            setattr(mod, name, value)


# -- the ground truth ------------------------------------------------------------------------


@dataclass(frozen=True)
class Mem:
    """The scope-relevant columns of one memory row."""

    rid: int
    id: str
    tenant: str
    namespace: str
    roles: frozenset[str]
    cls: int
    state: str
    consent: str | None
    valid_from: float
    valid_until: float
    recorded_at: float
    superseded_by: str | None = None


@dataclass(frozen=True)
class Snap:
    """Every row of every table that holds memories, events, recalls or derived data."""

    mems: dict[str, Mem]
    rows: dict[str, dict[Any, tuple[Any, ...]]]
    recall_scope: dict[str, tuple[str, frozenset[str], int]]
    events: list[tuple[int, str, str | None, frozenset[str], int, float]]
    """(seq, tenant, memory_id, role_key roles, clearance, at) of every ledger row, then of
    every recall record (its `recalled` event: no memory id, its own seq)."""
    rid_id: dict[int, str]

    def look_alike(self, kind: str, scope: str, name: str) -> bool:
        """Whether a different name of this kind and scope with the same confusable skeleton
        is taken (`situated.store.names`: a write claiming `name` is refused)."""
        key = skeleton(name)
        return any(k == kind and s == scope and n != name and r[3] == key
                   for (k, s, n), r in self.rows["names"].items())

    def tenant_taken(self, p: Principal) -> bool:
        """Whether a write by `p` is refused because its tenant looks like another's."""
        return self.look_alike("tenant", "", p.tenant)

    def readable(self, p: Principal, mid: str) -> bool:
        m = self.mems.get(mid)
        return m is not None and m.tenant == p.tenant and m.roles <= p.roles and (
            m.cls <= int(p.clearance)
        )

    def inspectable(self, p: Principal, mid: str) -> bool:
        return self.readable(p, mid) and self.mems[mid].state != "ERASED"

    def sees_recall(self, p: Principal, rid: str) -> bool:
        s = self.recall_scope.get(rid)
        return s is not None and s[0] == p.tenant and s[1] <= p.roles and s[2] <= p.clearance

    def by_rid(self, ids: Iterator[str] | Sequence[str] | set[str]) -> list[str]:
        return sorted(ids, key=lambda i: self.mems[i].rid)


def _roles_of_key(key: str) -> frozenset[str]:
    return frozenset(key.split("\x1f")) if key else frozenset()


def snapshot(db: Any) -> Snap:
    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in db.execute(sql).fetchall()]

    mem_rows = rows("SELECT * FROM memories")
    cols = [str(r[1]) for r in db.execute("PRAGMA table_info(memories)").fetchall()]
    mems = {}
    for r in mem_rows:
        d = dict(zip(cols, r, strict=True))
        mems[d["id"]] = Mem(
            d["rid"], d["id"], d["tenant"], d["namespace"], frozenset(json.loads(d["roles"])),
            int(d["classification"]), d["state"], d["consent"], d["valid_from"],
            d["valid_until"], d["recorded_at"], d["superseded_by"],
        )
    tables: dict[str, dict[Any, tuple[Any, ...]]] = {
        "memories": {r[1]: r for r in mem_rows},
        "ledger": {r[0]: r for r in rows("SELECT * FROM ledger")},
        # a recall record is also its `recalled` ledger event, in the recall file
        "recalls": {r[1]: r for r in rows("SELECT * FROM recall_log.recalls")},
        "recalls_legacy": {r[0]: r for r in rows("SELECT * FROM main.recalls_legacy")},
        "feedback": {r[0]: r for r in rows("SELECT * FROM feedback")},
        "memory_utility": {(r[0], r[1]): r for r in rows("SELECT * FROM memory_utility")},
        "vectors": {r[0]: r for r in rows("SELECT * FROM vectors")},
        "fts": {r[0]: r for r in rows("SELECT rowid, content, state_text FROM memories_fts")},
        "failures": {r[0]: r for r in rows("SELECT * FROM maintenance_failures")},
        "lexicon_postings": {r[:3]: r for r in rows("SELECT * FROM lexicon_postings")},
        "lexicon_docs": {r[0]: r for r in rows("SELECT * FROM lexicon_docs")},
        "lexicon_stats": {r[0]: r for r in rows("SELECT * FROM lexicon_stats")},
        "names": {r[:3]: r for r in rows("SELECT kind, scope, name, skeleton FROM names")},
    }
    with contextlib.suppress(Exception):  # before the first vector, no vec tables
        tables["vec_meta"] = {r[0]: r for r in rows(
            "SELECT rid, tenant, namespace, state, classification, role_key, valid_from, "
            "valid_until, recorded_at FROM vec_content"
        )}
    recall_scope = {
        r[0]: (r[1], _roles_of_key(r[2]), int(r[3]))
        for r in rows("SELECT id, tenant, role_key, clearance FROM recall_log.recalls")
    }
    events = [
        (int(r[0]), str(r[1]), r[2], _roles_of_key(r[3]), int(r[4]), float(r[5]))
        for r in rows("SELECT seq, tenant, memory_id, role_key, clearance, at FROM main.ledger")
    ] + [
        (int(r[0]), str(r[1]), None, _roles_of_key(r[2]), int(r[3]), float(r[4]))
        for r in rows("SELECT seq, tenant, role_key, clearance, at FROM recall_log.recalls "
                      "WHERE legacy = 0")
    ]
    return Snap(mems, tables, recall_scope, events, {m.rid: m.id for m in mems.values()})


# -- what the caller gets back ---------------------------------------------------------------


def plain(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return plain(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [plain(v) for v in obj]
    return obj


def dump(obj: Any) -> str:
    """Everything a caller can read from a result, as one string."""
    if isinstance(obj, Briefing):
        return "\n".join((
            obj.to_json(), obj.render("text"), obj.render("markdown"), obj.explain(),
            json.dumps(obj.messages(), ensure_ascii=False),
        ))
    return json.dumps(plain(obj), sort_keys=True, default=str, ensure_ascii=False)


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# -- the runner ------------------------------------------------------------------------------


@dataclass
class Tally:
    probes: int = 0
    needles: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    leaks: list[str] = field(default_factory=list)

    def line(self, what: str) -> str:
        return (f"scope suite{what}: {self.probes} probes over {len(self.paths)} paths, "
                f"{self.needles} out-of-scope ids and texts searched, {len(self.leaks)} leaks")


@dataclass(frozen=True)
class Config:
    resident_mb: float | None
    """None: the default budget."""
    load_after: int | None = None
    """Searches before a tenant's slice loads (None: the default)."""
    ann_rows: int | None = None
    """Rows from which a tenant is searched through its approximate index (None: default)."""
    postgres: bool = False
    """The PostgreSQL store (`resident_mb`, `load_after` and `ann_rows` do not apply)."""

    @property
    def name(self) -> str:
        if self.postgres:
            return "postgres"
        if self.resident_mb == 0:
            return "sqlite"
        name = "resident" if self.load_after is None else f"resident@{self.load_after}"
        return name if self.ann_rows is None else f"{name}+ann@{self.ann_rows}"


@dataclass
class Transcript:
    """What one principal's calls returned, in order (for the byte-identical comparison)."""

    entries: list[tuple[str, str]] = field(default_factory=list)


class Runner:
    """Runs operations on one store, checking every output and every change."""

    def __init__(self, path: Path | str, cfg: Config, tally: Tally, world: World) -> None:
        self.path = path
        self.cfg = cfg
        kw: dict[str, Any] = {} if cfg.resident_mb is None else {"resident_mb": cfg.resident_mb}
        if cfg.ann_rows is not None:
            kw["ann_rows"] = cfg.ann_rows
        self.mem = Memory(path, embedder="hash", lifecycle=RULES, write_policies=POLICIES,
                          **kw)
        if cfg.load_after is not None:
            self.mem.store.resident.load_after = cfg.load_after
        self.pg = cfg.postgres
        from scope_pg import pg_snapshot  # it reads this module's Mem and Snap

        self._pg_snapshot = pg_snapshot
        # the ground truth's own connection, never preparing: `SELECT *` changes shape when
        # the store adds its vector columns
        self.db: Any = (
            psycopg.connect(str(path), autocommit=True, prepare_threshold=None) if self.pg
            else self.mem.store.db
        )
        self.tally = tally
        self.world = world
        self.owners: dict[str, set[str]] = defaultdict(set)
        self.mems: list[str] = []
        self.recalls: list[tuple[str, Principal, tuple[str, ...]]] = []
        self.texts: list[tuple[str, State | None]] = []
        self.phase = "b"
        self.index = 0
        self.slot = 0
        self.cli = CliRunner()
        self.transcript: Transcript | None = None
        self.watch: Callable[[Principal], bool] = lambda p: False
        self._snap_key: object = None
        self._snap = self._pg_snapshot(self.db) if self.pg else snapshot(self.db)

    def close(self) -> None:
        self.mem.close()
        if self.pg:
            self.db.close()

    def snap(self) -> Snap:
        """The store now; re-read only when some connection changed it (this connection's
        change count, or `data_version` for the others: the CLI); PostgreSQL: always."""
        if self.pg:
            self._snap = self._pg_snapshot(self.db)
            return self._snap
        log = self.mem.store.recall_log.db  # the recall file: its own writer connection
        key = (self.db.total_changes(), log.total_changes(),
               self.db.execute("PRAGMA main.data_version").fetchone(),
               self.db.execute("PRAGMA recall_log.data_version").fetchone())
        if key != self._snap_key:
            self._snap, self._snap_key = snapshot(self.db), key
        return self._snap

    # -- the frame of one operation --------------------------------------------------------

    def begin(self, phase: str, index: int, now: float) -> None:
        self.phase, self.index, self.slot = phase, index, 0
        self.world.at(now, f"{phase}{index}")

    def marker(self) -> str:
        self.slot += 1
        return f"zq{self.phase}{self.index:04d}{chr(96 + min(self.slot, 26))}"

    def leak(self, path: str, who: Principal, what: str) -> None:
        self.tally.leaks.append(f"[{self.cfg.name}] {path} by {who.name} ({who.tenant!r}): {what}")

    def own(self, markers: Sequence[str], owner_ids: Sequence[str]) -> None:
        for m in markers:
            self.owners[m].update(owner_ids)

    # -- the checks -------------------------------------------------------------------------

    def scan(self, path: str, who: Principal, text: str, inputs: set[str], snap: Snap) -> None:
        """No out-of-scope id or text in what the caller got."""
        for found in set(_ID.findall(text)):
            if found in inputs:
                continue
            if found.startswith("mem_"):
                ok = snap.readable(who, found)
            else:
                ok = snap.sees_recall(who, found)
            if not ok:
                self.leak(path, who, f"out-of-scope id {found} in {_around(text, found)}")
        for found in set(_MARKER.findall(text)):
            if found in inputs:
                continue
            owners = self.owners.get(found, set())
            if not any(
                snap.readable(who, o) if o.startswith("mem_") else snap.sees_recall(who, o)
                for o in owners
            ):
                self.leak(path, who, f"out-of-scope text {found} in {_around(text, found)}")
        self.tally.needles += sum(1 for m in snap.mems if not snap.readable(who, m)) + sum(
            1 for r in snap.recall_scope if not snap.sees_recall(who, r)
        ) + sum(
            1 for m, o in self.owners.items() if not any(
                snap.readable(who, x) if x.startswith("mem_") else snap.sees_recall(who, x)
                for x in o
            )
        )

    def changes(
        self, path: str, who: Principal, before: Snap, after: Snap, *, write: bool,
        failed: bool, erased: str | None = None, records_recall: bool = False,
    ) -> None:
        """Nothing out of the caller's scope changed (nothing at all for a read or a refusal)."""
        for table, old in before.rows.items():
            new = after.rows.get(table, {})
            if table == "vec_meta" and table not in after.rows:
                new = {}
            for key in set(old) | set(new):
                if old.get(key) == new.get(key):
                    continue
                recorded = records_recall and not failed and key not in old and table in (
                    "recalls", "ledger")
                if (failed or not write) and not recorded:
                    self.leak(path, who, f"{'refused' if failed else 'read'} call changed "
                              f"{table} row {key!r}")
                    continue
                ok = self._change_ok(table, key, old, new, who, before, after, erased)
                if not ok:
                    self.leak(path, who, f"changed out-of-scope {table} row {key!r}")
        for mid, m in after.mems.items():
            was = before.mems.get(mid)
            if m.superseded_by and (was is None or was.superseded_by != m.superseded_by):
                new = after.mems.get(m.superseded_by)
                if new is None or (new.tenant, new.namespace, new.roles, new.cls) != (
                        m.tenant, m.namespace, m.roles, m.cls):
                    self.leak(path, who, f"{mid} superseded by {m.superseded_by} of another "
                              "scope")
        for table in set(after.rows) - set(before.rows):
            if (failed or not write) and after.rows[table]:
                self.leak(path, who, f"created {table}")

    def _change_ok(
        self, table: str, key: Any, old: dict[Any, Any], new: dict[Any, Any], who: Principal,
        before: Snap, after: Snap, erased: str | None,
    ) -> bool:
        def mem_ok(mid: str | None) -> bool:
            return mid is not None and (after.readable(who, mid) or before.readable(who, mid))

        def rid_ok(rid: int) -> bool:
            return mem_ok(after.rid_id.get(rid) or before.rid_id.get(rid))

        if table == "memories":
            return mem_ok(key)
        if table in ("vectors", "fts", "vec_meta", "lexicon_docs"):
            return rid_ok(int(key))
        if table == "lexicon_postings":
            return key[0] == who.tenant and rid_ok(int(key[2]))
        if table == "lexicon_stats":
            return key == who.tenant  # the writer's tenant's own document counts
        if table == "names":  # claimed by a write of the caller's tenant, never a look-alike
            kind, scope, name = key
            mine = name == who.tenant if kind == "tenant" else scope == who.tenant
            return key not in old and mine and not before.look_alike(kind, scope, name)
        if table == "memory_utility":
            return mem_ok(key[0])
        if table == "ledger":
            if key in old:
                return False  # append-only
            row = new[key]
            tenant, mid = row[3], row[4]
            if mid is not None:
                return tenant == who.tenant and mem_ok(mid)
            return after.sees_recall(who, row[5])
        if table == "recalls":
            if key not in old:
                return after.sees_recall(who, key)
            if erased is None:
                return False
            o, n = old[key], new[key]
            same_cols = o[:8] == n[:8] and o[9:] == n[9:]  # the payload (column 9) may be scrubbed
            return same_cols and set(_ID.findall(o[8])) - {erased} == set(
                _ID.findall(n[8])) - {erased}
        if table == "feedback":
            return key not in old and after.sees_recall(who, key)
        if table == "failures":
            return key not in old and new[key][-1] == who.tenant
        return False

    # -- one probe --------------------------------------------------------------------------

    def probe(
        self,
        path: str,
        who: Principal,
        call: Callable[[], Any],
        *,
        write: bool,
        inputs: Sequence[str] = (),
        expect: Callable[[Any, BaseException | None, Snap, Snap], str | None] | None = None,
        erased: str | None = None,
        text_of: Callable[[Any], str] = dump,
        failed_of: Callable[[Any], bool] = lambda out: False,
        records_recall: bool = False,
    ) -> tuple[Any, BaseException | None]:
        """Call, then check the output (ids, texts, exact expectations) and the changes."""
        before = self.snap()
        out: Any = None
        err: BaseException | None = None
        try:
            out = call()
        except SituatedError as exc:
            err = exc
        after = self.snap()
        text = error_text(err) if err is not None else text_of(out)
        self.scan(path, who, text, set(inputs), after)
        self.changes(path, who, before, after, write=write,
                     failed=err is not None or failed_of(out), erased=erased,
                     records_recall=records_recall)
        if expect is not None:
            problem = expect(out, err, before, after)
            if problem:
                self.leak(path, who, problem)
        self.tally.probes += 1
        self.tally.paths[path] += 1
        if self.transcript is not None and self.watch(who):
            self.transcript.entries.append((path, text))
        return out, err

    def absent_twin(
        self, path: str, who: Principal, target: str, call: Callable[[str], Any],
        err: BaseException | None, snap: Snap,
    ) -> None:
        """A call naming an out-of-scope id must fail exactly as one naming no id at all."""
        fresh = ("mem_" if target.startswith("mem_") else "rc_") + hashlib.sha256(
            f"absent{self.index}".encode()).hexdigest()[:16]
        before = self.snap()
        try:
            call(fresh)
            other = "no error"
        except SituatedError as exc:
            other = error_text(exc).replace(fresh, "<id>")
        seen = "no error" if err is None else error_text(err).replace(target, "<id>")
        self.changes(path + "(absent)", who, before, self.snap(), write=False,
                     failed=True)
        self.tally.probes += 1
        if seen != other:
            self.leak(path, who, f"an out-of-scope id fails differently ({seen!r}) than an "
                      f"absent one ({other!r})")

    # -- the CLI ----------------------------------------------------------------------------

    def cli_args(self, who: Principal) -> list[str]:
        out = ["--tenant", who.tenant, "--actor", who.name]
        for r in sorted(who.roles):
            out += ["--role", r]
        return out

    def run_cli(self, *args: str) -> tuple[int, str]:
        res = self.cli.invoke(app, ["--db", str(self.path), "--embedder", "hash", *args])
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return res.exit_code, res.stdout + "\n" + res.stderr


def _around(text: str, needle: str) -> str:
    i = text.find(needle)
    return repr(text[max(0, i - 120): i + 60])


__all__ = [
    "CONSENTS", "KEYS", "NAMESPACES", "PRINCIPALS", "ROLES", "STEP", "T0", "WORDS", "Config",
    "Runner", "Snap", "Tally", "Transcript", "World", "dominates", "dump", "error_text",
    "frozen", "snapshot",
]
