"""Respond mode with the embedded model over 45 real cases (one per category): seconds per case,
and the share of the run's time spent classifying the answers with the offline default
classifier (target: under 5%).

Run: python bench/bench_respond.py [--data PATH] [--cases 45] [--max-tokens 512]
(needs the real dataset: --data or $CASEBENCH_DATA or ../shared/casebench/CASEBench_data.json)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from machine import machine_line  # bench/machine.py: run as `python bench/bench_respond.py`


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("CASEBENCH_DATA") or
                    str(Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "CASEBench_data.json"))
    ap.add_argument("--cases", type=int, default=45)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--context-as", default="system")
    args = ap.parse_args()


    from casebench.runs.execute import RunConfig, run
    from casebench.runs.record import final_records, iter_records

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cfg = RunConfig(mode="respond", data=args.data, out=out, stratified=args.cases, selection_seed=0,
                        max_tokens=args.max_tokens, context_as=args.context_as, progress=False)
        t0 = time.perf_counter()
        summary = run(cfg)
        wall = time.perf_counter() - t0
        finals = final_records(iter_records(out))
        classify_s = sum(float(r.detail.get("classify_s", 0.0)) for r in finals.values())
        tokens = sum(int(r.usage.get("completion_tokens", 0)) for r in finals.values())
    print(machine_line())
    print(f"respond mode, embedded SmolLM2-135M, {args.cases} cases, context as {args.context_as}, "
          f"max_tokens {args.max_tokens}: {summary.status}")
    print(f"  wall time {wall:.1f} s, {wall / args.cases:.2f} s per case, {tokens / args.cases:.0f} tokens per answer")
    print(f"  classifying (offline default classifier): {classify_s * 1000:.1f} ms in all, {100 * classify_s / wall:.3f}% of the run "
          f"(target < 5%)")


if __name__ == "__main__":
    main()
