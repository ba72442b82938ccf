"""Embedders and their registry.

Built-in embedders are registered through `register_embedder`, the same door as any other;
third-party packages can also declare an entry point in the group `situated.embedders`
(name = "module:factory"), loaded the first time that name is looked up.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from situated.defaults import DEFAULT_EMBEDDER
from situated.embed.base import Embedder
from situated.embed.hashing import HashEmbedder
from situated.embed.openai import OpenAIEmbedder
from situated.embed.static import StaticEmbedder, default_tokenizer_path
from situated.errors import InvalidInput, UnknownPlugin

__all__ = [
    "DEFAULT_EMBEDDER",
    "ENTRY_POINT_GROUP",
    "Embedder",
    "EmbedderFactory",
    "HashEmbedder",
    "OpenAIEmbedder",
    "StaticEmbedder",
    "available_embedders",
    "default_tokenizer_path",
    "get_embedder",
    "register_embedder",
]

EmbedderFactory = Callable[..., Embedder]

ENTRY_POINT_GROUP = "situated.embedders"

_factories: dict[str, EmbedderFactory] = {}


def register_embedder(name: str, factory: EmbedderFactory, *, replace: bool = False) -> None:
    """Make `factory` available as `get_embedder(name, **kwargs)`.

    Args:
        name: The registry name.
        factory: Called with the keyword arguments of `get_embedder`; returns an `Embedder`.
        replace: Allow replacing another factory already registered under `name`.

    Raises:
        InvalidInput: `name` is empty, or taken by another factory and `replace` is false.
    """
    if not name:
        raise InvalidInput("name", "must not be empty")
    current = _factories.get(name)
    if current is not None and current is not factory and not replace:
        raise InvalidInput("name", f"an embedder named {name!r} is already registered")
    _factories[name] = factory


def get_embedder(name: str, **kwargs: Any) -> Embedder:
    """Build the embedder registered as `name`.

    Args:
        name: A registered name, e.g. `DEFAULT_EMBEDDER`, "hash" or "openai".
        **kwargs: Passed to the embedder's factory.

    Raises:
        UnknownPlugin: No embedder has that name, or its entry point cannot be loaded.
        InvalidInput: The factory returned something that is not an `Embedder`.
    """
    factory = _factories.get(name)
    if factory is None:
        entry_point = _discovered().get(name)
        if entry_point is None:
            raise UnknownPlugin(
                f"no embedder named {name!r}; available: {', '.join(available_embedders())}"
            )
        try:
            factory = entry_point.load()
        except (ImportError, AttributeError) as exc:
            raise UnknownPlugin(
                f"embedder {name!r} from entry point {entry_point.value!r} failed to load: {exc}"
            ) from exc
        register_embedder(name, factory)
    embedder = factory(**kwargs)
    if not isinstance(embedder, Embedder):
        raise InvalidInput("name", f"the factory for {name!r} returned {type(embedder).__name__}")
    return embedder


def available_embedders() -> list[str]:
    """Names of the registered embedders and of those declared by entry points, sorted."""
    return sorted(_factories.keys() | _discovered().keys())


def _discovered() -> dict[str, EntryPoint]:
    """Entry points of the group `situated.embedders`; their modules are not imported.

    Not cached: it is read only for a name not registered yet (a plugin's first use, after
    which it is registered, or an error) and by `available_embedders`.
    """
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


register_embedder("hash", HashEmbedder)
register_embedder("minilm-static", StaticEmbedder)
register_embedder("openai", OpenAIEmbedder)
