"""Coverage of the refusal rate's intervals, with known truth (issue 35, item 6).

A simulated respond run: ``Q`` queries, each in a safe- and an unsafe-intent context. Whether the
chatbot refuses is drawn per case with a query effect on the logit scale (``sigma``: 0 for no
clustering, larger for refusals clustered by query), so the two answers of a query go together
as they do in real runs. A reader with known sensitivity and specificity reads every answer; its
stored validation is a binomial draw of its counts on ``m`` refusals and ``m`` answers of other
writing (so the transport assumption holds by construction). People label ``n`` answers drawn by
``annotate answers``' own stratified draw (``annotate.answers.draw_sample``: reader's verdict by
context intent, weights recorded) with the truth.

Per draw, two 95% intervals of the refusal rate, each against the truth it claims: the chatbot's
refusal rate on cases like the run's (the superpopulation mean, computed once per scenario from
2,000,000 draws of the model):

* **corrected**: the transported Rogan-Gladen correction as ``score`` makes it
  (``stats.refusal.transported_rate``: from the raw rate's Wilson interval clustered by query,
  n / design effect with t on K - 1 degrees of freedom, widened by the validation's error; the
  validation one set, so no spread between sets to carry), withheld where the raw interval
  reaches outside [1 - Sp, Se] (the share withheld is printed: coverage is over the figures
  printed);
* **people**: the people-based estimate (``stats.people_refusal.people_refusal_figures``, PPI++
  with cross-fitted lambda, stratified by intent, clustered by query), the path ``score`` takes;
  and its context shift (answered in the safe-intent context minus the unsafe one, over the
  pairs) against the model's.

Prints the coverage table (with its Monte-Carlo standard error) and the mean widths, by reader
quality and clustering; the target is [0.93, 0.97].

    .venv/bin/python bench/bench_ppi_coverage.py [--draws 1000] [--queries 60] [--labels 50]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from casebench.annotate.answers import AnswerItem, draw_sample  # noqa: E402
from casebench.stats.people_refusal import people_refusal_figures  # noqa: E402
from casebench.stats.bootstrap import proportion_design_effect, wilson_ci  # noqa: E402
from casebench.stats.refusal import reader_error_of, transported_rate  # noqa: E402

#: readers by quality: (sensitivity, specificity)
READERS = {"good reader (Se 0.95, Sp 0.97)": (0.95, 0.97), "weak reader (Se 0.60, Sp 0.75)": (0.60, 0.75)}
#: clustering: the query effect's standard deviation on the logit scale
CLUSTERING = {"no clustering (sigma 0)": 0.0, "clustered by query (sigma 1.5)": 1.5}
#: the refusal logit's mean in the safe- and the unsafe-intent context
MU = {True: -1.5, False: 0.5}


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def truths(sigma: float, rng: np.random.Generator, draws: int = 2_000_000) -> tuple[float, float]:
    """The chatbot's refusal rate over the model (both contexts equally often), and its context
    shift (answered in the safe-intent context minus the unsafe one)."""
    u = rng.normal(0.0, sigma, draws) if sigma else np.zeros(draws)
    safe, unsafe = expit(MU[True] + u).mean(), expit(MU[False] + u).mean()
    return float((safe + unsafe) / 2), float(unsafe - safe)


def one_draw(rng: np.random.Generator, queries: int, sigma: float, se: float, sp: float, n_labels: int,
             m: int, seed: int) -> tuple[Any, Any, Any]:
    u = rng.normal(0.0, sigma, queries) if sigma else np.zeros(queries)
    intent = np.tile([True, False], queries)
    qid = np.repeat(np.arange(queries), 2)
    p = expit(np.where(intent, MU[True], MU[False]) + u[qid])
    y = (rng.random(2 * queries) < p).astype(float)
    f = np.where(y == 1, rng.random(2 * queries) < se, rng.random(2 * queries) >= sp).astype(float)
    tp = int(rng.binomial(m, se))
    tn = int(rng.binomial(m, sp))
    err = reader_error_of({"matrix": [[tn, m - tn], [m - tp, tp]], "set": "simulated"})
    deff = proportion_design_effect(f, np.ones_like(f), qid)  # as score clusters by query
    deff = max(1.0, deff) if math.isfinite(deff) else 1.0
    raw = wilson_ci(float(f.sum()) / deff, len(f) / deff, 0.95, df=queries - 1)
    got, _ = transported_rate(float(f.mean()), len(f), raw, err, 0.95)
    corrected = got.ci if got is not None else None
    items = [AnswerItem(case=i, sample=0, query="", answer="", reader="refuse" if f[i] else "comply",
                        intended_safe=bool(intent[i])) for i in range(len(f))]
    drawn = draw_sample(items, n_labels, seed)
    rows = [{"case": d.item.case, "sample": 0, "label": "refuse" if y[d.item.case] else "comply",
             "weight": d.weight} for d in drawn]
    block = people_refusal_figures(
        labels={"file": "simulated", "labelled_by": "people", "stratified": True, "rows": rows},
        case_index=list(range(len(f))), refused=f, human_safe=intent, intended_safe=intent, query_ids=qid,
        pairs=np.arange(len(f)).reshape(-1, 2), partial_as_safe=False,
        validation={"matrix": [[tn, m - tn], [m - tp, tp]], "set": "simulated"}, seed=seed)
    fig, shift = block["figures"]["refusal_rate"], block["figures"]["context_shift"]
    people = tuple(fig["ci"]) if fig else None
    return corrected, people, (tuple(shift["ci"]) if shift and shift.get("ci") else None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=60, help="queries per run (two answers each)")
    ap.add_argument("--labels", type=int, default=50, help="answers people label per run")
    ap.add_argument("--validation", type=int, default=150, help="refusals and answers in the stored validation")
    ap.add_argument("--seed", type=int, default=35)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"coverage of 95% intervals of the refusal rate: {args.draws} draws per row, {args.queries} queries "
          f"({2 * args.queries} answers), {args.labels} labelled, validation {args.validation} + {args.validation}; "
          f"Monte-Carlo s.e. of a coverage near 0.95: {math.sqrt(0.95 * 0.05 / args.draws):.3f}")
    head = (f"{'reader':<32} {'clustering':<32} {'truth':>6}  {'corrected':>9} {'width':>6}  {'people':>7} {'width':>6}"
            f"  {'shift':>6} {'people':>7} {'width':>6}")
    print(head)
    print("-" * len(head))
    t0 = time.perf_counter()
    for rname, (se, sp) in READERS.items():
        for cname, sigma in CLUSTERING.items():
            truth, shift = truths(sigma, np.random.default_rng(args.seed + 1))
            hit: dict[str, list[bool]] = {"corrected": [], "people": [], "shift": []}
            width: dict[str, list[float]] = {"corrected": [], "people": [], "shift": []}
            for d in range(args.draws):
                c, p, s = one_draw(rng, args.queries, sigma, se, sp, args.labels, args.validation, seed=d)
                for name, ci, want in (("corrected", c, truth), ("people", p, truth), ("shift", s, shift)):
                    if ci is None:
                        continue
                    hit[name].append(ci[0] <= want <= ci[1])
                    width[name].append(ci[1] - ci[0])
            cov = {k: (np.mean(v) if v else float("nan")) for k, v in hit.items()}
            wid = {k: (np.mean(v) if v else float("nan")) for k, v in width.items()}
            print(f"{rname:<32} {cname:<32} {truth:6.3f}  {cov['corrected']:9.3f} {wid['corrected']:6.3f}  "
                  f"{cov['people']:7.3f} {wid['people']:6.3f}  {shift:6.3f} {cov['shift']:7.3f} {wid['shift']:6.3f}"
                  + (f"  (corrected withheld in {args.draws - len(hit['corrected'])} draws)"
                     if len(hit["corrected"]) < args.draws else "")
                  + (f"  ({args.draws - len(hit['shift'])} draws without a shift interval)"
                     if len(hit["shift"]) < args.draws else ""))
    print(f"({time.perf_counter() - t0:.0f} s; target [0.93, 0.97])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
