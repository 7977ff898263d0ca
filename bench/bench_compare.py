"""Speed of ``casebench compare``: 10 inputs of 900 cases, all 45 pairs, 2,000 paired resamples.

Target (from the issue): under 5 s. The inputs are synthetic judges built on the real dataset's
cases and labels when ../shared/casebench/CASEBench_data.json is there (else on synthetic cases):
5 score-mode and 5 prob-mode judges with different noise, a few missing answers each, so the
default mode's per-pair case sets differ and every pair pays for its own scoring arrays.

    .venv/bin/python bench/bench_compare.py
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from casebench.stats.compare import compare
from casebench.stats.options import ScoringOptions
from casebench.data import Case, load_dataset
from casebench.predictions import Predictions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "CASEBench_data.json"
N_INPUTS, N_CASES, N_BOOT = 10, 900, 2000


def cases() -> tuple[list[Case], str]:
    if DATA.is_file():
        return list(load_dataset(DATA).cases), "real dataset cases"
    rng = np.random.default_rng(1)
    out = []
    for i in range(N_CASES):
        rate = float(rng.integers(0, 22)) / 21
        out.append(Case(i, f"synthetic query {i // 2}", {}, bool(i % 2), (1,) * 20, rate, f"cat {i % 45}"))
    return out, "synthetic cases"


def judges(cs: list[Case]) -> list[Predictions]:
    rng = np.random.default_rng(0)
    g = np.array([c.human_safe_rate for c in cs])
    preds = []
    for k in range(N_INPUTS):
        noisy = np.clip(g + rng.normal(0, 0.1 + 0.03 * k, len(g)), 0.001, 0.999)
        mode = "score" if k % 2 == 0 else "prob"
        values: list[float | None] = list(noisy * 10 + 0.5 if mode == "score" else noisy)
        for i in rng.choice(len(values), size=5, replace=False):
            values[int(i)] = None
        preds.append(Predictions.from_values(f"synthetic-{k}", f"judge{k}", mode, cs, values))
    return preds


def main() -> None:
    cs, what = cases()
    preds = judges(cs)
    compare(preds[:2], ScoringOptions(n_boot=10))  # warm imports (statsmodels, scipy), as a CLI run pays them once
    t0 = time.perf_counter()
    result = compare(preds, ScoringOptions(n_boot=N_BOOT, bootstrap_seed=0))
    elapsed = time.perf_counter() - t0
    t1 = time.perf_counter()
    compare(preds, ScoringOptions(paper_compat=True, n_boot=N_BOOT, bootstrap_seed=0))
    elapsed_pc = time.perf_counter() - t1
    print(f"compare: {N_INPUTS} inputs x {N_CASES} cases ({what}), {len(result.pairs)} pairs, {N_BOOT} resamples")
    print(f"  default mode (per-pair case sets): {elapsed:.2f} s")
    print(f"  paper-compatible (all cases):      {elapsed_pc:.2f} s")
    print(f"  target: < 5 s -> {'ok' if max(elapsed, elapsed_pc) < 5 else 'TOO SLOW'}")


if __name__ == "__main__":
    main()
