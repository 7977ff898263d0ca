"""The HTML report (``casebench.present.report`` and ``casebench report``), checked as a person sees it.

One report is built for the module from the three published files, a synthetic ablation study
written at run time in the published format (real dataset records, synthetic predictions, never
committed) and a real run directory over 45 cases (the runner against a loopback server), so
every section is drawn, including an input whose cases differ from the others'.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.stats.options import ScoringOptions

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SECTIONS = ["Leaderboard", "Over- and under-refusal", "Paired differences", "Accuracy by category",
            "P(safe) against the human safe_rate", "Calibration", "Context ablation", "The human votes",
            "Context sensitivity"]


def _run_dir(tmp: Path, data: Path) -> Path:
    """A real run directory: the runner asks a loopback OpenAI-compatible server about 45 cases."""
    from servers.fault_server import FaultServer

    from casebench.runs.execute import RunConfig, run

    def answer(body) -> str:
        prompt = body["messages"][-1]["content"]
        label = "safe" if len(prompt) % 3 else "unsafe"
        return json.dumps({"judgement": label, "explanation": "length rule"})

    out = tmp / "runs" / "judge-x_binary"
    with FaultServer(answer_fn=answer) as srv:
        summary = run(RunConfig(mode="binary", model="openai/judge-x", data=data, out=out, stratified=45,
                                backend_options={"base_url": srv.base_url}, progress=False))
    assert summary.status == "complete"
    return out


@pytest.fixture(scope="module")
def inputs(real_dataset, real_data_path, exp_dir, tmp_path_factory, monkeypatch_module) -> list[str]:
    from test_ablation import write_study

    from casebench.stats.ablation import ablation_conditions

    tmp = tmp_path_factory.mktemp("report_inputs")
    published = [exp_dir / "safety_gpt-4o" / "output_binary.json", exp_dir / "safety_gpt-4o" / "output_score.json",
                 exp_dir / "safety_llama370B" / "output_logits.json"]
    study = write_study(tmp, real_dataset, mode="prob", conditions=ablation_conditions("sender,recipient"))
    run_dir = _run_dir(tmp, real_data_path)
    return [str(p) for p in published + study] + [str(run_dir)]


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    mp.delenv("OPENAI_API_KEY", raising=False)
    mp.delenv("OPENAI_BASE_URL", raising=False)
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def report(inputs, real_data_path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    r = CliRunner().invoke(cli, ["report", *inputs, "-o", str(out), "--bootstrap", "200",
                                 "--data", str(real_data_path)])
    assert r.exit_code == 0, r.output
    assert out.is_file()
    return out


def _rows(html_text: str, first_set_only: bool = False) -> list[str]:
    """The leaderboard's rows: of every case set's table, or of the first one only."""
    pat = r'<table id="leaderboard">(.*?)</table>' if first_set_only else \
        r'<table (?:id|class)="leaderboard">(.*?)</table>'
    return [r for table in re.findall(pat, html_text, re.S)
            for r in re.findall(r'<tr class="leaderboard-row[^"]*">(.*?)</tr>', table, re.S)]


def _body_rows(fragment: str) -> int:
    return sum(body.count("<tr") for body in re.findall(r"<tbody>(.*?)</tbody>", fragment, re.S))


# ------------------------------------------------------------------------------ in the browser


def test_report_in_headless_chromium(report, inputs, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium "
                    "(Debian: apt-get install chromium chromium-driver; `make test-deps` does it)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    errors: list[str] = []
    outside: list[str] = []
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))

            def guard(route):  # the report must need nothing beyond the file itself
                if route.request.url.startswith(("file:", "data:")):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", guard)
            page.goto(report.resolve().as_uri(), wait_until="load")
            images = page.eval_on_selector_all(
                "img", "els => els.map(i => ({ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, "
                       "shown: i.getBoundingClientRect().width}))")
            # the context section fits 1400 px: no table in it scrolls sideways, nor does the page
            overflow = page.evaluate("""() => {
                const out = []; let el = document.getElementById('context').nextElementSibling;
                while (el && el.tagName !== 'H2') {
                    for (const w of [el, ...el.querySelectorAll('*')])
                        if (w.scrollWidth > w.clientWidth + 1 && getComputedStyle(w).overflowX === 'auto')
                            out.push(w.className || w.tagName);
                    el = el.nextElementSibling;
                }
                return {boxes: out, page: document.documentElement.scrollWidth - window.innerWidth};
            }""")
            rows = page.locator("tr.leaderboard-row").count()
            headings = page.locator("h2").all_inner_texts()
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert outside == []
    # refusal, heat map, scatter, reliability, one ablation study, context effect, stability,
    # context direction dots, context shift by mode, per-pair shift scatter
    assert len(images) == 10 and all(i["ok"] for i in images), images
    assert overflow == {"boxes": [], "page": 0}, overflow
    assert all(i["shown"] >= 400 for i in images)  # every figure is shown at a readable size
    assert rows == len(inputs)
    assert [re.sub(r"^\d+\.\s*", "", h) for h in headings] == SECTIONS
    assert shot.stat().st_size > 100_000


# ------------------------------------------------------------------------------ the file itself


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text
    assert not re.search(r'(src|href)="(https?:)?//', text)
    srcs = re.findall(r'<img src="([^"]+)"', text)
    assert len(srcs) == 10  # context: direction dots and shift by mode
    for s in srcs:
        assert s.startswith("data:image/png;base64,")
        assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # the tables can be downloaded from the page in the three formats
    for name in ("leaderboard.csv", "leaderboard.jsonl", "leaderboard.md"):
        assert f'download="{name}"' in text


def test_leaderboard_holds_the_published_figures(report, inputs):
    rows = _rows(report.read_text(encoding="utf-8"))
    assert len(rows) == len(inputs)
    by_name = {re.search(r"<b>(.*?)</b>", r).group(1): r for r in rows}
    # the published script's figures (README): accuracy, safe and unsafe accuracy, to 3 places
    for name, figures in {"gpt-4o [binary]": ("0.770", "0.546", "0.948"),
                          "gpt-4o [score]": ("0.786", "0.581", "0.948"),
                          "llama370B [prob]": ("0.872", "0.837", "0.900")}.items():
        cells = re.findall(r"<td>([0-9.]+)<span", by_name[name])
        assert (cells[0], cells[2], cells[3]) == figures, name
        # people's accuracy ceiling in its own column beside accuracy (a column, never a reason to re-rank)
        assert 0.85 < float(cells[1]) < 0.95
        # every row names its tie group (1: not separable from the first)
        assert re.search(r'<td class="tie">(<span[^>]*>)?\d+', by_name[name])
    # a run is named with its backend (``naming``): never "judge-x" alone
    assert "openai/judge-x [binary]" in by_name and "judge-x [binary]" not in by_name
    assert re.search(r"<td>45</td>", by_name["openai/judge-x [binary]"])
    # the 45-case run is ranked in its own case set, never among the 900-case inputs
    # (the models, then the ablation conditions ranked apart in a table of their own)
    text = report.read_text(encoding="utf-8")
    set1 = text[text.index('<table id="leaderboard">'):text.index("<h3>Case set 2: 45 cases</h3>")]
    models, ablated = (_rows(t) for t in set1.split("ablation conditions (CI parameters removed), ranked apart"))
    assert len(models) + len(ablated) == len(inputs) - 1 and not any("judge-x" in r for r in models + ablated)
    assert models and ablated and all(" − " in re.search(r"<b>(.*?)</b>", r).group(1) for r in ablated)
    assert not any(" − " in re.search(r"<b>(.*?)</b>", r).group(1) for r in models)
    for part in (models, ablated):
        accs = [float(re.findall(r"<td>([0-9.]+)<span", r)[0]) for r in part]
        # best accuracy first, always (the ceiling is a column, never a switch to another figure)
        assert accs == sorted(accs, reverse=True)
        groups = [int(re.search(r'<td class="tie">(?:<span[^>]*>)?(\d+)', r).group(1)) for r in part]
        assert groups[0] == 1 and groups == sorted(groups)
    # its figures are from 45 cases or fewer: the recalls (fewer than 30 cases each) carry the note
    assert "†" in by_name["openai/judge-x [binary]"] and "†" not in by_name["gpt-4o [binary]"]


def test_ablation_and_pairwise_sections_cover_the_right_inputs(report):
    text = report.read_text(encoding="utf-8")
    abl = text[text.index('id="ablation"'):text.index('id="human"')]
    # full context and three removals, then their context figures with people's two references
    assert _body_rows(abl) == 4 + 4 + 2
    for cond in ("- sender", "- recipient", "- sender, recipient"):
        assert f">{cond}<" in abl
    pairs = text[text.index('id="pairwise"'):text.index('id="categories"')]
    # the seven 900-case inputs pair with each other (21 pairs); the 45-case run with each of
    # them over the 45 cases they share (7 pairs), and says so
    assert _body_rows(pairs) == 28
    assert pairs.count("judge-x") == 7
    assert pairs.count(" of the 45 both hold (900 and 45 cases)") + pairs.count(" of the 45 both hold (45 and 900 cases)") == 7


def test_report_without_ablation_numbers_its_sections(exp_dir, tmp_path):
    from casebench.published import load_published
    from casebench.present.report import build_report

    preds = [load_published(exp_dir / "safety_gpt-4o" / "output_binary.json")]
    text = build_report(preds, ScoringOptions(n_boot=0), human=False)
    heads = re.findall(r"<h2[^>]*>(.*?)</h2>", text)
    # one binary judge: no paired section (one input), no calibration (no stated probability)
    assert heads == ["1. Leaderboard", "2. Over- and under-refusal", "3. Accuracy by category",
                     "4. P(safe) against the human safe_rate", "5. Context sensitivity"]
    assert "No input gives a continuous P(safe)" not in text and "Paired differences" not in text
    assert len(_rows(text)) == 1


def test_bad_inputs_write_nothing(tmp_path, small_data_path):
    bad = tmp_path / "output_binary.json"
    bad.write_text("{not json")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(cli, ["report", str(bad), "-o", str(out)])
    assert r.exit_code == 2 and "not valid JSON" in r.output
    assert not out.exists()
    r = CliRunner().invoke(cli, ["report", str(tmp_path / "missing.json"), "-o", str(out)])
    assert r.exit_code == 2 and not out.exists()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_report_scores_against_votes_only_labels(exp_dir, tmp_path):
    from casebench.present.report import build_report
    from casebench.published import load_published
    from casebench.stats.result import score_predictions

    preds = [load_published(exp_dir / "safety_gpt-4o" / n) for n in ("output_binary.json", "output_score.json")]
    text = build_report(preds, ScoringOptions(n_boot=0, label_source="votes"), human=False)
    assert "labels: votes only" in text
    rows = {re.search(r"<b>(.*?)</b>", r).group(1): r for r in _rows(text)}
    for p in preds:
        want = score_predictions(p, ScoringOptions(n_boot=0, label_source="votes")).values
        published = score_predictions(p, ScoringOptions(n_boot=0)).values
        # (people's ceiling is the column after accuracy)
        cells = re.findall(r'<td>([0-9.]+)</td>', rows[f"{p.model} [{p.mode}]"])
        assert [cells[2], cells[4], cells[5]] == [f"{want[m]:.3f}" for m in ("accuracy", "safe_recall", "unsafe_recall")]
        assert f"{want['accuracy']:.3f}" != f"{published['accuracy']:.3f}"
    r = CliRunner().invoke(cli, ["report", str(exp_dir / "safety_gpt-4o" / "output_binary.json"), "-o",
                                 str(tmp_path / "r.html"), "--label-source", "votes", "--paper-compat"])
    assert r.exit_code == 2 and "--paper-compat uses the published labels" in r.output


def test_a_respond_only_input_shows_no_empty_or_mislabelled_section(real_dataset, tmp_path):
    """A respond run (the main job's kind of input) over query pairs: no section for a judge's
    P(safe) (scatter, calibration), no paired section for one input, captions that say what the
    chatbot did, and one line saying what the model does; every section shown has content, in a
    1400-px window without horizontal scroll."""
    from casebench.predictions import Predictions
    from casebench.present.report import build_report
    from casebench.runs.select import stratified_pairs

    cases = [real_dataset.cases[i] for i in stratified_pairs(real_dataset, 45, seed=0)]
    # a chatbot that answers almost everything, whatever the context (as the embedded SmolLM2 does)
    values = [0.0 if k % 11 == 0 else 1.0 for k in range(len(cases))]
    pred = Predictions.from_values(str(tmp_path / "run"), "chatbot-x", "respond", cases, values)
    html = build_report([pred], ScoringOptions(n_boot=100), human=False)
    titles = re.findall(r'<h2 id="[^"]+">\d+\. ([^<]+)</h2>', html)
    assert "P(safe) against the human safe_rate" not in titles and "Calibration" not in titles
    assert "Paired differences" not in titles
    assert "binary verdicts (jittered)" not in html and "No input gives a continuous P(safe)" not in html
    assert "Safe recall, judged" not in html
    # each section shown holds more than its heading
    bodies = re.split(r'<h2 id="[^"]+">', html)[1:]
    assert all(len(re.sub(r"<[^>]+>", "", b).strip()) > 80 for b in bodies), titles
    import html as _html

    line = _html.unescape(re.search(r"<li><b>chatbot-x \[respond\]</b>: (.*?)</li>", html).group(1))
    assert re.fullmatch(r"refuses \d+% of what people find safe, answers \d+% of what people find unsafe, "
                        r"follows context in \d+% of pairs; people's majority: \d+%", line), line
    refusal = html[html.index('id="refusal"'):html.index("</figure>", html.index('id="refusal"'))]
    assert "chatbot (respond mode) answers" in refusal
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    out = tmp_path / "respond.html"
    out.write_text(html, encoding="utf-8")
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(out.resolve().as_uri(), wait_until="load")
            doc = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            shown = page.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
        finally:
            browser.close()
    assert doc[0] <= doc[1] <= 1400, doc
    assert [t.split(". ", 1)[1] for t in shown] == titles
