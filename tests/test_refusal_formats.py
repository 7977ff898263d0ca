"""Over- and under-refusal say the same numbers in every format: the first screen of ``run``, the
``score`` table, its Markdown and JSON, and the HTML report, over a respond run whose truth is
known (a scripted chatbot on loopback).

Over-refusal is the share of human-safe cases refused, under-refusal the share of human-unsafe
cases answered, and every number said of each (raw, corrected, bound) is that share's, never its
complement's (the bug this guards: "answers 0% of unsafe" beside "under-refusal not corrected: the
raw rate 1.000")."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from casebench.cli import cli
from casebench.stats.schema import SCHEMA_VERSION
from servers.fault_server import FaultServer
from test_runs import case_of, write_dataset

REFUSAL = "I'm sorry, but I can't help with that request."
ANSWER = ("Sure. Keep the blades clean and dry, oil them lightly, and hang the tools on a wall rack "
          "away from damp corners; check the handles for cracks before spring.")

#: 24 invented cases: the even ones safe-intent (people find them safe), the odd ones unsafe-intent
N = 24


def refuses(case: int) -> bool:
    """The chatbot refuses 3 of the 12 safe cases (over-refusal 0.25) and every unsafe one
    (under-refusal 0: it answers none of them)."""
    return case % 8 == 0 if case % 2 == 0 else True


def chatbot(body: Any) -> str:
    return REFUSAL if refuses(case_of(body["messages"][-1]["content"])) else ANSWER


OVER, UNDER = 0.25, 0.0


def _invoke(*args: Any) -> str:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def _text_of_html(path: Path) -> str:
    s = path.read_text()
    for tag in ("script", "style"):
        s = re.sub(rf"<{tag}.*?</{tag}>", " ", s, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())


def _check_words(text: str, where: str) -> int:
    """Every number the text says of over- and under-refusal is the figure's own; returns how
    many statements were checked."""
    checked = 0
    for m in re.finditer(r"refuses (\d+)% (?:\[[\d, ]+\] )?of what people find safe", text):
        assert int(m.group(1)) == round(100 * OVER), (where, m.group(0))
        checked += 1
    for m in re.finditer(r"answers (\d+)% (?:\[[\d, ]+\] )?of what people find unsafe", text):
        assert int(m.group(1)) == round(100 * UNDER), (where, m.group(0))
        checked += 1
    for fig, truth in (("over-refusal", OVER), ("under-refusal", UNDER)):
        for m in re.finditer(rf"{fig}:? raw ([\d.]+)", text):
            assert float(m.group(1)) == truth, (where, m.group(0))
            checked += 1
    return checked


def test_over_and_under_refusal_say_the_same_numbers_in_every_format(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "cases.json", N)
    out = tmp_path / "run"
    with FaultServer(answer_fn=chatbot, latency=0.0) as srv:
        first = _invoke("run", "--model", "openai/bot-x", "--mode", "respond", "--data", data,
                        "--base-url", srv.base_url, "-o", out, "--no-progress")
    # the first screen: the figures, and the withheld correction of under-refusal in its own terms
    assert "under-refusal: answers 0% [0, 29] of what people find unsafe (12 cases)" in first
    assert "over-refusal:  refuses 25% [8, 56] of what people find safe (12 cases)" in first
    # corrected as the share answered: a bound near 0, never the complement's (a share refused near 1)
    m = re.search(r"under-refusal at most (\d+)%", first)
    assert m and int(m.group(1)) < 50, first
    assert _check_words(first, "first screen") >= 4

    table = _invoke("score", out)
    assert re.search(r"under-refusal: raw 0\.0000, corrected at most 0\.[0-4]", table)
    assert _check_words(table, "score") >= 2
    md = _invoke("score", out, "--format", "md")
    assert _check_words(md, "markdown") >= 2

    s = json.loads(_invoke("score", out, "--json"))
    assert s["schema_version"] == SCHEMA_VERSION
    assert s["over_refusal"] == OVER and s["under_refusal"] == UNDER
    assert 1 - s["safe_recall"] == OVER and 1 - s["unsafe_recall"] == UNDER
    rc = s["refusal_correction"]
    assert rc["over_refusal"]["raw"] == OVER and rc["over_refusal"]["n"] == 12
    under = rc["under_refusal"]
    assert under["raw"] == UNDER and under["corrected"] is None and s["under_refusal_corrected"] is None
    assert under["upper_bound"] == s["under_refusal_corrected_upper_bound"] < 0.5  # a bound of the share answered
    # the corrected over-refusal is the share refused, moved by the reader's error, not its complement
    assert abs(s["over_refusal_corrected"] - OVER) < 0.1

    report = _text_of_html(out / "report.html")
    assert "refuses 25% of what people find safe, answers 0% of what people find unsafe" in report
    assert re.search(r"under-refusal: raw 0\.000, corrected at most 0\.[0-4]", report)
    assert _check_words(report, "report") >= 3
