"""The report over any mix of inputs, through ``casebench report`` as a user types it.

Every published output file in ../shared plus two subset runs over different case sets (the
runner against a loopback OpenAI-compatible server, whose answers follow a rule on the prompt):
the README's own command, which used to end in a traceback as soon as nine or more inputs held
more than one set of cases (``stats.overview.pair_matrix`` stacked arrays of different cases).
Then a chatbot's report (a respond run beside published judges): it leads with behaviour, ranks
the run among respond runs only, says in its title what it compares, explains each thing once,
and fits a 1400-px window in headless Chromium.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli



@pytest.fixture(scope="module", autouse=True)
def _no_provider_env():
    mp = pytest.MonkeyPatch()
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_CACHE"):
        mp.delenv(k, raising=False)
    yield
    mp.undo()


def _judge(body) -> str:
    prompt = body["messages"][-1]["content"]
    return json.dumps({"judgement": "safe" if len(prompt) % 3 else "unsafe", "explanation": "a rule"})


def _chatbot(body) -> str:
    text = " ".join(m["content"] for m in body["messages"])
    return ("I can't help with that request." if len(text) % 4 == 0
            else "Sure. Here is a short, general overview of the topic you asked about.")


def _run(out: Path, data: Path, mode: str, answer, **select) -> Path:
    """A finished run directory of a loopback model over a seeded subset (``select``)."""
    from servers.fault_server import FaultServer

    from casebench.runs.execute import RunConfig, run

    model = "openai/bot-x" if mode == "respond" else "openai/judge-x"
    with FaultServer(answer_fn=answer) as srv:
        summary = run(RunConfig(mode=mode, model=model, data=data, out=out, progress=False,
                                backend_options={"base_url": srv.base_url}, **select))
    assert summary.status == "complete"
    return out


@pytest.fixture(scope="module")
def subset_runs(real_data_path, tmp_path_factory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("subset_runs")
    return [_run(tmp / "pairs", real_data_path, "binary", _judge, pairs=6, selection_seed=1),
            _run(tmp / "strat", real_data_path, "binary", _judge, stratified=20, selection_seed=2)]


def test_report_over_every_published_file_and_two_subset_runs(subset_runs, exp_dir, real_data_path, tmp_path):
    """The README's command with runs of two different case sets: no traceback; the pairs are
    compared per set of cases, each matrix saying which cases it is over, and no input is ranked
    on cases it does not hold."""
    published = sorted(str(p) for p in exp_dir.glob("safety_*/output_*.json"))
    assert len(published) >= 9
    out = tmp_path / "report.html"
    r = CliRunner().invoke(cli, ["report", *map(str, subset_runs), *published, "-o", str(out), "--bootstrap", "30",
                                 "--data", str(real_data_path), "--no-reference", "--no-human"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    text = out.read_text(encoding="utf-8")
    pairs = text[text.index('id="pairwise"'):text.index('id="categories"')]
    heads = re.findall(r"<h3>(.*?)</h3>", pairs)
    # the published files over their 900 cases, then one matrix per subset run over its own cases
    assert heads[0] == f"{len(published)} inputs over the same 900 cases: {len(published) * (len(published) - 1) // 2} pairs"
    subset = [h for h in heads if h.startswith("Over the ")]
    assert sorted(int(re.match(r"Over the (\d+) cases", h).group(1)) for h in subset) == [12, 20]
    assert all(f": {len(published) + 1} inputs" in h for h in subset), subset
    assert pairs.count("(on these cases)") >= 2 * len(published)
    assert "different sets of cases, so each set gets its own matrix" in pairs
    # each matrix is square over its own inputs
    for table in re.findall(r'<table class="matrix">(.*?)</table>', pairs, re.S):
        body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
        rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
        assert all(r.count("<td") == len(rows) + 2 for r in rows)  # one cell per column, then better/worse


@pytest.fixture(scope="module")
def chatbot_report(real_data_path, exp_dir, tmp_path_factory) -> Path:
    """The main job's kind of report: a respond run over 15 query pairs, the published judges
    shown beside it for reference."""
    tmp = tmp_path_factory.mktemp("chatbot")
    run = _run(tmp / "bot", real_data_path, "respond", _chatbot, pairs=15)
    out = tmp / "report.html"
    r = CliRunner().invoke(cli, ["report", str(run), "-o", str(out), "--bootstrap", "50", "--data",
                                 str(real_data_path), "--reference", str(exp_dir), "--no-human"])
    assert r.exit_code == 0, r.output
    return out


def test_a_chatbots_report_leads_with_behaviour_and_ranks_it_among_chatbots(chatbot_report):
    text = chatbot_report.read_text(encoding="utf-8")
    title = re.search(r"<h1>(.*?)</h1>", text).group(1)
    assert title.startswith("What openai/bot-x does as a chatbot") and "judges agree" not in text.split("</h1>")[1][:400]
    heads = re.findall(r'<h2 id="([^"]+)">', text)
    assert heads[:2] == ["behaviour", "leaderboard-section"]
    behaviour = text[text.index('id="behaviour"'):text.index('id="leaderboard-section"')]
    # over- and under-refusal and the context shift, each beside people's
    head = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", re.search(r'<table class="behaviour">(.*?)</table>', behaviour, re.S).group(1))
    assert head == ["Chatbot", "Answered", "Over-refusal", "one person", "Under-refusal", "one person", "Pairs",
                    "Context shift", "one person", "people&#x27;s majority"]
    # ranked within its kind: the run's table holds no judge, and the run is its first
    board = text[text.index('id="leaderboard-section"'):text.index('id="refusal"')]
    tables = re.findall(r'<table (?:id|class)="leaderboard">(.*?)</table>', board, re.S)
    mine = [t for t in tables if "openai/bot-x" in t]
    assert len(mine) == 1 and mine[0].count('class="leaderboard-row') == 1
    assert re.search(r'<td>R?1</td><td class="tie">1</td><td class="l name"><b>openai/bot-x \[respond\]</b>', mine[0])
    assert sum(t.count("(published)") for t in tables) == 18 and "(published)" not in mine[0]
    # each explanation once, the method notes folded away beneath what they explain
    assert text.count("are readings of the answers by a refusal classifier") == 1
    assert text.count("One row per input,") == 1  # (ranked by accuracy, or by Brier near accuracy's ceiling)
    method = re.findall(r"<details[^>]*><summary>(.*?)</summary>", text)
    assert "How to read these tables" in method and "How to read this table" in method
    assert text.index("How to read these tables") > text.index('<table id="leaderboard">')


def test_a_chatbots_report_fits_1400_px_in_headless_chromium(chatbot_report, chromium):
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(chatbot_report.resolve().as_uri(), wait_until="load")
    doc = page.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    # no box of the page scrolls sideways either (a table behind its own scroll bar)
    boxes = page.evaluate("""Array.from(document.querySelectorAll('*'))
        .filter(w => w.scrollWidth > w.clientWidth + 1 && getComputedStyle(w).overflowX !== 'visible')
        .map(w => (w.firstElementChild && w.firstElementChild.className) || w.tagName)""")
    first = page.evaluate("document.querySelector('h2').textContent")
    # what a reader sees first, above the fold: the behaviour table
    top = page.evaluate("document.querySelector('table.behaviour').getBoundingClientRect().top")
    assert doc[0] <= doc[1] <= 1400, doc
    assert boxes == [], boxes
    assert first == "1. Behaviour"
    assert top < 1000
