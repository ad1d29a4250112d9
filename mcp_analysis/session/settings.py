"""The `sessions` settings: expiry, keeping, capacity and the shared store's key and encryption.

A leaf (pydantic and redact.py only), like search/settings.py: config.py attaches
`SessionSettings` as the `sessions` section.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mcp_analysis.redact import ambiguous, redact_url


class SessionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

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
    lock_lease_seconds: float = Field(
        10.0,
        ge=3,  # renewals come on the upkeep loop's 1 s ticks: a shorter lease could lapse between two
        le=3600,
        description="Shared store: how long a session's lock lasts without renewal (renewed every 3 s, or every "
        "third of it when shorter, while its call runs; at least 3 s): a killed replica's sessions are free "
        "again after this.",
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
