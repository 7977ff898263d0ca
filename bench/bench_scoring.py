"""One scoring pass (issue 24): ``casebench report`` over 43 inputs and ``casebench score
--reference`` of one input, a baseline checkout against this one, side by side in one run.

* **report**: the 43 inputs of ``bench_report.make_inputs`` (the published files, then seeded
  variants of them up to 43), ``casebench report FILES --data DATA``; before the change every
  input's scoring arrays were built several times (score, comparisons, ablation, placement,
  say-do each built their own) and bootstraps were repeated; now each input is scored once.
* **score --reference**: one published input with the 17 published models as reference rows.
  The baseline scores all of them on every call; this checkout scores them on the first call
  and keeps the scores in the cache directory (``reference_rows.ReferenceCache``: one JSON file per row), so the
  second call reads them. Each side gets its own empty ``$CASEBENCH_CACHE``.

Each command runs in a subprocess with the side's ``src`` on ``PYTHONPATH``; the figures are wall
and CPU seconds (user + system of the child: steadier than wall time on a loaded machine) and the
ratios this / baseline. The machine and its load are printed: quote them with the figures.

    git worktree add --detach /tmp/base 6f7d081
    .venv/bin/python bench/bench_scoring.py --baseline /tmp/base/src
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from machine import cpu_model  # noqa: E402  (bench/machine.py)

from bench_report import SHARED, make_inputs  # noqa: E402

REPO = HERE.parent
ONE = SHARED / "exp" / "safety_gpt-4o" / "output_binary.json"


def timed(src: Path, args: list[str], cache: Path) -> tuple[float, float]:
    """(wall s, cpu s) of ``casebench ARGS`` run with ``src`` on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": str(src), "CASEBENCH_CACHE": str(cache)}
    cmd = [sys.executable, "-c", "from casebench.cli import main; main()", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{src}: casebench {' '.join(args[:2])} failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the baseline checkout's src folder")
    ap.add_argument("--inputs", type=int, default=43)
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--skip-report", action="store_true")
    args = ap.parse_args()
    sides = [("baseline", args.baseline), ("this", REPO / "src")]
    print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f}")
    boot = ["--bootstrap", str(args.bootstrap)]
    with tempfile.TemporaryDirectory(prefix="bench-scoring-") as tmp:
        t = Path(tmp)
        results: dict[str, dict[str, tuple[float, float]]] = {s: {} for s, _ in sides}
        for side, src in sides:
            cache = t / f"cache-{side}"
            cache.mkdir()
            ref = ["score", str(ONE), "--reference", str(SHARED), *boot]
            results[side]["score --reference (1st call)"] = timed(src, ref, cache)
            results[side]["score --reference (2nd call)"] = timed(src, ref, cache)
            results[side]["score, no reference"] = timed(src, ["score", str(ONE), "--no-reference", *boot], cache)
        if not args.skip_report:
            files = make_inputs(t / "exp", args.inputs)
            for side, src in sides:
                html = t / f"report-{side}.html"
                results[side][f"report, {len(files)} inputs"] = timed(
                    src, ["report", *map(str, files), "-o", str(html), "--data", str(SHARED / "CASEBench_data.json"),
                          *boot], t / f"cache-{side}")
        print(f"{'':<32}{'baseline wall / cpu s':>24}{'this wall / cpu s':>22}{'ratio (cpu)':>14}")
        for what in results["baseline"]:
            (bw, bc), (nw, nc) = results["baseline"][what], results["this"][what]
            print(f"{what:<32}{bw:>12.1f} / {bc:>7.1f}{nw:>12.1f} / {nc:>7.1f}{nc / bc:>13.2f}x")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
