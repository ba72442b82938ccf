"""Retries, timeouts and the standard OpenAI environment, against a real HTTP server on
127.0.0.1 (tests/openai_server.py): the official `openai` client does the transport."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from openai_server import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    OpenAIStub,
    Reply,
    chat_reply,
    error_reply,
    hash_embeddings,
)
from situated.embed import OpenAIEmbedder
from situated.endpoint import Endpoint, endpoint_url
from situated.errors import InvalidInput, ModelError
from situated.recall.reconstruct.llm import LLMReconstructor

FAST = {"retry-after-ms": "10"}  # the server asks for a short pause: the client obeys it


@pytest.fixture
def srv() -> Iterator[OpenAIStub]:
    with OpenAIStub(embeddings=hash_embeddings(dim=8)) as stub:
        yield stub


def chat(srv: OpenAIStub, **kwargs: Any) -> Endpoint:
    return Endpoint(endpoint_url(srv.url, "chat/completions"), **kwargs)


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_retryable_status_is_retried_then_answered(srv: OpenAIStub, status: int) -> None:
    srv.chat.push(Reply(status=status, body={"error": {"message": "busy"}}, headers=FAST),
                  chat_reply("ok"))
    payload = chat(srv, max_retries=1).post(BODY)
    assert payload["choices"][0]["message"]["content"] == "ok"
    assert [r.path for r in srv.requests] == [CHAT_PATH, CHAT_PATH]
    assert srv.requests[0].json == srv.requests[1].json == BODY  # the same request again


def test_retries_back_off_when_the_server_gives_no_pause(srv: OpenAIStub) -> None:
    srv.chat.push(error_reply(503), chat_reply("ok"))
    started = time.perf_counter()
    chat(srv, max_retries=1).post(BODY)
    assert time.perf_counter() - started >= 0.2  # the client's backoff (0.5 s, jittered)


def test_retries_are_bounded_and_the_error_says_how_many(srv: OpenAIStub) -> None:
    srv.chat.always(Reply(status=500, body={"error": {"message": "down"}}, headers=FAST))
    with pytest.raises(ModelError, match=r"HTTP 500 \(3 attempts\)"):
        chat(srv, max_retries=2).post(BODY)
    assert len(srv.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_caller_error_is_not_retried(srv: OpenAIStub, status: int) -> None:
    srv.chat.always(error_reply(status, "bad request"))
    with pytest.raises(ModelError, match=f"HTTP {status}"):
        chat(srv, max_retries=3).post(BODY)
    assert len(srv.requests) == 1


def test_a_timeout_is_retried_then_answered(srv: OpenAIStub) -> None:
    srv.chat.push(chat_reply("late", delay=3.0), chat_reply("ok"))
    started = time.perf_counter()
    payload = chat(srv, timeout=0.3, max_retries=1).post(BODY)
    assert payload["choices"][0]["message"]["content"] == "ok"
    assert len(srv.requests) == 2
    assert time.perf_counter() - started < 2.5


def test_each_attempt_has_the_timeout(srv: OpenAIStub) -> None:
    srv.chat.always(chat_reply("late", delay=3.0))
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"timed out after 0\.2s \(2 attempts\)"):
        chat(srv, timeout=0.2, max_retries=1).post(BODY)
    elapsed = time.perf_counter() - started
    assert len(srv.requests) == 2
    assert 0.4 <= elapsed < 2.5  # two attempts of 0.2 s and one backoff, never the 3 s delay


def test_a_dropped_connection_is_retried(srv: OpenAIStub) -> None:
    srv.chat.push(Reply(drop=True), chat_reply("ok"))
    assert chat(srv, max_retries=1).post(BODY)["choices"][0]["message"]["content"] == "ok"
    assert len(srv.requests) == 2


def test_the_embedder_retries_and_gets_its_vectors(srv: OpenAIStub) -> None:
    srv.embeddings.push(Reply(status=429, body={"error": {"message": "slow down"}},
                              headers=FAST))
    vectors = OpenAIEmbedder(srv.url, "e", dim=8, max_retries=1).embed(["a stove", "a mug"])
    assert vectors.shape == (2, 8)
    assert [r.path for r in srv.requests] == [EMBEDDINGS_PATH, EMBEDDINGS_PATH]


def test_the_llm_reconstructor_retries_once_by_default(srv: OpenAIStub) -> None:
    llm = LLMReconstructor(srv.url, "m")
    assert llm._endpoint.max_retries == 1
    srv.chat.always(Reply(status=503, body={"error": {"message": "down"}}, headers=FAST))
    with pytest.raises(ModelError, match=r"\(2 attempts\)"):
        llm._endpoint.post(BODY)
    assert len(srv.requests) == 2


def test_openai_base_url_and_api_key_from_the_environment(
    srv: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", srv.url_v1)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    embedder = OpenAIEmbedder(model="e", dim=8)
    assert embedder.url == srv.url + EMBEDDINGS_PATH
    embedder.embed_one("hello")
    [req] = srv.requests
    assert req.headers["authorization"] == "Bearer sk-from-env"
    explicit = OpenAIEmbedder(srv.url, "e", api_key="sk-explicit", dim=8)
    explicit.embed_one("hello")
    assert srv.requests[-1].headers["authorization"] == "Bearer sk-explicit"


def test_without_any_key_no_authorization_header_is_sent(srv: OpenAIStub) -> None:
    OpenAIEmbedder(srv.url, "e", dim=8).embed_one("hello")
    assert "authorization" not in srv.requests[0].headers


def test_without_a_base_url_the_default_is_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert endpoint_url(None, "embeddings") == "https://api.openai.com/v1/embeddings"


def test_the_embedder_without_a_model_says_so() -> None:
    for build in (OpenAIEmbedder, LLMReconstructor):
        with pytest.raises(InvalidInput, match=r"^model: is required: the name of a model"):
            build("http://127.0.0.1:1")


@pytest.mark.parametrize("bad", [-1, 11, 1.5, True, "2", None])
def test_max_retries_is_checked(bad: Any) -> None:
    with pytest.raises(InvalidInput, match="max_retries"):
        OpenAIEmbedder("http://127.0.0.1:1", "e", max_retries=bad)
    with pytest.raises(InvalidInput, match="max_retries"):
        LLMReconstructor("http://127.0.0.1:1", "m", max_retries=bad)


def test_nothing_is_sent_and_openai_is_not_built_at_construction(srv: OpenAIStub) -> None:
    endpoint = chat(srv)
    assert endpoint._client is None and srv.requests == []
