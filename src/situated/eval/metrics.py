"""The scorecard's numbers, computed from per-task rows.

One `Row` is one arm on one scenario for one seed. Every arm ran with the same common random
number per (seed, scenario), so differences between arms are paired.

Definitions (per arm, overall and per slice):

- success: share of tasks that succeeded.
- lift: mean over tasks of (success of the arm - success of no memory); for `compiled` this
  is the verified memory lift, the headline.
- paired difference: mean of (success of compiled - success of the other arm).
- negative transfer rate: share of tasks where the arm failed and no memory succeeded.
- false acceptance: inapplicable memories served / inapplicable memories the store held
  (ground truth `applies: false`, distractors included).
- false rejection: applicable memories not served / applicable memories held.
- poisoned served, cross-scope leaks (served memories the principal may not read: another
  tenant, a role it lacks, a classification above its clearance), stale facts in context
  (expired, superseded, or under another policy version), revoked-consent memories served.
- tokens per task: tokens of the context the arm produced (the library's token counter).
- recall latency p50/p95 in milliseconds.
- accepted-only lift (diagnostic, never the headline): lift over the tasks where the arm
  served at least one memory.

Intervals are 95%: a t-interval over the per-seed means when there are two seeds or more,
otherwise a percentile bootstrap over tasks (2,000 resamples, fixed seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
    9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
    17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000,
    120: 1.980,
}
BOOTSTRAP_RESAMPLES = 2000


def t_quantile(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom.

    From a table; between tabulated values the smaller df is used (a slightly wider interval).
    """
    if df <= 0:
        raise ValueError("df must be positive")
    if df > max(_T975):
        return 1.96
    return _T975[max(d for d in _T975 if d <= df)]


@dataclass(frozen=True)
class Row:
    """One arm on one scenario for one seed."""

    seed: int
    scenario_id: str
    domain: str
    slice: str
    arm: str
    success: bool
    probability: float | None
    served: tuple[str, ...]
    applicable_held: int
    applicable_served: int
    inapplicable_held: int
    inapplicable_served: int
    poisoned_held: int
    poisoned_served: int
    leaks: int
    stale_served: int
    revoked_served: int
    tokens: int
    latency_ms: float
    mode: str | None = None
    false_rejections: tuple[str, ...] = ()
    """Why each applicable memory was not served (a rejection reason, or where it was lost)."""
    false_acceptances: tuple[str, ...] = ()
    """What each inapplicable memory served was (its first tag, or `inapplicable`)."""


@dataclass(frozen=True)
class Interval:
    """A mean with a 95% interval, and how it was computed."""

    mean: float
    low: float
    high: float
    n: int
    method: str

    def fmt(self, pct: bool = False, signed: bool = False) -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "-"
        scale = 100.0 if pct else 1.0
        sign = "+" if signed else ""
        return (f"{self.mean * scale:{sign}.1f} "
                f"[{self.low * scale:{sign}.1f}, {self.high * scale:{sign}.1f}]")


NAN_INTERVAL = Interval(float("nan"), float("nan"), float("nan"), 0, "none")


def interval(
    per_seed: Sequence[float], per_task: Sequence[float],
    bounds: tuple[float, float] = (-1.0, 1.0),
) -> Interval:
    """95% interval: t over per-seed means (>= 2 seeds), else bootstrap over tasks.

    A t-interval is clipped to `bounds`, the values the quantity can take (a rate cannot be
    negative, a paired difference of successes lies in [-1, 1]).
    """
    seeds = [v for v in per_seed if not math.isnan(v)]
    if len(seeds) >= 2:
        m = float(np.mean(seeds))
        sd = float(np.std(seeds, ddof=1))
        half = t_quantile(len(seeds) - 1) * sd / math.sqrt(len(seeds))
        lo, hi = max(bounds[0], m - half), min(bounds[1], m + half)
        return Interval(m, lo, hi, len(seeds), "t over seeds")
    if not per_task:
        return NAN_INTERVAL
    values = np.asarray(per_task, dtype=float)
    m = float(values.mean())
    if len(values) == 1:
        return Interval(m, m, m, 1, "single task")
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))
    means = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return Interval(m, float(lo), float(hi), len(values), "bootstrap over tasks")


@dataclass(frozen=True)
class Ratio:
    """A count over a count."""

    num: int
    den: int

    @property
    def value(self) -> float:
        return self.num / self.den if self.den else float("nan")

    def fmt(self) -> str:
        return "-" if not self.den else f"{100 * self.value:.0f}% ({self.num}/{self.den})"


@dataclass(frozen=True)
class ArmSummary:
    """Every scorecard number for one arm on one set of tasks."""

    arm: str
    tasks: int
    success: Interval
    lift: Interval
    negative_transfer: Interval
    false_acceptance: Ratio
    false_rejection: Ratio
    poisoned_served: Ratio
    leaks: int
    stale_served: int
    revoked_served: int
    tokens_per_task: float
    latency_p50_ms: float
    latency_p95_ms: float
    accepted_only_lift: Interval
    accepted_tasks: int
    vs: dict[str, Interval] = field(default_factory=dict)
    false_rejections_by_reason: dict[str, int] = field(default_factory=dict)
    false_acceptances_by_kind: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("false_acceptance", "false_rejection", "poisoned_served"):
            d[key]["rate"] = getattr(self, key).value
        out: dict[str, Any] = _finite(d)
        return out


def _finite(obj: Any) -> Any:
    """NaN -> None, recursively, so the JSON is standard."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _by_seed(pairs: Iterable[tuple[int, float]]) -> list[float]:
    groups: dict[int, list[float]] = {}
    for seed, v in pairs:
        groups.setdefault(seed, []).append(v)
    return [float(np.mean(v)) for _, v in sorted(groups.items())]


def _paired(
    rows: dict[tuple[int, str], Row], other: dict[tuple[int, str], Row],
    value: Callable[[Row, Row], float], keep: Callable[[Row], bool] = lambda r: True,
    bounds: tuple[float, float] = (-1.0, 1.0),
) -> Interval:
    pairs = [(key[0], value(r, other[key])) for key, r in sorted(rows.items())
             if key in other and keep(r)]
    if not pairs:
        return NAN_INTERVAL
    return interval(_by_seed(pairs), [v for _, v in pairs], bounds)


def summarize_arm(
    arm: str, rows: Sequence[Row], baseline: Sequence[Row],
    others: dict[str, Sequence[Row]] | None = None,
) -> ArmSummary:
    """The summary of `arm` over `rows`, paired with the baseline (no memory) rows."""
    mine = {(r.seed, r.scenario_id): r for r in rows}
    base = {(r.seed, r.scenario_id): r for r in baseline}
    succ = [(r.seed, float(r.success)) for r in rows]
    lift = _paired(mine, base, lambda a, b: float(a.success) - float(b.success))
    neg = _paired(mine, base, lambda a, b: float(b.success and not a.success), bounds=(0.0, 1.0))
    accepted = _paired(mine, base, lambda a, b: float(a.success) - float(b.success),
                       keep=lambda r: bool(r.served))
    vs = {
        name: _paired(mine, {(r.seed, r.scenario_id): r for r in o},
                      lambda a, b: float(a.success) - float(b.success))
        for name, o in (others or {}).items()
    }
    lat = np.asarray([r.latency_ms for r in rows], dtype=float)
    return ArmSummary(
        arm=arm,
        tasks=len(rows),
        success=(interval(_by_seed(succ), [v for _, v in succ], (0.0, 1.0)) if rows
                 else NAN_INTERVAL),
        lift=lift,
        negative_transfer=neg,
        false_acceptance=Ratio(sum(r.inapplicable_served for r in rows),
                               sum(r.inapplicable_held for r in rows)),
        false_rejection=Ratio(sum(r.applicable_held - r.applicable_served for r in rows),
                              sum(r.applicable_held for r in rows)),
        poisoned_served=Ratio(sum(r.poisoned_served for r in rows),
                              sum(r.poisoned_held for r in rows)),
        leaks=sum(r.leaks for r in rows),
        stale_served=sum(r.stale_served for r in rows),
        revoked_served=sum(r.revoked_served for r in rows),
        tokens_per_task=float(np.mean([r.tokens for r in rows])) if rows else float("nan"),
        latency_p50_ms=float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        latency_p95_ms=float(np.percentile(lat, 95)) if len(lat) else float("nan"),
        accepted_only_lift=accepted,
        accepted_tasks=sum(1 for r in rows if r.served),
        vs=vs,
        false_rejections_by_reason=_count(x for r in rows for x in r.false_rejections),
        false_acceptances_by_kind=_count(x for r in rows for x in r.false_acceptances),
    )


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Scorecard:
    """Summaries per arm: overall, per slice and per domain."""

    arms: tuple[str, ...]
    overall: dict[str, ArmSummary]
    slices: dict[str, dict[str, ArmSummary]]
    domains: dict[str, dict[str, ArmSummary]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "arms": list(self.arms),
            "overall": {a: s.to_dict() for a, s in self.overall.items()},
            "slices": {k: {a: s.to_dict() for a, s in v.items()} for k, v in self.slices.items()},
            "domains": {k: {a: s.to_dict() for a, s in v.items()}
                        for k, v in self.domains.items()},
        }


def _summaries(rows: Sequence[Row], arms: Sequence[str], baseline: str,
               reference: str) -> dict[str, ArmSummary]:
    by_arm: dict[str, Sequence[Row]] = {}
    for a in arms:
        by_arm[a] = [r for r in rows if r.arm == a]
    base = by_arm.get(baseline, [])
    out = {}
    for a in arms:
        others = (
            {o: by_arm[o] for o in arms if o not in (a, baseline)} if a == reference else None
        )
        out[a] = summarize_arm(a, by_arm[a], base, others)
    return out


def scorecard(
    rows: Sequence[Row], arms: Sequence[str], slice_order: Sequence[str] = (),
    baseline: str = "no_memory", reference: str = "compiled",
) -> Scorecard:
    """Summaries of every arm, paired with `baseline`; `reference` gets paired differences."""
    slices = list(dict.fromkeys([*[s for s in slice_order if any(r.slice == s for r in rows)],
                                 *sorted({r.slice for r in rows})]))
    domains = sorted({r.domain for r in rows})
    return Scorecard(
        arms=tuple(arms),
        overall=_summaries(rows, arms, baseline, reference),
        slices={s: _summaries([r for r in rows if r.slice == s], arms, baseline, reference)
                for s in slices},
        domains={d: _summaries([r for r in rows if r.domain == d], arms, baseline, reference)
                 for d in domains},
    )
