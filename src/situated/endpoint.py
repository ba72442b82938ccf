"""One client for OpenAI-compatible HTTP endpoints (embeddings, chat completions).

Used by the `openai` embedder, the `llm` reconstructor and the evaluation's LLM agent. The
transport is the official `openai` client: retries with exponential backoff and jitter on
connection errors, timeouts, 408, 409, 429 and 5xx (honouring `Retry-After`), a timeout per
attempt, and the standard `OPENAI_BASE_URL` / `OPENAI_API_KEY` when no base URL or key is
given. The answer's body is validated here, not by the client, so a server that answers
something malformed is a `ModelError` like any other failure.

A dead endpoint costs one short wait per process per interval, not one per call: connecting
may take at most `CONNECT_TIMEOUT` seconds, and once a request to a URL finds no server (no
connection, or a timeout) every request to that URL in this process fails at once
(`ModelError`, "skipped") for `PAUSE_SECONDS`; then one request tries again. A server that
answers, even with an error, is not paused (the next request may well succeed).

Nothing touches the network, and `openai` is not imported, at import or construction.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from situated.errors import InvalidInput, ModelError

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_RETRIES = 2
"""Retries after the first attempt (the `openai` client's own default)."""
MAX_RETRIES = 10
_ROUTES = ("chat/completions", "embeddings")
CONNECT_TIMEOUT = 3.0
"""Seconds allowed to connect (at most the call's own timeout): a host that does not answer
costs this, not the whole timeout."""
PAUSE_SECONDS = 30.0
"""How long a URL that failed is skipped in this process before it is tried again."""


_PAUSED: dict[str, tuple[float, str]] = {}
"""The URLs that failed in this process: when each may be tried again, and why it failed."""
_PAUSED_LOCK = threading.Lock()


def _check_paused(url: str) -> None:
    """Raise `ModelError` while `url` is paused; once the pause is over, let this one request
    through (and keep the others paused while it tries)."""
    with _PAUSED_LOCK:
        entry = _PAUSED.get(url)
        if entry is None:
            return
        until, error = entry
        now = time.monotonic()
        if now >= until:
            _PAUSED[url] = (now + PAUSE_SECONDS, error)
            return
    raise ModelError(f"{url} skipped for {until - now:.0f}s more: it failed in this process "
                     f"({error})")


def _failed(url: str, error: str) -> None:
    with _PAUSED_LOCK:
        _PAUSED[url] = (time.monotonic() + PAUSE_SECONDS, error[:200])


def _answered(url: str) -> None:
    with _PAUSED_LOCK:
        _PAUSED.pop(url, None)


def resume(url: str | None = None) -> None:
    """Try `url` (None: every URL) again from the next request, paused or not."""
    with _PAUSED_LOCK:
        if url is None:
            _PAUSED.clear()
        else:
            _PAUSED.pop(url, None)


def paused(url: str) -> str | None:
    """Why `url` is skipped by this process now (it failed within `PAUSE_SECONDS`), or None."""
    with _PAUSED_LOCK:
        entry = _PAUSED.get(url)
    return None if entry is None or entry[0] <= time.monotonic() else entry[1]


def endpoint_url(base_url: str | None, path: str) -> str:
    """`{base_url}/v1/{path}`, accepting a base URL with or without the trailing `/v1`.

    Without a base URL, `OPENAI_BASE_URL` is used, else OpenAI's own API.
    """
    if base_url is None:
        base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise InvalidInput("base_url", f"must start with http:// or https://, got {base_url!r}")
    root = base_url.rstrip("/")
    return (root if root.endswith("/v1") else f"{root}/v1") + "/" + path.lstrip("/")


def chat_settings(
    base_url: str | None, model: str | None, timeout: object, temperature: object
) -> tuple[str, str, float, float]:
    """The checked settings of a chat-completions client: (url, model, timeout, temperature).

    Raises:
        InvalidInput: `model`, `base_url`, `timeout` or `temperature` named.
    """
    if model is None:
        raise InvalidInput("model", "is required: the name of a model the server serves")
    url = endpoint_url(base_url, "chat/completions")
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput("model", "must not be empty")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidInput("timeout", f"must be a positive number of seconds, got {timeout!r}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        raise InvalidInput("temperature", f"must be from 0 to 2, got {temperature!r}")
    return url, model, float(timeout), float(temperature)


def check_retries(max_retries: object) -> int:
    """`max_retries` as an int from 0 to `MAX_RETRIES`, or `InvalidInput`."""
    if (
        isinstance(max_retries, bool)
        or not isinstance(max_retries, int)
        or not 0 <= max_retries <= MAX_RETRIES
    ):
        raise InvalidInput("max_retries", f"must be an integer from 0 to {MAX_RETRIES}, "
                           f"got {max_retries!r}")
    return max_retries


class Endpoint:
    """A lazily opened, thread-safe `openai` client for one endpoint URL.

    Args:
        url: the full endpoint URL (see `endpoint_url`), ending in `/v1/chat/completions` or
            `/v1/embeddings`.
        api_key: sent as a bearer token; when None, `OPENAI_API_KEY` is read at the first
            request, and without either no `Authorization` header is sent (local servers).
            Never logged or recorded.
        timeout: seconds per attempt.
        max_retries: attempts after the first one on connection errors, timeouts, 408, 409,
            429 and 5xx, with exponential backoff (0 turns retrying off).
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        root, sep, route = url.rpartition("/v1/")
        if not sep or route not in _ROUTES:
            raise InvalidInput("url", f"must end in /v1/{' or /v1/'.join(_ROUTES)}, got {url!r}")
        self.url = url
        self.timeout = timeout
        self.max_retries = check_retries(max_retries)
        self._base_url = root + "/v1"
        self._route = route
        self._api_key = api_key
        self._client: openai.OpenAI | None = None
        self._keyless = False
        self._lock = threading.Lock()

    def _openai(self) -> openai.OpenAI:
        import openai

        with self._lock:
            if self._client is None:
                key = self._api_key or os.environ.get("OPENAI_API_KEY")
                # the client insists on a key; without one, requests omit the header
                self._keyless = not key
                self._client = openai.OpenAI(
                    base_url=self._base_url,
                    api_key=key or "unused",
                    timeout=openai.Timeout(self.timeout,
                                          connect=min(self.timeout, CONNECT_TIMEOUT)),
                    max_retries=self.max_retries,
                )
            return self._client

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST JSON; returns the JSON object answered, or raises `ModelError`."""
        import openai

        _check_paused(self.url)
        client = self._openai()
        if self._keyless:  # a local server without a key: no Authorization header at all
            body = body | {"extra_headers": {"Authorization": openai.Omit()}}
        attempts = f"{self.max_retries + 1} attempt{'s' if self.max_retries else ''}"
        try:
            if self._route == "embeddings":
                raw = client.embeddings.with_raw_response.create(**body)
            else:
                raw = client.chat.completions.with_raw_response.create(**body)
            text = raw.text
        except openai.APITimeoutError as exc:  # (a subclass of APIConnectionError)
            _failed(self.url, f"timed out after {self.timeout}s")
            raise ModelError(f"{self.url} timed out after {self.timeout}s ({attempts})") from exc
        except openai.APIStatusError as exc:
            _answered(self.url)
            raise ModelError(
                f"{self.url} returned HTTP {exc.status_code} ({attempts}): "
                f"{exc.response.text[:200]!r}"
            ) from exc
        except openai.APIConnectionError as exc:
            _failed(self.url, f"no connection: {exc}")
            raise ModelError(f"{self.url} failed ({attempts}): {exc}") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.url} failed: {exc}") from exc
        _answered(self.url)
        try:
            payload = json.loads(text)
        except ValueError as exc:
            raise ModelError(f"{self.url} returned malformed JSON: {text[:200]!r}") from exc
        if not isinstance(payload, dict):
            raise ModelError(f"{self.url} returned {type(payload).__name__}, not an object")
        return payload

    def close(self) -> None:
        """Close the connection pool; a later request opens a new one."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
