"""Configuration in one place: `SITUATED_*` environment variables and an optional TOML file.

`Settings` (pydantic-settings) holds what a deployment chooses once: the database, the embedder
and its endpoint, the reconstructor and its endpoint, and the default principal. Each value is
taken from, in order (the first that sets it wins):

1. what the caller passes (`Memory(...)` arguments, CLI options);
2. the environment: `SITUATED_<FIELD>`, e.g. `SITUATED_EMBEDDER_MODEL`;
3. `situated.toml` in the working directory (keys in lower case, e.g. `embedder_model = "..."`);
4. the `[tool.situated]` table of `pyproject.toml` in the working directory (the same keys);
5. the defaults below.

Nothing is read at import: `load_settings()` reads the environment and the file each time it
is called (`Memory` calls it when an argument is left to the settings, the CLI once per
command). A bad value or an unknown key is an `InvalidInput` naming it. The `openai` client
still reads `OPENAI_BASE_URL` and `OPENAI_API_KEY` when no base URL or key is set here.
"""

from __future__ import annotations

import tomllib
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    PyprojectTomlConfigSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from situated.defaults import (
    ENDPOINT_DISTILLERS,
    ENDPOINT_EMBEDDERS,
    ENDPOINT_EXTRACTORS,
    ENDPOINT_RECONSTRUCTORS,
)
from situated.errors import InvalidInput

ENV_PREFIX = "SITUATED_"
TOML_FILE = "situated.toml"
PYPROJECT_TABLE = ("tool", "situated")

_ENDPOINT_OPTIONS = ("base_url", "model", "api_key", "timeout", "max_retries")


class Settings(BaseSettings):
    """What a deployment configures once; every field is optional.

    Attributes:
        db: the SQLite file, or a `postgresql://` connection string (`SITUATED_DB`).
        embedder: embedder name (`SITUATED_EMBEDDER`): `minilm-static` (default), `hash`,
            `openai` or a plugin; the CLI defaults to the one a store was created with.
        embedder_base_url, embedder_model, embedder_api_key, embedder_timeout,
            embedder_max_retries: the `openai` embedder's endpoint (`SITUATED_EMBEDDER_MODEL`,
            ...); without a base URL or key, `OPENAI_BASE_URL` / `OPENAI_API_KEY`.
        reconstructor: `rules` (default), `learned`, `llm` or a plugin
            (`SITUATED_RECONSTRUCTOR`).
        reconstructor_base_url, reconstructor_model, reconstructor_api_key,
            reconstructor_timeout, reconstructor_max_retries: the `llm` reconstructor's
            endpoint.
        distiller: `rules` (default), `llm` or a plugin (`SITUATED_DISTILLER`): how `learn`
            distils a trajectory.
        distiller_base_url, distiller_model, distiller_api_key, distiller_timeout,
            distiller_max_retries: the `llm` distiller's endpoint, also used by the `llm`
            conversation extractor.
        extractor: `none` (default: turns are stored as notes only), `llm` or a plugin
            (`SITUATED_EXTRACTOR`): what `add_conversation` proposes from the turns.
        tenant, roles, clearance, actor: the default principal of CLI commands
            (`SITUATED_ROLES` is space- or comma-separated; in TOML, a list).
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        toml_file=TOML_FILE,
        pyproject_toml_table_header=PYPROJECT_TABLE,
        validate_default=False,
    )

    db: str | None = None
    embedder: str | None = None
    embedder_base_url: str | None = None
    embedder_model: str | None = None
    embedder_api_key: SecretStr | None = None
    embedder_timeout: float | None = Field(default=None, gt=0)
    embedder_max_retries: int | None = Field(default=None, ge=0, le=10)
    reconstructor: str | None = None
    reconstructor_base_url: str | None = None
    reconstructor_model: str | None = None
    reconstructor_api_key: SecretStr | None = None
    reconstructor_timeout: float | None = Field(default=None, gt=0)
    reconstructor_max_retries: int | None = Field(default=None, ge=0, le=10)
    distiller: str | None = None
    distiller_base_url: str | None = None
    distiller_model: str | None = None
    distiller_api_key: SecretStr | None = None
    distiller_timeout: float | None = Field(default=None, gt=0)
    distiller_max_retries: int | None = Field(default=None, ge=0, le=10)
    extractor: str | None = None
    tenant: str | None = None
    roles: Annotated[tuple[str, ...] | None, NoDecode] = None
    clearance: str | None = None
    actor: str | None = None

    @field_validator("roles", mode="before")
    @classmethod
    def _split_roles(cls, value: Any) -> Any:
        if isinstance(value, str):  # the environment: "support billing" or "support,billing"
            return tuple(r for r in value.replace(",", " ").split() if r)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, the environment, `situated.toml`, then `[tool.situated]`."""
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls),
            PyprojectTomlConfigSettingsSource(settings_cls),
        )

    def embedder_options(self, name: str) -> dict[str, Any]:
        """The `embedder_*` endpoint settings, as keyword arguments for embedder `name`
        (only for the `openai` embedder or the embedder the settings name)."""
        return self._options("embedder", name, ENDPOINT_EMBEDDERS, self.embedder)

    def reconstructor_options(self, name: str) -> dict[str, Any]:
        """The `reconstructor_*` endpoint settings, as keyword arguments for reconstructor
        `name` (only for `llm` or the reconstructor the settings name)."""
        return self._options("reconstructor", name, ENDPOINT_RECONSTRUCTORS, self.reconstructor)

    def distiller_options(self, name: str) -> dict[str, Any]:
        """The `distiller_*` endpoint settings for distiller `name` (only for `llm` or the
        distiller the settings name)."""
        return self._options("distiller", name, ENDPOINT_DISTILLERS, self.distiller)

    def extractor_options(self, name: str) -> dict[str, Any]:
        """The `distiller_*` endpoint settings for conversation extractor `name` (only for
        `llm` or the extractor the settings name): one write-side model serves both."""
        return self._options("distiller", name, ENDPOINT_EXTRACTORS, self.extractor)

    def _options(
        self, kind: str, name: str, takers: frozenset[str], chosen: str | None
    ) -> dict[str, Any]:
        if name not in takers and name != chosen:
            return {}
        out: dict[str, Any] = {}
        for option in _ENDPOINT_OPTIONS:
            value = getattr(self, f"{kind}_{option}")
            if value is not None:
                out[option] = value.get_secret_value() if isinstance(value, SecretStr) else value
        return out


def where(kind: str, option: str) -> str:
    """Where a setting can be given, for error messages: `SITUATED_EMBEDDER_MODEL or
    embedder_model in situated.toml`."""
    key = f"{kind}_{option}"
    return f"{ENV_PREFIX}{key.upper()} or {key} in {TOML_FILE}"


def load_settings(**overrides: Any) -> Settings:
    """Read the settings now: `overrides` (None values ignored), the environment, the file.

    Raises:
        InvalidInput: a value does not validate or a key is unknown (named), or the TOML
            file cannot be parsed.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = f"is not a setting (settings: {', '.join(Settings.model_fields)})"
        raise InvalidInput(
            f"settings.{loc}",
            f"{msg} (from the arguments, {ENV_PREFIX}{loc.upper()}, {TOML_FILE} or "
            "[tool.situated] in pyproject.toml)",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{TOML_FILE} or pyproject.toml", f"is not valid TOML: {exc}") from None
