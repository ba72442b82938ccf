"""An embedder calling any OpenAI-compatible `POST /v1/embeddings` endpoint."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.errors import InvalidInput, ModelError

if TYPE_CHECKING:
    import httpx  # imported on first request: it is a tenth of a second of import time

_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp, ...).

    Nothing is sent before the first embedding. Every failure of the endpoint (timeout,
    connection error, HTTP error, a payload that does not validate) raises `ModelError`.
    Empty texts are not sent (servers reject them) and get the zero vector.

    Args:
        base_url: The server's address, with or without the trailing `/v1`.
        model: The model name sent with each request; the embedder is named `openai:<model>`.
        api_key: Sent as a bearer token when given.
        dim: The expected dimension; when None, it is learnt by embedding one probe text the
            first time it is needed (reading `dim` or `model_ref` counts).
        timeout: Seconds allowed for each request.
    """

    version = "1"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInput("base_url", f"must start with http:// or https://, got {base_url!r}")
        if not model:
            raise InvalidInput("model", "must not be empty")
        if dim is not None and dim < 1:
            raise InvalidInput("dim", f"must be positive, got {dim}")
        if timeout <= 0:
            raise InvalidInput("timeout", f"must be positive, got {timeout}")
        root = base_url.rstrip("/")
        self.url = f"{root}/embeddings" if root.endswith("/v1") else f"{root}/v1/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.timeout = timeout
        self._api_key = api_key
        self._dim = dim
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The vector dimension, probing the server once if it was not given."""
        if self._dim is None:
            self._dim = int(self._request([_PROBE_TEXT]).shape[1])
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        self._dim = value

    def embed_batch(self, texts: Sequence[str]) -> Vector:
        """Embed texts with one request; rows are in input order."""
        sent = [i for i, text in enumerate(texts) if text]
        vectors = self._request([texts[i] for i in sent]) if sent else None
        if self._dim is None and vectors is not None:
            self._dim = int(vectors.shape[1])  # the first batch doubles as the probe
        dim = self.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if vectors is not None:
            if vectors.shape[1] != dim:
                raise ModelError(
                    f"{self.url} returned vectors of dimension {vectors.shape[1]}, expected {dim}"
                )
            out[sent] = vectors
        return out

    def close(self) -> None:
        """Close the HTTP connection pool; a later call opens a new one."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _http(self) -> httpx.Client:
        """The shared HTTP client, created on first use."""
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                self._client = httpx.Client(timeout=self.timeout, headers=headers)
            return self._client

    def _request(self, texts: list[str]) -> Vector:
        """POST texts to the endpoint; returns one validated row per text."""
        import httpx

        try:
            response = self._http().post(self.url, json={"model": self.model, "input": texts})
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
        return _parse(payload, len(texts), self.url)


def _parse(payload: Any, count: int, url: str) -> Vector:
    """Validate an embeddings response and return its vectors in input order."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ModelError(f"{url} returned no 'data' list")
    if len(data) != count:
        raise ModelError(f"{url} returned {len(data)} embeddings for {count} inputs")
    rows: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        embedding = item.get("embedding") if isinstance(item, dict) else None
        index = item.get("index", position) if isinstance(item, dict) else position
        if not isinstance(embedding, list) or not embedding:
            raise ModelError(f"{url} returned an item without an 'embedding' list")
        if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
            raise ModelError(f"{url} returned a bad or repeated index {index!r}")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in embedding):
            raise ModelError(f"{url} returned an embedding with non-numeric values")
        rows[index] = embedding
    dims = {len(row) for row in rows if row is not None}
    if len(dims) != 1:
        raise ModelError(f"{url} returned embeddings of mixed dimensions {sorted(dims)}")
    values = np.asarray(rows, dtype=np.float64)
    if not np.isfinite(values).all() or np.abs(values).max() > np.finfo(np.float32).max:
        raise ModelError(f"{url} returned non-finite or out-of-range values")
    return values.astype(np.float32)
