"""Runner concurrency: one request at a time (the published script's pattern) vs 32 connections.

Both runs go through the real runner and the real OpenAI backend to the scripted loopback server
(``tests/servers/fault_server.py``), which waits ``--latency`` seconds (default 0.2) before each
answer, as a remote API would. Prints both wall times and the ratio.

    .venv/bin/python bench/bench_runner.py [--requests 200] [--connections 32] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from servers.fault_server import FaultServer  # noqa: E402

from casebench.runs.execute import RetryPolicy, RunConfig, run  # noqa: E402


def invented_dataset(path: Path, n: int) -> Path:
    """``n`` benign invented cases (no benchmark text), enough for a timing run."""
    recs = []
    for i in range(n):
        safe = i % 2 == 0
        recs.append({
            "query": f"[case {i}] How do I keep my tomato seedlings from wilting?",
            "context": {
                "sender": {"nature_of_the_interaction": "A gardener asking.", "platform_type": "A forum."},
                "recipient": {"type": "A helper.", "background": "Keeps a vegetable patch."},
                "transmission_principle": {"sender_purpose": "Healthy plants.", "confidentiality": "Public.",
                                           "source_accountability": "Named account.", "urgency": "Low."},
            },
            "context_intended_to_be_safe": safe,
            "scores": [1] * 15 + [2] * 5,
            "safe_rate": (15 + int(safe)) / 21,
            "category": f"topic {i % 5}",
        })
    path.write_text(json.dumps(recs))
    return path


def timed_run(srv: FaultServer, data: Path, out: Path, connections: int) -> tuple[float, int]:
    cfg = RunConfig(mode="binary", model="openai/bench-judge", data=data, out=out, max_connections=connections,
                    backend_options={"base_url": srv.base_url, "timeout": 30.0}, progress=False,
                    retry=RetryPolicy(max_attempts=3, base_s=0.05, cap_s=0.5))
    n0 = srv.count
    t0 = time.perf_counter()
    summary = run(cfg)
    elapsed = time.perf_counter() - t0
    if summary.status != "complete":
        raise SystemExit(f"bench run did not complete: {summary.line()}")
    return elapsed, srv.count - n0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    args = ap.parse_args()
    os.environ.pop("OPENAI_API_KEY", None)
    with tempfile.TemporaryDirectory() as tmp, FaultServer(latency=args.latency) as srv:
        data = invented_dataset(Path(tmp) / "cases.json", args.requests)
        seq_s, seq_n = timed_run(srv, data, Path(tmp) / "sequential", 1)
        par_s, par_n = timed_run(srv, data, Path(tmp) / "concurrent", args.connections)
    print(f"server latency {args.latency * 1000:.0f} ms, {args.requests} requests (binary mode, real OpenAI backend)")
    print(f"  one at a time (published pattern): {seq_s:7.2f} s  ({seq_n} requests, {seq_n / seq_s:6.1f} req/s)")
    print(f"  {args.connections} connections:                  {par_s:7.2f} s  "
          f"({par_n} requests, {par_n / par_s:6.1f} req/s)")
    print(f"  speed-up: {seq_s / par_s:.1f}x  (floor from latency alone: {args.requests * args.latency:.1f} s "
          f"vs {-(-args.requests // args.connections) * args.latency:.1f} s)")


if __name__ == "__main__":
    main()
