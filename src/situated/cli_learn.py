"""The CLI's learning commands: `situated add-conversation` (chat turns as notes, with an
extractor's facts and preferences), `situated export-training` (a training set for the
reconstructor from the store's recalls and feedback) and `situated schema` (the learned
attribute schema). Registered on `situated.cli.app`."""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from situated.cli_common import (
    Actor,
    Clearance,
    Roles,
    Tenant,
    _emit,
    _memory,
    _principal,
)
from situated.errors import InvalidInput


def _read(path: Path, field: str) -> str:
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not UTF-8 text ({exc.reason})"
        raise InvalidInput(field, f"cannot read {str(path)!r:.80}: {reason}") from None


def add_conversation(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A conversation JSON file ('-' for stdin).")],
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    session: Annotated[str | None, typer.Option(
        "--session", metavar="ID", help="The session id (default: the file's, else a new one).",
    )] = None,
    namespace: Annotated[str | None, typer.Option(
        "--namespace", metavar="NAME", help="Namespace (default: the file's, else default).",
    )] = None,
    extractor: Annotated[str | None, typer.Option(
        "--extractor", metavar="NAME", help="none (notes only) or llm (facts and preferences "
        "too; endpoint: SITUATED_DISTILLER_BASE_URL, SITUATED_DISTILLER_MODEL); default: "
        "SITUATED_EXTRACTOR, else none.",
    )] = None,
) -> None:
    """Store a conversation: a note per turn (speaker and session as provenance), and the
    facts and preferences an extractor finds, as one JSON document.

    The file is a list of turns, or an object holding one:

    \b
      {"session": "s-42", "namespace": "support",
       "messages": [{"speaker": "alice", "content": "I moved to Berlin."},
                    {"role": "assistant", "content": "Noted."}]}
    """
    from situated.models import validate_input
    from situated.service import Pool, Service
    from situated.service.models import ConversationRequest

    me = _principal(tenant, role, clearance, actor)
    text = _read(file, "messages")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput("messages", f"is not JSON ({exc})") from None
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InvalidInput("messages", "must be a list of turns or an object with 'messages'")
    unknown = set(data) - {"messages", "session", "namespace"}
    if unknown:
        raise InvalidInput("messages", f"unknown fields: {', '.join(sorted(unknown))}")
    with _memory(ctx, create=True) as mem:
        req = validate_input("", lambda: ConversationRequest(
            messages=data["messages"], session=session or data.get("session"),
            namespace=namespace or data.get("namespace"), extractor=extractor,
        ))
        _emit(Service(Pool.of(mem)).add_conversation(me, req).model_dump(mode="json"))


def export_training(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    format: Annotated[str, typer.Option(
        "--format", metavar="sft|preference", help="sft: {messages}; preference: {prompt, "
        "chosen, rejected} (TRL's conversational formats).",
    )] = "sft",
    namespace: Annotated[str | None, typer.Option("--namespace", metavar="NAME")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="FILE", help="Write the JSONL here (default: stdout).",
    )] = None,
    inferred: Annotated[bool, typer.Option(
        "--inferred", help="Also label by inferred outcomes (weaker).",
    )] = False,
) -> None:
    """Export a training set for the reconstructor from your recalls and their feedback:
    one JSON line per used memory, labelled by outcome, loadable with `datasets` and TRL.

    Only what you may read is exported (your tenant; an admin exports one tenant at a
    time); erased memories are absent. Fine-tune a model on it and serve it behind an
    OpenAI-compatible endpoint for `--reconstructor llm` (README: "Training the
    reconstructor").
    """
    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        rows = mem.export_training(principal=me, format=format, namespace=namespace,
                                   inferred=inferred)
        if out is None:
            for row in rows:
                _emit(row)
            return
        n = 0
        with out.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        typer.echo(f"wrote {n} {format} examples to {out}", err=True)


def schema(
    ctx: typer.Context,
    tenant: Tenant,
    role: Roles = None,
    clearance: Clearance = "internal",
    actor: Actor = "cli",
    memory: Annotated[str | None, typer.Option(
        "--memory", metavar="ID", help="Only the entry of this memory's attribute.",
    )] = None,
) -> None:
    """The learned attribute schema you may read: per attribute, the evidence that it holds
    one value, the counter-evidence, the posterior and the decision; one JSON line each."""
    from dataclasses import asdict

    me = _principal(tenant, role, clearance, actor)
    with _memory(ctx) as mem:
        for entry in mem.attribute_schema(principal=me, memory_id=memory):
            _emit(asdict(entry))


def register(app: typer.Typer) -> None:
    app.command("add-conversation")(add_conversation)
    app.command("export-training")(export_training)
    app.command("schema")(schema)
