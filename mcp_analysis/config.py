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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.embed.names import DEFAULT_EMBEDDER
from mcp_analysis.errors import ConfigError
from mcp_analysis.haiku import config_file as haiku_config_file
from mcp_analysis.ingest.limits import IngestSettings
from mcp_analysis.paths import data_home
from mcp_analysis.redact import ambiguous, redact_url
from mcp_analysis.search.settings import SearchSettings
from mcp_analysis.watch.settings import WatchSettings

CONFIG_ENV = "MCP_ANALYSIS_CONFIG"
DEFAULT_CONFIG_FILE = "mcp-analysis.yaml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SandboxSettings(_Section):
    code_timeout: float = Field(60.0, gt=0, le=3600, description="Wall-clock seconds per execute_code call.")
    max_output_chars: int = Field(50_000, ge=1000, description="stdout+stderr+value kept per call.")
    max_code_chars: int = Field(
        100_000, ge=1000, description="Characters of code one execute_code call may run (it is kept with the session)."
    )
    workers: int = Field(0, ge=0, le=256, description="Interpreter worker processes; 0 = CPU count.")
    max_memory_mb: int = Field(512, ge=16, description="Heap limit of one interpreter.")
    max_state_mb: int = Field(
        64, ge=1, description="Interpreter state (variables) one session keeps between calls, in MB."
    )
    max_recursion_depth: int = Field(1000, ge=50, description="Python call depth limit.")
    max_host_calls: int = Field(
        20_000, ge=100, description="File reads, searches and other host calls allowed per call."
    )
    checkout_timeout: float = Field(30.0, gt=0, description="Seconds to wait for a free worker.")
    idle_release_seconds: float = Field(
        30.0, ge=0, description="An idle session hands its worker back after this long."
    )


class SessionSettings(_Section):
    ttl_seconds: float = Field(3600.0, gt=0, description="Idle analysis sessions expire after this long.")
    persist: bool = Field(True, description="Keep hibernated sessions so they survive restarts.")
    dir: Path | None = Field(None, description="Where hibernated sessions live (default under data home).")
    store: str | None = Field(
        None,
        description="Shared session store for replicas: redis://HOST:PORT/DB (rediss:// for TLS). "
        "Default: the local directory `dir`.",
    )
    secret: SecretStr | None = Field(
        None,
        description="HMAC key signing stored sessions and handles; required (the same on every replica) "
        "with a shared store. Default for the local directory: a key file kept in it.",
    )
    max_sessions: int = Field(
        10_000,
        ge=1,
        description="Live sessions in memory at most (also open legacy HTTP sessions): beyond it, idle ones "
        "kept in the store leave memory; a new session that lives only in memory is refused, never another dropped.",
    )
    max_live_per_client: int = Field(
        100,
        ge=1,
        description="Sessions that live only in memory (legacy HTTP sessions; every session when persist is off) "
        "one client may hold: per bearer principal, else per client address.",
    )
    legacy_unused_ttl_seconds: float = Field(
        30.0, gt=0, description="A legacy HTTP session that has made no call yet ends after this long idle."
    )
    max_memory_mb: int = Field(
        1024,
        ge=16,
        description="Interpreter states all live sessions hold in memory together, in MB (at least "
        "sandbox.max_state_mb), open legacy HTTP sessions included: beyond it, idle sessions kept in the store are "
        "dropped from memory (reloaded on their next call), a session that is not kept in a store cannot grow, "
        "and a call whose session must be loaded waits for room.",
    )
    memory_wait_seconds: float = Field(
        30.0,
        ge=0,
        description="How long a call waits for room under max_memory_mb to load its session before it is refused.",
    )
    max_stored: int = Field(10_000, ge=1, description="Kept (persisted) sessions in total at most.")
    max_stored_mb: int = Field(
        4096,
        ge=1,
        description="Size of all kept sessions together in the store (disk, or Redis memory), in MB "
        "(at least sandbox.max_state_mb).",
    )
    max_per_principal: int = Field(
        1000, ge=1, description="Kept sessions per bearer principal at most (anonymous clients: only max_stored)."
    )
    lock_timeout: float = Field(
        30.0, gt=0, description="Shared store: seconds a call waits while another replica runs the same session."
    )
    encrypt: bool = Field(
        True,
        description="Shared store: encrypt kept sessions (state and interpreter dump) with AES-GCM, so a reader "
        "of Redis (or of its snapshots) learns nothing of them.",
    )
    encryption_key: SecretStr | None = Field(
        None,
        description="Key of that encryption (16+ characters, the same on every replica). Default: derived "
        "from sessions.secret.",
    )
    previous_encryption_keys: list[SecretStr] = Field(
        default_factory=list,
        description="Keys sessions may still be encrypted with after encryption_key changed (read, never "
        "written); drop them after sessions.ttl_seconds.",
    )

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"sessions.store must be a Redis URL such as redis://HOST:6379/0 (or unset for the local "
                f"directory), got {redact_url(value)!r}"
            )
        if ambiguous(value):
            raise ValueError(
                f"sessions.store ({redact_url(value)}) cannot be split into password and host for sure: "
                "percent-encode the characters / ? # and spaces in its password (%2F, %3F, %23, %20; "
                "@ and : may stay), e.g. redis://:p%2Fss@HOST:6379/0, or pass the password as "
                "?password=... percent-encoded"
            )
        return value

    @model_validator(mode="after")
    def _shared_store_needs_secret(self) -> SessionSettings:
        if self.store and self.secret is None:
            raise ValueError(missing_secret_message(self.store))
        if self.store and not self.persist:
            raise ValueError(
                "sessions.persist is false but sessions.store is set: replicas sharing a store keep every "
                "session there. Unset sessions.store to keep sessions in memory only, or drop persist: false."
            )
        if self.secret is not None and len(self.secret.get_secret_value()) < 16:
            raise ValueError("sessions.secret must be at least 16 characters (use 32+ random ones)")
        for key in (self.encryption_key, *self.previous_encryption_keys):
            if key is not None and len(key.get_secret_value()) < 16:
                raise ValueError(
                    "sessions.encryption_key and previous_encryption_keys must be at least 16 characters "
                    "(use 32+ random ones)"
                )
        return self


def missing_secret_message(store: str) -> str:
    return (
        f"sessions.store is shared ({redact_url(store)}) but sessions.secret is not set: every replica must sign "
        "sessions with the same key. Set MCP_ANALYSIS_SESSIONS__SECRET (or sessions.secret in the config file) "
        "to one random value of 32+ characters on every replica, e.g. the output of "
        "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
    )


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    path: str = "/mcp"
    filter: str | None = Field(None, description="SQL WHERE scoping everything the server exposes.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host headers accepted over HTTP.")
    allowed_origins: list[str] = Field(default_factory=list, description="Extra Origin headers accepted.")
    tokens_file: Path | None = Field(None, description="Bearer tokens with per-token filters (HTTP).")
    max_result_chars: int = Field(
        48_000, ge=2000, description="Budget of one tool result (text + structured); fits a 25k-token host limit."
    )
    resource_page_size: int = Field(500, ge=1, le=10_000)
    max_table_resource_chars: int = Field(
        16_000_000,
        ge=1000,
        description="Characters of CSV one read of a documents:///{id}/tables/{n}.csv resource may return; a "
        "larger table is refused (from its stored size, before it is decompressed): read it in execute_code.",
    )
    watch_interval: float = Field(2.0, gt=0, description="Seconds between checks for added documents.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    resume_buffer_mb: int = Field(
        32, ge=0, le=4096, description="Memory for SSE events a reconnecting HTTP client may resume from (0: none)."
    )
    resume_seconds: float = Field(300.0, gt=0, description="How long an SSE event can be resumed from.")
    host_log_per_minute: int = Field(
        30, ge=1, le=10_000, description="notifications/message one client connection is sent per minute at most."
    )


class AnalysisSettings(_Section):
    model: str = Field("anthropic:claude-sonnet-4-20250514", description="pydantic-ai model for `analyze`.")
    max_executions: int = Field(15, ge=1, le=200, description="execute_code calls per analysis.")
    max_requests: int = Field(40, ge=2, le=500, description="Model requests per analysis.")
    base_url: str | None = Field(None, description="Server of an Ollama / vLLM / OpenAI-compatible analysis model.")


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
