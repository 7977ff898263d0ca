"""Backends: things that answer prompts. ``make_backend(spec)`` picks one by its prefix.

Specs read ``PREFIX/MODEL``:

- ``openai/MODEL``: any OpenAI-compatible chat completions server (OpenAI, ``vllm serve``,
  llama.cpp's server, Ollama, OpenRouter). Options: ``base_url``, ``api_key_env`` (default
  ``OPENAI_API_KEY``), ``timeout`` and the rest of ``OpenAIBackend``'s keyword arguments.
- ``anthropic/MODEL``: Anthropic's Messages API (text modes only).
- ``hf/<model id or local path>``: a local transformers model (``casebench.backends.hf``).
- ``vllm/<hf id>`` is refused with directions: vllm's offline engine needs a GPU, so it cannot
  be tested here, while ``vllm serve`` speaks the OpenAI API and goes through the tested
  ``openai/`` backend unchanged.

This module also holds the few stdlib-only helpers both HTTP backends share (key lookup,
``Retry-After`` parsing, redaction), so importing ``casebench.backends`` stays light: the SDKs
are imported only when a backend of theirs is made.
"""

from __future__ import annotations

import email.utils
import ipaddress
import os
import re
import time
from importlib import import_module
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from casebench.backends.base import Backend

#: Prefix -> "module:class" of the backend that serves it (imported only when used).
BACKENDS: dict[str, str] = {
    "openai": "casebench.backends.openai:OpenAIBackend",
    "anthropic": "casebench.backends.anthropic:AnthropicBackend",
    "hf": "casebench.backends.hf:HFBackend",
}
#: Prefixes that are recognised but refused, with the reason shown to the user.
REFUSED: dict[str, str] = {
    "vllm": (
        "the 'vllm/' backend (vllm's offline engine) is not available: it runs only on a GPU "
        "and cannot be tested without one. Serve the model with vllm's OpenAI-compatible "
        "server instead and use the openai backend, which is tested against real servers:\n"
        "  vllm serve {model} --port 8000\n"
        "  casebench run --model openai/{model} --base-url http://127.0.0.1:8000/v1 ..."
    ),
}

#: Key used for servers on this machine, which do not check keys (llama.cpp, vllm, Ollama);
#: the SDKs refuse to start without some key.
LOCAL_PLACEHOLDER_KEY = "casebench-local-no-key"


def valid_prefixes() -> list[str]:
    return sorted([*BACKENDS, *REFUSED])


def make_backend(spec: str, **options: Any) -> "Backend":
    """Build the backend a spec names, passing ``options`` to its constructor.

    Raises ``ValueError`` for a malformed spec, an unknown prefix (listing the valid ones) or a
    refused prefix (saying what to use instead).
    """
    if not isinstance(spec, str) or "/" not in spec:
        raise ValueError(
            f"model spec {spec!r} must read PREFIX/MODEL, e.g. openai/gpt-4o-mini; "
            f"valid prefixes: {', '.join(valid_prefixes())}"
        )
    prefix, model = spec.split("/", 1)
    if prefix in REFUSED:
        raise ValueError(REFUSED[prefix].format(model=model or "MODEL"))
    if prefix not in BACKENDS:
        raise ValueError(
            f"unknown backend prefix {prefix!r} in model spec {spec!r}; "
            f"valid prefixes: {', '.join(valid_prefixes())}"
        )
    if not model.strip():
        raise ValueError(f"model spec {spec!r} names no model after {prefix + '/'!r}")
    cls = backend_class(spec)
    # Every backend is built as ``Class(model, **options)`` and names its own spec
    # (``PREFIX/MODEL``), so the factory and the classes cannot disagree.
    try:
        return cls(model, **options)
    except ModuleNotFoundError as e:
        from ..extras import missing_extra

        extra = missing_extra(e, what=f"needed by {prefix}/ models")
        if extra is None:
            raise
        raise extra from None


def backend_class(spec: str) -> type:
    """The class that serves a spec's prefix (importing its module; a missing SDK raises
    ``extras.MissingExtra`` naming the extra to install)."""
    prefix = spec.split("/", 1)[0]
    if prefix not in BACKENDS:
        raise ValueError(f"unknown backend prefix {prefix!r}; valid prefixes: {', '.join(valid_prefixes())}")
    module_name, class_name = BACKENDS[prefix].split(":")
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as e:
        from ..extras import missing_extra

        extra = missing_extra(e, what=f"needed by {prefix}/ models")
        if extra is None:
            raise
        raise extra from None
    return getattr(module, class_name)


#: Backend options that change how an answer is fetched, never what it says: they may differ
#: between the invocations of one run (recorded per invocation, not compared on resume).
TRANSPORT_OPTIONS: frozenset[str] = frozenset({"base_url", "api_key_env", "timeout", "batch_size", "generation_batch_size",
                                              "max_retries"})


def resolve_options(spec: str, options: dict[str, Any], cls: type | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(answer-changing options, transport options) a backend would be built with: every keyword
    of its constructor, with the user's value or the constructor's default. Answer-changing
    options go into a run's ``Asked`` (so ``--prob-method`` given or left at its default compare
    equal when they mean the same), transport options into the invocation's history. ``cls``: the
    class of a backend built by the caller (default: the class the spec's prefix names)."""
    import inspect

    cls = cls or backend_class(spec)
    params = inspect.signature(cls.__init__).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ValueError(f"backend for {spec!r} does not take option(s) {', '.join(unknown)}")
    answer: dict[str, Any] = {}
    transport: dict[str, Any] = {}
    for name, p in params.items():
        if name in ("self", "model") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = options.get(name, None if p.default is inspect.Parameter.empty else p.default)
        (transport if name in TRANSPORT_OPTIONS else answer)[name] = value
    return answer, transport


# --------------------------------------------------------------------------- shared helpers


class Secret:
    """Holds a key for redaction without ever showing it in a repr, a str or a traceback's
    locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<redacted>"

    __str__ = __repr__


def is_local_url(url: str | None) -> bool:
    """True when ``url`` points at this machine: ``localhost`` (and ``*.localhost``), a loopback
    address, or the unspecified address (``0.0.0.0``/``::``, which connects locally)."""
    if not url:
        return False
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_unspecified


def resolve_api_key(env_var: str, base_url: str | None) -> str:
    """The key from ``env_var``; a placeholder for a local server when it is unset.

    Raises ``ValueError`` naming the variable (never a value) when the key is unset and the
    endpoint is remote.
    """
    key = os.environ.get(env_var, "")
    if key.strip():
        return key.strip()
    if is_local_url(base_url):
        return LOCAL_PLACEHOLDER_KEY
    where = base_url or "the provider's default endpoint"
    raise ValueError(
        f"no API key: the environment variable {env_var} is unset or empty, and {public_url(where)} "
        f"is not a local server. Set {env_var}, or name another variable with --api-key-env."
    )


def public_url(url: str | None) -> str | None:
    """``url`` without user name, password, query string or fragment (places credentials
    hide in)."""
    if url is None:
        return None
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<unparseable url>"
    if not parts.scheme and not parts.netloc:
        return str(url).split("?", 1)[0].split("#", 1)[0]
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    Returns None when the header is missing or unreadable; never negative.
    """
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        import datetime as _dt

        when = when.replace(tzinfo=_dt.timezone.utc)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def retry_after_from_headers(headers: Any) -> float | None:
    """``retry-after-ms`` (OpenAI's finer variant) if present, else ``Retry-After``."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            seconds = float(ms) / 1000.0
            if seconds == seconds and seconds != float("inf"):
                return max(0.0, seconds)
    except (TypeError, ValueError, AttributeError):
        pass
    try:
        return parse_retry_after(headers.get("retry-after"))
    except AttributeError:
        return None


_SECRET_PATTERNS = [
    re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"),
    re.compile(r"(?i)(authorization|x-api-key|api[-_]?key|proxy-authorization)(\"?\s*[:=]\s*\"?)[^\s\"',;}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
]


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with every occurrence of ``secrets`` and anything shaped like a credential
    (``Bearer ...``, ``Authorization: ...``, ``x-api-key=...``, ``sk-...``) replaced by
    ``<redacted>``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "<redacted>")
    text = _SECRET_PATTERNS[0].sub(lambda m: f"{m.group(1)} <redacted>", text)
    text = _SECRET_PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}<redacted>", text)
    text = _SECRET_PATTERNS[2].sub("<redacted>", text)
    return text


def body_excerpt(text: str | None, secrets: tuple[str, ...] = (), limit: int = 200) -> str:
    """A short, single-line, redacted excerpt of a response body for an error message."""
    if not text:
        return "(empty body)"
    one_line = " ".join(str(text).split())
    # Redact before cutting, so a key straddling the cut cannot leak half of itself.
    one_line = redact(one_line, secrets)
    return one_line if len(one_line) <= limit else one_line[:limit] + "..."


def status_is_transient(status: int) -> bool:
    """Worth retrying: 408 (request timeout), 409 (conflict; OpenAI asks to retry), 425, 429,
    and every 5xx. Everything else in 4xx is the caller's mistake."""
    return status in (408, 409, 425, 429) or status >= 500
