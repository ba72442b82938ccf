"""Fuzz every public entry point and every CLI command with malformed values.

Two properties, over `Memory`'s public methods, `Principal`, `State`, `Briefing.render` and every
CLI command:

1. **Only situated's errors escape.** A malformed value (wrong type, None, a container, a huge
   or negative number, NaN or infinity, an empty or huge string, a lone surrogate, control and
   bidi characters, bytes) raises a `SituatedError`, and after the error the store is unchanged:
   no row written (the connection's change counter, the rows of the memory, ledger, recall and
   feedback tables) and no file created. On the CLI: exit code 1 (domain) or 2 (usage), exactly
   one line on stderr, never a traceback.
2. **What is accepted reads back.** Whatever a write path accepts (including the odd values
   above that are legitimate) is read back without error by inspect, list, export, history,
   ledger, stats, pending, recall (`explain()`, `render()` in every format), and the CLI
   (`--plain` and JSON).

Each malformed test runs a fixed catalogue (every argument x every value of `MALFORMED`) and
then derandomized hypothesis examples, so a run is deterministic. The last test prints a
one-line summary (entry points, values tried, non-project errors).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import situated.cli
import situated.demo
import situated.eval
import situated.eval.conversations
import situated.eval.envs
import situated.eval.envs.textworld
import situated.eval.poisoning
from situated import Memory, MemoryRecord, Principal, State
from situated.cli import app
from situated.errors import SituatedError
from situated.recall.reconstruct import Policy
from situated.store.scope import SYSTEM

RANDOM = settings(
    derandomize=True, database=None, deadline=None, print_blob=False,
    suppress_health_check=list(HealthCheck),
)
ADMIN = Principal("acme", roles={"support", "reviewer", "admin"}, clearance="restricted",
                  name="fuzzer")
"""Writes and reads everything below: every accepted value must be readable by it."""
MISSING = object()
"""An argument left out (the CLI: an option dropped)."""
RUNNER = CliRunner()
TALLY: Counter[str] = Counter()
"""entry points, values tried, non-project errors: for the summary line."""
ENTRY_POINTS: set[str] = set()
KINDS: Counter[str] = Counter()
"""Findings by kind, over the whole run."""


class _Opaque:
    """A value of no type any entry point expects."""

    def __repr__(self) -> str:
        return "<opaque>"


SURROGATE = "caf\udce9.txt"  # how os.fsdecode shows an undecodable file name
MALFORMED: list[Any] = [
    None, True, 0, -1, 2**31, 2**63, -(2**63) - 1, 10**400, 1.5, -0.0, math.nan, math.inf,
    -math.inf, "", " ", "\t\n", "x" * 100_001, SURROGATE, "\ud800", "nul\x00byte",
    "\x1b[2J\x07bell", "\u202eexe.txt", "zero\u200bwidth", "line\nbreak", "\x85\u2028",
    b"bytes", bytearray(b"x"), [], ["x"], [None], [SURROGATE], [2**63], [["nested"]], {},
    {"a": 1}, {"a": [1]}, ("x",), {"x"}, frozenset({1}), _Opaque(), 1 + 2j, "mem_" + "0" * 16,
]
ODD = st.characters(categories=("Cs", "Cc", "Cf", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Lo",
                                "Nd", "So", "Lu"))
MALFORMED_ST = st.one_of(
    st.sampled_from(MALFORMED),
    st.text(ODD, max_size=30),
    st.text(ODD, min_size=1, max_size=3).map(lambda s: s * 4000),
    st.integers(), st.floats(), st.binary(max_size=8),
    st.lists(st.one_of(st.text(ODD, max_size=8), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.text(ODD, max_size=8),
                    st.one_of(st.integers(), st.text(ODD, max_size=8), st.floats(),
                              st.lists(st.integers(), max_size=2)), max_size=3),
)
CLI_MALFORMED = [
    "", "-1", "9223372036854775808", "nan", "x" * 20_000, SURROGATE, "\x1b[2J\u202e",
    "a\nb", "--tenant", "1970-13-45", "nul\x00",
]
CLI_ST = st.one_of(
    st.sampled_from(CLI_MALFORMED), st.text(ODD, max_size=20),
    st.integers().map(str), st.floats().map(str),
)
WORDS = ("refund annual plan window billing ticket escalate courier parcel invoice tier "
         "router kitchen stove kettle garden ladder bucket harbor signal lantern meadow "
         "copper violet marble canyon").split()


def _words(n: int) -> str:
    """A sentence of its own for each n: near-duplicate detection merges similar ones."""
    out, k = [], n + 1
    while k:
        k, r = divmod(k, len(WORDS))
        out.append(WORDS[r])
    return " ".join(out)


# -- the world: a seeded store -------------------------------------------------------------


class World:
    """A store with a lesson, a fact, a held proposal and a recall, and fresh targets on
    demand: a target (a held proposal, a memory to erase, a consent, a recall) serves every
    call until one is accepted (`consumed`), so the next call has something to act on."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "world.db"
        self.mem = Memory(self.path, embedder="hash")
        self.n = 0
        self.accepted_ids: list[str] = []
        self._spare: dict[str, Any] = {}
        self.state = State("annual plan refund request", facts={"plan": "annual", "days": 40})
        self.lesson = self.mem.add(
            "Offer the prorated refund on annual plans past 30 days.", principal=ADMIN,
            namespace="refunds", state=self.state, conditions=["days > 30"], roles=["support"],
        ).id
        self.fact = self.mem.add(
            "The refund window is 30 days.", principal=ADMIN, kind="fact", entity="refund",
            attribute="window", value=30,
        ).id
        self.briefing = self.mem.recall(self.state, principal=ADMIN, namespace="refunds")
        assert self.briefing.items

    def close(self) -> None:
        self.mem.close()

    def next(self) -> int:
        self.n += 1
        return self.n

    def content(self) -> str:
        return f"Lesson {self.next()}: {_words(self.n)}."

    def consumed(self) -> None:
        self._spare.clear()

    def _reuse(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._spare:
            self._spare[key] = make()
        return self._spare[key]

    def fresh_memory(self) -> str:
        return str(self._reuse("memory", lambda: self.mem.add(self.content(), principal=ADMIN).id))

    def fresh_held(self) -> str:
        def make() -> str:
            rec = self.mem.add(self.content(), principal=ADMIN, authority="externally_verified")
            assert rec.state.value == "PROPOSED"
            return rec.id

        return str(self._reuse("held", make))

    def fresh_consent(self) -> str:
        def make() -> str:
            consent = f"consent-{self.next()}"
            self.mem.add(self.content(), principal=ADMIN, consent=consent)
            return consent

        return str(self._reuse("consent", make))

    def fresh_recall(self) -> tuple[str, str]:
        def make() -> tuple[str, str]:
            b = self.mem.recall(self.state, principal=ADMIN, namespace="refunds")
            return b.recall_id, b.items[0].memory_id

        rid, mid = self._reuse("recall", make)
        return rid, mid

    def snapshot(self) -> tuple[Any, ...]:
        return (self.mem.store.db.total_changes(), _rows(self.mem.store.db), _files(self.root))


CORE_TABLES = ("memories", "ledger", "recalls", "feedback", "meta", "memory_utility",
               "maintenance_failures", "vectors")


def _rows(db: apsw.Connection) -> int:
    return hash(tuple(tuple(db.execute(f"SELECT * FROM {t}")) for t in CORE_TABLES))


def _files(*dirs: Path) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(sorted(os.listdir(d))) for d in (*dirs, Path.cwd()))


# -- the property: only our errors, nothing changed, whatever is accepted reads back ----------


@dataclass
class Findings:
    """Non-project errors, store changes after errors, and failed read-backs, by kind."""

    items: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, where: str, detail: str) -> None:
        self.kinds[kind] += 1
        TALLY["non-project errors"] += 1
        KINDS[kind] += 1
        if len(self.items) < 40:
            self.items.append(f"{kind} at {where}: {detail}")

    def check(self) -> None:
        assert not self.items, (
            f"{sum(self.kinds.values())} findings ({dict(self.kinds)}):\n" + "\n".join(self.items)
        )


def _crash(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}({str(exc)[:120]!r}) in {Path(frame.filename).name}:{frame.lineno}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_back(world: World, result: Any, who: Principal = ADMIN, whole: bool = False) -> None:
    """Every read path over what a write returned (inspect, history, recall with explain and
    every rendering) and over the newest rows (list, ledger, stats, pending); with `whole`,
    over the whole store (list, export, ledger)."""
    mem = world.mem
    records = [r for r in (result if isinstance(result, list) else [result])
               if isinstance(r, MemoryRecord)]
    for rec in records:
        world.accepted_ids.append(rec.id)
        _printable(mem.inspect(rec.id, principal=who).model_dump(mode="json"))
        for ev in mem.history(rec.id, principal=who):
            _printable(ev.data, ev.reason, ev.actor)
        state = rec.source.state if rec.source.state is not None else rec.content
        b = mem.recall(state, principal=who, namespace=rec.scope.namespace)
        _printable(b.explain(), b.render("text"), b.render("markdown"), b.render("json"),
                   b.to_dict())
    stats = mem.stats(principal=who)
    _printable(str(stats))
    total = sum(stats.memories_by_state.values())
    limit, offset = (10_000, 0) if whole else (20, max(0, total - 20))
    _printable([r.model_dump(mode="json")
                for r in mem.list(principal=who, limit=limit, offset=offset)])
    _printable([(e.data, e.reason, e.actor)
                for e in mem.ledger(principal=who, limit=10_000 if whole else 50)])
    if whole:
        _printable(list(mem.export(principal=who)))
    if "reviewer" in who.roles:
        _printable([(r.model_dump(mode="json"), g)
                    for r, g in mem.pending(reviewer=who, limit=100 if whole else 5)])


def _printable(*values: Any) -> None:
    """What a read returns can be written out as UTF-8 JSON (a program's next step)."""
    json.dumps(values, ensure_ascii=False, default=str).encode("utf-8")


@dataclass(frozen=True)
class Entry:
    """A public entry point: valid keyword arguments and how to call it with them."""

    name: str
    base: Callable[[World], dict[str, Any]]
    call: Callable[[World, dict[str, Any]], Any]
    args: tuple[str, ...]
    extra: dict[str, list[Any]] = field(default_factory=dict)
    """Argument-specific malformed values, besides `MALFORMED`."""
    after: Callable[[World, Any], Any] | None = None
    """Use an accepted result (a Principal, a State) before reading back."""
    catalogue: tuple[str, ...] | None = None
    """The arguments tried with every value of `MALFORMED` (None: all); the others get the
    random values only (they share their checks with a catalogued argument)."""
    writes: bool = False
    """Accepted calls are read back through every read path (API and CLI)."""


def probe(world: World, entry: Entry, arg: str | None, value: Any, found: Findings) -> None:
    """Call `entry` with `arg` set to `value` (None: the valid call) and judge the outcome."""
    TALLY["values tried"] += 1
    kw = entry.base(world)
    if arg is None:
        pass
    elif value is MISSING:
        kw.pop(arg, None)
    else:
        kw[arg] = value
    where = f"{entry.name}({arg}={_short(value)})"
    before = world.snapshot()
    try:
        result = entry.call(world, kw)
    except SituatedError:
        if world.snapshot() != before:
            found.add("changed after error", where, "the store or the directory changed")
        return
    except Exception as exc:
        found.add(type(exc).__name__, where, _crash(exc))
        return
    world.consumed()
    try:
        if entry.after is not None:
            result = entry.after(world, result)
        if entry.writes or entry.after is not None:
            read_back(world, result)
        else:
            _printable(result if not hasattr(result, "model_dump") else result.model_dump())
    except SituatedError:
        pass  # the accepted value was refused where it was used: a clean refusal
    except Exception as exc:
        found.add("read-back " + type(exc).__name__, where, _crash(exc))


# -- the entry points ----------------------------------------------------------------------


def _add_base(w: World) -> dict[str, Any]:
    return {
        "content": w.content(), "principal": ADMIN, "kind": "fact", "namespace": "refunds",
        "state": w.state, "action": "offered the prorated amount", "success": True,
        "reward": 1.0, "episode_id": "ep-1", "step": 3, "evidence": ["ticket-17"],
        "conditions": ["days > 30"], "entity": "refund", "attribute": f"window{w.n}",
        "value": 30, "multi_valued": False, "roles": ["support"],
        "classification": "internal", "consent": "consent-7", "authority": "inferred",
        "valid_from": None, "valid_until": None, "policy_version": "v1",
        "source_classification": None,
    }


ADD_ARGS = (
    "content", "principal", "kind", "namespace", "state", "action", "success", "reward",
    "episode_id", "step", "evidence", "conditions", "entity", "attribute", "value",
    "multi_valued", "roles", "classification", "consent", "authority", "valid_from",
    "valid_until", "policy_version", "source_classification",
)
TIMES = [1e300, -1e300, 2**63, "0001-01-01", "9999-12-31T23:59:59", "99999-01-01", "now"]


def _add_many_call(w: World, kw: dict[str, Any]) -> Any:
    item = {k: v for k, v in _add_base(w).items() if k != "principal"}
    for key in [k for k in kw if k.startswith("item.")]:
        value = kw.pop(key)
        item[key.removeprefix("item.")] = value
    kw.setdefault("items", [item])
    return w.mem.add_many(**kw)


def _trajectory(w: World) -> dict[str, Any]:
    return {
        "episode_id": f"ep-{w.next()}", "task": f"refund {_words(w.n)}", "namespace": "refunds",
        "steps": [{"observation": "The customer asks for a refund.",
                   "facts": {"plan": "annual", "days": 40}, "action": "check the plan",
                   "result": "The plan is annual."},
                  {"observation": "The plan is annual.", "facts": {"plan": "annual"},
                   "action": f"offer prorated refund {_words(w.n)}", "result": "Accepted."}],
        "outcome": {"success": True, "reward": 1.0},
    }


def _learn_call(w: World, kw: dict[str, Any]) -> Any:
    traj = _trajectory(w)
    for key in [k for k in kw if k.startswith("trajectory.")]:
        value = kw.pop(key)
        path = key.removeprefix("trajectory.").split(".")
        target: Any = traj
        for part in path[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        target[path[-1]] = value
    kw.setdefault("trajectory", traj)
    return w.mem.learn(**kw)


def _policy_call(w: World, kw: dict[str, Any]) -> Any:
    parts = {k.removeprefix("policy."): kw.pop(k) for k in list(kw) if k.startswith("policy.")}
    if parts:
        kw["policy"] = Policy(**parts)
    b = w.mem.recall(**kw)
    return b.explain(), b.render("text"), b.render("markdown"), b.render("json")


def _state_call(w: World, kw: dict[str, Any]) -> Any:
    facts = kw.pop("facts", None)
    for key in [k for k in kw if k.startswith("facts.")]:
        value = kw.pop(key)
        facts = {**facts, key.removeprefix("facts."): value} if isinstance(facts, dict) else facts
    if "fact name" in kw:
        facts = _Pairs(kw.pop("fact name"), 1)
    return State(**kw) if facts is None else State(**kw, facts=facts)


class _Pairs(Mapping[Any, Any]):
    """A one-item mapping whose key need not be hashable (a list, a dict)."""

    def __init__(self, key: Any, value: Any) -> None:
        self.key, self.value = key, value

    def __getitem__(self, key: Any) -> Any:
        if key is self.key or key == self.key:
            return self.value
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return iter([self.key])

    def __len__(self) -> int:
        return 1


def _use_state(w: World, s: State) -> Any:
    return w.mem.add(w.content(), principal=ADMIN, state=s)  # read back: recalled with `s`


def _use_principal(w: World, p: Principal) -> Any:
    rec = w.mem.add(w.content(), principal=p)
    read_back(w, rec, p)
    return None


def _memory_call(w: World, kw: dict[str, Any]) -> Any:
    Memory(**kw).close()


def _export_call(w: World, kw: dict[str, Any]) -> Any:
    pages = w.mem.export(**kw)
    return list(pages)


def _feedback_base(w: World) -> dict[str, Any]:
    rid, mid = w.fresh_recall()
    return {"recall_id": rid, "principal": ADMIN, "success": True, "used": [mid],
            "reward": 1.0, "cited": f"I used [{mid}]."}


ID_EXTRA = ["mem_", "mem_" + "f" * 200, "MEM_0000000000000000", "../etc/passwd", "mem_x y",
            "' OR 1=1 --", "%", "rc_*"]
NUMBER_EXTRA = [0, -5, 10**6, 10**12, "5", 5.0, True]

API: list[Entry] = [
    Entry("Memory()", lambda w: {"path": f"fresh{w.next()}.db", "embedder": "hash",
                                 "reconstructor": "rules", "reconstructor_options": None,
                                 "promotion": None, "lifecycle": None, "write_policies": None,
                                 "resident_mb": 1.0},
          _memory_call,
          ("path", "embedder", "reconstructor", "reconstructor_options", "promotion",
           "lifecycle", "write_policies", "gates", "resident_mb"),
          {"path": [5, Path("nodir") / "m.db", "", ".", "/", Path(SURROGATE)],
           "resident_mb": [-1, 10**9, math.nan], "reconstructor_options": [{"x": 1}],
           "write_policies": [{"ns": 5}, {5: None}], "gates": [[5], "gates"]}),
    Entry("Memory.add", _add_base, lambda w, kw: w.mem.add(**kw), ADD_ARGS,
          {"valid_from": TIMES, "valid_until": TIMES, "step": [10**12], "reward": [10**400],
           "evidence": [["ok", 5], ["x" * 9000], ["r"] * 10_000, [SURROGATE]],
           "conditions": [["days > 30", 5], ["x" * 9000], [SURROGATE + " == 1"]],
           "value": [10**400, 2**63, SURROGATE, math.nan], "roles": [["support", 5], [5]],
           }, writes=True),
    Entry("Memory.add_many", lambda w: {"principal": ADMIN, "batch_size": 10}, _add_many_call,
          ("items", "principal", "batch_size",
           *(f"item.{a}" for a in ADD_ARGS if a != "principal")),
          {"items": [[5], [{"content": 5}], [{"bogus": 1}], iter([5]), [[("content", "x")]]],
           "item.evidence": [[SURROGATE]], "item.value": [SURROGATE]}, writes=True,
          catalogue=("items", "principal", "batch_size", "item.content", "item.evidence",
                     "item.value", "item.source_classification")),
    Entry("Memory.import_records",
          lambda w: {"lines": [json.dumps({"content": w.content(), "kind": "note"}),
                               json.dumps({"content": w.content(), "kind": "note"})],
                     "principal": ADMIN, "batch_size": 1, "start_line": 1, "progress": None},
          lambda w, kw: w.mem.import_records(**kw),
          ("lines", "principal", "batch_size", "start_line", "progress"),
          {"lines": [5, "one string", [5], iter([5]), [b"{}"]],
           "progress": [5, "x", lambda: None, lambda a, b: None]}),
    Entry("Memory.learn", lambda w: {"principal": ADMIN, "distiller": None,
                                     "classification": None, "source_classification": None,
                                     "consent": None, "authority": "system_observed"},
          _learn_call,
          ("trajectory", "principal", "distiller", "classification", "source_classification",
           "consent", "authority", "trajectory.episode_id", "trajectory.task",
           "trajectory.namespace", "trajectory.steps", "trajectory.outcome",
           "trajectory.steps.0.observation", "trajectory.steps.0.facts",
           "trajectory.steps.0.action", "trajectory.steps.1.action", "trajectory.steps.0.result",
           "trajectory.outcome.success", "trajectory.outcome.reward"),
          {"trajectory": ["{", '{"steps": 5}', "[]", "null"]}, writes=True,
          catalogue=("trajectory", "principal", "distiller", "classification",
                     "source_classification", "consent", "authority", "trajectory.episode_id",
                     "trajectory.steps", "trajectory.steps.0.facts",
                     "trajectory.steps.1.action", "trajectory.outcome.reward")),
    Entry("Memory.add_conversation",
          lambda w: {"messages": [{"speaker": "alice", "content": w.content()},
                                  {"role": "assistant", "content": f"Noted {_words(w.n)}."}],
                     "principal": ADMIN, "session": f"s-{w.n}", "namespace": "chat",
                     "extractor": None, "extractor_options": None, "classification": None,
                     "consent": None},
          lambda w, kw: w.mem.add_conversation(**kw),
          ("messages", "principal", "session", "namespace", "extractor", "extractor_options",
           "classification", "consent"),
          {"messages": [[], "[", "[5]", [5], [{"speaker": "a"}], [{"content": "x"}],
                        {"messages": 5}, [{"speaker": "a", "content": "b", "x": 1}]],
           "extractor": ["llm", "nope"], "extractor_options": [{"model": 5}, [1]]},
          after=lambda w, r: [*r.notes, *r.proposals]),
    Entry("Memory.export_training",
          lambda w: {"principal": ADMIN, "format": "sft", "namespace": None,
                     "inferred": False},
          lambda w, kw: list(w.mem.export_training(**kw)),
          ("principal", "format", "namespace", "inferred"), {"format": ["csv", "SFT"]}),
    Entry("Memory.attribute_schema", lambda w: {"principal": ADMIN, "memory_id": w.lesson},
          lambda w, kw: w.mem.attribute_schema(**kw), ("principal", "memory_id"),
          {"memory_id": ID_EXTRA}),
    Entry("Memory.promote", lambda w: {"memory_id": w.fresh_held(), "reviewer": ADMIN,
                                       "reason": "approved"},
          lambda w, kw: w.mem.promote(**kw), ("memory_id", "reviewer", "reason"),
          {"memory_id": ID_EXTRA}, writes=True),
    Entry("Memory.reject", lambda w: {"memory_id": w.fresh_held(), "reviewer": ADMIN,
                                      "reason": "wrong"},
          lambda w, kw: w.mem.reject(**kw), ("memory_id", "reviewer", "reason"),
          {"memory_id": ID_EXTRA}, writes=True),
    Entry("Memory.pending", lambda w: {"reviewer": ADMIN, "namespace": None, "limit": 10},
          lambda w, kw: w.mem.pending(**kw), ("reviewer", "namespace", "limit"),
          {"limit": NUMBER_EXTRA}),
    Entry("Memory.revoke_consent", lambda w: {"consent": w.fresh_consent(), "principal": ADMIN,
                                              "reason": "withdrawn"},
          lambda w, kw: w.mem.revoke_consent(**kw), ("consent", "principal", "reason"),
          writes=True),
    Entry("Memory.erase", lambda w: {"memory_id": w.fresh_memory(), "principal": ADMIN,
                                     "reason": "request 1"},
          lambda w, kw: w.mem.erase(**kw), ("memory_id", "principal", "reason"),
          {"memory_id": ID_EXTRA}, writes=True),
    Entry("Memory.recall", lambda w: {"state": w.state, "principal": ADMIN, "intent": "refund",
                                      "namespace": "refunds", "k": 5, "budget_tokens": 800,
                                      "as_of": None, "known_at": None, "policy": None},
          _policy_call,
          ("state", "principal", "intent", "namespace", "k", "budget_tokens", "as_of",
           "known_at", "policy", "policy.allowed_tools", "policy.prohibited_effects",
           "policy.version"),
          {"k": NUMBER_EXTRA, "budget_tokens": NUMBER_EXTRA, "as_of": TIMES, "known_at": TIMES,
           "policy.allowed_tools": [["ok", 5]], "policy.prohibited_effects": [[SURROGATE]]},
          writes=True),
    Entry("Memory.feedback", _feedback_base, lambda w, kw: w.mem.feedback(**kw),
          ("recall_id", "principal", "success", "used", "reward", "cited"),
          {"recall_id": ID_EXTRA, "used": [["mem_x"], [5], "mem_x", [SURROGATE]],
           "reward": [10**400]}, writes=True),
    Entry("Memory.maintain", lambda w: {"actor": "maintenance"},
          lambda w, kw: w.mem.maintain(**kw), ("actor",), writes=True),
    Entry("Memory.inspect", lambda w: {"memory_id": w.lesson, "principal": ADMIN,
                                       "as_of": None, "known_at": None},
          lambda w, kw: w.mem.inspect(**kw).model_dump(mode="json"),
          ("memory_id", "principal", "as_of", "known_at"),
          {"memory_id": ID_EXTRA, "as_of": TIMES, "known_at": TIMES}),
    Entry("Memory.gate_results", lambda w: {"memory_id": w.lesson, "principal": ADMIN},
          lambda w, kw: w.mem.gate_results(**kw), ("memory_id", "principal"),
          {"memory_id": ID_EXTRA}),
    Entry("Memory.history", lambda w: {"memory_id": w.lesson, "principal": ADMIN},
          lambda w, kw: w.mem.history(**kw), ("memory_id", "principal"),
          {"memory_id": ID_EXTRA}),
    Entry("Memory.list", lambda w: {"principal": ADMIN, "namespace": None, "states": None,
                                    "limit": 10, "offset": 0},
          lambda w, kw: w.mem.list(**kw), ("principal", "namespace", "states", "limit", "offset"),
          {"limit": NUMBER_EXTRA, "offset": NUMBER_EXTRA,
           "states": [["ACTIVE", 5], ["bogus"], "active", [None]]}),
    Entry("Memory.export", lambda w: {"principal": ADMIN, "namespace": None}, _export_call,
          ("principal", "namespace")),
    Entry("Memory.ledger", lambda w: {"principal": ADMIN, "limit": 10, "offset": 0},
          lambda w, kw: w.mem.ledger(**kw), ("principal", "limit", "offset"),
          {"limit": NUMBER_EXTRA, "offset": NUMBER_EXTRA}),
    Entry("Memory.recalls", lambda w: {"principal": ADMIN, "limit": 10, "offset": 0},
          lambda w, kw: w.mem.recalls(**kw), ("principal", "limit", "offset"),
          {"limit": NUMBER_EXTRA, "offset": NUMBER_EXTRA}),
    Entry("Memory.utilities", lambda w: {"principal": ADMIN, "limit": 10},
          lambda w, kw: w.mem.utilities(**kw), ("principal", "limit"),
          {"limit": NUMBER_EXTRA}),
    Entry("Memory.recall_outcomes", lambda w: {"principal": ADMIN, "limit": 10},
          lambda w, kw: w.mem.recall_outcomes(**kw), ("principal", "limit"),
          {"limit": NUMBER_EXTRA}),
    Entry("Memory.recall_record",
          lambda w: {"recall_id": w.fresh_recall()[0], "principal": ADMIN},
          lambda w, kw: w.mem.recall_record(**kw), ("recall_id", "principal"),
          {"recall_id": ID_EXTRA}),
    Entry("Memory.recalls_of", lambda w: {"memory_id": w.lesson, "principal": ADMIN,
                                          "limit": 10},
          lambda w, kw: w.mem.recalls_of(**kw), ("memory_id", "principal", "limit"),
          {"memory_id": ID_EXTRA, "limit": NUMBER_EXTRA}),
    Entry("Memory.stats", lambda w: {"principal": ADMIN}, lambda w, kw: w.mem.stats(**kw),
          ("principal",)),
    Entry("Memory.health", lambda w: {}, lambda w, kw: w.mem.health(**kw), ()),
    Entry("Memory.rebuild", lambda w: {"repair": False}, lambda w, kw: w.mem.rebuild(**kw),
          ("repair",)),
    Entry("Memory.write_policy", lambda w: {"namespace": "refunds"},
          lambda w, kw: w.mem.write_policy(**kw), ("namespace",)),
    Entry("Principal", lambda w: {"tenant": "acme", "roles": {"support"},
                                  "clearance": "internal", "name": "agent"},
          lambda w, kw: Principal(**kw), ("tenant", "roles", "clearance", "name"),
          {"roles": [["ok", 5], [SURROGATE]]}, after=_use_principal),
    Entry("State", lambda w: {"text": "annual plan", "facts": {"plan": "annual"}}, _state_call,
          ("text", "facts", "facts.plan", "facts.days", "fact name"),
          {"facts.days": [10**400, 2**63, -(2**63) - 1]}, after=_use_state),
    Entry("Briefing.render", lambda w: {"fmt": "text"}, lambda w, kw: w.briefing.render(**kw),
          ("fmt",)),
]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A seeded store, in memory-backed storage where there is some (every accepted write is
    a durable commit: on a disk, fsync would dominate the run)."""
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) else (
        tmp_path / "world")
    root.mkdir(exist_ok=True)
    w = World(root)
    try:
        yield w
    finally:
        w.close()
        shutil.rmtree(root, ignore_errors=True)


def _malformed_for(entry: Entry, arg: str) -> list[Any]:
    return MALFORMED + entry.extra.get(arg, [])


@pytest.mark.parametrize("entry", API, ids=[e.name for e in API])
def test_api_refuses_malformed_values_with_its_own_errors(entry: Entry, world: World) -> None:
    """Every argument x every catalogued malformed value, then random ones (hypothesis)."""
    ENTRY_POINTS.add(entry.name)
    found = Findings()
    probe(world, entry, None, None, found)
    for arg in entry.catalogue if entry.catalogue is not None else entry.args:
        for value in _malformed_for(entry, arg):
            probe(world, entry, arg, value, found)
    if entry.args:
        @settings(RANDOM, max_examples=min(60, 8 * len(entry.args)))
        @given(arg=st.sampled_from(entry.args), value=MALFORMED_ST)
        def random_values(arg: str, value: Any) -> None:
            probe(world, entry, arg, value, found)

        random_values()
    if entry.writes or entry.after is not None:
        _whole_read_back(world, found)
    found.check()


def _whole_read_back(world: World, found: Findings) -> None:
    """Every read over the whole store, through the API and the CLI."""
    try:
        read_back(world, None, whole=True)
    except Exception as exc:
        found.add("read-back " + type(exc).__name__, "the whole store", _crash(exc))
    _cli_read_back(world, found)


# -- valid values: whatever is accepted reads back --------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=120)
SHORT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)
LABEL = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1,
                max_size=30).filter(str.strip)
NAMES = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=20)
FACT_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), SHORT,
                        st.floats(allow_nan=False, allow_infinity=False))
FACTS = st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,12}", fullmatch=True),
                        FACT_VALUES, max_size=4)
TIME_ST = st.one_of(st.none(), st.floats(0, 4e9), st.datetimes().map(lambda d: d.isoformat()))


@st.composite
def add_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["lesson", "fact", "preference", "note"]))
    entity = draw(LABEL) if kind == "fact" else draw(st.none() | LABEL)
    return {
        "content": draw(TEXT), "kind": kind,
        "namespace": draw(st.sampled_from(["default", "refunds"]) | NAMES),
        "state": draw(st.none() | TEXT | st.builds(State, TEXT, FACTS)),
        "action": draw(st.none() | TEXT), "success": draw(st.none() | st.booleans()),
        "reward": draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        "episode_id": draw(st.none() | LABEL), "step": draw(st.none() | st.integers(0, 10**6)),
        "evidence": draw(st.lists(LABEL, max_size=3)),
        "conditions": draw(st.lists(st.sampled_from(["days > 30", "plan == 'annual'",
                                                     "flag == true", "price <= 42.5"]),
                                    max_size=2)),
        "entity": entity, "attribute": None if entity is None else draw(LABEL),
        "value": None if entity is None else draw(FACT_VALUES),
        "multi_valued": draw(st.booleans()),
        "roles": draw(st.sets(st.sampled_from(["support", "reviewer", "admin"]), max_size=2)),
        "classification": draw(st.sampled_from(["public", "internal", "confidential",
                                                "restricted", None])),
        "consent": draw(st.none() | LABEL),
        "authority": draw(st.sampled_from(["inferred", "user_declared", "system_observed",
                                           "externally_verified"])),
        "valid_from": draw(TIME_ST), "valid_until": None,
        "policy_version": draw(st.none() | LABEL),
    }


VALID_EXAMPLES = 25


def test_valid_values_read_back_everywhere(world: World) -> None:
    """Random valid values through add, add_many, learn, feedback and review; every read path
    (API and CLI) reads them back."""
    found = Findings()
    ENTRY_POINTS.update({"Memory.add", "Memory.add_many", "Memory.learn", "Memory.feedback"})
    accepted = Counter[str]()

    def attempt(name: str, call: Callable[[], Any]) -> None:
        TALLY["values tried"] += 1
        try:
            result = call()
        except SituatedError:
            return
        except Exception as exc:
            found.add(type(exc).__name__, name, _crash(exc))
            return
        accepted[name] += 1
        world.consumed()
        try:
            read_back(world, result)
        except Exception as exc:
            found.add("read-back " + type(exc).__name__, name, _crash(exc))

    @settings(RANDOM, max_examples=VALID_EXAMPLES)
    @given(kw=add_kwargs(), many=st.lists(add_kwargs(), min_size=1, max_size=3),
           episode=st.fixed_dictionaries({"task": TEXT, "obs": TEXT, "action": TEXT,
                                          "facts": FACTS, "reward": st.floats(-1e6, 1e6)}),
           reason=TEXT, cited=TEXT)
    def writes(kw: dict[str, Any], many: list[dict[str, Any]], episode: dict[str, Any],
               reason: str, cited: str) -> None:
        attempt("add", lambda: world.mem.add(principal=ADMIN, **kw))
        attempt("add_many", lambda: world.mem.add_many(many, principal=ADMIN))
        traj = {"episode_id": f"ep-{world.next()}", "task": episode["task"], "namespace": "refunds",
                "steps": [{"observation": episode["obs"], "facts": episode["facts"],
                           "action": episode["action"], "result": reason}],
                "outcome": {"success": True, "reward": episode["reward"]}}
        attempt("learn", lambda: world.mem.learn(traj, principal=ADMIN))
        rid, mid = world.fresh_recall()
        attempt("feedback", lambda: world.mem.feedback(
            rid, principal=ADMIN, success=bool(len(reason) % 2), used=[mid],
            reward=episode["reward"], cited=cited))
        attempt("reject", lambda: world.mem.reject(world.fresh_held(), reviewer=ADMIN,
                                                   reason=reason))
        attempt("erase", lambda: world.mem.erase(world.fresh_memory(), principal=ADMIN,
                                                 reason=reason))

    writes()
    assert accepted["add"] > 10 and accepted["learn"] > 5, accepted  # the property has teeth
    _whole_read_back(world, found)
    found.check()


# -- the CLI ---------------------------------------------------------------------------------

WHO = [("--tenant", "acme"), ("--role", "support"), ("--role#2", "reviewer"),
       ("--role#3", "admin"), ("--clearance", "restricted"), ("--actor", "fuzzer")]


@dataclass(frozen=True)
class Command:
    """A CLI command: its valid argv as (option, value) slots; `None` options are
    positionals, `None` values are flags."""

    name: str
    slots: Callable[[World], list[tuple[str | None, str | None]]]
    stdin: str | None = None


def _argv(world: World, slots: list[tuple[str | None, str | None]]) -> list[str]:
    out = ["--db", str(world.path), "--embedder", "hash"]
    for opt, value in slots:
        if opt is None or opt.startswith("@"):
            out.append(value or "")
        elif value is None:
            out.append(opt)
        else:
            out.extend([opt.split("#")[0], value])
    return out


def _chat_file(w: World) -> str:
    path = w.root / f"chat{w.next()}.json"
    path.write_text(json.dumps({"messages": [{"speaker": "bob", "content": w.content()}]}))
    return str(path)


def _import_file(w: World) -> str:
    path = w.root / f"import{w.next()}.jsonl"
    path.write_text("".join(json.dumps({"content": w.content(), "kind": "note"}) + "\n"
                            for _ in range(3)))
    return str(path)


def _traj_file(w: World) -> str:
    path = w.root / f"traj{w.next()}.json"
    path.write_text(json.dumps(_trajectory(w)))
    return str(path)


COMMANDS: list[Command] = [
    Command("init", lambda w: [("init", None)]),
    Command("add", lambda w: [("add", None), ("@content", w.content()), *WHO,
                              ("--namespace", "refunds"), ("--kind", "fact"),
                              ("--state", "annual plan refund"), ("--fact", "days=40"),
                              ("--condition", "days > 30"), ("--action", "offered"),
                              ("--success", None), ("--reward", "1.0"), ("--episode", "ep-1"),
                              ("--step", "3"), ("--evidence", "ticket-1"),
                              ("--entity", "refund"), ("--attribute", f"window{w.n}"),
                              ("--value", "30"), ("--classification", "internal"),
                              ("--role-required", "support"), ("--consent", "consent-7"),
                              ("--authority", "inferred"), ("--valid-from", "2024-01-01"),
                              ("--valid-until", "2999-01-01"), ("--policy-version", "v1")]),
    Command("recall", lambda w: [("recall", None), ("@state", "annual plan refund request"),
                                 *WHO, ("--fact", "plan=annual"), ("--fact#2", "days=40"),
                                 ("--intent", "refund"), ("--namespace", "refunds"),
                                 ("-k", "5"), ("--budget", "800"), ("--as-of", "2999-01-01"),
                                 ("--known-at", "2999-01-01"), ("--allow-tool", "refund"),
                                 ("--prohibit", "delete"), ("--policy-version", "v1"),
                                 ("--format", "text"), ("--explain", None)]),
    Command("feedback", lambda w: [("feedback", None), *_fb_slots(w), *WHO]),
    Command("inspect", lambda w: [("inspect", None), ("@memory_id", w.lesson), *WHO]),
    Command("history", lambda w: [("history", None), ("@memory_id", w.lesson), *WHO]),
    Command("ledger", lambda w: [("ledger", None), *WHO, ("--limit", "5")]),
    Command("list", lambda w: [("list", None), *WHO, ("--namespace", "refunds"),
                               ("--state", "ACTIVE"), ("--limit", "5"), ("--offset", "0")]),
    Command("export", lambda w: [("export", None), *WHO, ("--namespace", "refunds")]),
    Command("stats", lambda w: [("stats", None), *WHO]),
    Command("health", lambda w: [("health", None)]),
    Command("review", lambda w: [("review", None), *WHO, ("--namespace", "default"),
                                 ("--list", None)]),
    Command("promote", lambda w: [("promote", None), ("@memory_id", w.fresh_held()), *WHO,
                                  ("--reason", "approved")]),
    Command("reject", lambda w: [("reject", None), ("@memory_id", w.fresh_held()), *WHO,
                                 ("--reason", "wrong")]),
    Command("learn", lambda w: [("learn", None), ("@trajectory", _traj_file(w)), *WHO]),
    Command("import", lambda w: [("import", None), ("@file", _import_file(w)), *WHO,
                                 ("--batch-size", "2"), ("--start-line", "1"),
                                 ("--quiet", None)]),
    Command("learn -", lambda w: [("learn", None), ("@trajectory", "-"), *WHO],
            stdin="trajectory"),
    Command("add-conversation", lambda w: [("add-conversation", None), ("@file", _chat_file(w)),
                                           *WHO, ("--session", f"s-{w.n}"),
                                           ("--namespace", "chat"), ("--extractor", "none")]),
    Command("add-conversation -", lambda w: [("add-conversation", None), ("@file", "-"),
                                             *WHO], stdin="conversation"),
    Command("export-training", lambda w: [("export-training", None), *WHO,
                                          ("--format", "preference"), ("--namespace", "refunds"),
                                          ("--out", str(w.root / f"train{w.n}.jsonl"))]),
    Command("schema", lambda w: [("schema", None), *WHO, ("--memory", w.lesson)]),
    Command("revoke", lambda w: [("revoke", None), ("@consent", w.fresh_consent()), *WHO,
                                 ("--reason", "withdrawn")]),
    Command("erase", lambda w: [("erase", None), ("@memory_id", w.fresh_memory()), *WHO,
                                ("--reason", "request")]),
    Command("maintain", lambda w: [("maintain", None)]),
    Command("eval", lambda w: [("eval", None), ("--quick", None), ("--seeds", "1,2"),
                               ("--out", str(w.root / "out")), ("--arms", "compiled")]),
    Command("eval locomo", lambda w: [("eval", None), ("locomo", None), ("--quick", None),
                                      ("--out", str(w.root / "out")),
                                      ("--source-state", "context")]),
    Command("eval longmemeval", lambda w: [("eval", None), ("longmemeval", None),
                                           ("--out", str(w.root / "out")),
                                           ("--source-state", "unknown")]),
    Command("eval scienceworld", lambda w: [("eval", None), ("scienceworld", None),
                                            ("--out", str(w.root / "out")),
                                            ("--tasks", "boil"), ("--variations", "2"),
                                            ("--seed", "0")]),
    Command("eval poisoning", lambda w: [("eval", None), ("poisoning", None), ("--quick", None),
                                         ("--out", str(w.root / "out")), ("--offline", None)]),
    Command("eval textworld", lambda w: [("eval", None), ("textworld", None), ("--quick", None),
                                         ("--out", str(w.root / "out")), ("--seed", "1"),
                                         ("--train-games", "2"), ("--test-games", "2")]),
    Command("demo", lambda w: [("demo", None)]),
    Command("keys create", lambda w: [("keys", None), ("create", None), ("--tenant", "acme"),
                                      ("--role", "support"), ("--clearance", "internal"),
                                      ("--name", "support-bot"), ("--label", "fuzzed")]),
    Command("keys list", lambda w: [("keys", None), ("list", None), ("--tenant", "acme")]),
    # no PostgreSQL server here: the valid call is refused at the target (tests/test_pg_migrate.py
    # runs it against a real one)
    Command("migrate", lambda w: [("migrate", None), ("--from", str(w.path)),
                                  ("--to", "postgresql://fuzz@/none?host=/nonexistent-fuzz")]),
    Command("keys revoke", lambda w: [("keys", None), ("revoke", None),
                                      ("@key_id", _fresh_key(w)), ("--reason", "rotated")]),
]


RUNS = {"eval", "eval locomo", "eval longmemeval", "eval scienceworld", "eval poisoning",
        "eval textworld", "demo"}
"""Commands that run something and print a report, not a result: no --plain / --json."""
SERVERS = {"serve", "mcp"}
"""Commands that run a server until stopped: their bad input is tested through the real
servers (tests/test_http_api.py, tests/test_mcp.py)."""


def _command_paths(group: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, sub in group.commands.items():
        path = f"{prefix}{name}"
        if getattr(sub, "commands", None):  # a group (typer may vendor its own click)
            out |= _command_paths(sub, path + " ")
            if sub.invoke_without_command and not sub.no_args_is_help:
                out.add(path)
        else:
            out.add(path)
    return out


def test_every_cli_command_is_fuzzed() -> None:
    """A command added to the CLI without an entry here fails this test."""
    import typer.main

    registered = _command_paths(typer.main.get_command(app))
    fuzzed = {c.name.split(" -")[0].strip() for c in COMMANDS}
    assert registered - SERVERS - fuzzed == set()
    assert fuzzed - registered == set()


def _fresh_key(w: World) -> str:
    key, _ = w.mem.store.keys.create(Principal("acme", {"support"}), actor="fuzzer",
                                     label="", scope=SYSTEM)
    return key.id


def _fb_slots(w: World) -> list[tuple[str | None, str | None]]:
    rid, mid = w.fresh_recall()
    return [("@recall_id", rid), ("--success", None), ("--used", mid), ("--reward", "1")]


def _value_slots(cmd: Command, world: World) -> list[str]:
    """The options and positionals of a command that take a value (plus the root options)."""
    names = [opt for opt, value in cmd.slots(world)
             if opt is not None and value is not None and "#" not in opt]
    return ["--db", "--embedder", *names] + (["<stdin>"] if cmd.stdin else [])


class CliWatch:
    """Whether a CLI call changed the store: another connection's view of commits, the rows,
    and the files."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.db = world.mem.store.db

    def snapshot(self) -> tuple[Any, ...]:
        version = self.db.execute("PRAGMA data_version").fetchall()
        return (version, _rows(self.db), _files(self.world.root))


@pytest.fixture
def stubbed_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eval runs and the demo are long: their arguments are checked, their runs stubbed."""
    def stub(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(situated.eval, "run_eval", stub)
    monkeypatch.setattr(situated.eval.conversations, "run_locomo", stub)
    monkeypatch.setattr(situated.eval.conversations, "run_longmemeval", stub)
    monkeypatch.setattr(situated.eval.envs, "run_scienceworld", stub)
    monkeypatch.setattr(situated.eval.envs.textworld, "run_textworld", stub)
    monkeypatch.setattr(situated.eval.poisoning, "run_poisoning", stub)
    monkeypatch.setattr(situated.demo, "run_demo", stub)
    for key in list(os.environ):
        if key.startswith("SITUATED_"):
            monkeypatch.delenv(key)


def invoke(world: World, argv: list[str], stdin: str | None = None) -> Any:
    """The real app in-process; stdin as bytes (a lone surrogate as the invalid UTF-8 it
    stands for)."""
    data = None if stdin is None else stdin.encode("utf-8", "surrogatepass")
    return RUNNER.invoke(app, argv, input=data)


def cli_probe(world: World, cmd: Command, slot: str, value: Any, plain: bool,
              found: Findings) -> None:
    TALLY["values tried"] += 1
    slots = cmd.slots(world)
    stdin = (None if not cmd.stdin else json.dumps(_trajectory(world))
             if cmd.stdin == "trajectory" else json.dumps(
                 [{"speaker": "bob", "content": world.content()}]))
    root = {"--db": str(world.path), "--embedder": "hash"}
    if slot in root:
        root[slot] = value
    elif slot == "<stdin>":
        stdin = "" if value is MISSING else value
    else:
        slots = [(o, value if o == slot else v) for o, v in slots
                 if not (o == slot and value is MISSING)]
    if cmd.name not in RUNS:  # every command that prints a result: --plain or --json
        slots.append(("--plain" if plain else "--json", None))
    argv = _argv(world, slots)[4:]
    for opt in ("--embedder", "--db"):
        if root[opt] is not MISSING:
            argv = [opt, root[opt], *argv]
    where = f"situated {cmd.name} ({slot}={_short(value)})"
    watch = CliWatch(world)
    before = watch.snapshot()
    result = invoke(world, argv, stdin)
    if result.exit_code == 0:
        world.consumed()
    _judge(result, where, found, watch if result.exit_code != 0 else None, before)


def _judge(result: Any, where: str, found: Findings, watch: CliWatch | None,
           before: Any) -> None:
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        found.add(f"CLI traceback {type(exc).__name__}", where, _crash(exc))
        return
    if result.exit_code not in (0, 1, 2):
        found.add("CLI exit code", where, str(result.exit_code))
    if result.exit_code != 0:
        err = result.stderr.splitlines()
        if len(err) != 1 or not err[0].startswith("error: ") or "Traceback" in result.stderr:
            found.add("CLI stderr", where, repr(result.stderr[:300]))
        if watch is not None and watch.snapshot() != before:
            found.add("changed after error", where, "the store or the directory changed")


def _cli_read_back(world: World, found: Findings) -> None:
    """Every CLI read over the whole store, in both output modes; inspect and history of up
    to 5 accepted memories."""
    who = [a for opt, v in WHO for a in (opt.split("#")[0], v or "")]
    base = ["--db", str(world.path), "--embedder", "hash"]
    calls = [[*base, "list", *who, "--limit", "10000"], [*base, "export", *who],
             [*base, "ledger", *who, "--limit", "10000"], [*base, "stats", *who],
             [*base, "review", *who, "--list"]]
    calls += [[*c, "--plain"] for c in calls if c[4] != "export"]
    calls += [[*base, "recall", world.state.text, *who, "--explain", *fmt]
              for fmt in ([], ["--format", "markdown"], ["--json"])]
    for mid in dict.fromkeys(world.accepted_ids[-5:]):
        calls += [[*base, cmd, mid, *who, *plain] for cmd in ("inspect", "history")
                  for plain in ([], ["--plain"])]
    for argv in calls:
        result = invoke(world, argv)
        where = "situated " + " ".join(a for a in argv[4:6])
        exc = result.exception
        if result.exit_code != 0 or (exc is not None and not isinstance(exc, SystemExit)):
            found.add("CLI read-back", where,
                      _crash(exc) if exc is not None and not isinstance(exc, SystemExit)
                      else repr(result.stderr[:200]))
            continue
        if "--plain" not in argv and argv[4] in ("list", "export", "ledger", "stats",
                                                 "inspect", "history"):
            for line in result.stdout.splitlines():  # splitlines: every Unicode line break
                try:
                    json.loads(line)
                except ValueError as exc:
                    found.add("CLI read-back JSON", where, f"{exc}: {line[:120]!r}")
                    break


@pytest.mark.usefixtures("stubbed_runs")
@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.name for c in COMMANDS])
def test_cli_refuses_malformed_values_in_one_line(cmd: Command, world: World) -> None:
    """Every option of every command x the catalogue, then random values; exit 1 or 2, one
    line on stderr, no traceback, nothing changed; then the CLI reads everything back."""
    ENTRY_POINTS.add(f"situated {cmd.name}")
    found = Findings()
    slots = _value_slots(cmd, world)
    if cmd.name not in ("init", "list", "add"):
        slots = [s for s in slots if s not in ("--db", "--embedder")]  # once is enough
    shared = ("--tenant", "--role", "--clearance", "--actor")  # one `_principal` for all
    catalogue = slots if cmd.name in ("add", "list") else [s for s in slots if s not in shared]
    cli_probe(world, cmd, "", None, False, found)
    for slot in catalogue:
        for value in [*CLI_MALFORMED, MISSING]:
            cli_probe(world, cmd, slot, value, False, found)

    if slots:
        @settings(RANDOM, max_examples=min(40, 4 * len(slots)))
        @given(slot=st.sampled_from(slots), value=CLI_ST, plain=st.booleans())
        def random_values(slot: str, value: str, plain: bool) -> None:
            cli_probe(world, cmd, slot, value, plain, found)

        random_values()
    _whole_read_back(world, found)
    found.check()


def test_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """One line for the README (run after the tests above, in file order)."""
    with capsys.disabled():
        kinds = ", ".join(f"{k} {n}" for k, n in KINDS.most_common())
        print(f"\nfuzz: {len(ENTRY_POINTS)} entry points, {TALLY['values tried']} values "
              f"tried, {TALLY['non-project errors']} non-project errors"
              + (f" ({kinds})" if kinds else ""))
    assert TALLY["non-project errors"] == 0
