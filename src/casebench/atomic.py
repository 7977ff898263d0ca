"""Atomic file writes: a reader (or a killed writer) sees the old file or the new one, never half.

Every file casebench writes whole (manifests, exports, reports, downloads) goes through here.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | Path, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` to a temp file beside ``path``, then rename it over ``path``."""
    return write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)


def write_bytes_atomic(path: str | Path, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to a temp file beside ``path``, then rename it over ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; these files are meant to be shared
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 2, fsync: bool = False) -> Path:
    return write_text_atomic(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n", fsync=fsync)
