"""Reading a haiku.rag config file (``haiku.rag.yaml``) as mcp-analysis settings.

Only the parts that matter to serving and analysing a knowledge base are used:

    analysis.model {provider, name, base_url}  -> analysis.model (+ analysis.base_url)
                                                   (haiku.rag falls back to qa.model; so do we)
    analysis.code_timeout                        -> sandbox.code_timeout
    analysis.max_output_chars                    -> sandbox.max_output_chars
    analysis.max_executions                      -> analysis.max_executions
    embeddings.model {provider, name, vector_dim, base_url}
                                                 -> embedder (+ embedder_base_url)
    providers.ollama.base_url                    -> the base URL of Ollama models
    search.limit, search.max_context_chars       -> search.limit, search.max_context_chars
    storage.data_dir / lancedb.uri               -> db (data_dir/haiku.rag.lancedb, as haiku.rag)

Every other haiku.rag key is ignored with one note on stderr, never an error. A file
is read this way when it is named ``haiku.rag.yaml`` (or ``*.haiku.rag.yaml``) or
when it has haiku.rag-only sections; a file mixing both formats is an error, so our
own format keeps rejecting unknown keys. ``${VAR}`` / ``${VAR:-default}`` references
are expanded as haiku.rag does.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from mcp_analysis.errors import ConfigError
from mcp_analysis.haiku.embedders import mapped_embedder

log = logging.getLogger(__name__)

HAIKU_SECTIONS = frozenset(
    {
        "environment",
        "storage",
        "lancedb",
        "embeddings",
        "reranking",
        "qa",
        "analysis",
        "processing",
        "search",
        "doctor",
        "providers",
        "prompts",
        "ingester",
        "evaluations",
    }
)
OUR_SECTIONS = frozenset({"db", "embedder", "embedder_base_url", "ingest", "sandbox", "sessions", "server"})
_HAIKU_ONLY = HAIKU_SECTIONS - {"analysis", "search"}
_MODEL_PROVIDERS = {"gemini": "google"}  # haiku.rag provider name -> pydantic-ai's
_ENV_REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_noted: set[str] = set()


def is_haiku_config(data: dict[str, Any], path: Path) -> bool:
    """Explicitly one format or the other; a mix is an error that names the keys."""
    keys = set(data)
    by_name = path.name.endswith(("haiku.rag.yaml", "haiku.rag.yml"))
    theirs = keys & _HAIKU_ONLY
    ours = keys & OUR_SECTIONS
    analysis = data.get("analysis")
    nested_model = isinstance(analysis, dict) and isinstance(analysis.get("model"), dict)
    if (by_name or theirs or nested_model) and ours:
        raise ConfigError(
            f"Config file {path} mixes mcp-analysis settings ({', '.join(sorted(ours))}) with haiku.rag ones "
            f"({', '.join(sorted(theirs or {'analysis.model'}))}). Use one format per file: pass the haiku.rag.yaml "
            "as it is, and put mcp-analysis settings in an mcp-analysis.yaml, the environment or flags."
        )
    return bool(by_name or theirs or nested_model)


def _expand(value: Any, path: Path) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, path) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, path) for v in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if os.environ.get(name, ""):
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"Config file {path} references ${{{name}}}, which is unset or empty.")

    return _ENV_REF.sub(replace, value)


def _shape(value: Any) -> str:
    """A config value described without its content: ${VAR}s are expanded by now, and may be secrets."""
    if isinstance(value, dict):
        keys = ", ".join(f"{k} ({'empty' if not v else 'set'})" for k, v in value.items())
        return f"a mapping with {keys}" if keys else "an empty mapping"
    return f"a {type(value).__name__}"


def haiku_data_dir() -> Path:
    """haiku.rag's default storage.data_dir on this platform."""
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "haiku.rag"
    if sys.platform == "win32":
        return home / "AppData" / "Roaming" / "haiku.rag"
    return home / ".local" / "share" / "haiku.rag"


def find_config_file() -> Path | None:
    """haiku.rag's own config lookup: $HAIKU_RAG_CONFIG_PATH, ./haiku.rag.yaml, its data directory."""
    env = os.environ.get("HAIKU_RAG_CONFIG_PATH")
    if env:
        return Path(env).expanduser()
    for candidate in (Path.cwd() / "haiku.rag.yaml", haiku_data_dir() / "haiku.rag.yaml"):
        if candidate.exists():
            return candidate
    return None


def ollama_base_url(data: dict[str, Any] | None = None) -> str:
    """haiku.rag's Ollama URL: providers.ollama.base_url, else $OLLAMA_BASE_URL, else localhost."""
    configured = (((data or {}).get("providers") or {}).get("ollama") or {}).get("base_url")
    return configured or os.environ.get("OLLAMA_BASE_URL") or "http://localhost:11434"


def _section(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"Config file {path}: haiku.rag section '{key}' must be a mapping, not {_shape(value)}.")
    return value


def translate(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """Our settings from a haiku.rag config (see module docs); notes what is ignored."""
    data = _expand(raw, path)
    out: dict[str, Any] = {}
    ignored: list[str] = []
    used: dict[str, set[str]] = {}

    def take(section: str, key: str) -> Any:
        used.setdefault(section, set()).add(key)
        return _section(data, section, path).get(key)

    # analysis.model, else qa.model (haiku.rag's fallback)
    model = take("analysis", "model")
    if model is None and isinstance(_section(data, "qa", path).get("model"), dict):
        model = take("qa", "model")
    if model is not None:
        if not isinstance(model, dict) or not model.get("provider") or not model.get("name"):
            raise ConfigError(f"Config file {path}: analysis.model needs provider and name, got {_shape(model)}.")
        provider = str(model["provider"])
        out.setdefault("analysis", {})["model"] = f"{_MODEL_PROVIDERS.get(provider, provider)}:{model['name']}"
        base_url = model.get("base_url") or (ollama_base_url(data) if provider == "ollama" else None)
        if base_url:
            out["analysis"]["base_url"] = str(base_url)
        ignored += [f"model.{k}" for k in model if k not in ("provider", "name", "base_url") and model[k]]
    for key, (section, ours) in {
        "code_timeout": ("sandbox", "code_timeout"),
        "max_output_chars": ("sandbox", "max_output_chars"),
        "max_executions": ("analysis", "max_executions"),
    }.items():
        value = take("analysis", key)
        if value is not None:
            out.setdefault(section, {})[ours] = value

    # embeddings.model -> the embedder of queries (and of nothing else: we never write their database)
    embedding = take("embeddings", "model")
    if embedding is not None:
        if not isinstance(embedding, dict) or not embedding.get("provider") or not embedding.get("name"):
            raise ConfigError(f"Config file {path}: embeddings.model needs provider and name, got {_shape(embedding)}.")
        provider = str(embedding["provider"])
        out["embedder"] = mapped_embedder(provider, str(embedding["name"]), int(embedding.get("vector_dim") or 0))
        base_url = embedding.get("base_url") or (ollama_base_url(data) if provider == "ollama" else None)
        if base_url:
            out["embedder_base_url"] = str(base_url)
        ignored += [f"embeddings.model.{k}" for k in embedding if k == "multimodal" and embedding[k]]

    for key in ("limit", "max_context_chars"):
        value = take("search", key)
        if value is not None:
            out.setdefault("search", {})[key] = value

    # where the database is: haiku.rag's default location unless lancedb.uri names one
    uri = take("lancedb", "uri")
    data_dir = take("storage", "data_dir")
    if uri:
        out["db"] = str(uri)
    else:
        out["db"] = str(Path(str(data_dir)).expanduser() if data_dir else haiku_data_dir()) + "/haiku.rag.lancedb"
    take("providers", "ollama")

    for section, value in data.items():
        if section not in HAIKU_SECTIONS:
            ignored.append(section)
        elif section in used and isinstance(value, dict):
            ignored += [f"{section}.{k}" for k in value if k not in used[section]]
        elif section not in used:
            ignored.append(section)
    if ignored:
        note = (
            f"note: {path}: reading it as a haiku.rag config; mcp-analysis ignores the haiku.rag settings "
            f"{', '.join(ignored)} (it uses analysis.model/code_timeout/max_output_chars/max_executions, "
            "qa.model when analysis.model is not set, embeddings.model, providers.ollama.base_url, "
            "search.limit/max_context_chars, storage.data_dir, lancedb.uri)."
        )
        if note not in _noted:
            _noted.add(note)
            log.warning(note)
    return out
