"""Recall latency and write throughput of situated, against an exact numpy baseline.

Run from the repository root (see benchmarks/README.md):

    python benchmarks/recall.py --quick                 # 2k and 10k memories, about a minute
    python benchmarks/recall.py                         # 10k and 100k memories, several minutes
    python benchmarks/recall.py --json out.json         # also write every number as JSON

For each store size N and vector dimension (256, the default embedder's, and 384), the store
holds N memories spread over 10 tenants, so the tenant gate selects 10% of the rows. Vectors are
clustered (topics per namespace, fixed seed), memories have realistic shapes (state text,
facts and conditions; some text-only; some stateless facts and notes).

Every recall is timed with precomputed query vectors (an `Embedder` that returns vectors it was
handed), so the numbers exclude query embedding. Per query, interleaved so that noise hits all
of them alike:

* numpy: the fastest exact search over the same eligible rows: the tenant's rows stored
  contiguously in one float32 matrix, `mat @ q` then `argpartition` for the top k.
* dense: one `Store.dense` call (exact KNN over one vector field, eligibility applied).
* retrieve: stage 2 (`situated.recall.retrieve.retrieve`): two dense searches, BM25, fusion,
  record fetch.
* recall: the whole pipeline (`situated.recall.pipeline.run_recall`, stages 1-8, including the
  recall record written in its own transaction).

Each is timed twice: through the resident index (the default: the tenant's vectors,
eligibility columns and a BM25 index in memory, kept current from the ledger) and through
SQLite alone (a second connection with `resident_mb=0`: sqlite-vec KNN with the gates inside
the scan, FTS5). A tenant's second search loads its slice (its first runs in
SQLite); that one-off is reported apart ("slice load ms").

Ratios to the numpy baseline are the headline: the machine is shared and noisy.

A second pass runs the pipeline with 50 candidates and splits its time by the pipeline's own
stage functions (`situated.recall.pipeline.STAGES`, timed by `run_recall(clock=...)`): stage 2,
stage 3, stages 4-6 (pre-checks, `rules` reconstructor, validation, scores), 7 compile and
8 record.

Stores are filled through a bulk path that calls the real `Store.insert` and
`Store.append_event` (the same calls `Memory.add` makes) in transactions of 1,000 memories;
`Memory.add` one by one is measured separately, with precomputed vectors and with the default
embedder.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import importlib.metadata
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    import situated  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import apsw
from rich.console import Console
from rich.table import Table

import situated.recall.pipeline as pipeline
from situated import Memory, Principal, State
from situated.embed import DEFAULT_EMBEDDER, get_embedder
from situated.embed.base import Embedder, Vector
from situated.models import MemoryRecord
from situated.recall.analysis import VERSION as ANALYSIS_VERSION
from situated.recall.analysis import stored_form
from situated.recall.pipeline import RecallRequest, run_recall
from situated.recall.reconstruct import Policy
from situated.recall.retrieve import retrieve
from situated.store.bulk import NewRow
from situated.store.ledger import EventType
from situated.store.scope import ALL_STATES, Eligibility
from situated.store.vectors import load_extension

F32 = npt.NDArray[np.float32]

TENANTS = 10
CLUSTERS_PER_NAMESPACE = 40
SPREAD = 0.9
"""Norm of the noise added to a unit cluster centre: cosine to the centre is about 0.74."""
TOP_K = 20
"""k of the dense searches compared with numpy: what a recall with k=5 over-fetches."""
STAGE_CANDIDATES = 50
BULK_BATCH = 1000
TARGET_RECALL_RATIO = 3.0
TARGET_STAGES_MS = 2.0

# -- synthetic memories ---------------------------------------------------------------------

NAMESPACES: dict[str, dict[str, Any]] = {
    "refunds": {
        "nouns": ["refund", "invoice", "plan", "subscription", "charge", "credit", "receipt",
                  "customer", "card", "renewal", "discount", "voucher", "order", "account"],
        "verbs": ["offer", "issue", "prorate", "decline", "escalate", "confirm", "refund",
                  "check", "explain", "waive"],
        "facts": {"plan": ["annual", "monthly", "trial"], "days_since_purchase": (0, 120),
                  "region": ["eu", "us", "apac"], "chargeback": [True, False]},
    },
    "deploy": {
        "nouns": ["deploy", "service", "migration", "rollback", "canary", "cluster", "release",
                  "database", "pipeline", "build", "container", "node", "config", "alert"],
        "verbs": ["pause", "roll back", "drain", "restart", "promote", "verify", "scale",
                  "page", "pin", "retry"],
        "facts": {"env": ["staging", "production", "dev"], "error_rate": (0, 20),
                  "tests_passing": [True, False], "region": ["eu-west", "us-east"]},
    },
    "kitchen": {
        "nouns": ["mug", "kettle", "stove", "drawer", "cabinet", "fridge", "sink", "plate",
                  "knife", "pot", "counter", "shelf", "towel", "sponge"],
        "verbs": ["open", "take", "put", "heat", "wash", "close", "fill", "move", "find",
                  "turn off"],
        "facts": {"room": ["kitchen", "pantry", "dining room"], "drawer": (1, 6),
                  "target_visible": [True, False], "stove": ["on", "off"]},
    },
    "support": {
        "nouns": ["ticket", "password", "login", "user", "email", "phone", "agent", "queue",
                  "reset", "token", "device", "session", "profile", "team"],
        "verbs": ["reset", "verify", "assign", "close", "reopen", "escalate", "unlock",
                  "notify", "link", "merge"],
        "facts": {"tier": ["free", "pro", "enterprise"], "open_tickets": (0, 15),
                  "verified": [True, False], "channel": ["chat", "email", "phone"]},
    },
    "travel": {
        "nouns": ["flight", "hotel", "booking", "seat", "visa", "train", "ticket", "fare",
                  "luggage", "gate", "itinerary", "passport", "transfer", "lounge"],
        "verbs": ["book", "rebook", "cancel", "upgrade", "hold", "compare", "confirm", "check in",
                  "refund", "reserve"],
        "facts": {"budget": (100, 2000), "price": (80, 2500), "cabin": ["economy", "business"],
                  "international": [True, False]},
    },
}
FILLER = ["the", "a", "when", "after", "before", "then", "if", "only", "first", "again",
          "quickly", "carefully", "because", "so", "still", "now", "never", "always"]
STATES_ON_OFF = ["is on", "is off", "is open", "is closed", "is empty", "is full", "is running",
                 "is down"]


@dataclass(frozen=True)
class Spec:
    """One memory to write: `Memory.add` keyword arguments plus its two vectors."""

    tenant: int
    kwargs: dict[str, Any]
    content_vec: F32
    state_vec: F32


@dataclass(frozen=True)
class Query:
    """One present situation to recall for, with precomputed query and state vectors."""

    tenant: int
    state: State
    intent: str
    qvec: F32
    svec: F32


class World:
    """Cluster centres and the random generator shared by memories and queries."""

    def __init__(self, dim: int, seed: int) -> None:
        self.dim = dim
        self.rng = np.random.default_rng(seed)
        self.names = list(NAMESPACES)
        n = len(self.names) * CLUSTERS_PER_NAMESPACE
        self.centres = _unit(self.rng.standard_normal((n, dim)))
        # a source state is about the same topic as its lesson, but not the same text
        self.state_centres = _unit(self.centres + 0.8 * _unit(self.rng.standard_normal((n, dim))))

    def _near(self, centres: F32, cluster: int) -> F32:
        noise = self.rng.standard_normal(self.dim) * (SPREAD / np.sqrt(self.dim))
        return _unit(centres[cluster] + noise)

    def _words(self, ns: str, n: int) -> str:
        spec = NAMESPACES[ns]
        pool = spec["nouns"] + spec["verbs"] + FILLER
        return " ".join(str(w) for w in self.rng.choice(pool, n))

    def _facts(self, ns: str, keep: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, dom in NAMESPACES[ns]["facts"].items():
            if self.rng.random() > keep:
                continue
            if isinstance(dom, tuple):
                out[key] = int(self.rng.integers(dom[0], dom[1] + 1))
            else:
                out[key] = dom[int(self.rng.integers(len(dom)))]
        return out

    def _condition(self, key: str, value: Any, ns: str) -> str:
        dom = NAMESPACES[ns]["facts"][key]
        roll = self.rng.random()
        if isinstance(value, bool):
            return f"{key} == {'true' if value else 'false'}"
        if isinstance(value, int):
            op = ">=" if roll < 0.5 else "<="
            return f"{key} {op} {value}"
        if roll < 0.2:
            return f"exists({key})"
        if roll < 0.5:
            other = dom[int(self.rng.integers(len(dom)))]
            return f"{key} in [{value!r}, {other!r}]"
        return f"{key} == {value!r}"

    def state_text(self, ns: str, facts: dict[str, Any]) -> str:
        noun = NAMESPACES[ns]["nouns"]
        a, b = (str(x) for x in self.rng.choice(noun, 2))
        bits = [f"the {a} {self.rng.choice(STATES_ON_OFF)}",
                f"{int(self.rng.integers(1, 9))} {b}s waiting", self._words(ns, 6)]
        bits += [f"{k} {v}" for k, v in list(facts.items())[:2]]
        return ", ".join(bits)

    def memory(self, i: int) -> Spec:
        ns = self.names[i % len(self.names)] if self.rng.random() < 0.3 else str(
            self.rng.choice(self.names)
        )
        cluster = self.names.index(ns) * CLUSTERS_PER_NAMESPACE + int(
            self.rng.integers(CLUSTERS_PER_NAMESPACE)
        )
        tenant = int(self.rng.integers(TENANTS))
        verbs = NAMESPACES[ns]["verbs"]
        content = (
            f"{str(self.rng.choice(verbs)).capitalize()} {self._words(ns, 9)}; "
            f"then {self.rng.choice(verbs)} {self._words(ns, 6)} (#{i})."
        )
        kw: dict[str, Any] = {"content": content, "namespace": ns, "kind": "lesson"}
        shape = self.rng.random()
        if shape < 0.45:  # state text, facts and explicit conditions
            facts = self._facts(ns, keep=0.8)
            keys = list(facts)[: int(self.rng.integers(1, 3))]
            kw |= {"state": State(self.state_text(ns, facts), facts=facts),
                   "conditions": [self._condition(k, facts[k], ns) for k in keys]}
        elif shape < 0.65:  # state text and facts, conditions left to the facts
            facts = self._facts(ns, keep=0.8)
            kw["state"] = State(self.state_text(ns, facts), facts=facts)
        elif shape < 0.85:  # text-only source state
            kw["state"] = State(self.state_text(ns, {}))
        elif shape < 0.90:  # no source state, explicit conditions
            facts = self._facts(ns, keep=1.0)
            key = str(self.rng.choice(list(facts)))
            kw["conditions"] = [self._condition(key, facts[key], ns)]
        elif shape < 0.95:  # a fact about an entity
            noun = str(self.rng.choice(NAMESPACES[ns]["nouns"]))
            kw |= {"kind": "fact", "entity": f"{noun}-{i}", "attribute": "status",
                   "value": str(self.rng.choice(["ok", "late", "blocked"]))}
        else:  # a preference or a note
            kw["kind"] = "preference" if self.rng.random() < 0.5 else "note"
        if "state" in kw:
            kw |= {"action": f"{self.rng.choice(verbs)} {self._words(ns, 3)}",
                   "success": bool(self.rng.random() < 0.8)}
        kw["authority"] = str(self.rng.choice(
            ["inferred", "inferred", "user_declared", "system_observed"]
        ))
        return Spec(tenant, kw, self._near(self.centres, cluster),
                    self._near(self.state_centres, cluster))

    def query(self, tenant: int) -> Query:
        ns = str(self.rng.choice(self.names))
        cluster = self.names.index(ns) * CLUSTERS_PER_NAMESPACE + int(
            self.rng.integers(CLUSTERS_PER_NAMESPACE)
        )
        facts = self._facts(ns, keep=0.85) if self.rng.random() < 0.9 else {}
        state = State(self.state_text(ns, facts), facts=facts)
        spec = NAMESPACES[ns]
        intent = f"{self.rng.choice(spec['verbs'])} the {self.rng.choice(spec['nouns'])}"
        return Query(tenant, state, intent, self._near(self.centres, cluster),
                     self._near(self.state_centres, cluster))


def _unit(x: npt.NDArray[Any]) -> F32:
    x = np.asarray(x, dtype=np.float32)
    out: F32 = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return out


def principal(tenant: int) -> Principal:
    return Principal(tenant=f"tenant-{tenant:02d}", roles=set(), clearance="internal",
                     name=f"bench-{tenant:02d}")


# -- a precomputed embedder -----------------------------------------------------------------


class Precomputed(Embedder):
    """Returns vectors computed in advance, so that timings exclude embedding.

    Texts registered with `learn` map to their vector; vectors handed with `hand` are returned
    (in order) by the next `embed` call, whatever its texts (a recall's query and state).
    """

    name = "precomputed"
    version = "1"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._known: dict[str, F32] = {}
        self._next: list[F32] = []
        self.misses = 0

    def learn(self, text: str, vec: F32) -> None:
        self._known[text] = vec

    def learn_specs(self, specs: Sequence[Spec]) -> None:
        """Each memory's content and source-state texts mapped to its vectors."""
        for spec in specs:
            self.learn(spec.kwargs["content"], spec.content_vec)
            st = spec.kwargs.get("state")
            if st is not None and not st.is_empty:
                self.learn(st.describe(), spec.state_vec)

    def hand(self, *vectors: F32) -> None:
        self._next = list(vectors)

    def embed_batch(self, texts: Sequence[str]) -> Vector:
        out = []
        for text in texts:
            if self._next:
                out.append(self._next.pop(0))
            elif text in self._known:
                out.append(self._known[text])
            else:  # a text the write gates rewrote (e.g. a redaction): any fixed vector
                self.misses += 1
                seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest())
                raw = np.random.default_rng(seed).standard_normal(self.dim)
                out.append(_unit(raw))
        return np.stack(out).astype(np.float32)

    def embed(self, texts: Any) -> Vector:
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.embed_batch(items)  # already unit vectors: skip the base class's work


# -- writing ---------------------------------------------------------------------------------


def bulk_load(mem: Memory, emb: Precomputed, specs: Sequence[Spec]) -> list[int]:
    """Write memories as the batch writer stores them, 1,000 per transaction.

    Same validation (`Memory._build`), same rows and same ledger events (PROPOSED, PROMOTED)
    as `Memory.add`: a memory that supersedes nothing goes through the set-based
    `Store.insert_many` (what `add_many` uses for a plain new memory), a fact through
    `Store.insert` / `append_event` and the same-key supersession. It skips the write gates
    and the duplicate lookups (every synthetic content is unique) and commits once per batch.
    Returns the rowid of each spec.
    """
    store = mem.store
    store.bind_embedder(emb.model_ref, emb.dim)
    rids: list[int] = [0] * len(specs)
    for start in range(0, len(specs), BULK_BATCH):
        with store.transaction():
            plain: list[tuple[int, NewRow]] = []
            for at in range(start, min(start + BULK_BATCH, len(specs))):
                spec = specs[at]
                who = principal(spec.tenant)
                rec = _build(mem, who, spec.kwargs)
                vecs = {"content": spec.content_vec, "state": spec.state_vec}
                analysis = (ANALYSIS_VERSION, stored_form(rec))
                decision = mem.promotion.decide(rec)
                if rec.entity is None:
                    events: list[tuple[EventType, str, str, dict[str, Any]]] = [
                        (EventType.PROPOSED, who.name, "proposed via bulk load",
                         {"kind": rec.kind.value, "namespace": rec.scope.namespace})]
                    if decision.promote:
                        events.append((EventType.PROMOTED, who.name, decision.reason, {}))
                    plain.append((at, NewRow(rec, who, vecs, tuple(events), analysis)))
                    continue
                rids[at] = store.insert(rec, who, vecs, "proposed via bulk load",
                                        analysis=analysis)
                if decision.promote:
                    store.append_event(rec.id, Eligibility(who, states=ALL_STATES),
                                       EventType.PROMOTED, who.name, decision.reason)
                    mem._writer.supersede_same_key(rec, who)
            for (at, _), rid in zip(plain, store.insert_many([r for _, r in plain]),
                                    strict=True):
                rids[at] = rid
    return rids


def stored_rids(mem: Memory, specs: Sequence[Spec]) -> list[int]:
    """The rowids of a store `bulk_load` filled with these specs (`--reuse`), found by content
    (every generated content is unique); refused when a spec is missing."""
    db = mem.store.db  # type: ignore[attr-defined]
    by_content = {str(c): int(r) for r, c in db.execute("SELECT rid, content FROM memories")}
    try:
        return [by_content[spec.kwargs["content"].strip()] for spec in specs]
    except KeyError:
        raise SystemExit("--reuse: the stored file holds other memories (another size, seed "
                         "or generator): remove it or drop --reuse") from None


def stored_extra(mem: Memory, after: int) -> tuple[F32, npt.NDArray[np.int64], list[str]]:
    """Content vectors, rowids and tenants of the active rows added after the generated ones
    (an earlier run's adds into a kept store): the numpy baseline holds them too."""
    db = mem.store.db  # type: ignore[attr-defined]
    got = list(db.execute(
        "SELECT m.rid, m.tenant, v.content FROM memories m JOIN vectors v ON v.rid = m.rid "
        "WHERE m.rid > ? AND m.state = 'ACTIVE' ORDER BY m.rid", (after,)))
    vecs = (np.stack([np.frombuffer(r[2], dtype=np.float32) for r in got]) if got
            else np.zeros((0, 1), dtype=np.float32))
    return vecs, np.asarray([int(r[0]) for r in got], dtype=np.int64), [str(r[1]) for r in got]


def _build(mem: Memory, who: Principal, kw: dict[str, Any]) -> MemoryRecord:
    return mem._build(
        content=kw["content"], principal=who, kind=kw.get("kind", "lesson"),
        namespace=kw["namespace"], state=kw.get("state"), action=kw.get("action"),
        success=kw.get("success"), reward=None, episode_id=None, step=None, evidence=(),
        conditions=kw.get("conditions", ()), entity=kw.get("entity"),
        attribute=kw.get("attribute"), value=kw.get("value"), multi_valued=False, roles=(),
        classification="internal", consent=None, authority=kw.get("authority", "inferred"),
        valid_from=None, valid_until=None, policy_version=None,
    )


def add_one_by_one(mem: Memory, specs: Sequence[Spec], emb: Precomputed | None) -> float:
    """Memories per second through the public `Memory.add`, one call (one commit) each.

    `Memory.add` runs the write gates and the near-duplicate check, which `bulk_load` skips.
    """
    if emb is not None:
        emb.learn_specs(specs)
    t0 = time.perf_counter()
    for spec in specs:
        mem.add(principal=principal(spec.tenant), **spec.kwargs)
    return len(specs) / (time.perf_counter() - t0)


# -- timing ----------------------------------------------------------------------------------


def pct(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q)) if samples else float("nan")


@dataclass
class Dist:
    """Latency samples in milliseconds."""

    samples: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return pct(self.samples, 50)

    @property
    def p95(self) -> float:
        return pct(self.samples, 95)

    def summary(self) -> dict[str, float]:
        return {"p50_ms": self.p50, "p95_ms": self.p95,
                "mean_ms": statistics.fmean(self.samples) if self.samples else float("nan"),
                "n": len(self.samples)}


def ms(t0: int, t1: int) -> float:
    return (t1 - t0) / 1e6


class Baseline:
    """Exact top-k over one tenant's rows, stored contiguously: `mat @ q` + argpartition.

    Two ways to compute the similarities, timed separately: BLAS `mat @ q` (multi-threaded
    OpenBLAS, fastest on an idle machine, erratic on a busy one) and a single-threaded
    `einsum` loop; the faster of the two on each query is the baseline.
    """

    def __init__(self, vecs: F32, rids: npt.NDArray[np.int64]) -> None:
        self.mat = np.ascontiguousarray(vecs, dtype=np.float32)
        self.rids = rids

    def search(self, q: F32, k: int, blas: bool = True) -> npt.NDArray[np.int64]:
        sims = self.mat @ q if blas else np.einsum("ij,j->i", self.mat, q)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        return self.rids[top[np.argsort(-sims[top])]]

    def fastest(self, q: F32, k: int, first_blas: bool) -> tuple[float, npt.NDArray[np.int64]]:
        """(milliseconds of the faster way, its top k); the order alternates between calls."""
        best, out = float("inf"), np.empty(0, dtype=np.int64)
        for blas in (first_blas, not first_blas):
            t0 = time.perf_counter_ns()
            out = self.search(q, k, blas)
            best = min(best, ms(t0, time.perf_counter_ns()))
        return best, out


def request(q: Query, k: int = 5) -> RecallRequest:
    return RecallRequest(
        state=q.state, principal=principal(q.tenant), intent=q.intent, namespace=None, k=k,
        budget_tokens=800, as_of=None, known_at=None, policy=Policy(),
    )


# -- one configuration -----------------------------------------------------------------------


@dataclass
class ConfigResult:
    n: int
    dim: int
    eligible_rows: float
    build_s: float
    bulk_rate: float
    numpy: dict[str, float]
    dense: dict[str, float]
    retrieve: dict[str, float]
    recall: dict[str, float]
    dense_sqlite: dict[str, float]
    retrieve_sqlite: dict[str, float]
    recall_sqlite: dict[str, float]
    resident_mb: float
    slice_load_ms: float
    exact_topk_agreement: float
    stages: dict[str, dict[str, float]]
    candidates_judged: float
    modes: dict[str, int]
    add_into_store_rate: float
    db_mb: float
    raw_vectors_mb: float
    rss_mb: float
    graphs_s: float
    """Loading the tenants' slices, building or loading their HNSW graphs (first searches)."""
    ann_tenants: int
    reused: bool
    """The store was a previous run's (`--reuse`): no bulk-load rate."""
    recall_at_10: float
    """Of the exact top 10 (numpy), the share the resident search's top 10 holds."""
    ratios: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    resident_mb: float
    ann_rows: int
    sqlite_max: int
    reuse: bool = False
    """Time a store a previous run kept (`--workdir`) instead of filling a new one."""


def _rss_mb() -> float:
    """This process's resident set (VmRSS), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e3
    return float("nan")


def run_config(
    n: int, dim: int, queries: int, seed: int, workdir: Path, console: Console,
    profile_out: Path | None, add_n: int, opts: Options,
) -> ConfigResult:
    world = World(dim, seed)
    t0 = time.perf_counter()
    specs = [world.memory(i) for i in range(n)]
    gen_s = time.perf_counter() - t0
    emb = Precomputed(dim)
    path = workdir / f"recall-{n}-{dim}.db"
    reused = opts.reuse and path.exists()
    mem = Memory(path, embedder=emb, resident_mb=opts.resident_mb, ann_rows=opts.ann_rows)
    t0 = time.perf_counter()
    rids = stored_rids(mem, specs) if reused else bulk_load(mem, emb, specs)
    build_s = time.perf_counter() - t0
    if reused:
        console.log(f"N={n:,} dim={dim}: generated in {gen_s:.1f}s, reusing {path}")
    else:
        console.log(f"N={n:,} dim={dim}: generated in {gen_s:.1f}s, bulk-loaded in "
                    f"{build_s:.1f}s ({n / build_s:,.0f} memories/s)")

    rid_arr = np.asarray(rids, dtype=np.int64)
    tenant_of = np.asarray([s.tenant for s in specs])
    content = np.stack([s.content_vec for s in specs])
    if reused:  # an earlier run's adds are stored rows too
        ex_vecs, ex_rids, ex_tenants = stored_extra(mem, int(rid_arr.max()))
        if len(ex_rids):
            content = np.concatenate([content, ex_vecs])
            rid_arr = np.concatenate([rid_arr, ex_rids])
            tenant_of = np.concatenate([tenant_of, [
                next(t for t in range(TENANTS) if principal(t).tenant == x)
                for x in ex_tenants]])
            console.log(f"{len(ex_rids)} active rows an earlier run added are in the baseline")
    baselines = {
        t: Baseline(content[tenant_of == t], rid_arr[tenant_of == t]) for t in range(TENANTS)
    }
    del content
    qs = [world.query(i % TENANTS) for i in range(queries)]
    warm = [world.query(i % TENANTS) for i in range(10)]
    store = mem.store
    # the same file through a second connection with the resident index off: SQLite's own
    # search path (sqlite-vec KNN and FTS5), for comparison
    with_sqlite = n <= opts.sqlite_max
    sql_mem = Memory(path, embedder=emb, resident_mb=0) if with_sqlite else None
    sql_store = sql_mem.store if sql_mem is not None else None

    # a tenant's first search runs in SQLite, its second loads the slice: timed apart (a
    # one-off per tenant and process)
    loads = []
    t_graphs = time.perf_counter()
    for t in range(TENANTS):
        elig = Eligibility.for_recall(principal(t))
        store.dense("content", qs[0].qvec, TOP_K, elig)
        t0n = time.perf_counter_ns()
        store.dense("content", qs[0].qvec, TOP_K, elig)
        loads.append(ms(t0n, time.perf_counter_ns()))
    graphs_s = time.perf_counter() - t_graphs
    if store.resident.loads < TENANTS:
        raise SystemExit(f"only {store.resident.loads} of {TENANTS} slices loaded: raise "
                         "resident_mb or lower N")

    flip = [True]

    def one(q: Query, d: dict[str, Dist]) -> tuple[bool, float, str]:
        elig = Eligibility.for_recall(principal(q.tenant))
        text = f"{q.intent} {q.state.describe()}".strip()
        flip[0] = not flip[0]
        np_ms, top_np = baselines[q.tenant].fastest(q.qvec, TOP_K, flip[0])
        d["numpy"].samples.append(np_ms)
        top_db: list[tuple[int, float]] = []
        mode = ""
        for suffix, st_ in (("", store), ("_sqlite", sql_store)):
            if st_ is None:
                continue
            t_b = time.perf_counter_ns()
            hits = st_.dense("content", q.qvec, TOP_K, elig)
            t_c = time.perf_counter_ns()
            d["dense" + suffix].samples.append(ms(t_b, t_c))
            t_c = time.perf_counter_ns()
            retrieve(st_, q.qvec, text, elig, TOP_K)
            t_d = time.perf_counter_ns()
            emb.hand(q.qvec, q.svec)
            t_e = time.perf_counter_ns()
            b = run_recall(st_, emb, mem.reconstructor, request(q))
            t_f = time.perf_counter_ns()
            d["retrieve" + suffix].samples.append(ms(t_c, t_d))
            d["recall" + suffix].samples.append(ms(t_e, t_f))
            if not suffix:
                top_db, mode = hits, b.mode.value
        got = [r for r, _ in top_db]
        exact = [int(x) for x in top_np]
        return got == exact, len(set(got[:10]) & set(exact[:10])) / 10, mode

    names = ("numpy", "dense", "retrieve", "recall", "dense_sqlite", "retrieve_sqlite",
             "recall_sqlite")
    for q in warm:
        one(q, {k: Dist() for k in names})
    d = {k: Dist() for k in names}
    agree = 0
    recall10: list[float] = []
    modes: dict[str, int] = {}
    gc.collect()
    prof = cProfile.Profile() if profile_out else None
    if prof:
        prof.enable()
    for q in qs:
        same, r10, mode = one(q, d)
        agree += same
        recall10.append(r10)
        modes[mode] = modes.get(mode, 0) + 1
    if prof:
        prof.disable()
    if sql_mem is not None:
        sql_mem.close()
    d_np, d_dense, d_ret, d_rec = d["numpy"], d["dense"], d["retrieve"], d["recall"]

    # stages with exactly STAGE_CANDIDATES candidates, timed by the pipeline's own stages
    st = {k: Dist() for k in ("retrieve", "dedupe", "judge", "compile", "stages_4_7",
                              "record", "total")}
    judged: list[int] = []
    names = dict(zip(("eligible", "retrieve", "dedupe", "judge", "compile", "record"),
                     (name for name, _ in pipeline.STAGES), strict=True))
    for i, q in enumerate(warm + qs):
        emb.hand(q.qvec, q.svec)
        clock: dict[str, int] = {}
        t0n = time.perf_counter_ns()
        b = run_recall(store, emb, mem.reconstructor, request(q), candidates=STAGE_CANDIDATES,
                       clock=clock)
        t1n = time.perf_counter_ns()
        if i < len(warm):
            continue
        for key in ("retrieve", "dedupe", "judge", "compile", "record"):
            st[key].samples.append(clock[names[key]] / 1e6)
        st["stages_4_7"].samples.append((clock[names["judge"]] + clock[names["compile"]]) / 1e6)
        st["total"].samples.append(ms(t0n, t1n))
        judged.append(len({t.memory_id for t in b.trace}) - sum(
            1 for t in b.trace if t.stage == "dedupe"))
    if prof and profile_out:
        prof.enable()
        for q in qs:
            emb.hand(q.qvec, q.svec)
            run_recall(store, emb, mem.reconstructor, request(q), candidates=STAGE_CANDIDATES)
        prof.disable()
        prof.dump_stats(str(profile_out))
        console.log(f"profile written to {profile_out}")

    # Memory.add one by one into the loaded store (after the recalls, not part of the baseline)
    extra = [world.memory(n + i) for i in range(add_n)]
    add_rate = add_one_by_one(mem, extra, emb)
    mem.close()
    db_mb = sum(p.stat().st_size for p in workdir.glob(f"recall-{n}-{dim}.db*")) / 1e6

    res = ConfigResult(
        n=n, dim=dim, eligible_rows=float(np.mean([len(b.rids) for b in baselines.values()])),
        build_s=build_s, bulk_rate=n / build_s, numpy=d_np.summary(), dense=d_dense.summary(),
        retrieve=d_ret.summary(), recall=d_rec.summary(), exact_topk_agreement=agree / len(qs),
        dense_sqlite=d["dense_sqlite"].summary(), retrieve_sqlite=d["retrieve_sqlite"].summary(),
        recall_sqlite=d["recall_sqlite"].summary(),
        resident_mb=store.resident.nbytes() / 1e6, slice_load_ms=statistics.median(loads),
        raw_vectors_mb=n * dim * 4 * 2 / 1e6, rss_mb=_rss_mb(), graphs_s=graphs_s,
        ann_tenants=int(store.resident.describe()["ann"]["tenants"]), reused=reused,
        recall_at_10=float(np.mean(recall10)),
        stages={k: v.summary() for k, v in st.items()},
        candidates_judged=float(np.mean(judged)) if judged else 0.0, modes=modes,
        add_into_store_rate=add_rate, db_mb=db_mb,
    )
    base = d_np.p50
    res.ratios = {
        "dense_vs_numpy": d_dense.p50 / base,
        "retrieve_vs_numpy": d_ret.p50 / base,
        "recall_vs_numpy": d_rec.p50 / base,
        "dense_sqlite_vs_numpy": d["dense_sqlite"].p50 / base,
        "retrieve_sqlite_vs_numpy": d["retrieve_sqlite"].p50 / base,
        "recall_sqlite_vs_numpy": d["recall_sqlite"].p50 / base,
        "resident_vs_raw_vectors": res.resident_mb / res.raw_vectors_mb,
        "stages_4_7_vs_retrieve": st["stages_4_7"].p50 / st["retrieve"].p50,
    }
    return res


# -- throughput with real embedding ----------------------------------------------------------


def throughput(n: int, seed: int, workdir: Path, console: Console) -> dict[str, float]:
    """`Memory.add` one by one: precomputed vectors, and the default embedder; embedder alone."""
    out: dict[str, float] = {"n": n}
    real = get_embedder(DEFAULT_EMBEDDER)
    world = World(real.dim, seed + 1)
    specs = [world.memory(i) for i in range(n)]

    emb = Precomputed(real.dim)
    with Memory(workdir / "add-precomputed.db", embedder=emb) as mem:
        out["add_precomputed_per_s"] = add_one_by_one(mem, specs, emb)

    texts = []
    for s in specs:
        st = s.kwargs.get("state")
        texts += [s.kwargs["content"], st.describe() if st is not None else s.kwargs["content"]]
    real.embed(texts[:64])  # load the model outside the clock
    t0 = time.perf_counter()
    real.embed(texts)
    out["embed_texts_per_s"] = len(texts) / (time.perf_counter() - t0)

    with Memory(workdir / "add-default.db", embedder=real) as mem:
        out["add_default_embedder_per_s"] = add_one_by_one(mem, specs, None)

    emb2 = Precomputed(real.dim)
    with Memory(workdir / "bulk-precomputed.db", embedder=emb2) as mem:
        t0 = time.perf_counter()
        bulk_load(mem, emb2, specs)
        out["bulk_precomputed_per_s"] = n / (time.perf_counter() - t0)
    console.log(f"throughput at n={n:,}: {out}")
    out["embedder"] = real.model_ref  # type: ignore[assignment]
    return out


# -- machine and output ----------------------------------------------------------------------


def machine() -> dict[str, Any]:
    db = apsw.Connection(":memory:")
    load_extension(db)
    row = db.execute("SELECT vec_version()").fetchone()
    vec = str(row[0]) if row else "?"
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "sqlite_vec": vec,
        "numpy": np.__version__,
        "situated": _version("situated"),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def f2(x: float) -> str:
    return "-" if x != x else f"{x:.2f}"


def render(console: Console, facts: dict[str, Any], results: list[ConfigResult],
           tp: dict[str, float] | None, wall: float) -> None:
    console.print(
        f"[bold]machine[/]: {facts['cpu']}, {facts['cores']} cores "
        f"({facts['usable_cores']} usable), load {facts['loadavg_at_start']}\n"
        f"python {facts['python']}, SQLite {facts['sqlite']} (apsw {facts['apsw']}), "
        f"sqlite-vec {facts['sqlite_vec']}, numpy {facts['numpy']}, {facts['platform']}"
    )
    t = Table(title=f"Recall latency, ms (query embedding excluded; {TENANTS} tenants, "
                    f"tenant gate = 10%; dense k={TOP_K}, recall k=5; resident index)")
    for col in ("N", "dim", "eligible", "numpy p50/p95", "dense p50/p95", "x numpy",
                "retrieve p50/p95", "x numpy", "recall p50/p95", "x numpy", "top-k =",
                "recall@10", "HNSW tenants"):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r.n:,}", str(r.dim), f"{r.eligible_rows:,.0f}",
            f"{f2(r.numpy['p50_ms'])} / {f2(r.numpy['p95_ms'])}",
            f"{f2(r.dense['p50_ms'])} / {f2(r.dense['p95_ms'])}",
            f"[bold]{r.ratios['dense_vs_numpy']:.1f}x[/]",
            f"{f2(r.retrieve['p50_ms'])} / {f2(r.retrieve['p95_ms'])}",
            f"{r.ratios['retrieve_vs_numpy']:.1f}x",
            f"{f2(r.recall['p50_ms'])} / {f2(r.recall['p95_ms'])}",
            f"{r.ratios['recall_vs_numpy']:.1f}x",
            f"{r.exact_topk_agreement:.0%}", f"{r.recall_at_10:.3f}", str(r.ann_tenants),
        )
    console.print(t)

    q = Table(title="The same searches through SQLite alone (resident_mb=0: sqlite-vec KNN, "
                    "FTS5), ms p50 / p95; and what the resident index costs")
    for col in ("N", "dim", "dense", "x numpy", "retrieve", "x numpy", "recall", "x numpy",
                "resident MB", "x raw vectors", "RSS MB", "slice load ms", "first loads s"):
        q.add_column(col, justify="right")
    for r in results:
        q.add_row(
            f"{r.n:,}", str(r.dim),
            f"{f2(r.dense_sqlite['p50_ms'])} / {f2(r.dense_sqlite['p95_ms'])}",
            f"{r.ratios['dense_sqlite_vs_numpy']:.1f}x",
            f"{f2(r.retrieve_sqlite['p50_ms'])} / {f2(r.retrieve_sqlite['p95_ms'])}",
            f"{r.ratios['retrieve_sqlite_vs_numpy']:.1f}x",
            f"{f2(r.recall_sqlite['p50_ms'])} / {f2(r.recall_sqlite['p95_ms'])}",
            f"{r.ratios['recall_sqlite_vs_numpy']:.1f}x",
            f"{r.resident_mb:,.0f}", f"{r.ratios['resident_vs_raw_vectors']:.2f}x",
            f"{r.rss_mb:,.0f}", f"{r.slice_load_ms:,.0f}", f"{r.graphs_s:,.0f}",
        )
    console.print(q)

    s = Table(title=f"Pipeline stages (`pipeline.STAGES`, timed by `run_recall(clock=)`) with "
                    f"{STAGE_CANDIDATES} candidates, `rules` reconstructor, ms p50 / p95")
    for col in ("N", "dim", "judged", "2 retrieve", "3 dedupe", "4-6 judge", "7 compile",
                "4-7", "x retr.", f"<= {TARGET_STAGES_MS:g} ms", "8 record", "total"):
        s.add_column(col, justify="right")
    for r in results:
        g = r.stages

        def pp(key: str, g: dict[str, dict[str, float]] = g) -> str:
            return f"{f2(g[key]['p50_ms'])} / {f2(g[key]['p95_ms'])}"

        ok = g["stages_4_7"]["p50_ms"] <= TARGET_STAGES_MS
        s.add_row(
            f"{r.n:,}", str(r.dim), f"{r.candidates_judged:.1f}", pp("retrieve"), pp("dedupe"),
            pp("judge"), pp("compile"), pp("stages_4_7"),
            f"[bold]{r.ratios['stages_4_7_vs_retrieve']:.2f}x[/]",
            "[green]yes[/]" if ok else "[red]no[/]", pp("record"), pp("total"),
        )
    console.print(s)

    w = Table(title="Write throughput, memories/s")
    for col in ("path", "store", "memories/s"):
        w.add_column(col, justify="right" if col == "memories/s" else "left")
    for r in results:
        w.add_row("bulk load (set-based, 1,000 per transaction), precomputed vectors",
                  f"empty -> {r.n:,} @ {r.dim}",
                  "reused" if r.reused else f"{r.bulk_rate:,.0f}")
        w.add_row("Memory.add one by one, precomputed vectors",
                  f"holding {r.n:,} @ {r.dim}", f"{r.add_into_store_rate:,.0f}")
    if tp:
        n = int(tp["n"])
        w.add_row("Memory.add one by one, precomputed vectors", f"empty -> {n:,}",
                  f"{tp['add_precomputed_per_s']:,.0f}")
        w.add_row(f"Memory.add one by one, {DEFAULT_EMBEDDER} embedder", f"empty -> {n:,}",
                  f"{tp['add_default_embedder_per_s']:,.0f}")
        w.add_row("bulk load, precomputed vectors", f"empty -> {n:,}",
                  f"{tp['bulk_precomputed_per_s']:,.0f}")
        w.add_row(f"{DEFAULT_EMBEDDER} embed() alone (texts/s, 2 per memory)", "-",
                  f"{tp['embed_texts_per_s']:,.0f}")
    console.print(w)
    big = max(results, key=lambda r: (r.n, r.dim == 256))
    console.print(
        f"headline: at N={big.n:,}, dim={big.dim}, the eligible dense search is "
        f"{big.ratios['dense_vs_numpy']:.1f}x the numpy baseline, stage 2 retrieval "
        f"{big.ratios['retrieve_vs_numpy']:.1f}x and the whole recall "
        f"{big.ratios['recall_vs_numpy']:.1f}x (target <= {TARGET_RECALL_RATIO:g}x); "
        "stages 4-7 add "
        f"{big.stages['stages_4_7']['p50_ms']:.2f} ms p50 for {STAGE_CANDIDATES} candidates "
        f"(target <= {TARGET_STAGES_MS:g} ms). wall time {wall:.0f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="store sizes, comma-separated")
    ap.add_argument("--dims", default="256,384", help="vector dimensions, comma-separated")
    ap.add_argument("--quick", action="store_true", help="sizes 2000,10000 and fewer queries")
    ap.add_argument("--queries", type=int, default=None, help="timed recalls per configuration")
    ap.add_argument("--throughput-n", type=int, default=2000,
                    help="memories added one by one for the throughput rows (0 skips them)")
    ap.add_argument("--add-n", type=int, default=300,
                    help="Memory.add calls timed into each loaded store")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path, default=None, help="write every number to this file")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the databases here")
    ap.add_argument("--resident-mb", type=float, default=8000,
                    help="the resident index's budget (every tenant must fit)")
    ap.add_argument("--ann-rows", type=int, default=None,
                    help="a tenant with this many rows gets HNSW graphs (default: the "
                         "library's; 0: exact only)")
    ap.add_argument("--sqlite-max", type=int, default=200_000,
                    help="time the SQLite-alone search path only up to this store size")
    ap.add_argument("--reuse", action="store_true",
                    help="with --workdir: time the stores a previous run kept there (same "
                         "seed) instead of filling new ones; the adds then go into them")
    ap.add_argument("--profile", type=Path, default=None,
                    help="cProfile the recall loop of the largest configuration into this file")
    args = ap.parse_args(argv)

    sizes = [2000, 10000] if args.quick else [int(x) for x in args.sizes.split(",") if x]
    dims = [int(x) for x in args.dims.split(",") if x]
    queries = args.queries or (100 if args.quick else 200)
    tp_n = min(args.throughput_n, 500) if args.quick else args.throughput_n
    from situated.store.ann import DEFAULT_ROWS

    if args.reuse and args.workdir is None:
        raise SystemExit("--reuse needs --workdir (where a previous run kept its stores)")
    opts = Options(args.resident_mb,
                   DEFAULT_ROWS if args.ann_rows is None else args.ann_rows, args.sqlite_max,
                   args.reuse)
    probe = Console()
    console = Console(width=max(probe.width, 160) if probe.is_terminal else 230)
    facts = machine()
    wall0 = time.perf_counter()
    results: list[ConfigResult] = []
    with tempfile.TemporaryDirectory(prefix="situated-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        largest = (max(sizes), dims[0])
        for n in sizes:
            for dim in dims:
                prof = args.profile if (n, dim) == largest else None
                results.append(run_config(n, dim, queries, args.seed, workdir, console, prof,
                                          args.add_n, opts))
        tp = throughput(tp_n, args.seed, workdir, console) if tp_n > 0 else None
    wall = time.perf_counter() - wall0
    render(console, facts, results, tp, wall)
    if args.profile:
        buf = io.StringIO()
        pstats.Stats(str(args.profile), stream=buf).sort_stats("cumulative").print_stats(30)
        console.print(buf.getvalue())
    if args.json:
        args.json.write_text(json.dumps(
            {"machine": facts, "queries": queries, "top_k": TOP_K,
             "stage_candidates": STAGE_CANDIDATES, "tenants": TENANTS,
             "configs": [asdict(r) for r in results], "throughput": tp, "wall_s": wall},
            indent=2, default=str,
        ))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
