"""Evaluations on third-party environments (optional extras; nothing is imported from them
until a run starts)."""

from situated.eval.envs.scienceworld import (
    ScienceWorldMissing,
    run_scienceworld,
    unavailable_reason,
)
from situated.eval.envs.textworld import TextWorldMissing, run_textworld
from situated.eval.envs.twcustom import run_textworld_custom

__all__ = [
    "ScienceWorldMissing", "TextWorldMissing", "run_scienceworld", "run_textworld",
    "run_textworld_custom", "unavailable_reason",
]
