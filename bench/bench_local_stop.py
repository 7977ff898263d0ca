"""Local runs stop when asked and show answers at once: two times, with the embedded model.

For prob and binary mode, each repeat starts ``casebench run`` (the embedded SmolLM2, the
shipped demo set) as a user would, and measures

* **start to first record**: from starting the process to the first line of records.jsonl on
  disk (imports and model loading included: what a user waits for);
* **Ctrl-C to exit**: SIGINT is sent at a seeded random moment after the first record (so it
  lands mid-step: a forward pass in prob mode, a decoding step in binary mode), and the time to
  the process's exit is taken (target: under 2 s), with its exit code (130 expected).

Binary mode generates whole answers (``--full-answers``, 128 tokens) so that the signal lands
while sequences are being generated, with no parse re-asks (``--parse-retries 0``: an answer the
mode cannot read is recorded at once instead of being asked twice more, which would time the
re-asks, not the writing). Prints the machine line first: figures depend on it.

    .venv/bin/python bench/bench_local_stop.py [--repeats 3] [--seed 0]
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

CASEBENCH = [sys.executable, "-c", "from casebench.cli import main; main()"]
MODES = {
    "prob": ["--mode", "prob", "--limit", "12"],
    "binary": ["--mode", "binary", "--limit", "12", "--full-answers", "--max-tokens", "128", "--parse-retries", "0"],
}


def records(out: Path) -> int:
    try:
        return (out / "records.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def once(mode: str, rng: random.Random, timeout: float) -> tuple[float, float, int]:
    """(start to first record, Ctrl-C to exit, exit code) of one run."""
    from casebench.sources import demo_dataset_path

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [*CASEBENCH, "run", *MODES[mode], "--data", str(demo_dataset_path()), "-o", str(out),
               "--no-progress", "--no-report"]
        env = {**os.environ, "CASEBENCH_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while records(out) == 0 and proc.poll() is None and time.monotonic() - t0 < timeout:
                time.sleep(0.01)
            first = time.monotonic() - t0
            if proc.poll() is not None:
                raise SystemExit(f"{mode}: the run ended (exit {proc.returncode}) before it could be interrupted")
            time.sleep(rng.uniform(0.0, 1.0))
            t1 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=120)
            return first, time.monotonic() - t1, rc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="prob,binary")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds to wait for a first record")
    args = ap.parse_args()
    from machine import machine_line

    print(machine_line(), flush=True)
    rng = random.Random(args.seed)
    for mode in args.modes.split(","):
        firsts, stops, codes = [], [], []
        for _ in range(args.repeats):
            first, stop, rc = once(mode, rng, args.timeout)
            firsts.append(first)
            stops.append(stop)
            codes.append(rc)
            print(f"  {mode}: first record after {first:.1f} s; Ctrl-C to exit {stop:.2f} s (exit {rc}); "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
        print(f"{mode}: start to first record median {statistics.median(firsts):.1f} s (max {max(firsts):.1f}); "
              f"Ctrl-C to exit median {statistics.median(stops):.2f} s (max {max(stops):.2f}; target < 2 s); "
              f"exit codes {sorted(set(codes))}", flush=True)


if __name__ == "__main__":
    main()
