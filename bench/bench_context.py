"""Scoring with the context figures: 43 published files, every metric, 2,000 resamples (target:
under 10 s), and the ratio to scoring them without the context and human-reference figures.

The published release beside this checkout (../shared/casebench/exp) holds 19 output files here;
the 43 inputs cycle through them (each input is scored from scratch, as ``casebench score`` does
for 43 arguments). "Without" removes the eight added metrics from the table and skips the
pairing, so it is the scoring of before this change, measured in the same process.

Run: PYTHONPATH=src python bench/bench_context.py [--files 43] [--bootstrap 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

EXP = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "exp"


@contextmanager
def without_context_figures() -> Iterator[None]:
    """The metric table and scoring arrays as they were before the context figures."""
    from casebench.stats import context, pairs
    from casebench.stats.metrics import METRIC

    added = set(context.CONTEXT_METRICS + context.REFERENCE_METRICS)
    METRIC.load_builtins()
    # the registry's own tables, restored after (a bench may reach inside; nothing else does)
    saved_entries, saved_order = dict(METRIC._entries), list(METRIC._order)
    saved_pairs = pairs.pair_positions
    for name in added:
        METRIC._entries.pop(name, None)
    METRIC._order[:] = [n for n in METRIC._order if n not in added]
    pairs.pair_positions = lambda pred, mask: (None, None)  # type: ignore[assignment]
    try:
        yield
    finally:
        METRIC._entries.clear()
        METRIC._entries.update(saved_entries)
        METRIC._order[:] = saved_order
        pairs.pair_positions = saved_pairs  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=43)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from casebench.published import load_published
    from casebench.stats.result import score_predictions
    from casebench.stats.options import ScoringOptions

    files = sorted(EXP.glob("safety_*/output_*.json"))
    if not files:
        raise SystemExit(f"no published files under {EXP}")
    t = time.perf_counter()
    preds = [load_published(files[i % len(files)]) for i in range(args.files)]
    load_s = time.perf_counter() - t

    def run() -> float:
        # fresh predictions each time: an input's scoring result is kept beside its predictions
        # (stats.result), so scoring the same objects again would time a lookup
        fresh = [load_published(files[i % len(files)]) for i in range(args.files)]
        t0 = time.perf_counter()
        for p in fresh:
            score_predictions(p, ScoringOptions(n_boot=args.bootstrap, bootstrap_seed=0))
        return time.perf_counter() - t0

    score_predictions(preds[0], ScoringOptions(n_boot=100))  # warm-up (imports, allocator)
    with_s, without_s = [], []
    for _ in range(args.repeat):  # interleaved, so a change in machine load hits both alike
        with_s.append(run())
        with without_context_figures():
            without_s.append(run())
    best_with, best_without = min(with_s), min(without_s)
    print(f"{args.files} inputs ({len(files)} distinct published files), {args.bootstrap} resamples, "
          f"best of {args.repeat}; load average {os.getloadavg()[0]:.2f}")
    print(f"  loading:                     {load_s:7.2f} s (not in the figures below)")
    print(f"  scoring with context figures {best_with:7.2f} s  (target < 10 s)")
    print(f"  scoring without them         {best_without:7.2f} s")
    print(f"  ratio with / without         {best_with / best_without:7.2f}")


if __name__ == "__main__":
    main()
