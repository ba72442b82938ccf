"""What every `situated` command shares: one-line errors, the global settings, the principal
and output options, opening the store, parsing `key=value` facts, and printing (JSON lines of
the service's documents, or tables for people). `situated.cli` and `situated.cli_serve` hold
the commands."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import apsw
import click
import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from situated.defaults import DEFAULT_EMBEDDER, DEFAULT_RECONSTRUCTOR, OPEN_END
from situated.errors import InvalidInput, SituatedError

if TYPE_CHECKING:  # the library is imported when a command runs, not for `--help`
    from pydantic import BaseModel
    from rich.console import Console
    from rich.table import Table

    from situated.memory import Memory
    from situated.models import FactValue, MemoryRecord, Principal, State
    from situated.store.ledger import LedgerEvent


DB_ENV = "SITUATED_DB"
DEFAULT_DB = "situated.db"


class _Group(TyperGroup):
    """Turns domain errors into one line on stderr and exit code 1, usage errors into one line
    and exit code 2; every command's help names its values as people read them (`_plain`)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain(command)
        return command

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        with _usage_in_one_line():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _usage_in_one_line():
            try:
                return super().invoke(ctx)
            except SituatedError as exc:
                _fail(str(exc))
            except ModuleNotFoundError as exc:  # an optional extra this command needs
                from situated.extras import missing_extra

                refused = missing_extra(exc, f"situated {ctx.invoked_subcommand or ''}".strip())
                if refused is None:
                    raise
                _fail(str(refused))
            except apsw.Error as exc:  # the database file itself: unreadable, locked, full
                _fail(f"database: {exc}")
            except BrokenPipeError:
                raise
            except OSError as exc:  # a file or directory named on the command line
                _fail(f"{exc.filename or 'file'}: {exc.strerror or exc}")


class _Argument(TyperArgument):
    """An argument shown as `CONTENT` (usage: `[CONTENT]` when optional), with no Python type
    beside it."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or (self.name or "value").upper()
        return [name if self.required else f"[{name}]"]

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


_METAVARS = {"int": "N", "int range": "N", "float": "NUMBER", "float range": "NUMBER",
             "str": "TEXT", "path": "PATH", "Path": "PATH", "datetime": "TIME", "bool": "BOOL"}


def _plain(command: Any) -> None:
    """Typer's help shows Python types (`<list[str]>`, `<int>`) and required arguments as
    `{content}`: each argument becomes `CONTENT` (its class `_Argument`), each option that
    takes a value without a metavar of its own `TEXT`, `N`, `NUMBER`, `PATH`, or its
    choices `a|b|c`."""
    for param in getattr(command, "params", ()):
        if isinstance(param, TyperArgument) and not isinstance(param, _Argument):
            param.__class__ = _Argument
            param.metavar = param.metavar or (param.name or "value").upper()
        elif isinstance(param, TyperOption) and param.metavar is None and not param.is_flag:
            try:
                label = param.display_type(None).strip("<>")  # type: ignore[arg-type]
            except (TypeError, AttributeError, ValueError):  # typer cannot name it: as it was
                continue
            if label.startswith("list[") and label.endswith("]"):
                label = label[5:-1]  # a repeatable option: each value's kind
            param.metavar = label if "|" in label else _METAVARS.get(label, label.upper())


_CLICK = sys.modules[typer.BadParameter.__module__]
"""The click exceptions typer raises (recent typers vendor their own click)."""
_USAGE_ERRORS = tuple({click.UsageError, _CLICK.UsageError})
_HELP = tuple({click.exceptions.NoArgsIsHelpError,
               getattr(_CLICK, "NoArgsIsHelpError", click.exceptions.NoArgsIsHelpError)})


@contextmanager
def _usage_in_one_line() -> Iterator[None]:
    try:
        yield
    except _HELP:
        raise  # the help text, as asked for
    except _USAGE_ERRORS as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        _fail(exc.format_message() + hint, code=2)


MAX_ERROR_CHARS = 500


def _fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr (`_one_line`), `error: ...`, and the exit code."""
    typer.echo("error: " + _one_line(message), err=True)
    raise typer.Exit(code)


def _one_line(message: str) -> str:
    """`message` on one line: whitespace collapsed, other unprintable characters (controls,
    bidi overrides, unpaired surrogates) escaped, at most `MAX_ERROR_CHARS`."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(message.split()))
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 3] + "..."
    return line


@dataclass(frozen=True)
class Settings:
    """Global options, shared by every command."""

    db: str
    embedder: str | None
    reconstructor: str | None = None
    config: Any = None
    """Everything `situated.config` read (a `situated.config.Settings`), options applied."""


# -- shared options --------------------------------------------------------------------------

Tenant = Annotated[
    str,
    typer.Option(
        "--tenant", envvar="SITUATED_TENANT", metavar="NAME", help="Tenant to act for."
    ),
]
Roles = Annotated[
    list[str] | None,
    typer.Option(
        "--role",
        envvar="SITUATED_ROLES",
        metavar="ROLE",
        help="A role held (repeatable; env: space-separated).",
    ),
]
Clearance = Annotated[
    str,
    typer.Option(
        "--clearance",
        envvar="SITUATED_CLEARANCE",
        metavar="LEVEL",
        help="Highest classification readable: public, internal, confidential, restricted.",
    ),
]
Actor = Annotated[
    str,
    typer.Option(
        "--actor", envvar="SITUATED_ACTOR", metavar="NAME", help="Actor in the ledger."
    ),
]
Plain = Annotated[bool, typer.Option("--plain", "-p", help="For people: a table, not JSON lines.")]
AsJson = Annotated[bool, typer.Option("--json", help="JSON lines, for programs (the default).")]


def _for_people(plain: bool, as_json: bool, default: bool = False) -> bool:
    """`--plain` or `--json` (one of them, or the command's default): True for people."""
    if plain and as_json:
        raise typer.BadParameter("--plain and --json: choose one", param_hint="--json")
    return plain or (default and not as_json)
Facts = Annotated[
    list[str] | None,
    typer.Option(
        "--fact",
        metavar="KEY=VALUE",
        help="A state fact (repeatable); numbers, true, false and null are parsed.",
    ),
]
Namespace = Annotated[
    str | None, typer.Option("--namespace", "-n", metavar="NAME", help="Namespace.")
]


def _principal(tenant: str, roles: list[str] | None, clearance: str, actor: str) -> Principal:
    from situated.models import Principal, validate_input

    return validate_input(
        "principal",
        lambda: Principal(tenant=tenant, roles=frozenset(roles or ()), clearance=clearance,
                          name=actor),
    )


@contextmanager
def _memory(ctx: typer.Context, create: bool = False) -> Iterator[Memory]:
    """The store the options name, open for one command. A command that only reads (or acts
    on what is stored) refuses a store that does not exist (`create`: `init` and the writes
    make it). What the library tells the caller (`situated.notices`) is printed on stderr,
    `warning: ...` one line each, when the command's work is done."""
    from situated import arguments as args
    from situated.memory import Memory
    from situated.notices import collected, lines, summarised
    from situated.store.contract import is_postgres

    settings: Settings = ctx.obj
    location = args.path(settings.db, "db")
    if not is_postgres(location):
        if not Path(location).parent.exists():
            raise InvalidInput("db", f"directory {str(Path(location).parent)!r} does not exist")
        if not create and not Path(location).exists():
            raise InvalidInput("db", f"no store at {location!r}: create it with `situated "
                               "init` (or any write: add, import, learn)")
    mem = Memory(location,
                 embedder=settings.embedder or _stored_embedder(location) or DEFAULT_EMBEDDER,
                 reconstructor=settings.reconstructor or DEFAULT_RECONSTRUCTOR,
                 settings=settings.config)
    try:
        with collected() as notices:
            yield mem
    finally:
        mem.close()
    for line in lines(summarised(notices)):
        typer.echo("warning: " + _one_line(line), err=True)


def _stored_embedder(location: str) -> str | None:
    """The registered embedder name an existing store was created with, if any."""
    from situated.embed import available_embedders
    from situated.store.contract import is_postgres, open_store

    if not is_postgres(location) and not Path(location).exists():
        return None
    store = open_store(location, resident_mb=0)
    try:
        ref = store.embedder_ref()
    finally:
        store.close()
    if ref is None:
        return None
    name = ref.split("@", 1)[0]
    if name.startswith("openai:"):  # its model and endpoint come from the settings
        return "openai"
    return name if name in available_embedders() else None


# -- parsing ---------------------------------------------------------------------------------

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_WORDS: dict[str, FactValue] = {"true": True, "false": False, "null": None, "none": None}


def parse_value(raw: str) -> FactValue:
    """A scalar from the command line: int, float, true/false/null, a quoted or bare string."""
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    if _INT.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # more digits than Python converts; refused as a value later
            return text
    if _FLOAT.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    return text


def parse_facts(pairs: Iterable[str]) -> dict[str, FactValue]:
    """`key=value` pairs into a flat facts mapping."""
    facts: dict[str, FactValue] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {pair!r:.40}", param_hint="--fact")
        facts[key.strip()] = parse_value(value)
    return facts


def _time(raw: str | None) -> str | float | None:
    """An ISO-8601 time, or epoch seconds given as a number."""
    if raw is None:
        return None
    return float(raw) if _FLOAT.fullmatch(raw.strip()) else raw


def _state(text: str | None, facts: list[str] | None) -> State | None:
    from situated.models import State, validate_input

    parsed = parse_facts(facts or ())
    if not (text or "").strip() and not parsed:
        return None
    return validate_input("state", lambda: State(text or "", facts=parsed))


def _split(values: list[str] | None, option: str) -> list[str]:
    """Repeatable options that also accept comma-separated lists; an empty value (`''`,
    `a,,b`) is refused, never dropped."""
    out = []
    for raw in values or ():
        for v in raw.split(","):
            if not v.strip():
                raise typer.BadParameter(f"an empty value in {raw!r:.60}", param_hint=option)
            out.append(v.strip())
    return out


# -- output ----------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, frozenset | set | tuple):
        return list(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _emit(obj: Any) -> None:
    """One JSON line on stdout."""
    typer.echo(_json_line(obj))


_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""Line breaks for `str.splitlines` that JSON leaves raw: escaped, each JSON value stays on
its one line for every reader (inside JSON they can only occur in strings)."""


def _json_line(obj: Any, **kw: Any) -> str:
    return json.dumps(obj, default=_jsonable, ensure_ascii=False, **kw).translate(_LINE_BREAKS)


def record_json(rec: MemoryRecord) -> dict[str, Any]:
    """A memory as every door shows it (`situated.service.models.MemoryDoc`)."""
    from situated.service.models import MemoryDoc

    return MemoryDoc.of(rec).model_dump(mode="json")


def event_json(ev: LedgerEvent) -> dict[str, Any]:
    from situated.service.models import EventDoc

    return EventDoc.of(ev).model_dump(mode="json")


def _doc(model: type[BaseModel], value: Any) -> dict[str, Any]:
    """A library result as the service's response document (the HTTP API's body)."""
    data = asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
    return model.model_validate(data).model_dump(mode="json")


def _iso(ts: float) -> str:
    if ts >= OPEN_END:
        return "open"
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def _console(**options: Any) -> Console:
    """A rich console for people (no soft wrap, no highlighting unless asked)."""
    from rich.console import Console

    return Console(**({"soft_wrap": False, "highlight": False} | options))


def _kv_table(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(key, Text(_show(value)))
    return table


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(_show(v) for v in value) or "-"
    if isinstance(value, Enum):
        return str(value.name.lower() if isinstance(value.value, int) else value.value)
    return str(value)


_HOLDING = ("hold", "reject")
"""Gate verdicts that stop a proposal (a redaction changes the text and lets it go on)."""


def _held(gates: Iterable[dict[str, Any]], *, reasons: bool = True) -> list[str]:
    """The gates that held or rejected a proposal, one `gate (verdict): reasons` each."""
    return [f"{g.get('gate', '?')} ({g.get('verdict')})"
            + (": " + "; ".join(g["reasons"]) if reasons and g.get("reasons") else "")
            for g in gates if g.get("verdict") in _HOLDING]


def _gate_rows(gates: Iterable[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Rows for a memory's table: which gates held it and why, and what was redacted."""
    rows: list[tuple[str, Any]] = [("held by", line) for line in _held(gates)]
    rows += [("redacted", "; ".join(g.get("reasons", ())) or "-")
             for g in gates if g.get("verdict") == "redacted"]
    return rows


def _held_notes(title_rows: Iterable[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """Below a table of proposals: `<id> held by <gate> (<verdict>): <reasons>` lines."""
    return [f"{mem_id} held by {line}" for mem_id, gates in title_rows for line in _held(gates)]


def _record_rows(rec: MemoryRecord) -> list[tuple[str, Any]]:
    src = rec.source
    rows: list[tuple[str, Any]] = [
        ("id", rec.id),
        ("content", rec.content),
        ("kind", rec.kind),
        ("state", rec.state),
        ("tenant / namespace", f"{rec.scope.tenant} / {rec.scope.namespace}"),
        ("roles required", sorted(rec.scope.roles)),
        ("classification", rec.scope.classification),
        ("authority", rec.authority),
        ("source state", src.state.describe() if src.state else "unknown"),
        ("action", src.action),
        ("outcome", {"success": src.outcome.success, "reward": src.outcome.reward}),
        ("conditions", list(rec.conditions)),
        ("valid", f"{_iso(rec.validity.valid_from_ts)} .. "
                  f"{_iso(rec.validity.valid_until_ts)}"),
        ("recorded at", _iso(rec.validity.recorded_at_ts)),
        ("counters", asdict(rec.counters)),
        ("utility", f"{rec.utility:.3f}"),
    ]
    if rec.entity is not None:
        rows.insert(4, ("fact", f"{rec.entity}.{rec.attribute} = {rec.value!r}"))
    for key, value in (("supersedes", rec.supersedes), ("superseded by", rec.superseded_by),
                       ("consent", rec.scope.consent), ("episode", src.episode_id)):
        if value:
            rows.append((key, value))
    return rows


def _events_table(title: str, events: Iterable[LedgerEvent]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    table.add_column("seq", no_wrap=True)
    table.add_column("when", min_width=10)
    table.add_column("event", no_wrap=True)
    table.add_column("memory / recall", no_wrap=True)
    table.add_column("actor", overflow="fold")
    table.add_column("reason", overflow="fold", ratio=1)
    for ev in events:
        target = "\n".join(x for x in (ev.memory_id, ev.recall_id) if x) or "-"
        table.add_row(
            str(ev.seq), ev.at.isoformat(sep=" ", timespec="seconds").removesuffix("+00:00"),
            ev.event.value,
            target, Text(ev.actor), Text(ev.reason),
        )
    return table


def _records_table(title: str, records: Iterable[MemoryRecord],
                   held: dict[str, list[str]] | None = None) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for col in ("id", "kind", "namespace", "state", "utility"):
        table.add_column(col, no_wrap=True)
    table.add_column("content", overflow="fold", ratio=1)
    if held is not None:
        table.add_column("held by", overflow="fold", ratio=1)
    for rec in records:
        row = [rec.id, rec.kind.value, Text(rec.scope.namespace), rec.state.value,
               f"{rec.utility:.2f}", Text(rec.content)]
        if held is not None:
            row.append(Text("\n".join(held.get(rec.id, ())) or "-"))
        table.add_row(*row)
    return table
