"""One mapping from SDK failures to casebench's transport errors, shared by the API backends.

The ``openai`` and ``anthropic`` SDKs are generated from the same template and raise the same
exception family (``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``,
``APIResponseValidationError``), so one function maps both. Messages are built here from the
status code and a short redacted body excerpt; the SDK's own exception text, which may carry
request details, is never passed on.
"""

from __future__ import annotations

import json
import socket
import ssl
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Awaitable, Callable, Iterator, TypeVar

from casebench.backends.http import Secret, body_excerpt, retry_after_from_headers, status_is_transient
from casebench.backends.base import PermanentError, TransientError, Unreachable

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


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def connection_cause(exc: BaseException) -> tuple[str, bool]:
    """Why a connection failed, in plain words (connection refused, name not resolved, TLS, ...)
    from the exception chain under an SDK's connection error, and whether the cause means that
    the address itself answers nothing (refused, or a name that does not resolve)."""
    for e in _chain(exc):
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (nothing listens at that address and port)", True
        if isinstance(e, socket.gaierror):
            return f"host name not resolved ({e.strerror or e})", True
        if isinstance(e, ssl.SSLCertVerificationError):
            return f"TLS certificate not accepted ({e.verify_message or e.reason or e})", False
        if isinstance(e, ssl.SSLError):
            return f"TLS handshake failed ({e.reason or e})", False
        if isinstance(e, ConnectionResetError):
            return "connection reset by the server", False
        if isinstance(e, (TimeoutError, socket.timeout)):
            return "connection timed out", False
    for e in _chain(exc):
        text = str(e).lower()
        if "name or service not known" in text or "nodename nor servname" in text or "name resolution" in text:
            return f"host name not resolved ({e})", True
        if "connection refused" in text or "connect call failed" in text:
            return "connection refused (nothing listens at that address and port)", True
        if "certificate" in text or "ssl" in text or "tls" in text:
            return f"TLS failed ({e})", False
    inner = next((e for e in _chain(exc) if e is not exc), None)
    detail = f"{type(inner).__name__}: {inner}" if inner is not None else "connection error"
    return detail[:200], False


@dataclass
class Reach:
    """Whether anything has ever answered at a backend's address (shared by its requests): until
    something has, a refused connection or an unresolvable name is ``Unreachable``, not worth
    retrying."""

    answered: bool = False


async def call(sdk: ModuleType, request: Awaitable[T], *, where: str, model: str, secret: str | None,
               timeout: float, reach: Reach | None = None) -> T:
    """Await one SDK request, turning every SDK failure into a casebench transport error."""
    with translating(sdk, where=where, model=model, secret=secret, timeout=timeout, reach=reach):
        return await request


@contextmanager
def translating(sdk: ModuleType, *, where: str, model: str, secret: str | None,
                timeout: float, reach: Reach | None = None) -> Iterator[None]:
    """Turn every SDK (and transport) failure raised inside the block into a casebench error.

    Used around a request and around reading a stream: a stream can fail half way (the server
    drops the connection, times out between chunks, or sends an error event), and those failures
    come from the HTTP library or as an ``APIError`` without a status code, not as the SDK's
    usual status errors.
    """
    import httpx2  # both SDKs are built on it; imported here so casebench.backends stays light

    try:
        yield
        if reach is not None:
            reach.answered = True
    except sdk.APIStatusError as exc:
        if reach is not None:
            reach.answered = True  # a server answered, if only with an error
        if 200 <= exc.status_code < 300:
            # An error event inside a 200 stream (Anthropic sends e.g. overloaded_error this way).
            raise _stream_error(exc, where=where) from None
        raise status_error(exc, where=where, model=model, secret=secret) from None
    except sdk.APITimeoutError:
        raise TransientError(f"request to {where} timed out after {timeout:g} s (no answer)") from None
    except sdk.APIConnectionError as exc:
        cause, nobody = connection_cause(exc)
        if nobody and reach is not None and not reach.answered:
            raise Unreachable(f"cannot reach {where}: {cause}; nothing has answered there yet, so the run stops "
                              "instead of retrying (is the server running, and is --base-url right?)") from None
        raise TransientError(f"connection to {where} failed: {cause}") from None
    except sdk.APIResponseValidationError:
        raise TransientError(f"malformed response body from {where}") from None
    except sdk.APIError as exc:  # an error event in an OpenAI stream (no status code)
        raise _stream_error(exc, where=where) from None
    except httpx2.TimeoutException:
        raise TransientError(f"stream from {where} timed out (no data within {timeout:g} s)") from None
    except httpx2.HTTPError as exc:  # a dropped or broken stream
        raise TransientError(f"stream from {where} broke off ({connection_cause(exc)[0]})") from None
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
        err = body.get("error")
        inner: dict[str, Any] = err if isinstance(err, dict) else body
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
    #: whether anything has answered at ``where`` yet (mutable, shared by every request)
    reach: Reach = field(default_factory=Reach, compare=False)

    async def call(self, request: Awaitable[T]) -> T:
        """Await one SDK request, turning every SDK failure into a casebench transport error."""
        return await call(self.sdk, request, where=self.where, model=self.model,
                          secret=self.secret.get(), timeout=self.timeout, reach=self.reach)

    def translating(self) -> Any:
        """A context manager turning SDK failures inside it (e.g. while reading a stream) into
        casebench transport errors."""
        return translating(self.sdk, where=self.where, model=self.model, secret=self.secret.get(),
                           timeout=self.timeout, reach=self.reach)

    def excerpt(self, text: str | None) -> str:
        """A short redacted excerpt of a response body (the key never shows)."""
        return body_excerpt(text, secrets=(self.secret.get(),))

    def __repr__(self) -> str:
        return f"SDKTransport(where={self.where!r}, model={self.model!r})"
