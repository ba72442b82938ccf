"""`situated migrate --from agent.db --to postgresql://...`: copy a SQLite store into a new
PostgreSQL database and verify the copy (`situated.store.pg.migrate`). Registered on
`situated.cli.app`."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from situated.cli_common import AsJson, Plain, _console, _emit, _for_people, _kv_table
from situated.errors import InvalidInput

_S = TypeVar("_S")


def migrate(
    source: Annotated[
        str, typer.Option("--from", metavar="PATH", help="The SQLite store to copy.")
    ],
    target: Annotated[
        str, typer.Option("--to", metavar="URL",
                          help="An empty PostgreSQL database: postgresql://user@host/db.")
    ],
    plain: Plain = False,
    as_json: AsJson = False,
) -> None:
    """Copy a SQLite store (records, vectors, ledger, recall records, keys) into an empty
    PostgreSQL database; verify the counts and a ledger replay on the target."""
    from situated import arguments as args
    from situated.store.contract import is_postgres

    people = _for_people(plain, as_json)
    source = args.path(source, "from")
    if is_postgres(source):
        raise InvalidInput("from", "must be a SQLite file (PostgreSQL to PostgreSQL: pg_dump)")
    if not Path(source).is_file():
        raise InvalidInput("from", f"no such file {source!r:.120}")
    target = args.text(target, "to", 2000, required=True)
    if not is_postgres(target):
        raise InvalidInput("to", "must be a postgresql:// connection string")
    if "\x00" in target:
        raise InvalidInput("to", "holds a NUL character")

    from situated.store.pg.migrate import copy_store
    from situated.store.pg.store import PostgresStore
    from situated.store.sqlite import Store

    dst = _opened("to", lambda: PostgresStore(target))
    try:
        src = _opened("from", lambda: Store(source, resident_mb=0))
        try:
            report = copy_store(src, dst)
        finally:
            src.close()
        where = dst.path
    finally:
        dst.close()
    out = {"from": source, "to": where, "ok": report.ok, **report.counts,
           "replayed": report.replayed, "mismatched": list(report.mismatched),
           "notes": list(report.notes)}
    if people:
        _console().print(_kv_table("situated migrate", out.items()))
    else:
        _emit(out)
    if not report.ok:
        raise typer.Exit(1)


def _opened(field: str, open_: Callable[[], _S]) -> _S:
    """A store opened for `--from` or `--to`: a refusal to open names that option."""
    try:
        return open_()
    except InvalidInput as exc:
        raise InvalidInput(field, exc.message) from None


def register(app: typer.Typer) -> None:
    app.command()(migrate)
