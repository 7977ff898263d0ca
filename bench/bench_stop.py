"""Ctrl-C to exit, in the two phases a user waits through: loading the model, and generating.

Each repeat starts ``casebench run -v`` with the embedded SmolLM2 on the shipped demo set, as a
user would, and sends SIGINT

* **during loading**: as soon as the run says it is loading the backend (``-v``: "loading the
  backend of ..."), i.e. while transformers is imported and the weights are read in a worker
  thread (before issue 27 the exit waited for the load to end: 10.6 s measured);
* **during generation**: at a seeded random moment (0-1 s) after the first record is on disk.

It prints the time from the signal to the process's exit (target: under 2 s), the exit code
(130 expected) and whether the message says what happened. The machine line comes first.

    .venv/bin/python bench/bench_stop.py [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
ARGS = ["--mode", "binary", "--limit", "12", "--full-answers", "--max-tokens", "128", "--parse-retries", "0"]
LOADING = "loading the backend of"


def once(phase: str, rng: random.Random, timeout: float) -> tuple[float, int, str]:
    """(SIGINT to exit in seconds, exit code, last stderr line) of one run interrupted in ``phase``."""
    from casebench.sources import demo_dataset_path

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [*CASEBENCH, "run", *ARGS, "--data", str(demo_dataset_path()), "-o", str(out), "--no-progress",
               "--no-report", "-v"]
        env = {**os.environ, "CASEBENCH_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        loading = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line.rstrip())
                if LOADING in line:
                    loading.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        t0 = time.monotonic()
        try:
            if phase == "loading":
                if not loading.wait(timeout):
                    raise SystemExit(f"no '{LOADING}' line within {timeout:.0f} s: {lines[-3:]}")
            else:
                recs = out / "records.jsonl"
                while (not recs.exists() or recs.stat().st_size == 0) and proc.poll() is None:
                    if time.monotonic() - t0 > timeout:
                        raise SystemExit("no first record in time")
                    time.sleep(0.01)
                time.sleep(rng.uniform(0.0, 1.0))
            if proc.poll() is not None:
                raise SystemExit(f"{phase}: the run ended (exit {proc.returncode}) before it could be interrupted")
            t1 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)
            took = time.monotonic() - t1
            reader.join(5)
            return took, rc, next((ln for ln in reversed(lines) if "interrupted" in ln), lines[-1] if lines else "")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--phases", default="loading,generation")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    from machine import machine_line

    print(machine_line(), flush=True)
    rng = random.Random(args.seed)
    for phase in args.phases.split(","):
        took, codes = [], []
        for _ in range(args.repeats):
            t, rc, said = once(phase, rng, args.timeout)
            took.append(t)
            codes.append(rc)
            print(f"  {phase}: Ctrl-C to exit {t:.2f} s (exit {rc}); said: {said!r}; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
        print(f"{phase}: Ctrl-C to exit median {statistics.median(took):.2f} s (max {max(took):.2f}; target < 2 s); "
              f"exit codes {sorted(set(codes))}", flush=True)


if __name__ == "__main__":
    main()
