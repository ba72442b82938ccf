"""The Memory Decision Scorecard: paired counterfactual evaluation of memory arms.

`run_eval` runs no memory, raw replay, utility-ranked replay and compiled recall on the same
scenarios and store contents, with an agent that reads the rendered context (`TextAgent`, the
default; an `LLMAgent`; or any), and reports lift with 95%
intervals, negative transfer, false acceptance and rejection, poisoning, leaks, staleness,
tokens and latency, per slice.
"""

from situated.eval.agents import (
    Agent,
    Attempt,
    CallableAgent,
    Guidance,
    LLMAgent,
    SimulatedAgent,
    Task,
)
from situated.eval.generator import generate
from situated.eval.metrics import Row, Scorecard, scorecard
from situated.eval.reader import TextAgent
from situated.eval.runner import EvalResult, parse_arms, parse_seeds, run_eval
from situated.eval.scenarios import Scenario, ScenarioError, load_many, load_scenarios

__all__ = [
    "Agent",
    "Attempt",
    "CallableAgent",
    "EvalResult",
    "Guidance",
    "LLMAgent",
    "Row",
    "Scenario",
    "ScenarioError",
    "Scorecard",
    "SimulatedAgent",
    "Task",
    "TextAgent",
    "generate",
    "load_many",
    "load_scenarios",
    "parse_arms",
    "parse_seeds",
    "run_eval",
    "scorecard",
]
