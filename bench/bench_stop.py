"""Ctrl-C to exit, in the two phases a user waits through: loading the model, and generating.

Each repeat starts ``casebench run -v`` with the embedded SmolLM2 on the shipped demo set, as a
user would, and sends SIGINT

* **during loading**: as soon as the run says it is loading the backend (``-v``: "loading the
  backend of ..."), i.e. while transformers is imported and the weights are read in a worker
  thread (before issue 27 the exit waited for the load to end: 10.6 s measured);
* **during generation**: at a seeded random moment (0-1 s) after the first record is on disk.

It prints the time from the signal to the process's exit (target: under 2 s), the exit code
(130 expected) and whether the message says what happened. The machine line comes first.

``--baseline REV`` also times, side by side in the same run, the loading phase of an older
casebench (``git archive REV src``, e.g. the commit before issue 27's fix), which has no "loading"
line: it gets its SIGINT 1.5 s later after its start than this version said "loading" (inside the
load), and the ratio of the two medians is printed.

    .venv/bin/python bench/bench_stop.py [--repeats 3] [--seed 0] [--baseline REV]
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
#: the baseline gets its signal this much later than this version said "loading", so that it
#: lands inside the load (which takes seconds) rather than in the imports before it
BASELINE_LAG_S = 1.5


def once(phase: str, rng: random.Random, timeout: float, src: Path | None = None,
         after: float | None = None) -> tuple[float, int, str, float]:
    """(SIGINT to exit in seconds, exit code, last stderr line, seconds from start to the signal)
    of one run interrupted in ``phase``; ``src``: another casebench source tree, signalled
    ``after`` seconds after its start."""
    from casebench.sources import demo_dataset_path

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [*CASEBENCH, "run", *ARGS, "--data", str(demo_dataset_path()), "-o", str(out), "--no-progress",
               "--no-report", "-v"]
        env = {**os.environ, "CASEBENCH_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        if src is not None:
            env["PYTHONPATH"] = str(src)
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
            if after is not None:
                time.sleep(after)
            elif phase == "loading":
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
            said = next((ln for ln in reversed(lines) if "interrupted" in ln), lines[-1] if lines else "")
            return took, rc, said, t1 - t0
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
    ap.add_argument("--baseline", default=None, metavar="REV",
                    help="also time the loading phase of this git revision's casebench, side by side")
    args = ap.parse_args()
    from machine import machine_line

    print(machine_line(), flush=True)
    rng = random.Random(args.seed)
    base_src = None
    if args.baseline:
        base_src = Path(tempfile.mkdtemp(prefix="bench-stop-baseline-"))
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.baseline, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_src)], input=archive, check=True)
        base_src = base_src / "src"
    for phase in args.phases.split(","):
        took, codes, starts, base_took = [], [], [], []
        for _ in range(args.repeats):
            t, rc, said, start = once(phase, rng, args.timeout)
            took.append(t)
            codes.append(rc)
            starts.append(start)
            print(f"  {phase}: Ctrl-C to exit {t:.2f} s (exit {rc}); said: {said!r}; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            if base_src is not None and phase == "loading":
                bt, brc, bsaid, _ = once(phase, rng, args.timeout, src=base_src, after=start + BASELINE_LAG_S)
                base_took.append(bt)
                print(f"  {phase} ({args.baseline}): Ctrl-C to exit {bt:.2f} s (exit {brc}); said: {bsaid!r}; "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
        print(f"{phase}: Ctrl-C to exit median {statistics.median(took):.2f} s (max {max(took):.2f}; target < 2 s); "
              f"exit codes {sorted(set(codes))}", flush=True)
        if base_took:
            print(f"{phase} ({args.baseline}): median {statistics.median(base_took):.2f} s; this version takes "
                  f"{statistics.median(took) / statistics.median(base_took):.3f}x the time", flush=True)


if __name__ == "__main__":
    main()
