"""A real OpenAI-compatible HTTP server on 127.0.0.1 whose answers a test scripts.

Clients under test (the `llm` reconstructor, an LLM distiller, an LLM eval agent, the OpenAI
embedder) talk to it over a real socket with their real HTTP code; nothing is mocked inside
the client. The server records every request so a test can assert on what was sent.

Routes: `POST /v1/chat/completions`, `POST /v1/embeddings`, `GET /v1/models`. Any other path
gets a 404 (and is still recorded), so a client that builds the wrong URL fails loudly.

Each of the two POST routes has a `Script`: a queue of replies served in order, then an
optional fallback (one `Reply` repeated, or a function of the `Request`). A request that finds
nothing scripted gets HTTP 500 and is listed in `srv.unscripted`, so a test can tell "the
client failed as expected" from "the test forgot to script a reply".

    from openai_server import OpenAIStub, chat_reply, error_reply, raw_reply

    with OpenAIStub() as srv:
        srv.chat.push(
            chat_reply({"verdict": "APPLICABLE", ...}),   # a dict is sent as JSON content
            raw_reply("not json at all"),                  # the HTTP body itself
            error_reply(500),                              # an OpenAI-style error
            chat_reply("{}", delay=5.0),                   # answers after 5 s (client times out)
        )
        client = SomeClient(base_url=srv.url)             # srv.url has no /v1; srv.url_v1 has
        ...
        [first, *_] = srv.chat_requests
        first.messages, first.response_format, first.prompt  # what the client sent

    with OpenAIStub(embeddings=hash_embeddings(dim=8)) as srv: ...   # deterministic vectors
    with OpenAIStub(chat=lambda req: chat_reply(answer_for(req))) as srv: ...  # computed replies

Closing the stub (leaving the `with` block) cuts any pending delay short. The module imports
nothing from situated except in `hash_embeddings`, so it stays usable by any test file.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "OpenAIStub",
    "Reply",
    "Request",
    "Script",
    "chat_reply",
    "embeddings_reply",
    "error_reply",
    "hash_embeddings",
    "raw_reply",
]

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class Request:
    """One request the stub received, in arrival order."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    """The body parsed as JSON, or None when it is not JSON."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat `messages` sent (empty when absent)."""
        msgs = self.json.get("messages") if isinstance(self.json, dict) else None
        return list(msgs) if isinstance(msgs, list) else []

    @property
    def prompt(self) -> str:
        """Every message's text content, joined by blank lines: what the model would read."""
        parts = []
        for m in self.messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                parts.extend(
                    p["text"] for p in content
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                )
        return "\n\n".join(parts)

    @property
    def response_format(self) -> Any:
        """The `response_format` sent, or None."""
        return self.json.get("response_format") if isinstance(self.json, dict) else None

    @property
    def model(self) -> Any:
        return self.json.get("model") if isinstance(self.json, dict) else None


@dataclass(frozen=True)
class Reply:
    """What the stub answers to one request.

    Attributes:
        status: HTTP status code.
        body: a dict or list (sent as JSON), str or bytes (sent as is), or None (empty body).
        delay: seconds to wait before answering (cut short when the stub closes).
        headers: extra response headers.
        drop: close the connection without answering (the client sees a protocol error).
        content_type: the Content-Type header.
    """

    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    drop: bool = False
    content_type: str = "application/json"

    def encoded(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


Responder = Callable[[Request], Reply]


def chat_reply(
    content: str | Mapping[str, Any] | None,
    *,
    model: str = "stub-model",
    finish_reason: str = "stop",
    refusal: str | None = None,
    usage: Mapping[str, int] | None = None,
    delay: float = 0.0,
) -> Reply:
    """A successful chat completion whose first choice says `content`.

    Args:
        content: the assistant message text; a mapping is JSON-encoded first (the usual
            structured-output answer); a str is sent verbatim (use it for malformed JSON).
        model: the `model` field of the response.
        finish_reason: e.g. "stop", or "length" for an answer cut off at the token limit.
        refusal: a structured-output refusal message (content is then usually None).
        usage: token counts; defaults to small fixed numbers.
        delay: seconds to wait before answering.
    """
    text = json.dumps(content) if isinstance(content, Mapping) else content
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if refusal is not None:
        message["refusal"] = refusal
    return Reply(
        body={
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": dict(usage or {"prompt_tokens": 10, "completion_tokens": 5,
                                    "total_tokens": 15}),
        },
        delay=delay,
    )


def embeddings_reply(vectors: Sequence[Sequence[float]], *, model: str = "stub-embed") -> Reply:
    """A successful embeddings response, one item per vector, in order."""
    data = [
        {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
        for i, v in enumerate(vectors)
    ]
    return Reply(body={"object": "list", "data": data, "model": model})


def error_reply(status: int = 500, message: str = "stub: model crashed") -> Reply:
    """An OpenAI-style error body with the given HTTP status."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return Reply(status=status, body={"error": {"message": message, "type": kind, "code": None}})


def raw_reply(text: str | bytes, *, status: int = 200,
              content_type: str = "application/json") -> Reply:
    """Send `text` as the HTTP body verbatim (e.g. a truncated or non-JSON body)."""
    return Reply(status=status, body=text, content_type=content_type)


def hash_embeddings(dim: int = 8) -> Responder:
    """A responder for /v1/embeddings: situated's deterministic hash vectors of the input."""
    from situated.embed import HashEmbedder

    embedder = HashEmbedder(dim=dim)

    def respond(req: Request) -> Reply:
        texts = req.json.get("input") if isinstance(req.json, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return error_reply(400, "input must be a string or a list of strings")
        return embeddings_reply(embedder.embed(texts).tolist())

    return respond


class Script:
    """The replies of one route: a queue first, then a fallback, else nothing scripted."""

    def __init__(self, replies: Reply | Responder | Iterable[Reply] | None = None) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._fallback: Reply | Responder | None = None
        if isinstance(replies, Reply) or callable(replies):
            self._fallback = replies
        elif replies is not None:
            self._queue.extend(replies)

    def push(self, *replies: Reply) -> Script:
        """Queue replies, served once each, in order, before the fallback."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def always(self, reply: Reply | Responder | None) -> Script:
        """Answer with `reply` (or `reply(request)`) whenever the queue is empty."""
        with self._lock:
            self._fallback = reply
        return self

    @property
    def pending(self) -> int:
        """Queued replies not yet served."""
        with self._lock:
            return len(self._queue)

    def next(self, request: Request) -> Reply | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            fallback = self._fallback
        if fallback is None:
            return None
        return fallback if isinstance(fallback, Reply) else fallback(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    stub: OpenAIStub


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = Request(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            json=parsed,
        )
        reply = stub._route(request)
        if reply.delay > 0 and stub._stopping.wait(reply.delay):
            self.close_connection = True
            return  # the stub is closing: give up the pending answer
        if reply.drop:
            self.close_connection = True
            return
        data = reply.encoded()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class OpenAIStub:
    """A scripted OpenAI-compatible server on 127.0.0.1 (a free port), for tests.

    Args:
        chat: replies for `POST /v1/chat/completions`: a list (served in order), one `Reply`
            (repeated), or a function of the `Request`. More can be queued with `srv.chat.push`.
        embeddings: the same for `POST /v1/embeddings` (see `hash_embeddings`).
        models: model ids listed by `GET /v1/models`.
    """

    def __init__(
        self,
        chat: Reply | Responder | Iterable[Reply] | None = None,
        embeddings: Reply | Responder | Iterable[Reply] | None = None,
        models: Sequence[str] = ("stub-model",),
    ) -> None:
        self.chat = Script(chat)
        self.embeddings = Script(embeddings)
        self.models = tuple(models)
        self._requests: list[Request] = []
        self._unscripted: list[Request] = []
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> OpenAIStub:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name="openai-stub",
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut pending delays short, release the port."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub is not running; use `with OpenAIStub() as srv`")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base address without `/v1`, e.g. `http://127.0.0.1:54321`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url_v1(self) -> str:
        """The base address with `/v1`, as OpenAI SDKs expect it."""
        return f"{self.url}/v1"

    # -- what was received --------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every request received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    @property
    def embedding_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path == EMBEDDINGS_PATH]

    @property
    def unscripted(self) -> list[Request]:
        """Requests that found no scripted reply (answered with HTTP 500)."""
        with self._lock:
            return list(self._unscripted)

    @property
    def errors(self) -> list[str]:
        """Exceptions raised by responder functions (answered with HTTP 500)."""
        with self._lock:
            return list(self._errors)

    def clear(self) -> None:
        """Forget the recorded requests (scripts are kept)."""
        with self._lock:
            self._requests.clear()
            self._unscripted.clear()
            self._errors.clear()

    # -- routing ------------------------------------------------------------------------------

    def _route(self, request: Request) -> Reply:
        with self._lock:
            self._requests.append(request)
        path = request.path.split("?", 1)[0]
        if request.method == "GET" and path == MODELS_PATH:
            return Reply(body={"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "stub"}
                for m in self.models
            ]})
        script = {CHAT_PATH: self.chat, EMBEDDINGS_PATH: self.embeddings}.get(path)
        if script is None or request.method != "POST":
            return error_reply(404, f"stub: no route {request.method} {request.path}")
        try:
            reply = script.next(request)
        except Exception as exc:  # a bug in the test's responder: answer 500, keep it visible
            with self._lock:
                self._errors.append(f"{type(exc).__name__}: {exc}")
            return error_reply(500, f"stub: responder raised {exc!r}")
        if reply is None:
            with self._lock:
                self._unscripted.append(request)
            return error_reply(500, f"stub: nothing scripted for {path}")
        return reply

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"OpenAIStub({where}, {len(self.requests)} requests)"

