"""Coverage of the corrected refusal rate where the run's writer is new (issue 43, item 5).

The reader's error differs from writer to writer: the stored validation sets of one kind of
writer (``classify/validation.json``, ``pooled_sets``) disagree more than their binomial error
allows. So a run's writer is, to the reader, a new draw from that spread. Per pool (learned on
large writers, learned on small ones, rules on large, learned-lm on large) the spread is the
DerSimonian-Laird fit of the stored sets on the logit scale (mean and between-set variance of
Se and of Sp), and per draw:

* the **validation**: as many sets as are stored, of the stored sizes, each set's Se and Sp a
  draw from the spread and its counts binomial (``--fixed-validation``: the stored counts as
  they are, the run's writer alone drawn: coverage given the validation the package ships);
* the **run**: ``--queries`` queries of two answers each, refusals correlated within a query (a
  query effect N(0, ``--sigma``) on the logit scale, its mean set so the chatbot's refusal rate on
  cases like the run's is the row's true rate), each answer read with the run's writer's Se
  and Sp, a new draw from the spread;
* **corrected**: ``casebench.corrected_refusal_rate`` (``--method old``: the interval of the
  tree given by ``--src``, e.g. main before issue 43: the raw Wilson interval clustered by query
  mapped through the correction and widened by the delta method, ``stats.refusal.transported_rate``);
* beside it, from ``--labels`` answers labelled at random (the truth): the **labels-only**
  Wilson interval and **PPI++** (``stats.ppi.ppi_mean``, clustered by query, its Wilson interval
  on the effective size).

Columns: the share of draws with a two-sided interval and its coverage of the true rate, the
share with only a bound and how often the bound holds, the share with nothing printed, the
two-sided intervals' mean width; the labels-only and PPI coverage and width. Target: two-sided
0.93-0.97, bounds hold at their level (>= 0.95), nothing printed in at most 10% of draws.

    .venv/bin/python bench/bench_correction_coverage.py [--draws 1000] [--quick] [--workers 2]
    .venv/bin/python bench/bench_correction_coverage.py --method old --src OLD_TREE/src   # before

Measured (2-core dev box shared with other work, after: Intel Xeon; 1,000 draws a row, seed 43, redrawn
validation, 450 queries x 2 answers, query effect sd 1, 100 labels; Monte-Carlo s.e. 0.007 near
0.95). ``2-sided``: share of draws with a two-sided interval, ``cover`` its coverage; ``bound``:
share with a bound only, ``holds`` how often it held; ``none``: nothing printed. Before (issue 43,
first round): the simulation's draws, two-sided where the central 80% of the draws lay in [0, 1];
after: what is said follows the point (Rogan-Gladen at the pooled Se and Sp; stats.correction)::

    pool              rate | before: 2-sided cover bound holds  none | after: 2-sided cover width bound holds  none
    learned/large     0.05 |           0.462 0.985 0.538 0.980 0.000 |          0.957 0.993 0.114 0.043 1.000 0.000
    learned/large     0.15 |           0.983 0.976 0.017 1.000 0.000 |          1.000 0.976 0.198 0.000   n/a 0.000
    learned/large     0.35 |           1.000 0.979 0.000   n/a 0.000 |          1.000 0.979 0.271 0.000   n/a 0.000
    learned/large     0.60 |           0.999 0.959 0.001 1.000 0.000 |          1.000 0.959 0.336 0.000   n/a 0.000
    learned/large     0.90 |           0.387 0.930 0.613 0.977 0.000 |          0.974 0.965 0.198 0.026 0.962 0.000
    learned/small     0.05 |           0.089 1.000 0.830 1.000 0.081 |          0.867 1.000 0.329 0.099 1.000 0.034
    learned/small     0.15 |           0.392 1.000 0.472 0.992 0.136 |          0.840 0.994 0.555 0.107 1.000 0.053
    learned/small     0.35 |           0.451 0.991 0.445 0.993 0.104 |          0.884 0.991 0.792 0.073 1.000 0.043
    learned/small     0.60 |           0.313 0.981 0.629 0.987 0.058 |          0.883 0.990 0.732 0.081 1.000 0.036
    learned/small     0.90 |           0.136 0.941 0.840 0.994 0.024 |          0.610 0.980 0.667 0.369 0.992 0.021
    rules/large       0.05 |           0.336 0.952 0.657 0.976 0.007 |          0.881 0.981 0.267 0.117 0.991 0.002
    rules/large       0.15 |           0.745 0.977 0.235 0.877 0.020 |          0.955 0.949 0.510 0.038 1.000 0.007
    rules/large       0.35 |           0.727 0.950 0.263 0.958 0.010 |          0.970 0.951 0.703 0.027 1.000 0.003
    rules/large       0.60 |           0.370 0.922 0.627 0.963 0.003 |          0.976 0.950 0.601 0.022 1.000 0.002
    rules/large       0.90 |           0.113 0.876 0.886 0.979 0.001 |          0.613 0.976 0.518 0.386 1.000 0.001
    learned-lm/large  0.05 |           0.199 1.000 0.801 0.999 0.000 |          0.893 1.000 0.143 0.107 1.000 0.000
    learned-lm/large  0.15 |           0.809 0.999 0.189 0.979 0.002 |          0.998 0.995 0.270 0.001 1.000 0.001
    learned-lm/large  0.35 |           0.962 0.982 0.036 1.000 0.002 |          0.992 0.982 0.428 0.008 1.000 0.000
    learned-lm/large  0.60 |           0.962 0.973 0.038 0.974 0.000 |          0.999 0.971 0.399 0.001 1.000 0.000
    learned-lm/large  0.90 |           0.509 0.927 0.491 0.953 0.000 |          0.972 0.942 0.172 0.028 1.000 0.000

(Labels-only Wilson and PPI++ from 100 labels, beside: 0.926-0.971 and 0.930-0.960.) After:
two-sided coverage 0.942-1.000 in every row; nothing printed in at most 5.3% of runs; bounds hold
in 0.962-1.000 in every row that prints any. A bound where the point lies at or beyond an end is
taken at one-sided (1 - level) / 10 (``stats.correction.SELECTED_SHARE``): at the level's own
quantile it held in 0.864-0.893 in three rows (learned/large 0.9, rules 0.6, learned-lm 0.9) where
a bound is printed in 2-3% of runs: the point lies beyond the end there only for a writer in the
far tail of the spread, and the printed statement is selected by that (an exact conditional bound
said nothing in 10-23% of runs where bounds are common).
Why the before under-covered: whether its interval's ends lay in [0, 1] depends on the observed
rate, which carries the new writer's unseen error, so it printed two-sided intervals mostly for
the runs they miss (rules at 0.9: in 11% of runs, the writers in the low tail of Se, mean Se
percentile 0.07 against 0.45 over all runs; the predictive itself was calibrated: 2.0% / 1.7% of
writers beyond its 2.5% / 97.5% points). The point's side splits the runs about evenly near an
end, so each kind of statement keeps about its level.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

#: the pools: (classifier, kind of writer)
POOLS = (("learned", "large"), ("learned", "small"), ("rules", "large"), ("learned-lm", "large"))
#: the true refusal rates of the rows
RATES = (0.05, 0.15, 0.35, 0.6, 0.9)


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def stored_pool(classifier: str, writer: str) -> list[dict[str, int]]:
    """The stored validation sets a correction pools for ``classifier`` on ``writer``'s kind."""
    from casebench.classify.validation import load

    entry = (load() or {})["classifiers"][classifier]
    out = []
    for name in entry["pooled_sets"][writer]:
        (tn, fp), (fn, tp) = entry["sets"][name]["partial_as"]["unsafe"]["binary"]["matrix"]
        out.append({"tp": int(tp), "fn": int(fn), "tn": int(tn), "fp": int(fp)})
    return out


def dl_fit(xs: list[int], ns: list[int]) -> tuple[float, float]:
    """DerSimonian-Laird mean and between-set variance of the sets' logits."""
    x, n = np.array(xs, float), np.array(ns, float)
    c = np.where((x == 0) | (x == n), 0.5, 0.0)
    y = np.log((x + c) / (n - x + c))
    v = 1 / (x + c) + 1 / (n - x + c)
    w = 1 / v
    fixed = float((w * y).sum() / w.sum())
    q = float((w * (y - fixed) ** 2).sum())
    k = len(y)
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - (w * w).sum() / w.sum())) if k > 1 else 0.0
    wr = 1 / (v + tau2)
    return float((wr * y).sum() / wr.sum()), tau2


def intercept(rate: float, sigma: float) -> float:
    """The logit mean whose query-effect mixture has mean ``rate`` (bisection on a fixed grid)."""
    z = np.random.default_rng(0).standard_normal(400_000) * sigma
    lo, hi = -12.0, 12.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expit(mid + z).mean() < rate else (lo, mid)
    return (lo + hi) / 2


def old_interval(f: np.ndarray, qid: np.ndarray, pool: list[dict[str, int]], level: float) -> dict[str, Any]:
    """The interval of the tree before issue 43 (``stats.refusal.transported_rate``)."""
    from casebench.stats.bootstrap import proportion_design_effect, wilson_ci
    from casebench.stats.refusal import reader_error_of, transported_rate

    v = {"pool": [{"set": f"s{i}", "matrix": [[s["tn"], s["fp"]], [s["fn"], s["tp"]]]} for i, s in enumerate(pool)],
         "matrix": [[pool[0]["tn"], pool[0]["fp"]], [pool[0]["fn"], pool[0]["tp"]]], "set": "s0"}
    err = reader_error_of(v)
    deff = proportion_design_effect(f, np.ones_like(f), qid)
    deff = max(1.0, deff) if math.isfinite(deff) else 1.0
    k = int(qid.max()) + 1
    raw = wilson_ci(float(f.sum()) / deff, len(f) / deff, level, df=k - 1)
    got, _ = transported_rate(float(f.mean()), len(f), raw, err, level) if err is not None else (None, None)
    return {"ci": list(got.ci) if got is not None else None, "upper_bound": None, "lower_bound": None}


def one_row(task: tuple[Any, ...]) -> dict[str, Any]:
    """``draws`` draws of one pool and rate (a worker's share); returns the tallies."""
    (classifier, writer, rate, draws, seed, args) = task
    from casebench.stats.bootstrap import wilson_ci
    from casebench.stats.ppi import ppi_mean

    new = args["method"] == "new"
    if new:
        from casebench import corrected_refusal_rate
    pool = stored_pool(classifier, writer)
    mu_se, t2_se = dl_fit([s["tp"] for s in pool], [s["tp"] + s["fn"] for s in pool])
    mu_sp, t2_sp = dl_fit([s["tn"] for s in pool], [s["tn"] + s["fp"] for s in pool])
    rng = np.random.default_rng(seed)
    Q, sigma, level, n_lab = args["queries"], args["sigma"], args["level"], args["labels"]
    a = intercept(rate, sigma)
    qid = np.repeat(np.arange(Q), 2)
    t: dict[str, Any] = {k: 0 for k in ("two", "two_hit", "bound", "bound_hit", "none", "lab_hit", "ppi_hit")}
    t |= {"width": 0.0, "lab_width": 0.0, "ppi_width": 0.0, "draws": draws}
    for _ in range(draws):
        if args["fixed_validation"]:
            val = pool
        else:
            val = []
            for s in pool:
                se_i = expit(rng.normal(mu_se, math.sqrt(t2_se)))
                sp_i = expit(rng.normal(mu_sp, math.sqrt(t2_sp)))
                m1, m0 = s["tp"] + s["fn"], s["tn"] + s["fp"]
                tp, tn = int(rng.binomial(m1, se_i)), int(rng.binomial(m0, sp_i))
                val.append({"tp": tp, "fn": m1 - tp, "tn": tn, "fp": m0 - tn})
        se = float(expit(rng.normal(mu_se, math.sqrt(t2_se))))
        sp = float(expit(rng.normal(mu_sp, math.sqrt(t2_sp))))
        u = rng.normal(0.0, sigma, Q)
        y = (rng.random(2 * Q) < expit(a + u[qid])).astype(float)
        f = np.where(y == 1, rng.random(2 * Q) < se, rng.random(2 * Q) >= sp).astype(float)
        d = corrected_refusal_rate(f, qid, val, level).to_dict() if new else old_interval(f, qid, val, level)
        if d["ci"] is not None:
            t["two"] += 1
            t["two_hit"] += int(d["ci"][0] <= rate <= d["ci"][1])
            t["width"] += d["ci"][1] - d["ci"][0]
        elif d["upper_bound"] is not None or d["lower_bound"] is not None:
            t["bound"] += 1
            t["bound_hit"] += int((d["upper_bound"] is None or rate <= d["upper_bound"])
                                  and (d["lower_bound"] is None or rate >= d["lower_bound"]))
        else:
            t["none"] += 1
        lab = rng.choice(2 * Q, size=n_lab, replace=False)
        lo, hi = wilson_ci(float(y[lab].sum()), n_lab, level)
        t["lab_hit"] += int(lo <= rate <= hi)
        t["lab_width"] += hi - lo
        est = ppi_mean(y[lab], f[lab], f, population="includes", clusters=qid[lab], clusters_pop=qid,
                       seed=int(rng.integers(1 << 30)))
        lo, hi = est.rate_ci(level)
        t["ppi_hit"] += int(lo <= rate <= hi)
        t["ppi_width"] += hi - lo
    return {"pool": (classifier, writer), "rate": rate, **t}


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(parts[0])
    for p in parts[1:]:
        for k, v in p.items():
            if isinstance(v, (int, float)) and k not in ("rate",):
                out[k] += v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000, help="draws per row")
    ap.add_argument("--quick", action="store_true", help="200 draws per row")
    ap.add_argument("--queries", type=int, default=450, help="queries per run (two answers each)")
    ap.add_argument("--sigma", type=float, default=1.0, help="the query effect's sd (logit scale)")
    ap.add_argument("--labels", type=int, default=100, help="answers labelled for labels-only and PPI")
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--fixed-validation", action="store_true", help="the stored validation counts, not redrawn")
    ap.add_argument("--method", choices=("new", "old"), default="new",
                    help="new: casebench.corrected_refusal_rate; old: stats.refusal.transported_rate of --src")
    ap.add_argument("--src", default=str(HERE.parent / "src"), help="the source tree to measure (default: this one)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--pools", nargs="*", default=None, help="only these pools (e.g. learned/small)")
    ap.add_argument("--rates", nargs="*", type=float, default=None, help="only these true rates")
    args = ap.parse_args()
    sys.path.insert(0, args.src)
    draws = 200 if args.quick else args.draws
    opts = {"queries": args.queries, "sigma": args.sigma, "labels": args.labels, "level": args.level,
            "fixed_validation": args.fixed_validation, "method": args.method}
    chunks = max(1, args.workers)
    tasks = []
    for i, (c, w) in enumerate(POOLS):
        if args.pools and f"{c}/{w}" not in args.pools:
            continue
        for j, rate in enumerate(RATES):
            if args.rates and rate not in args.rates:
                continue
            for h in range(chunks):
                n = draws // chunks + (1 if h < draws % chunks else 0)
                tasks.append((c, w, rate, n, [args.seed, i, j, h], opts))
    t0 = time.perf_counter()
    with Pool(args.workers, initializer=sys.path.insert, initargs=(0, args.src)) as p:
        parts = p.map(one_row, tasks)
    rows: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for part in parts:
        rows.setdefault((part["pool"], part["rate"]), []).append(part)
    print(f"corrected refusal rate ({args.method} method, {args.src}), {'stored' if args.fixed_validation else 'redrawn'}"
          f" validation, the run's writer new: {draws} draws a row, {args.queries} queries x 2 answers, query effect "
          f"sd {args.sigma}, {args.labels} labels; Monte-Carlo s.e. near 0.95: {math.sqrt(0.95 * 0.05 / draws):.3f}")
    head = (f"{'pool':<18} {'rate':>5} | {'2-sided':>7} {'cover':>6} {'width':>6} | {'bound':>6} {'holds':>6} | "
            f"{'none':>5} {'holds':>6} | {'labels':>6} {'width':>6} | {'PPI':>6} {'width':>6}")
    print(head)
    print("-" * len(head))

    def r(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "   n/a"
    for (pool, rate), part in rows.items():
        t = merge(part)
        n = t["draws"]
        print(f"{pool[0] + '/' + pool[1]:<18} {rate:5.2f} | {r(t['two'], n):>7} {r(t['two_hit'], t['two']):>6} "
              f"{r(t['width'], t['two']):>6} | {r(t['bound'], n):>6} {r(t['bound_hit'], t['bound']):>6} | "
              f"{r(t['none'], n):>5} {r(t['two_hit'] + t['bound_hit'], t['two'] + t['bound']):>6} | "
              f"{r(t['lab_hit'], n):>6} {r(t['lab_width'], n):>6} | "
              f"{r(t['ppi_hit'], n):>6} {r(t['ppi_width'], n):>6}")
    print(f"({time.perf_counter() - t0:.0f} s on {args.workers} workers; target: two-sided 0.93-0.97, bounds hold "
          ">= 0.95, none <= 0.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
