"""The write side's pluggable models: distillers (`learn`) and conversation extractors
(`add_conversation`), registered by name and resolved like reconstructors.

Built-ins register through `register_distiller` / `register_extractor`, the same door as
third-party plugins: distillers `rules` (default) and `llm`; extractors `none` (default) and
`llm`. A name left out comes from the settings (`SITUATED_DISTILLER`, `SITUATED_EXTRACTOR`);
the `llm` ones take their endpoint from the `distiller_*` settings (`situated.config`) under
the options given. `run_distiller` and `run_extractor` fall back when a model fails: the rules
distiller's drafts, or no extracted items (the notes are still stored), with the failure
counted in `health` as `distiller:<name>` / `extractor:<name>`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from situated import arguments as args
from situated.defaults import DEFAULT_DISTILLER, DEFAULT_EXTRACTOR
from situated.errors import InvalidInput, ModelError, ModelFallbackWarning
from situated.notices import notify
from situated.write.conversation import Conversation, ExtractedItem, Extractor, NoExtractor
from situated.write.distill import Distiller, LessonDraft, RulesDistiller, Trajectory

if TYPE_CHECKING:
    from situated.config import Settings
    from situated.store.contract import StoreContract as Store

log = logging.getLogger("situated")

_DISTILLERS: dict[str, Callable[..., Distiller]] = {}
_EXTRACTORS: dict[str, Callable[..., Extractor]] = {}
_ENDPOINT_FIELDS = frozenset({"base_url", "model", "api_key", "timeout", "max_retries"})
_NO_OPTIONS = frozenset({"rules", "none"})
"""Built-ins without a model: the `distiller_*` endpoint settings are not theirs."""


def register_distiller(name: str, factory: Callable[..., Distiller]) -> None:
    """Make a distiller available by name (`Memory.learn(distiller=name)`)."""
    _DISTILLERS[args.label(name, "name")] = factory


def register_extractor(name: str, factory: Callable[..., Extractor]) -> None:
    """Make a conversation extractor available by name."""
    _EXTRACTORS[args.label(name, "name")] = factory


def _llm_distiller(**options: Any) -> Distiller:
    from situated.write.llm_distill import LLMDistiller

    return LLMDistiller(**options)


def _llm_extractor(**options: Any) -> Extractor:
    from situated.write.conversation import LLMExtractor

    return LLMExtractor(**options)


register_distiller("rules", RulesDistiller)
register_distiller("llm", _llm_distiller)
register_extractor("none", NoExtractor)
register_extractor("llm", _llm_extractor)


class Writers:
    """The distillers and extractors one `Memory` uses: by name (built once per name and
    options, so an endpoint's connections are reused) or as given.

    Args:
        settings: the `Memory`'s settings; None reads them when a name is left out or names
            an endpoint model.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        self._built: dict[tuple[str, str, str], Any] = {}

    def distiller(self, value: Any, options: Mapping[str, Any] | None = None) -> Distiller:
        """`value` (a `Distiller`, a registered name, or None for the configured one)."""
        found: Distiller = self._resolve("distiller", value, options, _DISTILLERS,
                                         DEFAULT_DISTILLER, "distill")
        return found

    def extractor(self, value: Any, options: Mapping[str, Any] | None = None) -> Extractor:
        """`value` (an `Extractor`, a registered name, or None for the configured one)."""
        found: Extractor = self._resolve("extractor", value, options, _EXTRACTORS,
                                         DEFAULT_EXTRACTOR, "extract")
        return found

    def _settings_now(self) -> Settings:
        if self._settings is None:
            from situated.config import load_settings

            self._settings = load_settings()
        return self._settings

    def _resolve(self, kind: str, value: Any, options: Mapping[str, Any] | None,
                 registry: Mapping[str, Callable[..., Any]], default: str, method: str) -> Any:
        field = f"{kind}_options"
        if options is not None and (
            not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options)
        ):
            raise InvalidInput(field, "must be a mapping of option names")
        given = dict(options or {})
        if value is None:
            value = getattr(self._settings_now(), kind) or default
        if not isinstance(value, str):
            if given:
                raise InvalidInput(field, f"options go with a {kind} given by name")
            return args.has_methods(value, kind, method)
        name = args.label(value, kind)
        if name not in registry:
            raise InvalidInput(kind, f"unknown {kind} {name!r} (known: {', '.join(registry)})")
        configured = {}
        if name not in _NO_OPTIONS and (name in _takers(kind) or self._settings is not None):
            configured = getattr(self._settings_now(), f"{kind}_options")(name)
        key = (kind, name, repr(sorted({**configured, **given}.items())))
        if key not in self._built:
            self._built[key] = _build(registry[name], kind, name, given, configured)
        return self._built[key]

    def close(self) -> None:
        """Close the endpoints of the models built here."""
        for built in self._built.values():
            close = getattr(built, "close", None)
            if callable(close):
                close()
        self._built.clear()


def _takers(kind: str) -> frozenset[str]:
    from situated.defaults import ENDPOINT_DISTILLERS, ENDPOINT_EXTRACTORS

    return ENDPOINT_DISTILLERS if kind == "distiller" else ENDPOINT_EXTRACTORS


def _build(factory: Callable[..., Any], kind: str, name: str, given: Mapping[str, Any],
           configured: Mapping[str, Any]) -> Any:
    field = f"{kind}_options"
    try:
        return factory(**{**configured, **given})
    except TypeError as exc:  # options the factory does not take
        raise InvalidInput(field, str(exc)) from None
    except InvalidInput as exc:
        if exc.field in configured and exc.field not in given:
            raise InvalidInput(f"settings.distiller_{exc.field}", exc.message) from None
        if exc.field in given or exc.field not in _ENDPOINT_FIELDS:
            raise InvalidInput(f"{field}.{exc.field}", exc.message) from None
        from situated.config import where

        raise InvalidInput(
            f"{field}.{exc.field}",
            f"{exc.message}; for {kind} {name!r} set {where('distiller', exc.field)} (or "
            f"{field}={{{exc.field!r}: ...}})",
        ) from None


def run_distiller(store: Store, distiller: Distiller, trajectory: Trajectory
                  ) -> list[LessonDraft]:
    """The distiller's drafts; a `ModelError` falls back to the rules distiller, loudly."""
    try:
        return distiller.distill(trajectory)
    except ModelError as exc:
        name = getattr(distiller, "name", "custom")
        error = record_model_failure(store, f"distiller:{name}", exc)
        notify(ModelFallbackWarning(f"the {name} distiller failed ({error}); the rules "
                                    "distiller distilled the episode instead"))
        rules = RulesDistiller()
        why = {"distiller": f"{rules.name}@{rules.version}", "fallback_from": name,
               "error": str(exc)[:500]}
        return [replace(d, provenance=why) for d in rules.distill(trajectory)]


def run_extractor(store: Store, extractor: Extractor, conversation: Conversation
                  ) -> tuple[list[ExtractedItem], str | None]:
    """The extractor's items and None; on a `ModelError`, no items and the error (the notes
    are stored anyway), counted in `health`."""
    try:
        return extractor.extract(conversation), None
    except ModelError as exc:
        name = getattr(extractor, "name", "custom")
        error = record_model_failure(store, f"extractor:{name}", exc)
        notify(ModelFallbackWarning(f"the {name} extractor failed ({error}); the turns were "
                                    "stored as notes, nothing was extracted from them"))
        return [], error


def record_model_failure(store: Store, component: str, exc: ModelError) -> str:
    """Log and count a model failure (shown by `health`); returns its message, clipped."""
    log.warning("%s failed, falling back: %s", component, exc)
    with store.transaction():
        store.record_failure(component, str(exc))
    return str(exc)[:500]
