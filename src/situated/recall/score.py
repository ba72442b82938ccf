"""Stage 6, scores: relevance, applicability, trust, freshness and expected utility, kept apart.

`expected_utility` is the one number the compiler maximises; it is documented here and never
overrides a hard gate (gates were applied in stages 1, 4 and 5 and are booleans).
"""

from __future__ import annotations

from situated.learning.utility import optimistic
from situated.models import Authority, MemoryRecord
from situated.recall.briefing import Reconstruction, Scores, Verdict

AUTHORITY_TRUST = {
    Authority.INFERRED: 0.5,
    Authority.USER_DECLARED: 0.7,
    Authority.SYSTEM_OBSERVED: 0.85,
    Authority.EXTERNALLY_VERIFIED: 0.95,
}
FRESHNESS_HALF_LIFE_DAYS = 180.0
_APPLICABLE = Verdict.APPLICABLE


def trust(record: MemoryRecord) -> float:
    """From authority, nudged by evidence: a recorded successful outcome, evidence references."""
    t: float = AUTHORITY_TRUST[record.authority]
    if record.source.outcome.success is True:
        t += 0.03
    elif record.source.outcome.success is False:
        t -= 0.05
    if record.source.evidence:
        t += 0.02
    return round(max(0.0, min(1.0, t)), 4)


def freshness(record: MemoryRecord, now: float) -> float:
    age_days = max(0.0, now - record.validity.recorded_at_ts) / 86400.0
    return round(float(0.5 ** (age_days / FRESHNESS_HALF_LIFE_DAYS)), 4)


def score(
    record: MemoryRecord,
    recon: Reconstruction,
    relevance: float,
    now: float,
    namespace_counts: tuple[float, float] | None = None,
) -> Scores:
    """Separate scores; expected utility = applicability x optimistic utility rate
    (the recall namespace's rate once it has evidence, else the memory's overall rate)."""
    applicability = recon.confidence * (1.0 if recon.verdict is _APPLICABLE else 0.7)
    eu = applicability * optimistic(record.counters, namespace_counts)
    return Scores(
        relevance=round(relevance, 4),
        applicability=round(applicability, 4),
        trust=trust(record),
        freshness=freshness(record, now),
        expected_utility=round(eu, 4),
    )
