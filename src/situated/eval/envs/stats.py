"""Small interval helpers for the environment evaluations (kept here, independent of the
scorecard's metrics module)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959964
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a 95% interval."""

    value: float
    low: float
    high: float
    n: int

    def fmt(self, pct: bool = False, digits: int = 1) -> str:
        if self.n == 0 or math.isnan(self.value):
            return "-"
        k = 100.0 if pct else 1.0
        v, lo, hi = self.value * k, self.low * k, self.high * k
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"

    def to_dict(self) -> dict[str, float | int]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def wilson(successes: int, n: int) -> Estimate:
    """A rate with its Wilson score 95% interval."""
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def bootstrap_mean(values: Sequence[float], seed: int = 0) -> Estimate:
    """A mean with a percentile-bootstrap 95% interval (2,000 resamples, fixed seed)."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = sum(values) / n
    if n == 1:
        return Estimate(mean, mean, mean, 1)
    rng = random.Random(seed)
    means = sorted(
        sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP_RESAMPLES)
    )
    lo = means[int(0.025 * BOOTSTRAP_RESAMPLES)]
    hi = means[int(0.975 * BOOTSTRAP_RESAMPLES) - 1]
    return Estimate(mean, lo, hi, n)
