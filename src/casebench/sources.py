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
    (only for a user-supplied ``url``). A ``dest`` that already holds the file with the right
    checksum is kept as it is, and nothing is downloaded (so a complete cache works offline).
    """
    url = url or PINNED_URL
    target = Path(dest) if dest else cached_dataset_path()
    if sha256 and has_checksum(target, sha256):
        return target  # already there, checksum valid: nothing to download (works offline)
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


# --------------------------------------------------------------------------------------------
# The authors' published outputs (reference rows beside the user's own runs)

#: where the published outputs live at the pinned commit (``exp/safety_<model>/output_<mode>.json``)
PUBLISHED_BASE_URL = f"https://raw.githubusercontent.com/BriansIDP/CASEBench/{PINNED_COMMIT}/"
#: every published output file at the pinned commit and its SHA-256
PUBLISHED_OUTPUTS: dict[str, str] = {
    "exp/safety_claude-3-5-sonnet-20240620/output_binary.json": "75eb0932a78e285a25b2248ea6e74c2380796ecd37b6897a3609dfb00178a8f2",
    "exp/safety_claude-3-5-sonnet-20240620/output_score.json": "0a575fb33c0f4afec8d03bf88efe8213b325c57e79710c5c326875bb65458a7d",
    "exp/safety_dolphin/output_binary.json": "0c110233b8cf5a1693923c802214a9382bba093d65abf2a2c97c9696133e8e2b",
    "exp/safety_dolphin/output_logits.json": "d3fc7efe1f60c6bda5d222edef84f06f691584d5ca2ad785ae134f2674e408ea",
    "exp/safety_dolphin/output_score.json": "2c69835a4d088f3908a0235ebffe40605c6360c1879264c46c3bd58957294dbe",
    "exp/safety_gpt-4o-mini-2024-07-18/output_binary.json": "f357b10dd6319fc43619da09cb37739ec5b26de8e70a38a6b43c2d7273b22928",
    "exp/safety_gpt-4o-mini-2024-07-18/output_score.json": "c39cfe7bb6b5795b1cc43e138fee34baca36048e75ef581879c59f976c91f3c4",
    "exp/safety_gpt-4o-mini-2024-07-18/output_score_sender.json": "8a4b2c9ff6b2d5226ae00d1fc057fa136cbd116eae7f5abd61d67fcaae9c9c5e",
    "exp/safety_gpt-4o/output_binary.json": "3eef9079ed6ec4246f3de0a8f36bafd9500b5bdfe05c48b13de3ffd5e39fbf06",
    "exp/safety_gpt-4o/output_score.json": "9bd0df71d6eb63d31b825d73fbe923b2bc451760959add9b67c2fd5b2f7c28a1",
    "exp/safety_llama370B/output_binary.json": "3aa1778b54691bd2dcfba497f5ae0339e19fe25589529e29d5687f88eb350400",
    "exp/safety_llama370B/output_logits.json": "bfea2a6584bc5ea952df9d62bf45254c5867de7f6baca35fb447e45afe677246",
    "exp/safety_llama370B/output_score.json": "e33fbfc0362b54b28d2c4530ef0779780a6609b91e7a589b127e083536fc1ba6",
    "exp/safety_mixtral8x7B/output_binary.json": "5287dfbb3d3b6eba4c23d73d6c773d1acb1b6368a22c7d55ea92d77c18de751b",
    "exp/safety_mixtral8x7B/output_logits.json": "d0cd87a1ffee7c9aaf1bbca7eb8ec0a592b0261276603fe9d6603abf9533a7ed",
    "exp/safety_mixtral8x7B/output_score.json": "79777c9cc2b754b5c86ce16bd8d53ca499a05cc3ef2c97a48397e6bca619a601",
    "exp/safety_qwen272B/output_binary.json": "ac40d3eed0defa2cf0c1c245dc4638636579476e01e4fbfb698542288e6a6d8a",
    "exp/safety_qwen272B/output_logits.json": "48ce443fcb872a50fb7deb748c0c9319c2fcf834b59668e7daf03adc4d60c7da",
    "exp/safety_qwen272B/output_score.json": "2de9c19b4c65a8a289872d82d7128d1aa870c06d11b1ff9021a0c4612abacd01",
}


def has_checksum(path: Path, sha256: str) -> bool:
    """Whether ``path`` is a file whose SHA-256 is ``sha256``."""
    if not path.is_file():
        return False
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == sha256


def outputs_to_fetch(dest: str | Path | None = None) -> list[str]:
    """The published output files (``PUBLISHED_OUTPUTS``) not yet under ``dest`` (default: the
    cache) with their checksum: what ``fetch_outputs`` would download."""
    root = Path(dest) if dest else cached_outputs_dir()
    return [rel for rel, digest in PUBLISHED_OUTPUTS.items() if not has_checksum(root / rel, digest)]


def cached_outputs_dir() -> Path:
    """Where ``casebench data fetch`` keeps the published outputs: ``<cache>/published/<commit>``,
    holding ``exp/`` as the release does."""
    return cache_dir() / "published" / PINNED_COMMIT[:12]


def cached_outputs() -> Path | None:
    """The cached published outputs' directory when every file is there (None otherwise)."""
    root = cached_outputs_dir()
    return root if all((root / rel).is_file() for rel in PUBLISHED_OUTPUTS) else None


def fetch_outputs(base_url: str | None = None, dest: str | Path | None = None, timeout: float = 30.0,
                  check: bool = True) -> Path:
    """Download every published output file (``PUBLISHED_OUTPUTS``) under ``dest`` (default:
    ``cached_outputs_dir()``), each SHA-256 checked before it is kept (``fetch_dataset``); files
    already there with the right checksum are not downloaded again. ``base_url``: where the
    release's ``exp/`` lies (default: the pinned commit on GitHub; any ``file://`` or ``http://``
    base serves a mirror). ``check=False`` skips the checksums (only for a user's own mirror of
    other files). Returns the directory that holds ``exp/``."""
    base = (base_url or PUBLISHED_BASE_URL).rstrip("/") + "/"
    root = Path(dest) if dest else cached_outputs_dir()
    for rel, digest in PUBLISHED_OUTPUTS.items():
        target = root / rel
        if has_checksum(target, digest):
            continue
        fetch_dataset(url=base + rel, dest=target, sha256=digest if check else None, timeout=timeout)
    return root


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
