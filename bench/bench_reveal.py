"""Speed of a live reveal run beside the same number of calls asked at once.

A reveal conversation (``--context-as reveal-late``) asks its four user turns one after another
(each waits for the model's answer to the one before), records every earlier turn in
``turns.jsonl`` and reads every answer; its control in the reveal study, ``resample`` (the user
placement with ``--samples 4``), makes the same number of calls with no turn waiting for another.
Both runs ask a scripted chatbot on a loopback OpenAI-compatible server
(``tests/servers/fault_server.py``, a fixed ``--latency`` per reply), side by side in one process
invocation, each a ``casebench run`` subprocess timed by wall seconds and the child's CPU seconds
(``RUSAGE_CHILDREN`` deltas). The ratio reveal / resample is the figure: with latency the wall
ratio says what the sequential turns cost, the CPU ratio what the per-turn bookkeeping costs.

    .venv/bin/python bench/bench_reveal.py [--pairs 20] [--latency 0.05] [--connections 8]

Figures (2-core AMD EPYC, loaded by other helpers' test runs; 2026-12-07), --pairs 20 (40 cases,
160 calls each), 8 connections:

    latency   side                  wall s   cpu s
    0.05 s    resample (user x4)      7.03    1.87
              reveal-late             6.44    1.87    reveal / resample: wall 0.92, cpu 1.00
    0.2 s     resample (user x4)     10.48    1.87
              reveal-late             9.92    2.04    wall 0.95, cpu 1.09
    0.2 s     (again)                10.83 / 10.04   1.94 / 2.16   wall 0.93, cpu 1.11

With 40 conversations and 8 connections the sequential turns cost no wall time (the connections
stay busy with other conversations' turns); the per-turn bookkeeping (a ``turns.jsonl`` line and
a reading per turn, the conversation rebuilt per request) costs up to ~10% more CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "src")]

from servers.fault_server import FaultServer  # noqa: E402

DATA = REPO.parent / "shared" / "casebench" / "CASEBench_data.json"
REFUSAL = "I'm sorry, but I can't help with that request."


def reply(body: dict) -> str:
    last = body["messages"][-1]["content"]
    h = hashlib.sha256(last.encode("utf-8")).hexdigest()
    return REFUSAL if int(h, 16) % 3 == 0 else f"Sure, here is how it works in general terms. [{h[:8]}]"


def timed(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--connections", type=int, default=8)
    a = ap.parse_args()
    cli = [sys.executable, "-c", "from casebench.cli import main; main()"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, FaultServer(answer_fn=reply, latency=a.latency) as srv:
        for name, extra in (("resample (user x4)", ["--context-as", "user", "--samples", "4"]),
                            ("reveal-late", ["--context-as", "reveal-late"])):
            out = Path(tmp) / name.split()[0]
            n0 = srv.count
            wall, cpu = timed([*cli, "run", "--model", "openai/bot", "--mode", "respond", "--data", str(DATA),
                               "--pairs", str(a.pairs), "--base-url", srv.base_url, "-o", str(out), "--no-progress",
                               "--no-report", "--max-connections", str(a.connections), *extra])
            rows.append((name, wall, cpu, srv.count - n0))
    print(f"--pairs {a.pairs}, latency {a.latency:g} s, {a.connections} connections")
    print(f"{'side':<22}{'calls':>7}{'wall s':>9}{'cpu s':>8}")
    for name, wall, cpu, calls in rows:
        print(f"{name:<22}{calls:>7}{wall:>9.2f}{cpu:>8.2f}")
    print(f"reveal / resample: wall {rows[1][1] / rows[0][1]:.2f}, cpu {rows[1][2] / rows[0][2]:.2f}")


if __name__ == "__main__":
    main()
