"""The report over many inputs, as the published outputs at full scale give it (43 files, 903 pairs).

The published files in ../shared (19) plus judges made from them at run time (a seeded share of
each one's verdicts flipped, written in the published format to a temporary folder, never
committed) make 43 inputs over the real dataset. The real ``casebench report`` runs on them once;
the page must stay under 2 MB, fit a 1400-px-wide window in headless Chromium (no horizontal
overflow, no table that needs scrolling), show the pairs as a compact matrix with the full table
as a download, print its progress on stderr and nothing else there (no leaked warnings).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from casebench.present.report import NEIGHBOUR_ROWS
from casebench.stats.overview import PAIRWISE_TABLE_MAX

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
N_INPUTS = 43
MODEL_KEYS_SKIP = {"query", "context", "context_intended_to_be_safe", "scores", "safe_rate", "category"}


def derived_inputs(exp_dir: Path, out: Path, n: int) -> list[Path]:
    """The published files, then judges made from them (verdicts flipped, scores mirrored)."""
    real = sorted(exp_dir.glob("safety_*/output_*.json"))
    files = list(real[:n])
    rng = np.random.default_rng(0)
    k = 0
    while len(files) < n:
        src = real[k % len(real)]
        recs = json.loads(src.read_text())
        key = next(x for x in recs[0] if x not in MODEL_KEYS_SKIP)
        name = f"derived-{k}"
        for r in recs:
            v = r.pop(key)
            if v != "" and rng.random() < 0.03 + 0.02 * (k % 7):
                v = {"safe": "unsafe", "unsafe": "safe"}.get(v, v) if isinstance(v, str) else (
                    11.0 - v if v > 1.0 else 1.0 - v)
            r[name] = v
        target = out / f"safety_{name}" / src.name
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(recs))
        files.append(target)
        k += 1
    return files


@pytest.fixture(scope="module")
def big_report(exp_dir, real_data_path, tmp_path_factory) -> tuple[Path, list[Path], subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("scale")
    files = derived_inputs(exp_dir, tmp / "exp", N_INPUTS)
    out = tmp / "report.html"
    env = {k: v for k, v in os.environ.items() if k not in ("CASEBENCH_DATA",)}
    env["PYTHONWARNINGS"] = "default"  # a warning anywhere would be printed: none may reach stderr
    res = subprocess.run([sys.executable, "-c", "from casebench.cli import main; main()", "report", *map(str, files),
                          "-o", str(out), "--data", str(real_data_path), "--bootstrap", "200"],
                         env=env, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    return out, files, res


def test_progress_on_stderr_and_nothing_else(big_report):
    _, _, res = big_report
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert lines and all(x.startswith("casebench: report: ") for x in lines), lines
    said = [x[len("casebench: report: "):] for x in lines]
    assert said[0] == "scoring 43 input(s) and pairing them"
    assert "paired differences" in said and "the human votes" in said
    assert not any(x.startswith("note:") for x in said)
    assert res.stdout.startswith("wrote ")


def test_size_and_a_compact_pair_matrix_with_every_pair_as_a_download(big_report):
    out, files, _ = big_report
    assert out.stat().st_size < 2_000_000
    text = out.read_text(encoding="utf-8")
    pairs = text[text.index('id="pairwise"'):text.index('id="categories"')]
    matrix = re.search(r'<table class="matrix">(.*?)</table>', pairs, re.S).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", matrix.split("<tbody>")[1], re.S)
    assert len(rows) == N_INPUTS
    assert all(r.count("<td") == N_INPUTS + 2 for r in rows)  # every other input, better, worse
    # instead of 903 rows: the neighbours in the ranking
    neighbours = re.search(r'<table class="pairwise">(.*?)</table>', pairs, re.S).group(1)
    assert neighbours.count("<tr>") - 1 == NEIGHBOUR_ROWS
    link = re.search(r'download="pairwise_accuracy.csv" href="data:text/csv;charset=utf-8;base64,([^"]+)"', pairs)
    table = list(csv.DictReader(io.StringIO(base64.b64decode(link.group(1)).decode("utf-8"))))
    assert len(table) == N_INPUTS * (N_INPUTS - 1) // 2 == 903
    # the marks are the download's significant pairs: one up and one down mark per significant pair
    marks = matrix.count("▲") + matrix.count("▼")
    assert marks == 2 * sum(r["significant"] == "True" for r in table) > 0
    # the figures drawn for at most 12 inputs say how many were left out
    assert "Only the 9 most accurate inputs are drawn; 34 more are in the leaderboard." in text
    assert 'download="accuracy_by_category.csv"' in text


def test_the_matrix_agrees_with_casebench_compare(exp_dir):
    """The matrix's accuracy differences and McNemar p-values are ``compare``'s, pair for pair."""
    from casebench.published import load_published
    from casebench.stats.compare import compare
    from casebench.stats.paired_tests import accuracy_matrix
    from casebench.stats.metrics import scoring_arrays
    from casebench.stats.options import ScoringOptions

    preds = [load_published(p) for p in sorted(exp_dir.glob("safety_*/output_*.json"))
             if "_" not in p.stem.replace("output_", "")][:5]
    correct = np.zeros((len(preds), preds[0].n), dtype=bool)
    scored = np.zeros_like(correct)
    for k, p in enumerate(preds):
        a, mask = scoring_arrays(p)
        scored[k], correct[k, np.flatnonzero(mask)] = mask, a.correct
    from casebench.stats.bootstrap import case_clusters

    # the default clustering (by query) in both: the matrix runs the same clustered McNemar test
    mx = accuracy_matrix(correct, scored, clusters=case_clusters(preds[0].cases, "query"))
    res = compare(preds, ScoringOptions(n_boot=0))
    for pc in res.pairs:
        acc = pc.metrics["accuracy"]
        assert mx.n_paired[pc.a, pc.b] == pc.n_paired
        assert mx.diff[pc.a, pc.b] == pytest.approx(acc.diff, abs=1e-12)
        assert mx.p[pc.a, pc.b] == pytest.approx(pc.mcnemar["p"], rel=1e-9)
        assert (mx.a_only[pc.a, pc.b], mx.a_only[pc.b, pc.a]) == (pc.mcnemar["a_only"], pc.mcnemar["b_only"])
    assert len(preds) <= PAIRWISE_TABLE_MAX  # a group this small keeps one row per pair


def test_readable_in_a_1400_px_window(big_report, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    out, _, _ = big_report
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(out.resolve().as_uri(), wait_until="load")
            doc = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            boxes = page.evaluate(
                "Array.from(document.querySelectorAll('.wide')).map(d => [d.firstElementChild.className || "
                "d.firstElementChild.id, d.scrollWidth, d.clientWidth])")
            images = page.eval_on_selector_all("img", "els => els.map(i => i.getBoundingClientRect().right)")
            shot = tmp_path / "report-43.png"
            page.screenshot(path=str(shot), full_page=False)
        finally:
            browser.close()
    assert doc[0] <= doc[1] <= 1400, doc  # no horizontal overflow of the page
    assert boxes and all(sw <= cw for _, sw, cw in boxes), boxes  # no table needs a scroll bar
    assert all(right <= 1400 for right in images)
    assert shot.stat().st_size > 50_000


def test_one_line_per_model_ablations_ranked_apart_and_no_query_text(big_report):
    """At 43 inputs: one line per model saying what it does, the ablation conditions in a table of
    their own (numbered A1, A2, ...), and the dataset's query text left out (``--show-text`` adds it)."""
    import html as _html

    out, files, _ = big_report
    text = out.read_text(encoding="utf-8")
    ablated = [f for f in files if f.stem.replace("output_", "") not in ("binary", "score", "logits")]
    assert ablated  # the published gpt-4o-mini score file without its sender, and inputs derived from it
    lines = re.findall(r'<ul class="verdicts">(.*?)</ul>', text, re.S)[0].split("<li>")[1:]
    assert len(lines) == N_INPUTS - len(ablated)
    for line in lines:
        said = _html.unescape(re.sub(r"<[^>]+>", "", line))
        assert re.search(r": (judges|scores|rates) unsafe \d+% of what people find safe, (judges|scores|rates) safe "
                         r"\d+% of what people find unsafe, follows context in \d+% of pairs; people's majority: "
                         r"\d+%$", said.strip()), said
    assert "ablation conditions (ci parameters removed), ranked apart from the models" in text.lower()
    board = text[text.index('id="leaderboard-section"'):text.index('id="refusal"')]
    assert board.count('<td>A1</td>') == 1
    blind = text[text.index("Where the judge is context-blind"):]
    assert "query text hidden" in blind and "“" not in blind
