"""The CLI's doors for agents: API keys (`situated keys ...`), the HTTP server (`situated
serve`) and the MCP server over stdio (`situated mcp`). Registered on `situated.cli.app`."""

from datetime import datetime
from typing import Annotated

import typer

from situated.cli_common import (
    Actor,
    AsJson,
    Clearance,
    Plain,
    Roles,
    Settings,
    _console,
    _emit,
    _for_people,
    _Group,
    _kv_table,
    _memory,
    _principal,
    _split,
)
from situated.errors import InvalidInput

keys_app = typer.Typer(
    cls=_Group, help="API keys for `situated serve` and MCP over HTTP: each bound to one "
    "principal.", no_args_is_help=True,
)


@keys_app.command("create")
def keys_create(
    ctx: typer.Context,
    tenant: Annotated[str, typer.Option("--tenant", metavar="NAME", help="The key's tenant.")],
    role: Annotated[
        list[str] | None, typer.Option("--role", metavar="ROLE", help="A role (repeatable).")
    ] = None,
    clearance: Annotated[
        str, typer.Option("--clearance", metavar="LEVEL", help="Highest classification read.")
    ] = "internal",
    name: Annotated[
        str | None, typer.Option("--name", metavar="NAME",
                                 help="Actor recorded in the ledger (default key:<tenant>).")
    ] = None,
    label: Annotated[str, typer.Option("--label", help="A note for whom it is.")] = "",
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Create a key bound to one principal; prints its secret once (only a hash is kept)."""
    from situated.service import Pool, Service
    from situated.service.models import KeyCreate

    with _memory(ctx, create=True) as mem:
        doc = Service(Pool.of(mem)).create_key(
            KeyCreate(tenant=tenant, roles=_split(role, "--role"), clearance=clearance, actor=name,
                      label=label), actor=actor)
    _print_key(f"key {doc.id} (its secret is shown only now)", doc.model_dump(mode="json"),
               _for_people(plain, as_json))


@keys_app.command("list")
def keys_list(
    ctx: typer.Context,
    tenant: Annotated[str | None, typer.Option("--tenant", metavar="NAME")] = None,
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Every key (of one tenant), revoked ones included; never a secret."""
    from rich.table import Table
    from rich.text import Text

    from situated.service import Pool, Service

    with _memory(ctx) as mem:
        docs = Service(Pool.of(mem)).list_keys(tenant)
    if _for_people(plain, as_json):
        table = Table(title="api keys", title_justify="left")
        for col in ("id", "tenant", "roles", "clearance", "actor", "created", "revoked"):
            # names wrap, never cut at the terminal's width; ids and times stay whole
            table.add_column(col, no_wrap=col in ("id", "clearance", "created", "revoked"),
                             overflow="fold")
        for d in docs:
            table.add_row(d.id, Text(d.tenant), Text(", ".join(d.roles) or "-"), d.clearance,
                          Text(d.actor), _minute(d.created_at),
                          _minute(d.revoked_at) if d.revoked_at else "-")
        console = _console()
        if not console.is_terminal:  # a file or a pipe has no width to keep to
            console = _console(width=160)
        console.print(table)
        return
    for d in docs:
        _emit(d.model_dump(mode="json"))


@keys_app.command("revoke")
def keys_revoke(
    ctx: typer.Context,
    key_id: Annotated[str, typer.Argument(help="The key id (key_...).")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the ledger).")] = "",
    actor: Actor = "cli",
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Refuse a key from the next request on."""
    from situated.service import Pool, Service

    with _memory(ctx) as mem:
        doc = Service(Pool.of(mem)).revoke_key(key_id, actor=actor, reason=reason)
    _print_key(f"revoked {key_id}", doc.model_dump(mode="json"), _for_people(plain, as_json))


def _minute(at: datetime) -> str:
    """A key's time for people: UTC, to the minute (`2026-01-31 09:05`)."""
    return at.strftime("%Y-%m-%d %H:%M")


def _print_key(title: str, doc: dict[str, object], people: bool) -> None:
    if people:
        _console().print(_kv_table(title, doc.items()))
    else:
        _emit(doc)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")]
    = 8765,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow binding to a non-loopback address.")
    ] = False,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Server processes.")] = 1,
    pool: Annotated[int, typer.Option(min=1, max=64, help="Memory objects per process.")]
    = 2,
    no_mcp: Annotated[bool, typer.Option("--no-mcp", help="Do not mount MCP at /mcp.")]
    = False,
    no_inferred: Annotated[
        bool, typer.Option("--no-inferred-feedback", help="Never infer outcomes.")
    ] = False,
    demo: Annotated[
        bool, typer.Option("--demo", help="Serve a temporary store filled with the demo's "
                           "scenario (ignores --db) and print a reviewer key for the dashboard.")
    ] = False,
) -> None:
    """Serve the HTTP API (and MCP at /mcp) and the dashboard at / over one store; every
    request needs an API key (a browser logs in with one)."""
    import dataclasses
    import os

    from situated.http.protocol import DoorConfig, run  # the `serve` extra, before any output

    if host not in LOOPBACK and not allow_remote:
        raise InvalidInput("host", f"{host!r:.60} is not loopback; pass --allow-remote to "
                           "serve other machines (use TLS in front: keys travel in headers)")
    if host not in LOOPBACK:
        typer.echo(f"warning: serving on {host}, reachable from other machines", err=True)
    settings: Settings = ctx.obj
    if demo:
        from situated.dashboard.demo import fill
        from situated.embed import DEFAULT_EMBEDDER

        filled = fill(settings.embedder or DEFAULT_EMBEDDER)
        settings = dataclasses.replace(settings, db=str(filled.path))
        ctx.obj = settings
        typer.echo(f"situated: demo store {filled.path} (the demo's scenario, "
                   f"{len(filled.held)} proposals held for review)\n"
                   f"  dashboard  http://{host}:{port}/login\n"
                   f"  acme key   {filled.reviewer_key}   (reviewer, operator, admin)\n"
                   f"  globex key {filled.other_tenant_key}   (the other tenant)")
    with _memory(ctx, create=True) as mem:  # checks the path, binds the embedder, then forks
        mem.store.bind_embedder(mem.embedder.model_ref, mem.embedder.dim)
        embedder = mem.embedder.model_ref.split("@", 1)[0]
    os.environ.update({
        "SITUATED_SERVE_DB": str(settings.db), "SITUATED_SERVE_EMBEDDER": embedder,
        "SITUATED_SERVE_POOL": str(pool), "SITUATED_SERVE_MCP": "0" if no_mcp else "1",
        "SITUATED_SERVE_INFERRED": "0" if no_inferred else "1",
        "SITUATED_SERVE_HOST": host, "SITUATED_SERVE_WORKERS": str(workers),
    })
    mcp_note = "" if no_mcp else ", MCP /mcp"
    typer.echo(f"situated: serving {settings.db} on http://{host}:{port} "
               f"(dashboard /, docs /docs, OpenAPI /openapi.json{mcp_note})", err=True)
    run(DoorConfig("situated.http.serve:app_from_env", factory=True, host=host, port=port,
                   workers=workers, log_level="warning"))


def mcp_stdio(
    ctx: typer.Context,
    tenant: Annotated[
        str | None, typer.Option("--tenant", envvar="SITUATED_TENANT", metavar="NAME")
    ] = None,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "mcp",
    key: Annotated[
        str | None, typer.Option("--key", envvar="SITUATED_API_KEY", metavar="SECRET",
                                 help="Act as this API key's principal instead.")
    ] = None,
    no_inferred: Annotated[
        bool, typer.Option("--no-inferred-feedback", help="Never infer outcomes.")
    ] = False,
) -> None:
    """Run the MCP server over stdio as the principal the options (or --key) name."""
    from situated.mcp_server import build_server, fixed_principal, key_principal
    from situated.service import Pool, Service

    with _memory(ctx, create=True) as mem:
        service = Service(Pool.of(mem), inferred_feedback=not no_inferred)
        if key is not None:
            if service.principal_for(key) is None:
                raise InvalidInput("key", "unknown or revoked API key")
            principal_of = key_principal(service, key)  # asked again at every call
        elif tenant is None:
            raise InvalidInput("tenant", "name the principal: --tenant (or SITUATED_TENANT), "
                               "or --key")
        else:
            principal_of = fixed_principal(
                _principal(tenant, _split(role, "--role"), clearance, actor))
        build_server(service, principal_of).run("stdio")


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
    app.command()(serve)
    app.command("mcp")(mcp_stdio)
