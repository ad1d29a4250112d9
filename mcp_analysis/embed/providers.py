"""pydantic-ai providers with an explicit base URL (Ollama, vLLM, OpenAI-compatible servers).

pydantic-ai reads base URLs from the environment (``OLLAMA_BASE_URL``, ...); haiku.rag
configs carry them in the file (``embeddings.model.base_url``,
``providers.ollama.base_url``, ``analysis.model.base_url``). This turns such a URL into
the ``provider_factory`` that ``infer_model`` / ``infer_embedding_model`` accept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Providers that speak the OpenAI API at a configurable URL ending in /v1.
OPENAI_COMPATIBLE = ("ollama", "vllm", "openai")


def v1_url(url: str) -> str:
    """haiku.rag appends /v1 to Ollama and vLLM base URLs; so do we."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def provider_factory(base_url: str | None) -> Callable[[str], Any]:
    """A factory giving OpenAI-compatible providers `base_url`; any other provider as pydantic-ai infers it."""
    from pydantic_ai.providers import infer_provider, infer_provider_class

    def make(provider: str) -> Any:
        if base_url and provider in OPENAI_COMPATIBLE:
            url = base_url.rstrip("/") if provider == "openai" else v1_url(base_url)
            return infer_provider_class(provider)(base_url=url)
        return infer_provider(provider)

    return make
