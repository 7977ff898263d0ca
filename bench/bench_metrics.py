"""Scoring speed: 900 cases, every metric, 2,000 bootstrap resamples (target: under 1 s).

Run: python bench/bench_metrics.py   (uses ../shared/casebench/exp if present, else synthetic)
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from casebench.stats.result import score_predictions
from casebench.stats.options import ScoringOptions

EXP = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "exp"


def inputs():
    from casebench.published import load_published

    files = [EXP / "safety_gpt-4o" / "output_binary.json", EXP / "safety_gpt-4o" / "output_score.json",
             EXP / "safety_llama370B" / "output_logits.json"]
    if all(f.is_file() for f in files):
        return [load_published(f) for f in files]
    from casebench.data import Case
    from casebench.predictions import Predictions

    rng = np.random.default_rng(0)
    cases = [Case(i, "q", {}, bool(i % 2), (1,) * 10 + (2,) * 10, float(rng.uniform()), f"c{i % 45}") for i in range(900)]
    return [Predictions.from_values("synthetic", "m", "prob", cases, rng.uniform(size=900).tolist())]


def main() -> None:
    preds = inputs()
    score_predictions(preds[0], ScoringOptions(n_boot=100))  # warm-up (imports, allocator)
    for p in preds:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            score_predictions(p, ScoringOptions(n_boot=2000, bootstrap_seed=0))
            times.append(time.perf_counter() - t)
        print(f"{p.name:<28} n={p.n}  2000 resamples: best {min(times):.3f} s, median {sorted(times)[2]:.3f} s  (target < 1 s)")
        t = time.perf_counter()
        score_predictions(p, ScoringOptions(n_boot=2000, bootstrap_seed=0), breakdowns=True)
        print(f"{'':<28} with category and intent breakdowns: {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
