"""Utility as a measured rate: a Beta(1, 1) posterior over "it helped when used".

A never-used memory sits at 0.5. The rate is kept overall and per namespace of the recall
(a memory useless for deploys may be vital for approvals); selection uses the namespace's
rate once that namespace has evidence, plus an exploration bonus from the posterior's spread.
"""

from __future__ import annotations

import math
from functools import lru_cache

from situated.models import Counters

EXPLORATION = 0.5
"""Weight of the posterior's standard deviation in the optimistic utility used for selection."""


@lru_cache(maxsize=4096)
def posterior(successes: float, uses: float) -> tuple[float, float]:
    """Mean and standard deviation of Beta(1 + successes, 1 + failures) (cached: counts are
    small integers that recur across memories)."""
    a, b = 1 + successes, 1 + max(0, uses - successes)
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    return mean, math.sqrt(var)


def rate(
    counters: Counters, namespace_counts: tuple[float, float] | None = None
) -> tuple[float, float]:
    """(mean, sd) from the namespace's (uses, successes) when it has any, else overall."""
    if namespace_counts is not None and namespace_counts[0] > 0:
        uses, successes = namespace_counts
        return posterior(successes, uses)
    return posterior(counters.successes, counters.uses)


def optimistic(
    counters: Counters, namespace_counts: tuple[float, float] | None = None
) -> float:
    """Posterior mean plus `EXPLORATION` standard deviations, capped at 1."""
    mean, sd = rate(counters, namespace_counts)
    return min(1.0, mean + EXPLORATION * sd)
