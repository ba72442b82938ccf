"""One schema-constrained chat call for the write side's models (the `llm` distiller, the `llm`
conversation extractor): the same protocol as the `llm` reconstructor.

`SchemaChat.ask` sends `POST /v1/chat/completions` through the configured OpenAI-compatible
client (`situated.endpoint`), asks for one JSON object constrained by a schema generated from a
pydantic model (`response_format` of type `json_schema`, strict), and validates the answer
with that model before anything uses it. Every failure (timeout, connection, HTTP error,
malformed JSON, a refusal, a schema violation) is a `ModelError`; the caller falls back to the
rules and counts the failure in `health`.

Each answer comes with its provenance envelope: the prompt template (name, version and a hash
of its text), the model, the endpoint and a hash of the exact prompt sent, so a proposal can be
traced to what asked for it. Untrusted text travels between delimiters whose tag is a hash of
the document (`untrusted_block`), so the data cannot forge the closing tag.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from situated.endpoint import Endpoint, chat_settings
from situated.errors import ModelError
from situated.recall.reconstruct.llm import message_content, strict_schema, unfence

A = TypeVar("A", bound=BaseModel)


@dataclass(frozen=True)
class Template:
    """A prompt template: the system prompt and the user message's format (`{data}`, `{tag}`)."""

    name: str
    version: str
    system: str
    user: str

    @property
    def sha256(self) -> str:
        return _sha(self.system + "\x00" + self.user)


def untrusted_block(template: Template, data: Any) -> str:
    """The user message: `data` as JSON between markers tagged with the document's hash."""
    doc = json.dumps(data, ensure_ascii=False, indent=1)
    return template.user.format(tag=_sha(doc)[:16], data=doc)


class SchemaChat:
    """A chat model behind any OpenAI-compatible endpoint, answering one JSON object.

    Args:
        base_url: the server's address, with or without `/v1`; None for `OPENAI_BASE_URL`.
        model: the model name sent with each request (required).
        api_key: bearer token; None for `OPENAI_API_KEY`, else no header. Never recorded.
        timeout: seconds per attempt.
        temperature: sampling temperature, 0 to 2.
        max_retries: attempts after the first on connection errors, timeouts, 429 and 5xx.

    Raises:
        InvalidInput: a bad argument (nothing is sent at construction).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        temperature: float = 0.0,
        max_retries: int = 1,
    ) -> None:
        self.url, self.model, self.timeout, self.temperature = chat_settings(
            base_url, model, timeout, temperature)
        self._endpoint = Endpoint(self.url, api_key, self.timeout, max_retries)

    @property
    def model_ref(self) -> str:
        return f"openai:{self.model}"

    def request_body(
        self, template: Template, user: str, answer: type[BaseModel]
    ) -> dict[str, Any]:
        """The chat-completions request (no network)."""
        return {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": template.system},
                {"role": "user", "content": user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": template.name.replace(".", "_").replace("/", "_"),
                    "strict": True,
                    "schema": strict_schema(answer),
                },
            },
        }

    def ask(self, template: Template, user: str, answer: type[A]) -> tuple[A, dict[str, Any]]:
        """The validated answer and its provenance; `ModelError` on any failure."""
        body = self.request_body(template, user, answer)
        started = time.perf_counter()
        payload = self._endpoint.post(body)
        elapsed_ms = (time.perf_counter() - started) * 1000
        content = message_content(payload, self.url)
        try:
            data = json.loads(unfence(content), parse_constant=_no_constant)
        except ValueError as exc:
            raise ModelError(
                f"{self.model_ref} answered with malformed JSON: {content[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise ModelError(f"{self.model_ref} answered {type(data).__name__}, not an object")
        try:
            parsed = answer.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            raise ModelError(
                f"{self.model_ref} answer violates the schema: {loc + ': ' if loc else ''}{msg}"
            ) from exc
        provenance: dict[str, Any] = {
            "prompt_template": f"{template.name}@{template.version}",
            "template_sha256": template.sha256,
            "prompt_sha256": _sha(template.system + "\x00" + user),
            "model": self.model_ref,
            "endpoint": self.url,
            "temperature": self.temperature,
            "latency_ms": round(elapsed_ms, 1),
        }
        if isinstance(payload.get("model"), str):
            provenance["served_model"] = payload["model"]
        return parsed, provenance

    def close(self) -> None:
        self._endpoint.close()

    def __repr__(self) -> str:
        return f"SchemaChat({self.url!r}, {self.model!r})"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
