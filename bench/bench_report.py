"""Speed and size of ``casebench report`` over the published outputs, before and after.

The issue's figure: 43 published files took 68 s and gave 6.8 MB. ``../shared/casebench/exp``
holds the published files of this checkout (19 of them); the rest, up to ``--inputs`` (43 by
default), are judges made from them: each a published file of the same mode with a seeded share
of its verdicts flipped (scores and probabilities mirrored), named ``synth-k``, so the report has
as many inputs, pairs and panels as the full set. They are written to a temporary folder beside
a copy-free pointer to the real dataset (``--data``); nothing is written into the repository.

Each side runs the real CLI (``casebench report FILES -o OUT --data DATA``) in a subprocess with
its own source tree on ``PYTHONPATH``: this checkout's ``src`` and, with ``--baseline OLD/src``,
another one (e.g. a ``git worktree add --detach /tmp/base main``). It reports wall seconds, CPU
seconds of the child (user + system: steadier than wall time on a loaded machine), the HTML's
size, and the lines the command wrote on stderr that are not casebench's own progress lines
(warnings that leaked).

    .venv/bin/python bench/bench_report.py --baseline /tmp/base/src

``--baseline-ref main`` extracts that commit's ``src`` into the temporary folder itself (``git
archive``), so one run measures both sides. ``--subset-runs`` (issue 34) adds two subset runs over
different case sets (a seeded ``--pairs 6`` and ``--stratified 20`` run of a rule-following judge
on a loopback OpenAI-compatible server, ``tests/servers/fault_server.py``) to the inputs, the mix
that made the report crash before: each side is measured on the published files alone and on the
files plus the two runs, and a side that fails says how (its exit status and last line).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "casebench"


def make_inputs(out: Path, n: int) -> list[Path]:
    """The published files, then synthetic judges made from them up to ``n`` inputs."""
    real = sorted((SHARED / "exp").glob("safety_*/output_*.json"))
    files = list(real[:n])
    rng = np.random.default_rng(0)
    k = 0
    while len(files) < n:
        src = real[k % len(real)]
        recs = json.loads(src.read_text())
        model_key = [key for key in recs[0] if key not in ("query", "context", "context_intended_to_be_safe",
                                                            "scores", "safe_rate", "category")][0]
        share = 0.03 + 0.02 * (k % 7)
        for r in recs:
            v = r[model_key]
            if v == "" or rng.random() >= share:
                continue
            if isinstance(v, str):
                r[model_key] = {"safe": "unsafe", "unsafe": "safe"}.get(v, v)
            elif isinstance(v, (int, float)):
                r[model_key] = (11.0 - v) if v > 1.0 else (1.0 - v)
        name = f"synth-{k}"
        for r in recs:
            r[name] = r.pop(model_key)
        target = out / f"safety_{name}" / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(recs))
        files.append(target)
        k += 1
    return files


def subset_runs(out: Path) -> list[Path]:
    """Two finished runs over different seeded subsets of the real dataset (``--pairs 6``,
    ``--stratified 20``): a judge on a loopback server whose verdict follows the prompt's length."""
    sys.path[:0] = [str(REPO / "tests"), str(REPO / "src")]
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # the loopback server, never a real provider
        os.environ.pop(k, None)
    from servers.fault_server import FaultServer

    from casebench.runs.execute import RunConfig, run

    def answer(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        return json.dumps({"judgement": "safe" if len(prompt) % 3 else "unsafe", "explanation": "a rule"})

    runs = []
    with FaultServer(answer_fn=answer) as srv:
        for name, select in (("pairs6", {"pairs": 6, "selection_seed": 1}), ("strat20", {"stratified": 20,
                                                                                       "selection_seed": 2})):
            target = out / name
            run(RunConfig(mode="binary", model="openai/judge-x", data=SHARED / "CASEBench_data.json", out=target,
                          progress=False, backend_options={"base_url": srv.base_url}, **select))
            runs.append(target)
    return runs


def baseline_src(ref: str, out: Path) -> Path:
    """The ``src`` folder of commit ``ref`` of this repository, extracted under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out / "src"


def run_report(src: Path, files: list[Path], html: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONWARNINGS": "default"}
    cmd = [sys.executable, "-c", "from casebench.cli import main; main()", "report", *map(str, files),
           "-o", str(html), "--data", str(SHARED / "CASEBench_data.json")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = [line for line in res.stderr.splitlines() if line.strip()]
    if res.returncode != 0:
        return {"failed": f"exit {res.returncode}: {err[-1][:150] if err else ''}", "wall_s": wall, "cpu_s": cpu}
    progress = [line for line in err if line.startswith("casebench: report")]
    leaked = [line for line in err if not line.startswith("casebench: report")]
    return {"wall_s": wall, "cpu_s": cpu, "bytes": html.stat().st_size, "progress_lines": len(progress),
            "other_stderr": leaked}


def _line(label: str, r: dict) -> str:
    if "failed" in r:
        return f"{label:<41} FAILED after {r['wall_s']:.1f} s ({r['failed']})"
    return (f"{label:<41} wall {r['wall_s']:7.1f} s   cpu {r['cpu_s']:7.1f} s   size {r['bytes'] / 1e6:6.2f} MB   "
            f"progress lines {r['progress_lines']:3d}   other stderr lines {len(r['other_stderr'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=43)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout's src folder")
    ap.add_argument("--baseline-ref", default=None, help="a commit of this repository to measure as the baseline")
    ap.add_argument("--subset-runs", action="store_true", help="also measure with two subset runs added (issue 34)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the HTML files in this folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        tmp_path = Path(tmp)
        files = make_inputs(tmp_path / "exp", args.inputs)
        real = sum(1 for f in files if SHARED in f.parents)
        print(f"inputs: {len(files)} ({real} published files, {len(files) - real} synthetic judges made from them)")
        sys.path.insert(0, str(REPO / "bench"))
        from machine import cpu_model

        print(f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; load average {os.getloadavg()[0]:.2f}")
        sides = [("this checkout", REPO / "src")]
        base = args.baseline or (baseline_src(args.baseline_ref, tmp_path / "base") if args.baseline_ref else None)
        if base:
            sides.insert(0, (f"baseline {args.baseline_ref or base}", base))
        mixes = [("files", files)]
        if args.subset_runs:
            runs = subset_runs(tmp_path / "runs")
            mixes.append(("files + 2 subset runs", files + runs))
            print(f"subset runs: {', '.join(r.name for r in runs)} (12 and 20 cases)")
        rows = []
        for mix, inputs in mixes:
            for label, src in sides:
                html = (args.keep or tmp_path) / f"report-{label.split()[0]}-{mix.split()[0]}-{len(inputs)}.html"
                html.parent.mkdir(parents=True, exist_ok=True)
                r = run_report(src, inputs, html)
                rows.append((mix, label, r))
                print(_line(f"{label[:17]} · {mix}", r))
                for line in r.get("other_stderr", [])[:5]:
                    print(f"    stderr: {line[:160]}")
            pair = [r for m, _, r in rows if m == mix]
            if len(pair) == 2 and not any("failed" in r for r in pair):
                a, b = pair
                print(f"  {mix}: after / before: wall x{b['wall_s'] / a['wall_s']:.2f}, cpu x{b['cpu_s'] / a['cpu_s']:.2f}, "
                      f"size x{b['bytes'] / a['bytes']:.2f}")


if __name__ == "__main__":
    main()
