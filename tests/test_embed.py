"""Tests of situated.embed: hash and static embedders, the registry, the OpenAI client."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer

from situated.embed import (
    DEFAULT_EMBEDDER,
    Embedder,
    HashEmbedder,
    OpenAIEmbedder,
    StaticEmbedder,
    available_embedders,
    default_tokenizer_path,
    get_embedder,
    register_embedder,
)
from situated.embed.static import default_model_path
from situated.errors import InvalidInput, ModelError, UnknownPlugin, UsageError

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every connection that leaves the machine, and any hub access."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            raise AssertionError(f"test tried to reach {address}")
        real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- HashEmbedder -------------------------------------------------------------------------------


def test_hash_is_deterministic_and_stable() -> None:
    texts = ["the stove is on", "Der Herd ist an", "naïve café"]
    first = HashEmbedder().embed(texts)
    assert np.array_equal(first, HashEmbedder().embed(texts))
    # Pinned buckets and signs: blake2b, not Python's per-process salted hash().
    vector = HashEmbedder().embed_one("stove")
    buckets = np.flatnonzero(vector)
    assert buckets.tolist() == [33, 41, 140, 161, 205, 207]
    assert np.sign(vector[buckets]).astype(int).tolist() == [-1, -1, -1, 1, 1, -1]


def test_hash_shape_norm_and_identity() -> None:
    embedder = HashEmbedder(dim=64)
    out = embedder.embed(["one text", "another text", ""])
    assert out.shape == (3, 64)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out[:2], axis=1), 1.0)
    assert not out[2].any()  # no words, no features
    assert embedder.embed([]).shape == (0, 64)
    assert embedder.model_ref == "hash@1:64"


def test_hash_similarity_ordering() -> None:
    embed = HashEmbedder().embed_one
    stove = embed("the stove is on")
    refund = embed("refund for annual plans")
    assert cos(stove, embed("The stove is still ON!")) > 0.6
    assert cos(stove, embed("the stoves are on")) > cos(stove, refund) + 0.2
    assert abs(cos(stove, refund)) < 0.2
    assert cos(refund, embed("refunds on the annual plan")) > 0.4  # stop words barely count
    assert cos(refund, embed("refnud for anual plans")) > 0.3  # trigrams survive typos
    assert abs(cos(embed("the stove is on"), embed("the refund is on"))) < 0.3


def test_hash_rejects_bad_dim() -> None:
    with pytest.raises(InvalidInput):
        HashEmbedder(dim=1)


# --- StaticEmbedder -----------------------------------------------------------------------------

# Reference vectors from model2vec 0.10.0 `StaticModel.from_pretrained(default_model_path(),
# quantize_to="float32").encode(...)`, L2-normalised, first six components.
MODEL2VEC_REFERENCE = {
    "the stove is on": [-0.038774, -0.111654, 0.054089, -0.024315, -0.117598, -0.014923],
    "the burner is lit": [0.089784, -0.305231, -0.046136, -0.070944, -0.18429, -0.148983],
    "a refund for annual plans": [-0.03298, -0.197148, 0.132391, -0.205696, 0.031885, -0.215946],
    "Héllo, Wörld! naïve café": [-0.146345, 0.045191, 0.077151, 0.062022, -0.095203, -0.306668],
    # Cut to 512 tokens.
    " ".join(f"word{i}" for i in range(800)): [
        0.194596,
        -0.316346,
        0.42075,
        -0.306032,
        0.007456,
        0.028764,
    ],
    # Cut to 512 x (median token length 6) characters before tokenizing: "refund" is dropped.
    "stove" + " " * 4000 + "refund": [-0.091687, 0.016127, -0.029402, 0.03977, -0.103536, 0.179226],
}


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_static_matches_model2vec(static: StaticEmbedder) -> None:
    out = static.embed(list(MODEL2VEC_REFERENCE))
    expected = np.array(list(MODEL2VEC_REFERENCE.values()), dtype=np.float32)
    assert np.abs(out[:, :6] - expected).max() < 1e-5


def test_static_shape_norm_identity(static: StaticEmbedder) -> None:
    texts = ["the stove is on", "a refund for annual plans", "", "😀🦄"]
    out = static.embed(texts)
    assert out.shape == (4, 256)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out[:2], axis=1), 1.0, atol=1e-6)
    assert not out[2:].any()  # no tokens, or only unknown ones: the zero vector
    assert static.dim == 256
    assert static.model_ref == "minilm-static@1:256"
    # Batching does not change vectors.
    singles = np.stack([static.embed_one(text) for text in texts])
    assert np.allclose(out, singles, atol=1e-6)


def test_static_semantic_ordering(static: StaticEmbedder) -> None:
    embed = static.embed_one
    stove = embed("the stove is on")
    burner = embed("the burner is lit")
    refund = embed("a refund for annual plans")
    assert cos(stove, burner) > cos(stove, refund) + 0.2
    billing = embed("customers asked for their money back on yearly subscriptions")
    assert cos(refund, billing) > cos(refund, burner)
    assert cos(embed("the oven is hot"), stove) > cos(embed("the invoice is overdue"), stove)


def test_static_loads_lazily_and_reports_broken_model(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(default_model_path(), folder)
    embedder = StaticEmbedder(path=folder)
    assert embedder.model_ref == "static:broken@1:256"
    (folder / "model.safetensors").unlink()  # construction read nothing heavy
    with pytest.raises(ModelError, match=r"model\.safetensors"):
        embedder.embed_one("anything")


def test_default_tokenizer_counts_without_truncation() -> None:
    path = default_tokenizer_path()
    assert path.is_file()
    tokenizer = Tokenizer.from_file(str(path))
    ids = tokenizer.encode(" ".join(["stove"] * 1000), add_special_tokens=False).ids
    assert len(ids) == 1000


# --- registry -----------------------------------------------------------------------------------


def test_builtins_are_registered() -> None:
    names = available_embedders()
    assert {"hash", "minilm-static", "openai"} <= set(names)
    assert DEFAULT_EMBEDDER == "minilm-static"
    assert isinstance(get_embedder(DEFAULT_EMBEDDER), StaticEmbedder)
    hashed = get_embedder("hash", dim=32)
    assert isinstance(hashed, HashEmbedder)
    assert hashed.dim == 32


def test_unknown_embedder_names_the_available_ones() -> None:
    with pytest.raises(UnknownPlugin) as info:
        get_embedder("no-such-embedder")
    message = str(info.value)
    for name in ("hash", "minilm-static", "openai"):
        assert name in message
    assert isinstance(info.value, UsageError)
    assert isinstance(info.value, KeyError)


def test_register_embedder() -> None:
    def factory(**kwargs: Any) -> Embedder:
        return HashEmbedder(dim=16)

    register_embedder("test-fake", factory)
    register_embedder("test-fake", factory)  # the same factory again is fine
    assert get_embedder("test-fake").dim == 16
    assert "test-fake" in available_embedders()
    with pytest.raises(InvalidInput):
        register_embedder("test-fake", HashEmbedder)
    register_embedder("test-fake", HashEmbedder, replace=True)
    assert get_embedder("test-fake").dim == 256
    with pytest.raises(InvalidInput):
        register_embedder("", HashEmbedder)


def test_factory_must_return_an_embedder() -> None:
    register_embedder("test-not-an-embedder", lambda: "nope", replace=True)  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidInput):
        get_embedder("test-not-an-embedder")


def test_entry_point_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fake_situated_plugin.py").write_text(
        "from situated.embed import HashEmbedder\n"
        "def make(dim=8):\n"
        "    return HashEmbedder(dim=dim)\n"
    )
    dist = tmp_path / "fake_situated_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-situated-plugin\n")
    (dist / "entry_points.txt").write_text(
        "[situated.embedders]\n"
        "test-entry-point = fake_situated_plugin:make\n"
        "test-broken-entry-point = fake_situated_plugin_missing:make\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "test-entry-point" in available_embedders()
    assert get_embedder("test-entry-point", dim=12).dim == 12
    with pytest.raises(UnknownPlugin, match="failed to load"):
        get_embedder("test-broken-entry-point")


# --- OpenAIEmbedder against a real HTTP server ---------------------------------------------------


class FakeEmbeddingsServer(ThreadingHTTPServer):
    """Speaks POST /v1/embeddings; `mode` picks the behaviour, `requests` records the calls."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = "ok"
        self.dim = 8
        self.payload: Any = None  # sent as is in mode "payload"
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeEmbeddingsServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        mode = self.server.mode
        if self.path != "/v1/embeddings":
            self._send(404, b'{"error": "not found"}')
        elif mode == "500":
            self._send(500, b'{"error": "model crashed"}')
        elif mode == "malformed":
            self._send(200, b'{"data": [{"embedding": [0.1, ')
        elif mode == "payload":
            self._send(200, json.dumps(self.server.payload).encode())
        elif mode == "slow":
            time.sleep(1.0)
            self._send(200, b"{}")
        else:
            dim = self.server.dim if mode == "ok" else self.server.dim - 3
            vectors = HashEmbedder(dim=dim).embed(body["input"])
            # Out of order on purpose: clients must follow "index".
            data = [
                {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
                for i in reversed(range(len(vectors)))
            ]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[FakeEmbeddingsServer]:
    srv = FakeEmbeddingsServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_openai_success(server: FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(server.url, "tiny-embed", api_key="sk-test", dim=8)
    assert server.requests == []  # nothing sent at construction
    texts = ["the stove is on", "", "a refund for annual plans"]
    out = embedder.embed(texts)
    assert out.shape == (3, 8)
    expected = HashEmbedder(dim=8).embed(texts)
    assert np.allclose(out, expected, atol=1e-6)
    assert not out[1].any()
    [request] = server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"] == {"model": "tiny-embed", "input": [texts[0], texts[2]],
                               "encoding_format": "float"}
    assert embedder.name == "openai:tiny-embed"
    assert embedder.model_ref == "openai:tiny-embed@1:8"


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_openai_base_url_forms_and_dim_discovery(server: FakeEmbeddingsServer, suffix: str) -> None:
    embedder = OpenAIEmbedder(server.url + suffix, "tiny-embed")
    assert server.requests == []
    assert embedder.dim == 8  # one probe request
    assert embedder.model_ref == "openai:tiny-embed@1:8"
    assert len(server.requests) == 1
    assert server.requests[0]["auth"] is None
    embedder.embed_one("hello")
    assert len(server.requests) == 2
    embedder.close()


def test_openai_first_batch_discovers_dim(server: FakeEmbeddingsServer) -> None:
    embedder = OpenAIEmbedder(server.url, "tiny-embed")
    assert embedder.embed(["a", "b"]).shape == (2, 8)
    assert len(server.requests) == 1


def test_openai_http_500(server: FakeEmbeddingsServer) -> None:
    server.mode = "500"
    with pytest.raises(ModelError, match="HTTP 500"):
        OpenAIEmbedder(server.url, "tiny-embed", dim=8, max_retries=0).embed_one("hello")


def test_openai_malformed_json(server: FakeEmbeddingsServer) -> None:
    server.mode = "malformed"
    with pytest.raises(ModelError, match="malformed JSON"):
        OpenAIEmbedder(server.url, "tiny-embed", dim=8).embed_one("hello")


def test_openai_timeout(server: FakeEmbeddingsServer) -> None:
    server.mode = "slow"
    embedder = OpenAIEmbedder(server.url, "tiny-embed", dim=8, timeout=0.2, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"timed out after 0\.2s"):
        embedder.embed_one("hello")
    assert time.monotonic() - started < 0.9


def test_openai_wrong_dim(server: FakeEmbeddingsServer) -> None:
    server.mode = "wrong-dim"
    with pytest.raises(ModelError, match="dimension 5, expected 8"):
        OpenAIEmbedder(server.url, "tiny-embed", dim=8).embed_one("hello")


def test_openai_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError, match="failed"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}", "tiny-embed", dim=8,
                       max_retries=0).embed_one("hello")


@pytest.mark.parametrize(
    "payload",
    [
        {"object": "list"},
        {"data": []},
        {"data": [{"index": 0}]},
        {"data": [{"index": 0, "embedding": ["a"] * 8}]},
        {"data": [{"index": 3, "embedding": [0.1] * 8}]},
        {"data": [{"index": 0, "embedding": [1e39] * 8}]},
        [1, 2, 3],
    ],
)
def test_openai_invalid_payloads(server: FakeEmbeddingsServer, payload: Any) -> None:
    server.mode = "payload"
    server.payload = payload
    with pytest.raises(ModelError):
        OpenAIEmbedder(server.url, "tiny-embed", dim=8).embed_one("hello")


def test_openai_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("localhost:8080", "m")
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("http://127.0.0.1:1", "")
    with pytest.raises(InvalidInput):
        OpenAIEmbedder("http://127.0.0.1:1", "m", dim=0)
