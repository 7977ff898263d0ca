"""Helpers the HTTP backends share (stdlib only): API key lookup, ``Retry-After`` parsing and
redaction of credentials. ``SDKTransport`` (in ``sdk_errors``) is the one way an SDK backend and
the batch path send a request and turn every SDK failure into a casebench transport error.

Importing this module stays light: the SDKs are imported only by the backend that uses them.
"""

from __future__ import annotations

import email.utils
import ipaddress
import os
import re
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .registry import Option
from .urls import check_base_url, url_as_given, url_problem  # noqa: F401  (re-exported: the HTTP backends' check)


#: The options the HTTP backends share (``openai/``, ``anthropic/``): one flag each on the CLI.
BASE_URL = Option("base_url", "API endpoint (OpenAI-compatible servers, Anthropic proxies): an http(s) URL with a "
                  "host.", type="url", metavar="URL", answers=False)
API_KEY_ENV = Option("api_key_env", "Name of the environment variable holding the API key (the key itself is "
                     "never logged).", metavar="VAR", answers=False)
TIMEOUT = Option("timeout", "Seconds per API request (default 60).", type="float", answers=False,
                 minimum=0, above=True)

#: Key used for servers on this machine, which do not check keys (llama.cpp, vllm, Ollama);
#: the SDKs refuse to start without some key.
LOCAL_PLACEHOLDER_KEY = "casebench-local-no-key"

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
