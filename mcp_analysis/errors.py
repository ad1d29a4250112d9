"""User-facing errors.

Every exception here carries a message that says what went wrong and what to do
about it. The CLI prints it on one line and exits non-zero; the MCP layer turns
it into a tool error the model can act on. Anything else escaping is a bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterator


class AnalysisError(Exception):
    """Base class: the message is written for the person (or model) who caused it."""


class ConfigError(AnalysisError):
    """The configuration file, environment or flags are invalid."""


class DatabaseNotFoundError(AnalysisError):
    """No knowledge base exists at the configured path."""


class DatabaseMismatchError(AnalysisError):
    """The database was built with another embedder or schema version."""


class DatabaseDamagedError(AnalysisError):
    """A knowledge base's tables or files are missing or unreadable (a partial copy, a full disk)."""


class FilterError(AnalysisError):
    """A document filter (SQL WHERE over document metadata) is invalid."""


class DocumentNotFoundError(AnalysisError):
    """No visible document has this id (it may not exist or be outside the filter)."""


class EmbedderError(AnalysisError):
    """The embedding model could not be loaded or failed to embed."""


class IngestError(AnalysisError):
    """A file could not be ingested."""


class SecretFileError(IngestError):
    """The file is a secret (a private key), never a document (ingest/secrets.py)."""


class UnsupportedFormatError(IngestError):
    """The file's format is not one we can read."""


class IngestLimitError(IngestError):
    """A file exceeds a per-file bound (size, time, memory, items, depth); the message names the setting."""


class SandboxError(AnalysisError):
    """The sandbox could not run the code (not an error *in* the code)."""


class TableTooLargeError(AnalysisError):
    """A table's CSV is larger than one read may bring: found from its stored size before it is
    decompressed (or while, for tables stored without it); the reader names its setting."""

    def __init__(self, measure: str, limit: int) -> None:
        super().__init__(f"the table's CSV is {measure}, over the {limit:,} characters a read may bring")
        self.measure, self.limit = measure, limit  # measure: "31,993,402 characters", "more than 4,000 bytes"


class ChartError(AnalysisError):
    """A chart spec was refused (unsafe or too large) or could not be rendered."""


class SessionNotFoundError(AnalysisError):
    """An analysis session handle is unknown or expired."""


class CitationError(AnalysisError):
    """None of the chunk ids given to cite() could be resolved."""


class ModelConfigError(AnalysisError):
    """The LLM for `analyze` is not configured or not reachable."""


class ReadOnlyDatabaseError(AnalysisError):
    """The knowledge base is served read-only (it was written by another application)."""


class StorageUnavailableError(AnalysisError):
    """The knowledge base's object store (S3 or compatible) cannot be reached right now; retryable."""


class SessionBusyError(AnalysisError):
    """Another call (maybe on another replica) is running or changed this session; retry the call."""


class SessionStoreError(AnalysisError):
    """The shared session store (Redis) cannot be reached right now; retryable."""


class SessionLimitError(AnalysisError):
    """Too many kept sessions (per principal or in total)."""


_S3_ERROR = re.compile(r"<Code>(\w+)</Code>\s*(?:<Message>([^<]*)</Message>)?")
_NO_CREDENTIALS = ("CredentialsNotLoaded", "no providers in chain provided credentials")  # the AWS SDK's words
_CREDENTIALS_REFUSED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken"}


def exception_leaves(exc: BaseException) -> Iterator[BaseException]:
    """The failures inside `exc`: itself, or each one its (nested) exception groups hold (reads run at once,
    such as a search's two legs, fail together as a group)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from exception_leaves(inner)
    else:
        yield exc


_RUST_PLACE = re.compile(r",?\s*/(?:rustc|home|root|usr)/\S+\.rs:\d+(?::\d+)?")


def damaged_database_message(location: str, what: str) -> str:
    """`what` went wrong reading a local knowledge base's files: what it means and what to do."""
    return (
        f"The knowledge base at {location} is damaged: {what} (a partial copy, a disk that filled up, a file "
        "deleted by hand?); nothing was changed. Restore the folder from a copy, or build it again in a new "
        "folder (`mcp-analysis --db NEW_FOLDER add PATH`; a haiku.rag database with `haiku-rag rebuild`)."
    )


def lance_read_failure(exc: BaseException) -> str:
    """A Lance I/O error's own words, without the Rust source place it ends with."""
    detail = _RUST_PLACE.sub("", " ".join(str(exc).split()))
    return detail if len(detail) <= 300 else detail[:300] + " ..."


def storage_error_message(location: str, exc: BaseException) -> str:
    detail = " ".join(str(exc).split())
    if any(said in detail for said in _NO_CREDENTIALS):  # nothing was sent: retrying cannot help
        return (
            f"The knowledge base at {location} cannot be opened: no credentials for the object store were "
            "found. Set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or storage_options)."
        )
    answer = _S3_ERROR.search(detail)  # the store's own verdict, deep inside LanceDB's error text
    if answer:
        code, said = answer.group(1), (answer.group(2) or "").strip()
        verdict = f"{code}: {said}" if said else code
        if code == "NoSuchBucket":
            bucket = location.split("://", 1)[-1].split("/", 1)[0]
            return (
                f"The knowledge base at {location} cannot be opened: the object store has no bucket '{bucket}' "
                f"({verdict}). Create the bucket first (mcp-analysis creates the prefix, not the bucket), or fix "
                "the bucket name in --db / MCP_ANALYSIS_DB, or the endpoint (AWS_ENDPOINT_URL, storage_options)."
            )
        if code in _CREDENTIALS_REFUSED:
            return (
                f"The knowledge base at {location} cannot be opened: the object store refused the credentials "
                f"({verdict}). Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or storage_options) and the "
                "bucket's permissions."
            )
        detail = f"{verdict}; {detail}"
    if len(detail) > 300:
        detail = detail[:300] + " ..."
    return (
        f"The knowledge base at {location} cannot be read right now (object storage unreachable or failing: "
        f"{detail}). Retry shortly; check the store's endpoint and credentials (AWS_ENDPOINT_URL, "
        "AWS_ACCESS_KEY_ID, storage_options) if this persists."
    )
