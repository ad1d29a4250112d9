"""Query embedders for haiku.rag databases: their embedder record -> one we can run.

- ``sentence-transformers`` ``all-MiniLM-L6-v2`` (384) -> our offline ONNX MiniLM, the
  fp32 variant (``onnx:all-MiniLM-L6-v2-exact``): re-embedding the 311 stored chunk
  texts of the haiku.rag 0.101.1 fixture gives cosine 0.9995 mean (0.9990 min) to the
  stored vectors, and every chunk's nearest stored vector is its own
  (``bench/haiku_vectors.py``; the int8 default variant: 0.9973 mean, 0.9939 min).
- ``ollama`` / ``openai`` / ``vllm`` / ``cohere`` / ``voyageai`` / other
  sentence-transformers models -> the pydantic-ai embedder of that name, usable where
  it is configured (API key, base URL, installed SDK).

Nothing is guessed silently: an embedder we cannot run is a one-line error that names
what the database was built with and offers keyword-only search instead. This is
knowledge of haiku.rag's records (its names, its default servers), not of running
models, and it works on names alone (embed/names.py): reading a haiku.rag.yaml uses it
before any model library is loaded.
"""

from __future__ import annotations

import logging
import os
import re

from mcp_analysis.embed.names import MINILM_DIMENSION, MINILM_EXACT, known_dimension
from mcp_analysis.errors import DatabaseMismatchError, EmbedderError

log = logging.getLogger(__name__)

_MINILM_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
KEYWORD_HINT = (
    "or search by keywords only (full-text index, no vectors): set `search.mode: keyword` in the config or "
    "MCP_ANALYSIS_SEARCH__MODE=keyword"
)


def mapped_embedder(provider: str, name: str, vector_dim: int) -> str:
    """Our embedder name for a haiku.rag embedder record (see module docs)."""
    if provider == "sentence-transformers" and name.lower() in _MINILM_NAMES and vector_dim == MINILM_DIMENSION:
        return MINILM_EXACT
    return f"{provider}:{name}"


def choose_query_embedder(provider: str, name: str, vector_dim: int, location: str, configured: str | None) -> str:
    """The embedder for queries: the configured one if compatible, else the mapped one."""
    mapped = mapped_embedder(provider, name, vector_dim)
    if configured is None or configured == mapped:
        return mapped
    dimension = known_dimension(configured)
    if dimension is not None and dimension != vector_dim:
        raise DatabaseMismatchError(
            f"{location} was built by haiku.rag with {provider} '{name}' ({vector_dim}-dim vectors); the configured "
            f"embedder '{configured}' makes {dimension}-dim ones. Unset `embedder` (queries then use '{mapped}'), "
            "or configure an embedder with the database's dimension."
        )
    log.warning(
        "%s was built with %s '%s'; queries use the configured embedder '%s' instead. Results are only right if "
        "it produces the same vectors.",
        location,
        provider,
        name,
        configured,
    )
    return configured


def unavailable(
    provider: str, name: str, vector_dim: int, location: str, query_embedder: str, exc: Exception
) -> EmbedderError:
    """One line: what the database was built with, why we cannot embed queries like it, what to do."""
    reason = re.sub(r"\s+", " ", str(exc)).strip().rstrip(".") + "."
    return EmbedderError(
        f"{location} was built by haiku.rag with {provider} '{name}' ({vector_dim}-dim vectors), and its query "
        f"embedder '{query_embedder}' cannot be used here: {reason} Configure that embedder (API key / base URL / "
        f"package), {KEYWORD_HINT}."
    )


def default_base_url(embedder: str) -> str | None:
    """haiku.rag's default server for Ollama ($OLLAMA_BASE_URL or localhost) and vLLM (localhost:8000)."""
    provider = embedder.partition(":")[0]
    if provider == "ollama":
        return os.environ.get("OLLAMA_BASE_URL") or "http://localhost:11434"
    if provider == "vllm":
        return os.environ.get("VLLM_BASE_URL") or "http://localhost:8000/v1"
    return None
