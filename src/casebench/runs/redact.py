"""Keeping secrets out of what a run writes: error texts, logs and the manifest.

Backends already redact their own keys; this is the runner's second line of defence, for text a
library may have built from a request (an error message quoting a header, say).
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

#: environment variable names that hold credentials contain one of these words
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def secrets_in_environment() -> tuple[str, ...]:
    """Values of environment variables that look like credentials, longest first."""
    out = []
    for k, v in os.environ.items():
        ku = k.upper()
        if any(w in ku for w in _SECRET_WORDS) and v and len(v.strip()) >= 6:
            out.append(v.strip())
    return tuple(sorted(set(out), key=len, reverse=True))


def redact_text(text: str) -> str:
    """``text`` with every credential from the environment replaced."""
    from ..backends import redact

    return redact(text, secrets_in_environment())


def redact_json(value: Any) -> Any:
    """A JSON-able value with every credential from the environment replaced in its strings."""
    return json.loads(redact_text(json.dumps(value, default=str)))


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as a run may record it (``Invocation.command``): every credential from the
    environment replaced, and the user name and password of a URL (``http://user:pw@host``)
    dropped. casebench takes keys from environment variables only, never from its arguments;
    this is the second line of defence."""
    from urllib.parse import urlsplit, urlunsplit

    out = []
    for arg in argv:
        text = str(arg)
        if "://" in text and "@" in text:
            try:
                parts = urlsplit(text)
                if parts.username is not None or parts.password is not None:
                    text = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
            except ValueError:
                pass
        out.append(redact_text(text))
    return out


def invocation_command(command: "Sequence[str] | None") -> dict[str, Any]:
    """The ``command`` and ``cwd`` of a run's ``Invocation`` from the command line that asked for
    it (``RunConfig.command``), redacted (``redact_argv``); {} without one (the Python API)."""
    if not command:
        return {}
    return {"command": redact_argv(list(command)), "cwd": os.getcwd()}
