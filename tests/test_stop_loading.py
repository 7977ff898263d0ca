"""Ctrl-C during model loading is answered at once (issue 27, item 5): SIGINT sent while the
embedded model loads (``-v`` says "loading the backend of ...") ends the process with exit code
130 and says that nothing was asked; the run directory holds no record. The time it takes is
measured in bench/bench_stop.py, not asserted here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def test_sigint_while_the_model_loads_exits_130_and_says_so(tmp_path, embedded_model):
    from casebench.sources import demo_dataset_path

    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(SRC), "CASEBENCH_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("CASEBENCH_DATA", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from casebench.cli import main; main()", "run", "--mode", "prob", "--limit", "2",
         "--data", str(demo_dataset_path()), "-o", str(out), "--no-progress", "--no-report", "-v"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    loading = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "loading the backend of hf/" in line:
                loading.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert loading.wait(600), "".join(lines)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    err = "".join(lines)
    assert rc == 130, err
    assert "SIGINT" in err and "interrupted before the run started; nothing was asked" in err
    assert not (out / "records.jsonl").exists() or (out / "records.jsonl").read_bytes() == b""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_sigint_in_a_command_without_a_run_exits_130(tmp_path):
    """Ctrl-C in any other phase (here `casebench score`, blocked reading its input from a pipe)
    ends with exit code 130 and says so, not click's "Aborted!" and exit 1."""
    import errno
    import time

    fifo = tmp_path / "output_binary.json"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(SRC), "CASEBENCH_OFFLINE": "1"}
    env.pop("CASEBENCH_DATA", None)
    proc = subprocess.Popen([sys.executable, "-c", "from casebench.cli import main; main()", "score", "--no-reference",
                             str(fifo)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        for _ in range(6000):  # until the command opened the pipe to read it (a bound, not a timing)
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                assert e.errno == errno.ENXIO and proc.poll() is None, proc.communicate()
                time.sleep(0.01)
        assert writer is not None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    finally:
        if writer is not None:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "casebench: interrupted" in err and "Aborted!" not in err
