"""Speed of the end of a ``casebench run`` (``cli.run.score_and_report``), before and after.

What ``casebench run`` does once the answers are in: score the run once, print the first screen
and the table, and write the HTML report with the published models beside the run on the same
cases. "Before" is commit ``7658b48`` (its ``src`` extracted with ``git archive``, as
``bench_report.py --baseline-ref`` does), "after" this checkout's ``src``; each side runs in a
subprocess with its own ``src`` on ``PYTHONPATH``, timed by wall seconds and the child's CPU
seconds (user + system, ``RUSAGE_CHILDREN`` deltas: steadier than wall time on a loaded machine).

The run both sides read is made by the OLD code (so both can read it): a respond run
(``--pairs 10`` on the real dataset, ``--no-report``) of a scripted chatbot on a loopback
OpenAI-compatible server (``tests/servers/fault_server.py``) that refuses about a third of the
queries, chosen by a hash of the prompt. It is copied once per side (a side writes
``report.html`` into it). Each side has its own ``CASEBENCH_CACHE`` in which
``published/<pinned commit>/exp`` points at ``../shared/casebench/exp`` (the layout ``casebench
data fetch`` leaves, read by both versions), so both find the 19 published files. Call 1 starts
from an empty cache; call 2 is the same command again on the same cache: the new version reads
the reference rows back from its JSON cache (``reference_rows``), the old one rescored every
published file each time.

    .venv/bin/python bench/bench_run_end.py [--pairs 10] [--baseline-ref 7658b48]

Figures (2-core AMD EPYC, loaded by a concurrent test run; 2026-11-28), seconds:

    --pairs 10 (20 cases; 18 published models shown, the 19th file is an ablation)
    side                     call 1 wall      cpu call 2 wall      cpu
    before (7658b48)                 5.8      3.9            5.9      3.9
    after (this checkout)            6.4      4.5            5.3      3.7

    --pairs 100 (200 cases)
    before (7658b48)                 8.8      4.6            8.7      4.4
    after (this checkout)            9.1      5.4            6.2      4.0

The kept reference rows (18 files on disk after call 1) save 0.8 CPU s on call 2 at 20 cases
and 1.4 s at 200; call 1 costs the new version 0.6-0.8 CPU s more (hashing the files and writing
the rows), so against the old code call 2 is level at 20 cases and 0.4 CPU s faster at 200.
Most of the end of a run is fixed cost (imports, the first screen, drawing the HTML report),
not the published rows.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import REPO, SHARED, baseline_src  # noqa: E402

PINNED = "135f221e0e3e"  # sources.PINNED_COMMIT[:12], the same in both versions
CLI = "from casebench.cli import main; main()"
END = "import sys; from pathlib import Path; from casebench.cli.run import score_and_report; score_and_report(Path(sys.argv[1]))"


def _env(src: Path, cache: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(PYTHONPATH=str(src), PYTHONWARNINGS="ignore")
    if cache is not None:
        env["CASEBENCH_CACHE"] = str(cache)
    return env


def make_run(src: Path, out: Path, pairs: int, cache: Path) -> Path:
    """A finished respond run made by the code in ``src`` against a scripted chatbot on loopback."""
    sys.path.insert(0, str(REPO / "tests"))
    from servers.fault_server import FaultServer

    def answer(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if hashlib.sha256(prompt.encode()).digest()[0] % 3 == 0:
            return "I'm sorry, but I can't help with that request."
        return "Sure. Here is a short, general overview of the topic, with the main points explained step by step."

    with FaultServer(answer_fn=answer) as srv:
        cmd = [sys.executable, "-c", CLI, "run", "--model", "openai/chat-x", "--mode", "respond",
               "--data", str(SHARED / "CASEBench_data.json"), "--base-url", srv.base_url, "--pairs", str(pairs),
               "-o", str(out), "--no-progress", "--no-report"]
        res = subprocess.run(cmd, env=_env(src, cache), capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"making the run failed (exit {res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return out


def published_cache(cache: Path) -> Path:
    """A fresh ``CASEBENCH_CACHE`` whose published outputs are the shared ``exp/``."""
    root = cache / "published" / PINNED
    root.mkdir(parents=True)
    (root / "exp").symlink_to(SHARED / "exp", target_is_directory=True)
    return cache


def end_of_run(src: Path, run_dir: Path, cache: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", END, str(run_dir)], env=_env(src, cache), capture_output=True,
                         text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = res.stdout + res.stderr
    shown = [line for line in text.splitlines() if "published models" in line]
    return {"wall_s": wall, "cpu_s": cpu, "rc": res.returncode, "shown": shown[-1] if shown else "",
            "tail": text.strip().splitlines()[-1:] if res.returncode else []}


def _cell(r: dict) -> str:
    if r["rc"] != 0:
        return f"FAILED exit {r['rc']}: {r['tail'][0][:60] if r['tail'] else ''}"
    return f"{r['wall_s']:8.1f} {r['cpu_s']:8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10, help="pairs in the run (--pairs of casebench run)")
    ap.add_argument("--baseline-ref", default="7658b48", help="the commit measured as 'before'")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-run-end-") as tmp:
        tmp_path = Path(tmp)
        old = baseline_src(args.baseline_ref, tmp_path / "base")
        run = make_run(old, tmp_path / "run", args.pairs, tmp_path / "cache-make")
        print(f"run: respond, --pairs {args.pairs} ({2 * args.pairs} cases), made by {args.baseline_ref}")
        sides = [(f"before ({args.baseline_ref})", old), ("after (this checkout)", REPO / "src")]
        rows = []
        for i, (label, src) in enumerate(sides):
            run_dir = tmp_path / f"run-{i}"
            shutil.copytree(run, run_dir)
            cache = published_cache(tmp_path / f"cache-{i}")
            first = end_of_run(src, run_dir, cache)
            second = end_of_run(src, run_dir, cache)
            rows.append((label, first, second))
            kept = len(list((cache / "scores").glob("reference-*.json")))
            print(f"{label}: {first['shown'] or 'no published models line'}; reference rows kept on disk: {kept}",
                  flush=True)
        print(f"\n{'side':<24} {'call 1 wall':>11} {'cpu':>8} {'call 2 wall':>11} {'cpu':>8}")
        for label, first, second in rows:
            print(f"{label:<24} {_cell(first):>20}    {_cell(second):>20}")


if __name__ == "__main__":
    main()
