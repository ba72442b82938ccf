"""The store contract on both backends: one suite, parametrised over SQLite and PostgreSQL
(a real server, `tests/pg_server.py`), covering what is not SQLite-specific: records round
trip, eligibility on every read path with the adversarial names, ledger replay and repair,
supersession and `as_of`, erasure, revocation, bad input leaving data unchanged, and the same
transcript, call for call, from both backends under a frozen clock."""

from __future__ import annotations

import json
import re
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pg_server import PgServer
from scope_harness import ADVERSARIAL_TENANTS, PRINCIPALS, T0, World, dump, frozen
from situated import InvalidInput, Memory, NotFound, PermissionDenied, Principal, State
from situated.store.bulk import NewRow
from situated.store.contract import StoreContract, is_postgres, open_store
from situated.store.ledger import EventType
from situated.store.pg.store import PostgresStore
from situated.store.scope import ALL_STATES, SYSTEM, Eligibility
from situated.store.sqlite import Store

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.fresh_dsn(request.node.name)


@pytest.fixture
def mem(location: str) -> Iterator[Memory]:
    m = Memory(location, embedder="hash")
    yield m
    m.close()


def rows(location: str, sql: str) -> list[tuple[Any, ...]]:
    """Raw rows, read past the store (the ground truth of a test)."""
    if is_postgres(location):
        with psycopg.connect(location) as c:
            return [tuple(r) for r in c.execute(sql).fetchall()]
    import apsw

    from situated.store.vectors import load_extension

    db = apsw.Connection(location)
    try:
        load_extension(db)
        return [tuple(r) for r in db.execute(sql).fetchall()]
    finally:
        db.close()


def execute(location: str, sql: str) -> None:
    """A raw change, past the store (to tamper with it)."""
    if is_postgres(location):
        with psycopg.connect(location, autocommit=True) as c:
            c.execute(sql.encode())
        return
    import apsw

    db = apsw.Connection(location)
    try:
        db.execute(sql)
    finally:
        db.close()


def everything(location: str) -> str:
    """Every stored value of every table (and the recall file) as text."""
    if is_postgres(location):
        tables = [r[0] for r in rows(location, "SELECT tablename FROM pg_tables "
                                               "WHERE schemaname = 'public'")]
        return "\n".join(f"{t}: {rows(location, f'SELECT * FROM {t}')}" for t in tables)
    out = []
    for path in (location, location + "-recalls"):
        names = [r[0] for r in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")]
        out += [f"{n}: {rows(path, f'SELECT * FROM {n!r}')}" for n in names]
    return "\n".join(out)


ACME = Principal(tenant="acme", roles={"support", "admin"}, clearance="restricted", name="a")
SUPPORT = Principal(tenant="acme", roles={"support"}, clearance="internal", name="s")
OTHER = Principal(tenant="globex", roles={"support", "admin"}, clearance="restricted", name="g")


# -- the contract itself ----------------------------------------------------------------------


def test_both_backends_open_through_the_contract(location: str) -> None:
    store: StoreContract = open_store(location, 0)
    try:
        assert isinstance(store, PostgresStore if is_postgres(location) else Store)
        assert store.migrations() and store.embedder_ref() is None
        store.bind_embedder("hash@1:256", 256)
        assert store.embedder_ref() == "hash@1:256"
        with pytest.raises(Exception, match="refusing to mix"):
            store.bind_embedder("other@1:8", 8)
        assert store.location == location and store.integrity() == "ok"
    finally:
        store.close()


def test_a_bad_connection_string_is_refused_naming_path(pg_server: PgServer) -> None:
    with pytest.raises(InvalidInput) as exc:
        Memory("postgresql://nobody@/nodb?host=/nonexistent-socket-dir", embedder="hash")
    assert exc.value.field == "path"
    with pytest.raises(InvalidInput) as exc:
        Memory(pg_server.dsn("no_such_database"), embedder="hash")
    assert exc.value.field == "path" and "no_such_database" in str(exc.value)


# -- records ----------------------------------------------------------------------------------


def test_records_round_trip(mem: Memory) -> None:
    added = [
        mem.add("Refund over 100 dollars needs a manager (zq1).", principal=ACME,
                state=State("refund request", facts={"amount": 150, "tier": "gold"}),
                action="escalate", success=True, reward=1.0, episode_id="ep-1", step=3,
                evidence=["ticket 9"], conditions=["amount > 100"], roles=["support"],
                classification="confidential", consent="c1", namespace="refunds",
                authority="externally_verified"),
        mem.add("Account 7 is on the gold tier.", principal=ACME, kind="fact",
                entity="acct-7", attribute="tier", value="gold", valid_from=T0),
        mem.add("Prefers email over phone (ünïcødé, 中文).", principal=ACME, kind="preference"),
        mem.add("A note with a quote ' and a backslash \\ and 100%.", principal=ACME,
                kind="note", roles=["admin"], classification="restricted"),
    ]
    for rec in added:
        got = mem.inspect(rec.id, principal=ACME)
        assert got.model_dump() == rec.model_dump()
    exported = sorted(r["id"] for r in mem.export(principal=ACME))
    assert exported == sorted(r.id for r in added)
    assert sum(mem.stats(principal=ACME).memories_by_state.values()) == 4
    assert mem.health().ok


# -- eligibility on every read path -------------------------------------------------------------


def _world(mem: Memory) -> dict[str, tuple[str, frozenset[str], int]]:
    """Memories of several scopes in acme and in its look-alike tenants: id -> scope."""
    out: dict[str, tuple[str, frozenset[str], int]] = {}
    writers = [p for p in PRINCIPALS if p.name == "acme:root" or p.name.endswith(":hi")]
    for n, w in enumerate(writers):
        for roles, level in (((), "public"), (("support",), "internal"),
                             (("billing",), "confidential"), (("admin", "support"),
                                                              "restricted")):
            try:
                rec = mem.add(f"refund ledger payroll note {n} {'-'.join(roles)} {level}",
                              principal=w, kind="note", roles=roles, classification=level)
            except InvalidInput as exc:  # a look-alike of a taken tenant: refused, named
                assert exc.field == "principal.tenant"
                break
            out[rec.id] = (w.tenant, frozenset(roles), int(rec.scope.classification))
    return out


def test_eligibility_on_every_read_path(mem: Memory, location: str) -> None:
    scopes = _world(mem)
    fingerprint = {str(i): str(f)
                   for i, f in rows(location, "SELECT id, fingerprint FROM memories")}
    every_rid = [int(r[0]) for r in rows(location, "SELECT rid FROM memories")]
    assert len({t for t, _, _ in scopes.values()}) >= 5  # acme and look-alikes of its own
    for p in PRINCIPALS:
        may = {i for i, (t, roles, level) in scopes.items()
               if t == p.tenant and roles <= p.roles and level <= int(p.clearance)}
        assert {r.id for r in mem.list(principal=p, limit=1000)} == may, p.name
        assert {r["id"] for r in mem.export(principal=p)} == may, p.name
        b = mem.recall("refund ledger payroll note", principal=p, k=50)
        assert {i.memory_id for i in b.items} <= may, p.name
        elig = Eligibility.for_recall(p)
        store = mem.store
        found = {rid for ranks in (store.dense("content", mem.embedder.embed(["refund"])[0],
                                               50, elig),
                                   store.lexical("refund ledger", 50, elig)) for rid, _ in ranks}
        assert {r.id for r in store.by_rids(list(found), elig).values()} <= may
        assert len(store.by_rids(list(found), elig)) == len(found), p.name
        # main's bulk reads (the batch writer's, the recall's, the dashboard's): same gates
        q = mem.embedder.embed(["refund", "payroll"])
        many = {rid for ranks in store.dense_many("content", q, 50, elig) for rid, _ in ranks}
        assert {r.id for r in store.by_rids(list(many), elig).values()} <= may, p.name
        assert len(store.by_rids(list(many), elig)) == len(many), p.name
        inspect = Eligibility.for_inspection(p)
        assert store.fingerprints_among(list(fingerprint.values()), inspect) == {
            fingerprint[i] for i in may}, p.name
        assert {r.record.id for r in store.recall_rows(every_rid, inspect, 1).values()} == may
        assert len(mem.utilities(principal=p)) == len(may), p.name
        for mid in scopes:
            if mid in may:
                assert mem.inspect(mid, principal=p).id == mid
                assert mem.history(mid, principal=p)
            else:
                with pytest.raises(NotFound):
                    mem.inspect(mid, principal=p)
                with pytest.raises(NotFound):
                    mem.history(mid, principal=p)
        seen = {e.memory_id for e in mem.ledger(principal=p, limit=1000) if e.memory_id}
        assert seen <= may, p.name
        stats = mem.stats(principal=p)
        assert sum(stats.memories_by_state.values()) == len(may), p.name


def test_look_alike_tenants_are_refused_alike(mem: Memory) -> None:
    mem.add("first", principal=Principal(tenant="acme"), kind="note")
    refused = []
    for t in ADVERSARIAL_TENANTS:
        try:
            p = Principal(tenant=t)
        except InvalidInput:
            continue
        try:
            mem.add("look-alike", principal=p, kind="note")
        except InvalidInput as exc:
            refused.append((t, exc.field))
    assert ("ACME", "principal.tenant") in refused and ("Acme", "principal.tenant") in refused


# -- the ledger ----------------------------------------------------------------------------------


def test_ledger_replay_detects_and_repairs_tampering(mem: Memory, location: str) -> None:
    rec = mem.add("Check the invoice date first.", principal=ACME, kind="note")
    b = mem.recall("invoice date", principal=ACME)
    assert [i.memory_id for i in b.items] == [rec.id]
    mem.feedback(b.recall_id, principal=ACME, success=True, used=[rec.id])
    assert mem.rebuild().mismatched == ()
    execute(location, f"UPDATE memories SET uses = 99, state = 'LOW_VALUE' WHERE id = '{rec.id}'")
    report = mem.rebuild()
    assert report.mismatched == (rec.id,) and not report.repaired
    assert not mem.health().ok
    assert mem.rebuild(repair=True).repaired
    assert mem.rebuild().mismatched == ()
    got = mem.inspect(rec.id, principal=ACME)
    assert (got.state.value, got.counters.uses) == ("ACTIVE", 1)
    with pytest.raises(Exception, match="append-only"):
        execute(location, "DELETE FROM ledger")
    assert [e.event for e in mem.history(rec.id, principal=ACME)] == [
        EventType.PROPOSED, EventType.PROMOTED, EventType.FEEDBACK]


def test_supersession_and_as_of(mem: Memory) -> None:
    old = mem.add("Account 7 is on the gold tier.", principal=ACME, kind="fact",
                  entity="acct-7", attribute="tier", value="gold", valid_from=T0)
    new = mem.add("Account 7 is on the platinum tier.", principal=ACME, kind="fact",
                  entity="acct-7", attribute="tier", value="platinum", valid_from=T0 + 100)
    was = mem.inspect(old.id, principal=ACME)
    assert was.superseded_by == new.id and was.validity.valid_until_ts == T0 + 100
    assert mem.inspect(new.id, principal=ACME).supersedes == old.id
    then = mem.recall("account 7 tier", principal=ACME, as_of=T0 + 50)
    now = mem.recall("account 7 tier", principal=ACME)
    assert [i.memory_id for i in then.items] == [old.id]
    assert [i.memory_id for i in now.items] == [new.id]
    assert EventType.SUPERSEDED in [e.event for e in mem.history(old.id, principal=ACME)]


# -- erasure and revocation -------------------------------------------------------------------


def test_erasure_removes_text_vectors_lexical_rows_and_recalled_text(
    mem: Memory, location: str
) -> None:
    keep = mem.add("Keep this unrelated shipping note.", principal=ACME, kind="note")
    gone = mem.add("Secret zqerasedword about the merger.", principal=ACME, kind="note",
                   state=State("merger talks zqstateword"))
    b = mem.recall("the merger", principal=ACME)
    assert gone.id in [i.memory_id for i in b.items]
    assert "zqerasedword" in everything(location)
    mem.erase(gone.id, principal=ACME, reason="subject request")
    text = everything(location)
    for word in ("zqerasedword", "zqstateword"):
        assert word not in text, [t[:40] for t in text.split("\n") if word in t]
    elig = Eligibility.for_inspection(ACME)
    assert mem.store.lexical("zqerasedword merger", 10, elig) == []
    assert mem.store.vectors_of("content", [keep_rid(mem, keep.id)], elig)
    with pytest.raises(NotFound):
        mem.inspect(gone.id, principal=ACME)
    assert EventType.ERASED in [e.event for e in mem.store.history(
        gone.id, Eligibility(ACME, states=ALL_STATES))]
    assert mem.health().ok and mem.store.orphans() == 0


def keep_rid(mem: Memory, memory_id: str) -> int:
    hits = mem.store.dense("content", mem.embedder.embed(["shipping note"])[0], 10,
                           Eligibility.for_inspection(ACME))
    recs = mem.store.by_rids([r for r, _ in hits], Eligibility.for_inspection(ACME))
    return next(rid for rid, r in recs.items() if r.id == memory_id)


def test_revoke_consent(mem: Memory) -> None:
    a = mem.add("Consented note one about refunds.", principal=ACME, kind="note", consent="c1")
    mem.add("Consented note two about invoices.", principal=ACME, kind="note", consent="c2")
    mem.add("Other tenant's consented note.", principal=OTHER, kind="note", consent="c1")
    assert mem.revoke_consent("c1", principal=ACME, reason="withdrawn") == 1
    assert mem.revoke_consent("c1", principal=ACME, reason="again") == 0
    assert mem.inspect(a.id, principal=ACME).state.value == "REVOKED"
    assert mem.stats(principal=OTHER).memories_by_state == {"ACTIVE": 1}
    assert [i.memory_id for i in mem.recall("refunds note", principal=ACME).items] != [a.id]


# -- bad input ----------------------------------------------------------------------------------


def test_bad_input_leaves_the_store_unchanged(mem: Memory, location: str) -> None:
    mem.add("A stored note.", principal=ACME, kind="note")
    before = everything(location)
    calls = [
        (lambda: mem.add("", principal=ACME), InvalidInput),
        (lambda: mem.add("x", principal=ACME, classification="ultra"), InvalidInput),
        (lambda: mem.add("x", principal=SUPPORT, roles=["billing"]), PermissionDenied),
        (lambda: mem.add("x", principal=SUPPORT, classification="restricted"),
         PermissionDenied),
        (lambda: mem.erase("mem_0000000000000000", principal=ACME, reason="r"), NotFound),
        (lambda: mem.feedback("rc_0000000000000000", principal=ACME, success=True),
         NotFound),
        (lambda: mem.recall("x", principal=ACME, k=0), InvalidInput),
    ]
    for call, error in calls:
        with pytest.raises(error):
            call()
    assert everything(location) == before


def test_postgres_refuses_nul_naming_the_argument(pg_server: PgServer) -> None:
    m = Memory(pg_server.fresh_dsn("nul"), embedder="hash")
    try:
        with pytest.raises(InvalidInput) as exc:
            m.add("a\x00b", principal=ACME, kind="note")
        assert exc.value.field == "content"
        assert m.list(principal=ACME) == []
    finally:
        m.close()


# -- the same transcript from both backends ----------------------------------------------------


_FLOAT = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def _transcript(location: str) -> list[str]:
    """A script of writes, recalls, feedback, supersession, revocation and erasure under a
    frozen clock and frozen ids; everything each call returned, floats to 5 digits."""
    world = World()
    out: list[str] = []
    with frozen(world):
        m = Memory(location, embedder="hash", resident_mb=0)
        try:
            step = iter(range(1000))

            def at() -> None:
                n = next(step)
                world.at(T0 + 10 * n, f"s{n}")

            texts = [
                ("Refunds over 100 need a manager.", "refund request", {"amount": 150}),
                ("Ship to the EU from the Dublin depot.", "eu shipping order", {"region": "eu"}),
                ("Invoices are due in 30 days.", "invoice question", {"days": 30}),
                ("Payroll runs on the last Friday.", "payroll timing", {}),
            ]
            ids = []
            for n, (text, st, facts) in enumerate(texts):
                at()
                who = ACME if n % 2 == 0 else SUPPORT
                rec = m.add(text, principal=who, state=State(st, facts=facts),
                            roles=["support"], consent="c1" if n == 3 else None)
                ids.append(rec.id)
                out.append(dump(rec))
            at()
            out.append(dump(m.add("Account 7 is gold.", principal=ACME, kind="fact",
                                  entity="acct-7", attribute="tier", value="gold")))
            for st in ("refund request of 150", "order shipping to the eu", "when is payroll"):
                at()
                b = m.recall(State(st), principal=ACME, k=3)
                out.append(b.render("json"))
                at()
                out.append(dump(m.feedback(b.recall_id, principal=ACME, success=True,
                                           used=[i.memory_id for i in b.items][:1])))
            at()
            out.append(dump(m.add("Account 7 is platinum.", principal=ACME, kind="fact",
                                  entity="acct-7", attribute="tier", value="platinum")))
            at()
            out.append(dump(m.revoke_consent("c1", principal=ACME, reason="withdrawn")))
            at()  # the batch writer: exact twins reinforce, new rows go in set-based on SQLite
            batch = m.add_many([{"content": "Refunds over 100 need a manager.",
                                 "state": State("refund request", facts={"amount": 150}),
                                 "roles": ["support"]},
                                {"content": "Gift cards never expire.", "kind": "note"},
                                {"content": "Gift cards never expire.", "kind": "note"}],
                               principal=SUPPORT)
            out.append(dump(batch))
            prefs = []
            for seat in ("aisle", "window"):  # the attribute schema: evidence from use
                at()
                prefs.append(m.add(f"Dana prefers the {seat} seat.", principal=ACME,
                                   kind="preference", entity="dana", attribute="seat",
                                   value=seat))
            at()
            b = m.recall(prefs[0].content, principal=ACME, k=10)
            out.append(b.render("json"))
            at()
            out.append(dump(m.feedback(b.recall_id, principal=ACME, success=False,
                                       used=[prefs[0].id])))
            at()
            m.erase(ids[1], principal=ACME, reason="request")
            for p in (ACME, SUPPORT):  # every read of main's, each as the caller may see it
                out.append(dump(m.recalls(principal=p, limit=50)))
                out.append(dump([m.recall_record(r.id, principal=p)
                                 for r in m.recalls(principal=p, limit=50)]))
                out.append(dump(m.recalls_of(ids[0], principal=p)))
                out.append(dump(m.recall_outcomes(principal=p)))
                out.append(dump(m.utilities(principal=p)))
                out.append(dump(m.attribute_schema(principal=p)))
                out.append(dump(list(m.export_training(principal=p, inferred=True))))
                out.append(dump(m.list(principal=p, limit=100)))
                out.append(dump(m.ledger(principal=p, limit=100)))
                out.append(dump(m.stats(principal=p)))
                for mid in ids:
                    try:
                        out.append(dump(m.history(mid, principal=p)))
                    except NotFound as exc:
                        out.append(str(exc))
            out.append(dump(m.rebuild()))
        finally:
            m.close()
    return [_FLOAT.sub(lambda x: format(float(x.group(0)), ".5g"), t) for t in out]


def test_both_backends_give_the_same_transcript(tmp_path: Path, pg_server: PgServer) -> None:
    sqlite = _transcript(str(tmp_path / "same.db"))
    postgres = _transcript(pg_server.fresh_dsn("same"))
    assert len(sqlite) == len(postgres)
    for n, (a, b) in enumerate(zip(sqlite, postgres, strict=True)):
        assert json.loads(a) == json.loads(b) if a[:1] in "[{" else a == b, f"call {n}"


def test_system_reads_see_every_tenant(mem: Memory) -> None:
    mem.add("acme note", principal=ACME, kind="note")
    mem.add("globex note", principal=OTHER, kind="note")
    tenants = {t for _, t, _, _ in mem.store.lifecycle_candidates(SYSTEM)}
    assert tenants == {"acme", "globex"}


# -- set-based inserts equal the one-row path --------------------------------------------------


def _new_rows(m: Memory) -> list[NewRow]:
    """Rows of every shape the batch writer hands over: lessons with states and facts, a fact,
    a note, names and tokens that need quoting, held (proposed only), promoted and rejected."""
    texts = [
        ("Refunds over 100 need a manager's sign-off.", "refund of 150", {"amount": 150}),
        ("Back\\slash 'quoted' tokens: don't split O'Brien.", "O'Brien \\ path", {}),
        ("Ship EU orders from Dublin.", None, {}),
        ("Gift cards never expire.", "gift card question", {"card": "gift"}),
    ]
    out = []
    m.store.bind_embedder(m.embedder.model_ref, m.embedder.dim)
    for n, (text, st, facts) in enumerate(texts * 3):
        who = ACME if n % 2 else OTHER
        with warnings.catch_warnings():  # a lesson without state or conditions: stored anyway
            warnings.simplefilter("ignore")
            rec = m._build(
                content=f"{text} #{n}", principal=who, kind="fact" if n == 5 else "lesson",
                namespace="ops" if n % 3 else "refunds",
                state=None if st is None else State(st, facts=facts), action="did it",
                success=bool(n % 2), reward=None, episode_id=f"ep{n}", step=n, evidence=(),
                conditions=("amount > 100",) if facts.get("amount") else (),
                entity="acct" if n == 5 else None, attribute="tier" if n == 5 else None,
                value="gold" if n == 5 else None, multi_valued=False,
                roles=("support",) if n % 4 == 1 else (), classification="internal",
                consent="c1" if n == 7 else None, authority="inferred", valid_from=None,
                valid_until=None, policy_version=None,
            )
        vec = m.embedder.embed([rec.content, st or rec.content])
        later = [(EventType.PROMOTED, "policy", "auto", {"auto": True})] if n % 3 else (
            [(EventType.REJECTED, "gate", "poison", {"why": ["x"]})] if n % 2 else [])
        out.append(NewRow(rec, who, {"content": vec[0], "state": vec[1]},
                          ((EventType.PROPOSED, who.name, "batch",
                            {"kind": rec.kind.value, "namespace": rec.scope.namespace,
                             "gates": {"ok": n}}), *later), (3, b"analysis-%d" % n)))
    return out


def test_insert_many_writes_what_the_one_row_path_writes(
    location: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if is_postgres(location):
        reference = request.getfixturevalue("pg_server").fresh_dsn("reference")
    else:
        reference = str(tmp_path / "reference.db")
    dumps = []
    for loc, set_based in ((location, True), (reference, False)):
        world = World()
        with frozen(world):
            m = Memory(loc, embedder="hash", resident_mb=0)
            try:
                world.at(T0, "rows")
                rows_ = _new_rows(m)
                world.at(T0 + 10, "write")
                with m.store.transaction():
                    if set_based:
                        rids = m.store.insert_many(rows_)
                    else:  # the reference: `insert` then `append_event`, row by row
                        rids = []
                        for r in rows_:
                            (_, _, reason, data), *later = r.events
                            rids.append(m.store.insert(r.record, r.writer, r.vectors, reason,
                                                       data, r.analysis))
                            for ev, actor, why, more in later:
                                m.store.append_event(r.record.id, SYSTEM, ev, actor, why, more)
                assert rids == sorted(rids) and len(set(rids)) == len(rows_)
                assert m.rebuild().mismatched == ()
                hits = m.store.search(rows_[1].vectors["content"], "O'Brien quoted tokens",
                                      10, Eligibility.for_recall(ACME))
            finally:
                m.close()
        dumps.append((_tables(loc), hits))
    ours, theirs = ({t.rsplit(":", 1)[1]: v for t, v in d.items()} for d, _ in dumps)
    assert ours.keys() == theirs.keys()
    for table, got in ours.items():
        assert got == theirs[table], table
    assert dumps[0][1] == dumps[1][1]


def _tables(location: str) -> dict[str, list[str]]:
    """Every table's rows, sorted (but SQLite's FTS5 and vec0 shadow tables)."""
    if is_postgres(location):
        files = {location: "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"}
    else:
        files = dict.fromkeys((location, location + "-recalls"),
                              "SELECT name FROM sqlite_master WHERE type = 'table'")
    return {
        f"{path}:{t}": sorted(repr(r) for r in rows(path, f'SELECT * FROM "{t}"'))
        for path, sql in files.items() for (t,) in rows(path, sql) if not t.startswith(_LAYOUT)
    }


_LAYOUT = ("memories_fts_", "vec_content_", "vec_state_")
"""SQLite's FTS5 and vec0 shadow tables: their pages' layout depends on how rows were added
(their rows are compared through `memories_fts`, `vec_*` and the searches)."""


def test_insert_many_refuses_a_bad_row_and_writes_nothing(mem: Memory, location: str) -> None:
    rows_ = _new_rows(mem)
    before = everything(location)
    stranger = NewRow(rows_[0].record, SUPPORT, rows_[0].vectors, rows_[0].events,
                      rows_[0].analysis)  # another tenant's row
    with pytest.raises(PermissionDenied), mem.store.transaction():
        mem.store.insert_many([rows_[1], stranger])
    if is_postgres(location):  # SQLite stores a NUL character
        r = rows_[2]
        bad = NewRow(r.record.model_copy(update={"content": "nul \x00 here"}), r.writer,
                     r.vectors, r.events, r.analysis)
        with pytest.raises(InvalidInput) as exc, mem.store.transaction():
            mem.store.insert_many([*rows_[:2], bad])
        assert exc.value.field == "content"
    assert everything(location) == before


def test_the_dashboard_secret_is_kept_in_the_store_made_once(location: str) -> None:
    """On both backends (a connection string has no file beside it): made once, atomically,
    by whichever process asks first; the same after reopening; read by no other path."""
    got: list[bytes] = []

    def ask() -> None:
        store = open_store(location, 0)
        try:
            got.append(store.secret("dashboard"))
        finally:
            store.close()

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and len(set(got)) == 1 and len(got[0]) == 64
    m = Memory(location, embedder="hash")
    try:
        m.add("a note", principal=ACME, kind="note")
        assert m.store.secret("dashboard") == got[0]
        with pytest.raises(InvalidInput) as exc:
            m.store.secret("other")
        assert exc.value.field == "name"
        seen = json.dumps([dump(m.list(principal=ACME)), dump(m.ledger(principal=ACME)),
                           dump(m.stats(principal=ACME)), m.store.meta("dashboard", "secret"),
                           dump(list(m.export(principal=ACME)))])
        assert got[0].decode() not in seen
    finally:
        m.close()
    assert rows(location, "SELECT COUNT(*) FROM secrets")[0][0] == 1
