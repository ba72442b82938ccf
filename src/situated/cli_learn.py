"""The CLI's learning commands: `situated add-conversation` (chat turns as notes, with an
extractor's facts and preferences) and `situated export-training` (a training set for the
reconstructor from the store's recalls and feedback). Registered on `situated.cli.app`."""

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
from situated.models import validate_input
from situated.service import Pool, Service
from situated.service.models import ConversationRequest


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
    with _memory(ctx) as mem:
        req = validate_input("", lambda: ConversationRequest(
            messages=data["messages"], session=session or data.get("session"),
            namespace=namespace or data.get("namespace"), extractor=extractor,
        ))
        _emit(Service(Pool.of(mem)).add_conversation(me, req).model_dump(mode="json"))


def register(app: typer.Typer) -> None:
    app.command("add-conversation")(add_conversation)
