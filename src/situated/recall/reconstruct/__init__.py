"""Stage 4, reconstruction: pre-checks and pluggable reconstructors."""

from situated.recall.reconstruct.base import (
    Policy,
    ReconstructionInput,
    Reconstructor,
    available_reconstructors,
    get_reconstructor,
    register_reconstructor,
)
from situated.recall.reconstruct.llm import LLMReconstructor
from situated.recall.reconstruct.rules import RulesReconstructor

__all__ = [
    "LLMReconstructor",
    "Policy",
    "ReconstructionInput",
    "Reconstructor",
    "RulesReconstructor",
    "available_reconstructors",
    "get_reconstructor",
    "register_reconstructor",
]
