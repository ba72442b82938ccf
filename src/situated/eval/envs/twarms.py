"""The arms of the TextWorld benchmarks, how memory is built from train games, and the metrics
(shared by `textworld` and `twcustom`).

Arms: `no_memory`; `raw_replay` (the successful train episode whose first state is most
similar to the query `intent + present state`, its actions pasted verbatim); `compiled`
(`Memory.recall` in the benchmark's namespace; plans and things to avoid parsed from its
rendered items, as the agent reads them). Metrics per arm: success (won), mean score (points /
max points, %), lift over no memory and compiled minus raw replay (paired by game and agent
seed), negative transfer (an episode that ends worse than no memory on the same game and
seed: lower score, or lost where no memory was not), lost rate, steps, context tokens, consult
latency; Wilson intervals for rates, bootstrap for means.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from situated.embed import Embedder
from situated.eval.envs.stats import Estimate, bootstrap_mean, wilson
from situated.eval.envs.swagent import NO_ADVICE, Advice, Plan, parse_guidance, read_briefing
from situated.eval.envs.twgame import (
    COOKING,
    INTENT,
    Episode,
    Play,
    Settings,
    run_episode,
    walkthrough,
)
from situated.memory import Memory
from situated.models import LifecycleState, Principal, State
from situated.recall.compile import token_counter

ARMS: tuple[str, ...] = ("no_memory", "raw_replay", "compiled")
BASELINE = "no_memory"
RAW_HEADER = "Relevant past experience:"


class RecallSettings(Settings, Protocol):
    """What the compiled arm and memory building need of a benchmark's configuration: an
    episode's settings, and how much a recall may bring."""

    @property
    def k(self) -> int: ...

    @property
    def budget_tokens(self) -> int: ...


# -- arms -------------------------------------------------------------------------------------


class NoMemory:
    name = "no_memory"

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        return NO_ADVICE

    def feedback(self, episode: Episode) -> None:
        return None


class RawReplay:
    """The most similar successful train episode, its actions pasted verbatim."""

    name = "raw_replay"

    def __init__(self, embedder: Embedder, intent: str = INTENT) -> None:
        self.embedder = embedder
        self.intent = intent
        self.index: list[tuple[str, tuple[str, ...], Any]] = []

    def add(self, ep: Episode) -> None:
        if ep.won and ep.steps:
            first = ep.steps[0]
            text = f"{self.intent} {State(first.observation, first.facts).describe()}"
            self.index.append((ep.episode_id, tuple(s.action for s in ep.steps),
                               self.embedder.embed_one(text)))

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        query = self.embedder.embed_one(f"{self.intent} {state.describe()}")
        cands = [c for c in self.index if c[0] not in exclude]
        if not cands:
            return Advice("NO_APPLICABLE_MEMORY", latency_ms=(time.perf_counter() - t0) * 1000)
        best = max(cands, key=lambda c: (float(c[2] @ query), c[0]))
        text = f"{RAW_HEADER}\n- To {self.intent}: {'; '.join(best[1])}."
        return Advice("GUIDED", plans=(Plan(best[0], best[1]),), text=text,
                      tokens=token_counter().count(text),
                      latency_ms=(time.perf_counter() - t0) * 1000, served=(best[0],))

    def feedback(self, episode: Episode) -> None:
        return None


class Compiled:
    """`Memory.recall`; plans and things to avoid are read from the rendered items."""

    name = "compiled"

    def __init__(self, mem: Memory, principal: Principal, cfg: RecallSettings,
                 play: Play = COOKING) -> None:
        self.mem, self.principal, self.cfg, self.play = mem, principal, cfg, play
        self.modes: Counter[str] = Counter()
        self.rejections: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        """Served items by kind and verdict: `plan APPLICABLE`, `failure PARTIAL`, ..."""

    def consult(self, state: State, exclude: frozenset[str]) -> Advice:
        t0 = time.perf_counter()
        b = self.mem.recall(state, principal=self.principal, intent=self.play.intent,
                            namespace=self.play.namespace, k=self.cfg.k,
                            budget_tokens=self.cfg.budget_tokens)
        advice, _ = read_briefing(b, (time.perf_counter() - t0) * 1000, exclude)
        verdicts = {i.memory_id: i.verdict.value for i in b.items}
        for i in b.items:
            plan, bad = parse_guidance(i.memory_id, i.text)
            kind = "plan" if plan is not None else "failure" if bad else "other"
            self.served[f"{kind} {verdicts[i.memory_id]}"] += 1
        self.modes[b.mode.value] += 1
        self.rejections.update(r.reason.value for r in b.rejected)
        return advice

    def feedback(self, episode: Episode) -> None:
        for advice in episode.advices:
            if advice.ref is not None:
                self.mem.feedback(advice.ref, principal=self.principal, success=episode.won,
                                  used=[m for m in advice.served if m in episode.used],
                                  reward=episode.score / 100.0)


# -- memory building ----------------------------------------------------------------------------


def _no_advice(state: State, exclude: frozenset[str]) -> Advice:
    return NO_ADVICE


def build_memory(mem: Memory, principal: Principal, train: Sequence[Path], cfg: RecallSettings,
                 raw: RawReplay, sink: list[dict[str, Any]], play: Play = COOKING,
                 partner: Callable[[int], Path] | None = None) -> dict[str, int]:
    """Memory from train games only: each game's walkthrough, the agent exploring it, and the
    agent replaying another train game's walkthrough verbatim (`partner(i)`, default the
    next game in the list)."""
    counts: Counter[str] = Counter()
    walks = {p: walkthrough(p) for p in train}

    def learn(ep: Episode) -> None:
        if not ep.steps:
            return
        traj = ep.trajectory()
        sink.append(traj.model_dump(mode="json"))
        counts["episodes"] += 1
        counts["won"] += ep.won
        for rec in mem.learn(traj, principal=principal):
            counts["proposed"] += 1
            counts[{LifecycleState.ACTIVE: "promoted", LifecycleState.PROPOSED: "held",
                    LifecycleState.REJECTED: "rejected"}.get(rec.state, "other")] += 1

    for i, p in enumerate(train):
        gold = run_episode(p, "train", "gold", _no_advice, cfg, fixed=walks[p], play=play)
        counts["gold_won"] += gold.won
        learn(gold)
        raw.add(gold)
        learn(run_episode(p, "train", "explore", _no_advice, cfg, play=play))
        other = partner(i) if partner else train[(i + 1) % len(train)]
        if other != p:
            plan = Advice("GUIDED", plans=(Plan(f"gold:{other.stem}", walks[other]),))

            def fixed(state: State, exclude: frozenset[str], a: Advice = plan) -> Advice:
                return a

            learn(run_episode(p, "train", f"replay-{other.stem}", fixed, cfg, play=play))
    return dict(counts)


# -- metrics ------------------------------------------------------------------------------------


def summarise(episodes: Sequence[Episode], seed: int = 0) -> dict[str, dict[str, Any]]:
    base = {e.key: e for e in episodes if e.arm == BASELINE}
    out: dict[str, dict[str, Any]] = {}
    for arm in ARMS:
        eps = [e for e in episodes if e.arm == arm]
        if not eps:
            continue
        paired = [(e, base[e.key]) for e in eps if e.key in base]
        worse = sum(e.score < b.score or (e.lost and not b.lost) for e, b in paired)
        lat = sorted(a.latency_ms for e in eps for a in e.advices if a.latency_ms > 0)
        out[arm] = {
            "episodes": len(eps),
            "success": wilson(sum(e.won for e in eps), len(eps)).to_dict(),
            "mean_score": bootstrap_mean([e.score for e in eps], seed).to_dict(),
            "lift": bootstrap_mean([e.score - b.score for e, b in paired], seed).to_dict(),
            "negative_transfer": wilson(worse, len(paired)).to_dict(),
            "lost": wilson(sum(e.lost for e in eps), len(eps)).to_dict(),
            "steps_per_episode": statistics.fmean(len(e.steps) for e in eps),
            "tokens_per_episode": statistics.fmean(e.tokens for e in eps),
            "latency_p50_ms": lat[len(lat) // 2] if lat else float("nan"),
        }
    raw = {e.key: e for e in episodes if e.arm == "raw_replay"}
    if "compiled" in out and raw:
        pairs = [e.score - raw[e.key].score for e in episodes
                 if e.arm == "compiled" and e.key in raw]
        out["compiled"]["minus_raw_replay"] = bootstrap_mean(pairs, seed).to_dict()
    return out


def est(d: dict[str, Any], pct: bool = False) -> str:
    """A stored estimate as `value [low, high]`."""
    return Estimate(float(d["value"]), float(d["low"]), float(d["high"]),
                    int(d["n"])).fmt(pct=pct, digits=0 if pct else 1)
