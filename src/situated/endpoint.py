"""One client for OpenAI-compatible HTTP endpoints (embeddings, chat completions).

Used by the `openai` embedder, the `llm` reconstructor and the evaluation's LLM agent. Nothing
touches the network at import or construction; every failure is a `ModelError`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from situated.errors import InvalidInput, ModelError

if TYPE_CHECKING:
    import httpx


def endpoint_url(base_url: str, path: str) -> str:
    """`{base_url}/v1/{path}`, accepting a base URL with or without the trailing `/v1`."""
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise InvalidInput("base_url", f"must start with http:// or https://, got {base_url!r}")
    root = base_url.rstrip("/")
    return (root if root.endswith("/v1") else f"{root}/v1") + "/" + path.lstrip("/")


class Endpoint:
    """A lazily opened, thread-safe HTTP client for one endpoint URL.

    Args:
        url: the full endpoint URL (see `endpoint_url`).
        api_key: sent as a bearer token when given; never logged or recorded.
        timeout: seconds per request.
    """

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 30.0) -> None:
        self.url = url
        self.timeout = timeout
        self._api_key = api_key
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                self._client = httpx.Client(timeout=self.timeout, headers=headers)
            return self._client

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST JSON; returns the JSON object answered, or raises `ModelError`."""
        import httpx

        try:
            response = self._http().post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise ModelError(f"{self.url} timed out after {self.timeout}s") from exc
        except httpx.HTTPError as exc:
            raise ModelError(f"{self.url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise ModelError(
                f"{self.url} returned HTTP {response.status_code}: {response.text[:200]!r}"
            )
        try:
            payload = response.json()
        except ValueError as exc:
            raise ModelError(
                f"{self.url} returned malformed JSON: {response.text[:200]!r}"
            ) from exc
        if not isinstance(payload, dict):
            raise ModelError(f"{self.url} returned {type(payload).__name__}, not an object")
        return payload

    def close(self) -> None:
        """Close the connection pool; a later request opens a new one."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
