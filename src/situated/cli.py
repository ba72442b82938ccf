"""The `situated` command line: thin commands that parse, call `Memory`, and print.

Every command that prints a result takes `--json` (JSON lines, for programs) and `--plain` (a
table or text, for people), with one meaning everywhere; JSON is the default except for
`recall`, whose default is the rendered briefing (what an agent reads). Times are ISO 8601.
A domain error (`SituatedError`, a file that cannot be read) is one line on stderr,
`error: <field>: <message>`, and exit code 1; a usage mistake (unknown option, missing
argument, a value of the wrong type) is one line too, `error: <what click says> (see: <command>
--help)`, and exit code 2. Never a traceback: every argument is checked by the library before
anything is read or written.
"""

import shlex
import sys
import warnings
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text
from typer.core import TyperGroup

from situated.cli_common import (
    DB_ENV,
    DEFAULT_DB,
    Actor,
    AsJson,
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
    _for_people,
    _gate_rows,
    _Group,
    _held,
    _held_notes,
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
from situated.cli_eval import register as _register_eval
from situated.cli_import import register as _register_import
from situated.cli_learn import register as _register_learning
from situated.cli_migrate import register as _register_migrate
from situated.cli_serve import register as _register_doors
from situated.defaults import DEFAULT_EMBEDDER
from situated.errors import InvalidInput
from situated.notices import collected, lines, notify

if TYPE_CHECKING:
    from collections.abc import Iterator

    from situated.memory import Memory
    from situated.models import MemoryRecord, Principal
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
        str | None,
        typer.Option(
            "--db", envvar=DB_ENV, metavar="PATH",
            help=f"The SQLite file, or a postgresql:// connection string (env {DB_ENV}; "
            f"default: db in situated.toml, else {DEFAULT_DB}).",
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
    ctx.obj = Settings(db=config.db or DEFAULT_DB, embedder=config.embedder,
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
def init(ctx: typer.Context, plain: Plain = False, as_json: AsJson = False) -> None:
    """Create the store (or check an existing one) and bind its embedder."""
    with _memory(ctx, create=True) as mem:
        mem.store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
        health = mem.health()
        out = {
            "db": health.path,
            "embedder": mem.store.embedder_ref(),
            "migrations": list(health.migrations),
            "ok": health.ok,
        }
    if _for_people(plain, as_json):
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
    kind: Annotated[
        str, typer.Option(metavar="KIND", help="lesson, fact, preference or note.")
    ] = "lesson",
    state: Annotated[
        str | None, typer.Option("--state", metavar="TEXT",
                                 help="The situation it was learned in, in words.")
    ] = None,
    fact: Facts = None,
    condition: Annotated[
        list[str] | None,
        typer.Option("--condition", "-c", metavar="PREDICATE",
                     help="Applicability predicate over facts, e.g. 'days > 30' (repeatable)."),
    ] = None,
    action: Annotated[
        str | None, typer.Option(metavar="TEXT", help="The action taken in that state.")
    ] = None,
    success: Annotated[
        bool | None, typer.Option("--success/--failure", help="The outcome of the action.")
    ] = None,
    reward: Annotated[float | None, typer.Option(metavar="NUMBER", help="A numeric reward.")]
    = None,
    episode: Annotated[str | None, typer.Option(metavar="ID", help="Episode id.")] = None,
    step: Annotated[int | None, typer.Option(metavar="N", help="Step within the episode.")]
    = None,
    evidence: Annotated[
        list[str] | None, typer.Option(metavar="REF", help="Evidence reference (repeatable).")
    ] = None,
    entity: Annotated[
        str | None, typer.Option(metavar="NAME", help="Fact entity (what it is about).")
    ] = None,
    attribute: Annotated[
        str | None, typer.Option(metavar="NAME", help="Fact attribute (which property).")
    ] = None,
    value: Annotated[
        str | None, typer.Option(metavar="VALUE", help="Fact value (parsed like --fact).")
    ] = None,
    multi_valued: Annotated[
        bool, typer.Option("--multi-valued", help="Facts with this key may coexist.")
    ] = False,
    classification: Annotated[
        str, typer.Option(metavar="LEVEL", help="public, internal, confidential or restricted.")
    ] = "internal",
    role_required: Annotated[
        list[str] | None,
        typer.Option("--role-required", metavar="ROLE", help="Role needed to read it."),
    ] = None,
    consent: Annotated[str | None, typer.Option(metavar="REF", help="Consent reference.")]
    = None,
    authority: Annotated[
        str,
        typer.Option(metavar="AUTHORITY",
                     help="inferred, user_declared, system_observed or externally_verified."),
    ] = "inferred",
    valid_from: Annotated[
        str | None, typer.Option(metavar="TIME", help="ISO time or epoch seconds.")
    ] = None,
    valid_until: Annotated[
        str | None, typer.Option(metavar="TIME", help="ISO time or epoch seconds.")
    ] = None,
    policy_version: Annotated[
        str | None, typer.Option(metavar="VERSION", help="Policy version it holds under.")
    ] = None,
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Propose a memory; printed as stored (ACTIVE when promoted) with its gate results.

    A proposal held for review (PROPOSED) or refused (REJECTED) names the gate and its reasons
    (`held by` with --plain; `gates` and `warnings` in JSON), and every warning of the write
    (held, rejected, redacted, merged into a stored twin, never servable) is one `warning:`
    line on stderr.
    """
    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    source = _state(state, fact)
    with _memory(ctx, create=True) as mem:
        with collected() as notices:  # for the JSON document; then on stderr like any
            rec = mem.add(
                content, principal=me, kind=kind, namespace=namespace, state=source,
                action=action, success=success, reward=reward, episode_id=episode, step=step,
                evidence=evidence or (), conditions=condition or (), entity=entity,
                attribute=attribute, value=None if value is None else parse_value(value),
                multi_valued=multi_valued, roles=role_required or (),
                classification=classification, consent=consent, authority=authority,
                valid_from=_time(valid_from), valid_until=_time(valid_until),
                policy_version=policy_version,
            )
        for notice in notices:
            notify(notice)
        said = lines(notices)
        gates = mem.gate_results(rec.id, principal=me)
    from situated.service.models import GatedDoc

    if people:
        _console().print(_kv_table(f"added {rec.id}", _record_rows(rec) + _gate_rows(gates)))
    else:
        _emit(GatedDoc.of_gates(rec, gates, said).model_dump(mode="json"))


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
    plain: Annotated[
        bool, typer.Option("--plain", "-p", help="The rendered briefing, for people and agents "
                           "(the default).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="The whole briefing as one JSON line, for programs.")
    ] = False,
) -> None:
    """Compile guidance for the present state: served items and typed rejections."""
    from situated.models import State
    from situated.recall.reconstruct import Policy

    people = _for_people(plain, as_json, default=fmt is not Format.json)
    me = _principal(tenant, role, clearance, actor)
    present = _state(state, fact) or State("")
    tools = _split(allow_tool, "--allow-tool")
    policy = Policy(
        allowed_tools=frozenset(tools) if allow_tool else None,
        prohibited_effects=frozenset(_split(prohibit, "--prohibit")),
        version=policy_version,
    )
    with _memory(ctx) as mem:
        briefing = mem.recall(
            present, principal=me, intent=intent, namespace=namespace, k=k,
            budget_tokens=budget, as_of=_time(as_of), known_at=_time(known_at), policy=policy,
        )
    if not people:
        from situated.service.models import BriefingDoc

        out = BriefingDoc.of(briefing, explain=explain).model_dump(mode="json")
        typer.echo(_json_line(out, sort_keys=True))
        return
    typer.echo(briefing.render(fmt.value))
    if explain:
        typer.echo("")
        typer.echo(briefing.explain())
    for note in briefing.notes()[len(briefing.warnings):]:  # the warnings are printed already
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"recall {briefing.recall_id}: {briefing.mode.value}, {len(briefing.items)} served, "
        f"{len(briefing.rejected)} rejected" + ("" if explain else " (--explain for why)")
        + "; after the task: " + _feedback_command(ctx, me, briefing.recall_id,
                                                   [i.memory_id for i in briefing.items]),
        err=True,
    )


def _feedback_command(ctx: typer.Context, me: "Principal", recall_id: str,
                      served: list[str]) -> str:
    """The `situated feedback` command for a recall, as it runs when pasted: the same store
    and principal (a connection string, which may hold a password, as `$SITUATED_DB`)."""
    from situated.store.contract import is_postgres

    settings: Settings = ctx.obj
    db = '"$SITUATED_DB"' if is_postgres(settings.db) else shlex.quote(str(settings.db))
    argv = ["situated", "--db", db]
    if settings.embedder:
        argv += ["--embedder", shlex.quote(settings.embedder)]
    argv += ["feedback", recall_id, "--success", "--tenant", shlex.quote(me.tenant)]
    argv += [x for r in sorted(me.roles) for x in ("--role", shlex.quote(r))]
    argv += ["--clearance", me.clearance.label, "--actor", shlex.quote(me.name)]
    argv += [x for i in served for x in ("--used", i)]
    return " ".join(argv) + " (--failure if it failed; --used only what you acted on)"


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
    as_json: AsJson = False,
) -> None:
    """Credit the memories used in a success, blame them in a failure, count exposure."""
    from situated.service.models import FeedbackDoc

    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        result = mem.feedback(
            recall_id, principal=me, success=success, used=_split(used, "--used"), reward=reward
        )
    if _for_people(plain, as_json):
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
    as_json: AsJson = False,
) -> None:
    """One memory you may read, in any lifecycle state (with --plain, the gates that held
    its proposal; in JSON they are in `history`'s `proposed` event)."""
    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        rec = mem.inspect(memory_id, principal=me)
        gates = mem.gate_results(rec.id, principal=me) if people else []
    if people:
        _console().print(_kv_table(rec.id, _record_rows(rec) + _gate_rows(gates)))
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
    as_json: AsJson = False,
) -> None:
    """The ledger events of one memory, oldest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        events = mem.history(memory_id, principal=me)
    _print_events(f"history of {memory_id}", events, _for_people(plain, as_json))


@app.command()
def ledger(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 100,
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Recent ledger events you may see, newest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        events = mem.ledger(principal=me, limit=limit)
    _print_events(f"ledger of {me.tenant}", events, _for_people(plain, as_json))


def _print_events(title: str, events: "list[LedgerEvent]", people: bool) -> None:
    if people:
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
    as_json: AsJson = False,
) -> None:
    """Memories you may read, oldest first."""
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        records = mem.list(
            principal=me, namespace=namespace, states=_split(state, "--state") or None, limit=limit,
            offset=offset,
        )
    if _for_people(plain, as_json):
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
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Every memory you may read, as JSON lines (read in pages; --plain: one table)."""
    from situated.service import Pool, Service

    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        docs = Service(Pool.of(mem)).export(me, namespace)
        if people:
            _console().print(_records_table(f"memories of {me.tenant}",
                                            _all_records(mem, me, namespace)))
            return
        for doc in docs:
            _emit(doc.model_dump(mode="json"))


def _all_records(mem: "Memory", me: "Principal", namespace: str | None
                 ) -> "Iterator[MemoryRecord]":
    offset = 0
    while page := mem.list(principal=me, namespace=namespace, limit=500, offset=offset):
        yield from page
        offset += len(page)


@app.command()
def stats(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Counts of what you may see: memories by state, recalls, feedback, failures."""
    from situated.service.models import StatsDoc

    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        result = mem.stats(principal=me)
    if _for_people(plain, as_json):
        _console().print(_kv_table(f"stats of {me.tenant}", asdict(result).items()))
    else:
        _emit(_doc(StatsDoc, result))


@app.command()
def health(ctx: typer.Context, plain: Plain = False, as_json: AsJson = False) -> None:
    """Integrity, vectors, ledger replay and maintenance failures; exit code 1 when unsound."""
    from situated.service.models import HealthDoc

    with _memory(ctx) as mem:
        result = mem.health()
    if _for_people(plain, as_json):
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
    as_json: AsJson = False,
) -> None:
    """List proposals waiting for review with their gate results, or review them one by one.

    The reviewer needs the `reviewer` role (`--role reviewer`).
    """
    from situated.service.models import PendingDoc

    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    ask = sys.stdin.isatty() if interactive is None else interactive
    with _memory(ctx) as mem:
        pending = mem.pending(reviewer=me, namespace=namespace)
        if not ask:
            if people:
                _print_proposals("pending proposals", pending)
                return
            for rec, gates in pending:
                _emit(PendingDoc.of_gates(rec, gates).model_dump(mode="json"))
            return
        console = _console()
        if not pending:
            console.print("No proposals wait for review.")
        for rec, gates in pending:
            console.print(_kv_table(f"proposal {rec.id}", _record_rows(rec) + _gate_rows(gates)))
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
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Approve a proposal held for review (needs the `reviewer` role)."""
    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        _print_record(f"promoted {memory_id}",
                      mem.promote(memory_id, reviewer=me, reason=reason), people)


@app.command()
def reject(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The proposal to reject.")],
    reason: Annotated[str, typer.Option(help="Why it is rejected.")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "restricted",
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Reject a proposal held for review (needs the `reviewer` role)."""
    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        _print_record(f"rejected {memory_id}",
                      mem.reject(memory_id, reviewer=me, reason=reason), people)


def _print_proposals(title: str, proposals: "list[tuple[MemoryRecord, list[dict[str, Any]]]]"
                     ) -> None:
    """A table of proposals (`held by`: gate and verdict), then each holding gate's reasons."""
    console = _console()
    console.print(_records_table(title, [r for r, _ in proposals],
                                 held={r.id: _held(g, reasons=False) for r, g in proposals}))
    for line in _held_notes((r.id, g) for r, g in proposals):
        console.print(Text(line))


def _print_record(title: str, rec: "MemoryRecord", people: bool) -> None:
    if people:
        _console().print(_kv_table(title, _record_rows(rec)))
    else:
        _emit(record_json(rec))


@app.command()
def learn(
    ctx: typer.Context,
    trajectory: Annotated[Path, typer.Argument(help="A trajectory JSON file ('-' for stdin).")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
    distiller: Annotated[str | None, typer.Option(
        "--distiller", metavar="NAME", help="rules or llm (its endpoint: SITUATED_DISTILLER_"
        "BASE_URL, SITUATED_DISTILLER_MODEL); default: SITUATED_DISTILLER, else rules.",
    )] = None,
) -> None:
    """Distil a finished episode into lesson proposals, one JSON line each (with its gates).

    The trajectory is one JSON object:

    \b
      {"episode_id": "ep-17", "task": "boil water", "namespace": "kitchen",
       "steps": [{"observation": "You are in the kitchen. The stove is off.",
                  "facts": {"room": "kitchen", "stove_on": false},
                  "action": "turn on stove", "result": "The stove is now on."}],
       "outcome": {"success": true, "reward": 1.0}}

    Required: episode_id, task, steps (1 to 500) and outcome.success. Optional: namespace
    (default "default"), outcome.reward, and in each step observation, facts (flat: string,
    number, true/false or null values), observed (flat facts about the surroundings, kept only
    where the outcome turned on them), action, result and reward (the reward after the step).
    Text that is not such an object is refused with the field named; nothing is written.
    """
    from situated.service.models import GatedDoc

    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)
    try:
        text = sys.stdin.read() if str(trajectory) == "-" else trajectory.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
        raise InvalidInput("trajectory", f"cannot read {str(trajectory)!r:.80}: {reason}") from None
    with _memory(ctx, create=True) as mem:
        learned = [(rec, mem.gate_results(rec.id, principal=me))
                   for rec in mem.learn(text, principal=me, distiller=distiller)]
    if people:
        _print_proposals("lessons learned", learned)
        return
    for rec, gates in learned:
        _emit(GatedDoc.of_gates(rec, gates).model_dump(mode="json"))


@app.command()
def revoke(
    ctx: typer.Context,
    consent: Annotated[str, typer.Argument(help="The consent reference withdrawn.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the ledger).")],
    tenant: Tenant,
    role: Roles = None,
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Withdraw a consent: its memories become REVOKED at once (needs the `admin` role)."""
    from situated.service.models import RevokedDoc

    me = _principal(tenant, role, "restricted", actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        n = mem.revoke_consent(consent, principal=me, reason=reason)
    _print_doc(f"revoked {consent}", _doc(RevokedDoc, {"consent": consent, "revoked": n}),
               people)


@app.command()
def erase(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="The memory to erase.")],
    reason: Annotated[str, typer.Option(help="The erasure request (recorded).")],
    tenant: Tenant,
    role: Roles = None,
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Erase a memory's content, vectors and recalled text; a tombstone stays (needs `admin`)."""
    from situated.service.models import ErasedDoc

    me = _principal(tenant, role, "restricted", actor)
    people = _for_people(plain, as_json)
    with _memory(ctx) as mem:
        mem.erase(memory_id, principal=me, reason=reason)
    _print_doc(f"erased {memory_id}", _doc(ErasedDoc, {"erased": memory_id}), people)


def _print_doc(title: str, doc: dict[str, Any], people: bool) -> None:
    if people:
        _console().print(_kv_table(title, doc.items()))
    else:
        _emit(doc)


@app.command()
def maintain(ctx: typer.Context, plain: Plain = False, as_json: AsJson = False) -> None:
    """Run lifecycle transitions in bulk; exits 1 if any maintenance step failed."""
    from situated.service.models import MaintenanceDoc

    with _memory(ctx) as mem:
        report = mem.maintain()
    if _for_people(plain, as_json):
        _console().print(_kv_table("maintenance", asdict(report).items()))
    else:
        _emit(_doc(MaintenanceDoc, report))
    if report.failures:
        raise typer.Exit(1)


_register_doors(app)  # keys, serve, mcp
_register_eval(app)  # eval, demo
_register_learning(app)  # add-conversation, export-training
_register_import(app)  # import
_register_migrate(app)  # migrate


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
