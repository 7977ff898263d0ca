"""``casebench human --json`` on the published dataset, before and after, side by side in one run
(issue 36: the 45 per-category signed-rank tests ran as scipy permutation tests, 10-16 s of every
human section; the exact sign-flip distribution is computed in numpy), and the signed-rank tests
alone, scipy's against ours, in this process.

Each side runs the real CLI in a subprocess with its own ``src`` on ``PYTHONPATH`` (this
checkout's, and with ``--baseline OLD/src`` another one: e.g. ``git archive BASE src | tar -x -C
/tmp/base``). Reports wall and child CPU seconds (CPU is steadier on a loaded machine) and the two
figures the issue names (the 450-query p and the per-query count).

    .venv/bin/python bench/bench_human.py --baseline /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "casebench"


def run_human(src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-c", "from casebench.cli import main; main()", "human",
           str(SHARED / "CASEBench_data.json"), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{src}: human failed ({res.returncode}):\n{res.stderr[-2000:]}")
    d = json.loads(res.stdout)
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "p": d["paired"]["p"], "count": d["pairs_significant"]["count"]}


def signed_rank_only() -> tuple[float, float]:
    """Seconds for the 45 categories' tests: scipy.stats.wilcoxon (its default method, a
    permutation test where there are ties) against ``stats.human.signed_rank_exact``."""
    from scipy.stats import wilcoxon

    sys.path.insert(0, str(REPO / "src"))
    from casebench.stats.human import signed_rank_exact

    recs = json.loads((SHARED / "CASEBench_data.json").read_text())
    by: dict = {}
    for r in recs:
        by.setdefault((r["category"], r["query"]), {})[r["context_intended_to_be_safe"]] = r["scores"]
    cats: dict = {}
    for (cat, _), q in by.items():
        s, u = q[True], q[False]
        cats.setdefault(cat, []).append(s.count(1) / len(s) - u.count(1) / len(u))
    ds = [np.round(np.array(v), 12) for v in cats.values()]
    t0 = time.perf_counter()
    for d in ds:
        if np.count_nonzero(d):
            wilcoxon(d)
    t_scipy = time.perf_counter() - t0
    t0 = time.perf_counter()
    for d in ds:
        signed_rank_exact(d)
    return t_scipy, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout's src folder")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f}")
    sides = [("this checkout", REPO / "src")]
    if args.baseline:
        sides.insert(0, ("baseline", args.baseline))
    rows = []
    for label, src in sides:
        r = run_human(src)
        rows.append(r)
        print(f"{label:<14} wall {r['wall_s']:6.1f} s   cpu {r['cpu_s']:6.1f} s   450-query p {r['p']:.3g}   "
              f"queries that differ {r['count']}")
    if len(rows) == 2:
        print(f"after / before: wall x{rows[1]['wall_s'] / rows[0]['wall_s']:.2f}, "
              f"cpu x{rows[1]['cpu_s'] / rows[0]['cpu_s']:.2f}")
    t_scipy, t_exact = signed_rank_only()
    print(f"45 category signed-rank tests: scipy.stats.wilcoxon {t_scipy:.2f} s, exact sign-flip {t_exact:.3f} s")


if __name__ == "__main__":
    main()
