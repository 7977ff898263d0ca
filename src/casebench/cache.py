"""The one cache root casebench writes to: datasets (``data/``) and converted models (``models/``).

A leaf module with no casebench imports, so the data sources and the backends share it without
either importing the other.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CASEBENCH_CACHE"


def cache_dir() -> Path:
    """``$CASEBENCH_CACHE`` or ``~/.cache/casebench``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "casebench"
