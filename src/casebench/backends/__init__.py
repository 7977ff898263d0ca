"""Backends: things that answer prompts. ``make_backend(spec)`` picks one by its prefix.

Specs read ``PREFIX/MODEL``; every backend describes itself once, with ``@backend(...)`` on its
class (``casebench.backends.registry``): its prefix, options, capabilities and price lookup. The
built-in ones:

- ``openai/MODEL``: any OpenAI-compatible chat completions server (OpenAI, ``vllm serve``,
  llama.cpp's server, Ollama, OpenRouter) (``casebench.backends.openai``).
- ``anthropic/MODEL``: Anthropic's Messages API, text modes only (``casebench.backends.anthropic``).
- ``hf/<model id or local path>``: a local transformers model (``casebench.backends.hf``).
- ``vllm/<hf id>`` is refused with directions: vllm's offline engine needs a GPU, so it cannot
  be tested here, while ``vllm serve`` speaks the OpenAI API and goes through the tested
  ``openai/`` backend unchanged.

This package only re-exports: the registry lives in ``registry``, the helpers the HTTP backends
share (key lookup, ``Retry-After`` parsing, redaction) in ``http``, and the one streaming loop of
the SDK backends in ``streaming``. Importing it stays light: the SDKs are imported only when a
backend of theirs is built.
"""

from __future__ import annotations

from .sdk_errors import SDKTransport
from .http import (
    LOCAL_PLACEHOLDER_KEY,
    Secret,
    body_excerpt,
    is_local_url,
    parse_retry_after,
    public_url,
    redact,
    resolve_api_key,
    retry_after_from_headers,
    status_is_transient,
)
from .registry import (
    BackendInfo,
    Option,
    RegistryError,
    backend,
    backend_class,
    backends,
    info_for,
    make_backend,
    register_backend,
    resolve_options,
    transport_option_names,
    valid_prefixes,
)

__all__ = [
    "LOCAL_PLACEHOLDER_KEY", "SDKTransport", "Secret", "body_excerpt", "is_local_url", "parse_retry_after",
    "public_url", "redact", "resolve_api_key", "retry_after_from_headers", "status_is_transient",
    "BackendInfo", "Option", "RegistryError", "backend", "backend_class", "backends",
    "info_for", "make_backend", "register_backend", "resolve_options", "transport_option_names", "valid_prefixes",
]
