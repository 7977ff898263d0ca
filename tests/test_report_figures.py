"""The report's figures drawn beside the rest of its work (``present.report_figures`` over
``casebench.offload``): the page is the same bytes with the helper process and without it, every
section's figure included; a figure that fails in the helper fails the report with the same error
as without it, and nothing is written.

The reports are built in a fresh interpreter: a helper is only started where no other thread
runs, which the test process does not promise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = '''
import re, sys
from pathlib import Path
import casebench.offload as offload_mod
from casebench.loader import load_predictions
from casebench.data import load_dataset
from casebench.present import plots
from casebench.present.report import build_report, write_report
from casebench.stats.options import ScoringOptions

out = Path(sys.argv[1])
data = load_dataset(sys.argv[2])
preds = [load_predictions(f, dataset=data) for f in sys.argv[3:]]
options = ScoringOptions(n_boot=200)
assert offload_mod.helper_possible()
handed: list[bool] = []
submit = offload_mod.Offload.submit

def spy(self, fn, *args, **kw):
    handed.append(self.helper)
    return submit(self, fn, *args, **kw)

offload_mod.Offload.submit = spy
pages = {}
for helper in (True, False):
    page = build_report(preds, options, human_cases=data.cases, helper=helper)
    pages[helper] = re.sub(r"generated [0-9-]+ [0-9:]+ UTC", "generated T", page)
print("handed to the helper:", sum(handed))
print("figures:", pages[True].count("<img "))
print("same page:", pages[True] == pages[False])

def broken(*args, **kw):
    raise ValueError("reliability: input 2 has no bins")

plots.reliability = broken
for helper in (False, True):
    target = out / f"broken-{helper}.html"
    try:
        write_report(target, preds[1:2], options, human=False, helper=helper)
    except ValueError as e:
        print("error:", helper, str(e), "written" if target.exists() else "nothing written")
import multiprocessing
print("processes left:", len(multiprocessing.active_children()))
'''


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a helper process is only started with two CPUs or more")
def test_the_page_is_the_same_with_the_helper_and_without(exp_dir, real_dataset, real_data_path, tmp_path) -> None:
    from test_ablation import write_study

    from casebench.stats.ablation import ablation_conditions

    study = write_study(tmp_path, real_dataset, mode="prob", conditions=ablation_conditions("sender"))
    files = [exp_dir / "safety_gpt-4o" / "output_binary.json", exp_dir / "safety_llama370B" / "output_logits.json",
             *study]
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path), str(real_data_path),
                        *map(str, files)], env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines())
    # every figure of the page (leaderboard, refusal, categories, scatter, calibration, ablation,
    # human votes, context) went to the helper, with the human statistics
    assert int(lines["figures"]) >= 10 and int(lines["handed to the helper"]) == int(lines["figures"]) + 1
    assert lines["same page"] == "True"
    assert [line for line in r.stdout.splitlines() if line.startswith("error")] == [
        f"error: {h} reliability: input 2 has no bins nothing written" for h in (False, True)]
    assert lines["processes left"] == "0"
