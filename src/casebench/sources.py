"""Where a dataset comes from: the user's path, $CASEBENCH_DATA, the cache, a download, or the demo.

The published file is gated by the SORRY-Bench licence, so casebench never ships it. It can fetch
the authors' file pinned at one commit and checks its SHA-256 before keeping it. With nothing
reachable, the main job falls back to a small demo set of our own (benign cases, labelled only by
the intent of their context, with no invented human votes) and says so.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .cache import CACHE_ENV, cache_dir  # noqa: F401  (re-exported: one cache root)

PINNED_COMMIT = "135f221e0e3e4cdc9a7d17288fa6b54c8aa45d0a"
PINNED_URL = f"https://raw.githubusercontent.com/BriansIDP/CASEBench/{PINNED_COMMIT}/data/CASEBench_data.json"
PINNED_SHA256 = "49bc10879c5350061eb1239b4f14f1a756683ca39e7e2abfc85fba70f9faac0c"
DATA_ENV = "CASEBENCH_DATA"
#: Set to 1 to never try a download (the main job then falls back to the demo set at once).
OFFLINE_ENV = "CASEBENCH_OFFLINE"
DATA_FILE_NAME = "CASEBench_data.json"


class FetchError(RuntimeError):
    """The download failed or the file's checksum did not match (nothing was kept)."""


def cached_dataset_path() -> Path:
    return cache_dir() / "data" / DATA_FILE_NAME


def demo_dataset_path() -> Path:
    """The demo set shipped inside the package."""
    return Path(str(resources.files("casebench") / "demo" / "demo_cases.json"))


def fetch_dataset(
    url: str | None = None, dest: str | Path | None = None, sha256: str | None = PINNED_SHA256, timeout: float = 30.0
) -> Path:
    """Download the dataset to ``dest`` (default: the cache) and verify its SHA-256.

    The file is written to a temporary name and renamed only after the checksum matched, so a
    failed or tampered download never leaves a file behind. ``sha256=None`` skips the check
    (only for a user-supplied ``url``).
    """
    url = url or PINNED_URL
    target = Path(dest) if dest else cached_dataset_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    for chunk in iter(lambda: resp.read(1 << 16), b""):
                        h.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                raise FetchError(f"cannot download {url}: {reason}") from None
        digest = h.hexdigest()
        if sha256 and digest != sha256:
            raise FetchError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {digest}; nothing was saved")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


@dataclass(frozen=True)
class DataChoice:
    """Which dataset a command uses and why (printed by the main job)."""

    path: Path
    origin: str  # "argument", "environment", "cache", "download", "demo"

    @property
    def is_demo(self) -> bool:
        return self.origin == "demo"


def resolve_dataset(data: str | None = None, *, allow_download: bool = True, allow_demo: bool = True) -> DataChoice:
    """Pick the dataset: ``--data``, else ``$CASEBENCH_DATA``, else the cache, else a download of
    the pinned file, else (offline) the demo set. A path given explicitly must exist."""
    if data:
        return DataChoice(Path(data), "argument")
    env = os.environ.get(DATA_ENV)
    if env:
        return DataChoice(Path(env), "environment")
    cached = cached_dataset_path()
    if cached.is_file():
        return DataChoice(cached, "cache")
    if allow_download and os.environ.get(OFFLINE_ENV, "") not in ("1", "true", "yes"):
        try:
            return DataChoice(fetch_dataset(timeout=10.0), "download")
        except FetchError:
            if not allow_demo:
                raise
    if allow_demo:
        return DataChoice(demo_dataset_path(), "demo")
    raise FetchError(f"no dataset: pass --data, set ${DATA_ENV}, or run `casebench data fetch`")
