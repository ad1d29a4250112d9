"""One settings model, read from (highest precedence first):

1. CLI flags (passed as init arguments),
2. environment variables ``MCP_ANALYSIS_*`` (nested keys with ``__``, e.g.
   ``MCP_ANALYSIS_SEARCH__LIMIT=10``); for the database path also ``HAIKU_RAG_DB``,
3. a YAML file: ``--config``, else ``$MCP_ANALYSIS_CONFIG``, else ``./mcp-analysis.yaml``,
4. defaults.

Unknown keys anywhere are an error that names the key. A haiku.rag config file
(``haiku.rag.yaml``) is read too: the parts that matter here are translated and the
rest ignored with a note (see haiku/config_file.py).

Where files live by default (`data_home`, `cache_home`) is paths.py, and the default
embedder's name embed/names.py: both leaves, so reading settings loads no model library.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mcp_analysis.agent.settings import AnalysisSettings
from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.embed.names import DEFAULT_EMBEDDER
from mcp_analysis.errors import ConfigError
from mcp_analysis.haiku import config_file as haiku_config_file
from mcp_analysis.ingest.limits import IngestSettings
from mcp_analysis.paths import data_home
from mcp_analysis.sandbox.settings import SandboxSettings
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.server.settings import ServerSettings
from mcp_analysis.session.settings import SessionSettings
from mcp_analysis.watch.settings import WatchSettings

CONFIG_ENV = "MCP_ANALYSIS_CONFIG"
DEFAULT_CONFIG_FILE = "mcp-analysis.yaml"


class _YamlSource(PydanticBaseSettingsSource):
    """The YAML config file; a missing default file is fine, a missing explicit one is not."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None, explicit: bool) -> None:
        super().__init__(settings_cls)
        self._data: dict[str, Any] = {}
        if path is None:
            return
        if not path.exists():
            if explicit:
                raise ConfigError(f"Config file {path} does not exist.")
            return
        from mcp_analysis.yaml_files import load_yaml

        loaded = load_yaml(path)
        if loaded is None:
            return
        if not isinstance(loaded, dict):
            raise ConfigError(f"Config file {path} must hold a mapping of settings, not {type(loaded).__name__}.")
        if haiku_config_file.is_haiku_config(loaded, path):
            loaded = haiku_config_file.translate(loaded, path)
        self._data = loaded

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class _HaikuDbSource(PydanticBaseSettingsSource):
    """``HAIKU_RAG_DB`` as a lower-precedence alias of ``MCP_ANALYSIS_DB``."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        value = os.environ.get("HAIKU_RAG_DB")
        return {"db": value} if value else {}


def db_location(value: Any) -> Any:
    """Local paths become Paths; URIs (s3://b/p, gs://, az://, memory://) stay text, unmangled."""
    if isinstance(value, str) and "://" not in value:
        return Path(value).expanduser()
    if isinstance(value, Path):
        return value.expanduser()
    if isinstance(value, str):
        return value.strip()
    return value


class Settings(BaseSettings):
    """All settings of mcp-analysis. Documented in docs/configuration.md."""

    model_config = SettingsConfigDict(
        env_prefix="MCP_ANALYSIS_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    db: Path | str = Field(
        default_factory=lambda: data_home() / "kb.lancedb",
        description="Knowledge base: a local path, or an object-store URI such as s3://BUCKET/PREFIX (kept as text).",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Object-store options passed to LanceDB (e.g. aws_endpoint, allow_http, region); "
        "the standard AWS_* variables are read too.",
    )
    embedder: str = Field(DEFAULT_EMBEDDER, description="Embedding model, `provider:name`.")
    embedder_base_url: str | None = Field(None, description="Server of an Ollama / vLLM / OpenAI-compatible embedder.")
    search: SearchSettings = Field(default_factory=SearchSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    charts: ChartSettings = Field(default_factory=ChartSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    analysis: AnalysisSettings = Field(default_factory=AnalysisSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)

    # Set by load_settings; not a user setting.
    _config_path: Path | None = None

    @property
    def config_file(self) -> Path | None:
        """The configuration file these settings were read from (None when none was): never ingested."""
        return self._config_path

    def read_from(self, path: Path) -> None:
        """Remember the configuration file these settings were read from (`load_settings`)."""
        self._config_path = path.absolute()

    @field_validator("db", mode="before")
    @classmethod
    def _expand_db(cls, value: Any) -> Any:
        return db_location(value)

    @field_validator("storage_options", mode="before")
    @classmethod
    def _stringify_options(cls, value: Any) -> Any:
        """YAML gives booleans and numbers; LanceDB wants every option as text."""
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value

    @field_validator("embedder")
    @classmethod
    def _check_embedder(cls, value: str) -> str:
        if ":" not in value:
            raise ValueError(f"embedder must look like 'provider:model' (e.g. {DEFAULT_EMBEDDER!r}), got {value!r}")
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
        path, explicit = _config_file_choice()
        return (
            init_settings,
            env_settings,
            _HaikuDbSource(settings_cls),
            _YamlSource(settings_cls, path, explicit),
        )


_CONFIG_OVERRIDE: list[Path | None] = [None]


def _config_file_choice() -> tuple[Path | None, bool]:
    if _CONFIG_OVERRIDE[0] is not None:
        return _CONFIG_OVERRIDE[0], True
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser(), True
    return Path.cwd() / DEFAULT_CONFIG_FILE, False


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Build settings from the sources above; `overrides` are CLI flags (None = not given).

    Nested overrides use dicts, e.g. ``search={"limit": 3}``.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    _CONFIG_OVERRIDE[0] = Path(config).expanduser() if config else None
    try:
        if given:
            # Merge nested CLI flags over the lower sources instead of replacing whole sections.
            base = Settings()
            merged = _merge(base.model_dump(exclude_unset=True), given)
            settings = Settings(**merged)
        else:
            settings = Settings()
        path, _ = _config_file_choice()
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
    finally:
        _CONFIG_OVERRIDE[0] = None
    if path is not None and path.is_file():
        settings.read_from(path)
    return settings


def with_db(settings: Settings, db: str | Path) -> Settings:
    """A copy of `settings` on another knowledge base, read as `--db` reads it (URIs stay text, ~ expands)."""
    return settings.model_copy(update={"db": db_location(db)})


def format_validation_error(exc: ValidationError) -> str:
    """One readable line per problem, naming the key (e.g. ``search.limitt``)."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown setting '{key}'")
        else:
            lines.append(f"setting '{key}': {err['msg']}")
    return "Invalid configuration: " + "; ".join(lines)
