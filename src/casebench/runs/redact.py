"""Keeping secrets out of what a run writes: error texts, logs and the manifest.

Backends already redact their own keys; this is the runner's second line of defence, for text a
library may have built from a request (an error message quoting a header, say).
"""

from __future__ import annotations

import json
import os
from typing import Any

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
