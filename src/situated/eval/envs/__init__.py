"""Evaluations on third-party environments (optional extras; nothing is imported from them
until a run starts)."""

from situated.eval.envs.scienceworld import (
    ScienceWorldMissing,
    run_scienceworld,
    unavailable_reason,
)

__all__ = ["ScienceWorldMissing", "run_scienceworld", "unavailable_reason"]
