"""An embedder calling any OpenAI-compatible `POST /v1/embeddings` endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from situated.embed.base import Embedder, Vector
from situated.endpoint import DEFAULT_MAX_RETRIES, Endpoint, endpoint_url
from situated.errors import InvalidInput, ModelError

_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder(Embedder):
    """Embeddings from an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp, ...).

    Nothing is sent before the first embedding. Requests go through the official `openai`
    client (retries with backoff on connection errors, timeouts, 429 and 5xx). Every failure
    of the endpoint (timeout, connection error, HTTP error after the retries, a payload that
    does not validate) raises `ModelError`. Empty texts are not sent (servers reject them)
    and get the zero vector.

    Args:
        base_url: The server's address, with or without the trailing `/v1`; None for
            `OPENAI_BASE_URL`, else OpenAI's API.
        model: The model name sent with each request (required); the embedder is named
            `openai:<model>`.
        api_key: Sent as a bearer token; None for `OPENAI_API_KEY`, else no header.
        dim: The expected dimension; when None, it is learnt by embedding one probe text the
            first time it is needed (reading `dim` or `model_ref` counts).
        timeout: Seconds allowed for each attempt.
        max_retries: Attempts after the first one on a retryable failure (0: none).
    """

    version = "1"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        if model is None:
            raise InvalidInput("model", "is required: the name of a model the server serves")
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("model", "must not be empty")
        url = endpoint_url(base_url, "embeddings")
        if dim is not None and dim < 1:
            raise InvalidInput("dim", f"must be positive, got {dim}")
        if timeout <= 0:
            raise InvalidInput("timeout", f"must be positive, got {timeout}")
        self._endpoint = Endpoint(url, api_key, timeout, max_retries)
        self.url = url
        self.model = model
        self.name = f"openai:{model}"
        self.timeout = timeout
        self._dim = dim

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
        self._endpoint.close()

    def _request(self, texts: list[str]) -> Vector:
        """POST texts to the endpoint; returns one validated row per text."""
        payload = self._endpoint.post(
            {"model": self.model, "input": texts, "encoding_format": "float"}
        )
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
