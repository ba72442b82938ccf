"""`situated import FILE.jsonl`: bulk import of memories (one JSON object of `add` fields per
line; `recorded_at` for an admin), every gate on, one durable transaction per batch.
Registered on `situated.cli.app`; the format is `situated.write.importer`'s; the library is
imported when the command runs."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from situated.cli_common import (
    Actor,
    AsJson,
    Clearance,
    Plain,
    Roles,
    Tenant,
    _console,
    _emit,
    _for_people,
    _kv_table,
    _memory,
    _principal,
)
from situated.errors import InvalidInput

if TYPE_CHECKING:
    from situated.write.importer import ImportReport


def import_file(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON lines of memories ('-' reads stdin).",
                                         metavar="FILE.jsonl")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, max=10_000,
                          help="Lines per transaction (one durable commit each).")
    ] = 1000,
    start_line: Annotated[
        int, typer.Option("--start-line", min=1,
                          help="Skip the lines before this one (resume an import).")
    ] = 1,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.")
    ] = False,
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Import memories from a JSON-lines file; prints what was committed (one JSON line, or a
    table with --plain).

    A bad line stops the import with its number and field; the batches before it stay
    committed and the error says where to resume (`--start-line`)."""
    me = _principal(tenant, role, clearance, actor)
    people = _for_people(plain, as_json)

    def progress(r: "ImportReport") -> None:
        if not quiet:
            typer.echo(f"committed {r.committed} memories in {r.batches} batches; "
                       f"next line {r.next_line}", err=True)

    source = "-" if str(file) == "-" else file
    if source != "-" and not file.is_file():
        raise InvalidInput("file", f"no such file: {str(file)!r:.80}")
    with _memory(ctx, create=True) as mem:
        if source == "-":
            stream = typer.get_text_stream("stdin")
            report = mem.import_records(stream, principal=me, batch_size=batch_size,
                                        start_line=start_line, progress=progress)
        else:
            with file.open(encoding="utf-8", errors="strict", newline="") as f:
                report = mem.import_records(f, principal=me, batch_size=batch_size,
                                            start_line=start_line, progress=progress)
    doc = {"lines": report.lines, "committed": report.committed, "created": report.created,
           "batches": report.batches, "next_line": report.next_line}
    if people:
        _console().print(_kv_table(f"imported {file}", doc.items()))
    else:
        _emit(doc)


def register(app: typer.Typer) -> None:
    app.command("import")(import_file)
