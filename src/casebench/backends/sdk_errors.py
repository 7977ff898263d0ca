"""One mapping from SDK failures to casebench's transport errors, shared by the API backends.

The ``openai`` and ``anthropic`` SDKs are generated from the same template and raise the same
exception family (``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``,
``APIResponseValidationError``), so one function maps both. Messages are built here from the
status code and a short redacted body excerpt; the SDK's own exception text, which may carry
request details, is never passed on.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Awaitable, Callable, Iterator, TypeVar

from casebench.backends.http import Secret, body_excerpt, retry_after_from_headers, status_is_transient
from casebench.backends.base import PermanentError, TransientError

T = TypeVar("T")


def status_error(exc: Any, *, where: str, model: str, secret: str | None) -> Exception:
    """``TransientError`` (with Retry-After) for 408/409/425/429/5xx, else ``PermanentError``."""
    status = exc.status_code
    try:
        text = exc.response.text
    except Exception:  # the body may be unreadable (streaming, decode errors)
        text = None
    excerpt = body_excerpt(text, secrets=(secret,) if secret else ())
    message = f"HTTP {status} from {where} for model {model!r}: {excerpt}"
    if status_is_transient(status):
        return TransientError(message, retry_after=retry_after_from_headers(exc.response.headers))
    err = PermanentError(message)
    err.status = status  # type: ignore[attr-defined]  # which refusal it was (400 vs 401, ...)
    return err


async def call(sdk: ModuleType, request: Awaitable[T], *, where: str, model: str, secret: str | None,
               timeout: float) -> T:
    """Await one SDK request, turning every SDK failure into a casebench transport error."""
    with translating(sdk, where=where, model=model, secret=secret, timeout=timeout):
        return await request


@contextmanager
def translating(sdk: ModuleType, *, where: str, model: str, secret: str | None,
                timeout: float) -> Iterator[None]:
    """Turn every SDK (and transport) failure raised inside the block into a casebench error.

    Used around a request and around reading a stream: a stream can fail half way (the server
    drops the connection, times out between chunks, or sends an error event), and those failures
    come from the HTTP library or as an ``APIError`` without a status code, not as the SDK's
    usual status errors.
    """
    import httpx2  # both SDKs are built on it; imported here so casebench.backends stays light

    try:
        yield
    except sdk.APIStatusError as exc:
        if 200 <= exc.status_code < 300:
            # An error event inside a 200 stream (Anthropic sends e.g. overloaded_error this way).
            raise _stream_error(exc, where=where) from None
        raise status_error(exc, where=where, model=model, secret=secret) from None
    except sdk.APITimeoutError:
        raise TransientError(f"request to {where} timed out after {timeout:g} s") from None
    except sdk.APIConnectionError as exc:
        cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "connection error"
        raise TransientError(f"connection to {where} failed ({cause})") from None
    except sdk.APIResponseValidationError:
        raise TransientError(f"malformed response body from {where}") from None
    except sdk.APIError as exc:  # an error event in an OpenAI stream (no status code)
        raise _stream_error(exc, where=where) from None
    except httpx2.TimeoutException:
        raise TransientError(f"stream from {where} timed out (no data within {timeout:g} s)") from None
    except httpx2.HTTPError as exc:  # a dropped or broken stream
        raise TransientError(f"stream from {where} broke off ({type(exc).__name__})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        # The SDKs decode bodies (and stream events) with json.loads and let its errors through.
        raise TransientError(f"malformed (undecodable) response body from {where}") from None


#: Error types in a stream's error event that retrying cannot fix.
_PERMANENT_STREAM_ERRORS = frozenset({
    "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
    "request_too_large", "invalid_request",
})


def _stream_error(exc: Any, *, where: str) -> Exception:
    """An error event read from a stream: transient unless its type says the request is wrong.

    The message names only the error's type, never its text (which may echo the request)."""
    body = getattr(exc, "body", None)
    kind = None
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        kind = inner.get("type") or inner.get("code")
    kind = str(kind) if kind is not None else "unknown"
    message = f"error event in the stream from {where} (type {kind[:60]})"
    if kind in _PERMANENT_STREAM_ERRORS:
        return PermanentError(message)
    return TransientError(message)


def read_response(read: Callable[[], T], *, where: str) -> T:
    """Read a response object; a body of the wrong shape is a transient transport failure.

    The SDKs build response objects without validation, so a wrong shape shows up as a missing
    attribute or a wrong type while it is read.
    """
    try:
        return read()
    except (AttributeError, TypeError, KeyError, IndexError, ValueError):
        raise TransientError(f"malformed response body from {where} (unexpected shape)") from None


@dataclass(frozen=True, repr=False)
class SDKTransport:
    """How an SDK backend talks to its server: the SDK module, where (a public URL), the model,
    the key (held as a ``Secret``) and the per-request timeout. ``call`` and ``translating`` turn
    every SDK failure into ``TransientError``/``PermanentError`` with a redacted message; the
    batch path uses the same object, so no caller reads a backend's private attributes."""

    sdk: ModuleType
    where: str
    model: str
    secret: Secret
    timeout: float

    async def call(self, request: Awaitable[T]) -> T:
        """Await one SDK request, turning every SDK failure into a casebench transport error."""
        return await call(self.sdk, request, where=self.where, model=self.model,
                                     secret=self.secret.get(), timeout=self.timeout)

    def translating(self) -> Any:
        """A context manager turning SDK failures inside it (e.g. while reading a stream) into
        casebench transport errors."""
        return translating(self.sdk, where=self.where, model=self.model, secret=self.secret.get(),
                                      timeout=self.timeout)

    def excerpt(self, text: str | None) -> str:
        """A short redacted excerpt of a response body (the key never shows)."""
        return body_excerpt(text, secrets=(self.secret.get(),))

    def __repr__(self) -> str:
        return f"SDKTransport(where={self.where!r}, model={self.model!r})"
