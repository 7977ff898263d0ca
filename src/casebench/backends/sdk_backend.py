"""What the two SDK backends (``openai/``, ``anthropic/``) share: one endpoint, one client.

Both take a base URL (option, then ``$<PREFIX>_BASE_URL``, then the provider's), the *name* of
the variable holding the key, and a timeout per request; both build their SDK's async client
with ``max_retries=0`` (the runner owns retries) and an ``SDKTransport`` that turns every SDK
failure into casebench's errors (the batch path uses it too). Written once here, so a fix to how
an endpoint is checked, a key found or a client closed reaches both.

Importing this module stays light: each backend imports its SDK when it is built and hands the
module and client class to ``_connect``.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, Callable

from casebench.backends.http import Secret, check_base_url, public_url, resolve_api_key
from casebench.backends.sdk_errors import SDKTransport


class SDKBackend:
    """The endpoint and client half of an SDK backend; the subclass says how it asks.

    A subclass sets ``prefix`` (its spec prefix and SDK name), ``base_url_env`` and
    ``default_base_url``, calls ``_endpoint`` first in its ``__init__`` (argument checks before
    anything is imported), then imports its SDK and calls ``_connect``."""

    prefix: str = ""
    base_url_env: str = ""
    default_base_url: str = ""
    batch_size = 1

    model: str
    spec: str
    base_url: str
    api_key_env: str
    timeout: float
    transport: SDKTransport
    client: Any

    def _endpoint(self, model: str, base_url: str | None, api_key_env: str, timeout: float) -> None:
        """Check and keep where requests go: the model, the base URL (the option, else
        ``$<base_url_env>``, else the provider's), the key variable's name and the timeout."""
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.model = model
        self.spec = f"{self.prefix}/{model}"
        self.base_url = (check_base_url(base_url) if base_url else None) or check_base_url(
            os.environ.get(self.base_url_env) or None, f"${self.base_url_env}") or self.default_base_url
        self.api_key_env = api_key_env
        self.timeout = float(timeout)

    def _connect(self, sdk: ModuleType, client_class: Callable[..., Any]) -> None:
        """Find the key (after the SDK import, so a missing extra is named before a missing key)
        and build the transport and the SDK's async client, which never retries on its own."""
        key = resolve_api_key(self.api_key_env, self.base_url)
        self._sdk = sdk
        #: how requests reach the server (the batch path uses it too)
        self.transport = SDKTransport(sdk, str(public_url(self.base_url)), self.model, Secret(key), self.timeout)
        self.client = client_class(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

    def _describe(self, own: dict[str, Any]) -> dict[str, Any]:
        """``describe()``: where it asks, the subclass's ``own`` settings, and the SDK's version."""
        return {
            "backend": self.prefix,
            "model": self.model,
            "base_url": public_url(self.base_url),
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout,
            **own,
            "sdk": self.prefix,
            "sdk_version": getattr(self._sdk, "__version__", None),
        }

    def _where(self) -> str:
        """The endpoint as errors name it (no credentials in it)."""
        return str(public_url(self.base_url))

    async def aclose(self) -> None:
        await self.client.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={public_url(self.base_url)!r})"


__all__ = ["SDKBackend"]
