"""People's references in the report: each input is quoted beside people on its own pairs (as its
first screen and ``score`` say), so a published file beside a subset run is quoted as in a report
of that file alone, and a reference over some inputs' cases names those inputs."""

from __future__ import annotations

import html
import re

from casebench.loader import load_predictions
from casebench.present.report import build_report
from casebench.published import load_published, write_published
from casebench.session import scoring_session
from casebench.stats.options import ScoringOptions
from casebench.stats.result import score_input

OPTS = ScoringOptions(n_boot=50)


def _lines(page: str) -> dict[str, str]:
    """Each verdict line of the report, by input name."""
    return {html.unescape(n): html.unescape(t) for n, t in re.findall(r"<li><b>(.*?)</b>: (.*?)</li>", page)}


def _majority(line: str) -> int:
    m = re.search(r"people's majority: (\d+)%", line)
    assert m, line
    return int(m.group(1))


def test_each_input_is_quoted_beside_people_on_its_own_pairs(exp_dir, tmp_path) -> None:
    full = load_predictions(exp_dir / "safety_gpt-4o" / "output_binary.json")
    small_file = tmp_path / "safety_small" / "output_binary.json"
    write_published(small_file, full.cases[:60], "small", "binary",
                    ["safe" if x == 1.0 else "unsafe" for x in full.label[:60]])
    small = load_published(small_file)
    with scoring_session():
        own_full = score_input(full, OPTS).people
        own_small = score_input(small, OPTS).people
    assert own_small.pair_count and own_small.pair_count < own_full.pair_count

    alone = _lines(build_report([full], OPTS, human=False))
    (full_alone,) = alone.values()
    mixed_page = build_report([full, small], OPTS, human=False)
    mixed = _lines(mixed_page)
    (full_mixed,) = [t for n, t in mixed.items() if "small" not in n]
    (small_mixed,) = [t for n, t in mixed.items() if "small" in n]
    # the published file: the same people's reference beside a subset as alone, on its own pairs
    assert _majority(full_mixed) == _majority(full_alone) == round(100 * own_full.follow()[0])
    # the subset: people on its own pairs
    assert _majority(small_mixed) == round(100 * own_small.follow()[0])
    # one reference line per set of cases, each naming its inputs
    notes = re.findall(r'<p class="note reference">Reference, people \((\d+) cases; inputs ([^)]*)\)', mixed_page)
    assert sorted(int(n) for n, _ in notes) == [60, len(full.cases)]
    assert all(names for _, names in notes)


def test_one_case_policy_for_reference_rows(exp_dir, tmp_path, monkeypatch) -> None:
    """``score``, ``report`` and the end of ``run`` score the published models on the same cases:
    those every input scored (``reference_rows.reference_cases``)."""
    from click.testing import CliRunner

    from casebench.cli import cli
    from casebench.reference_rows import reference_cases, reference_inputs

    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "cache"))
    full = load_predictions(exp_dir / "safety_gpt-4o" / "output_binary.json")
    labels = ["safe" if x == 1.0 else "unsafe" for x in full.label[:40]]
    labels[3] = None  # one case unanswered: not scored, so no reference row stands on it
    small_file = tmp_path / "safety_small" / "output_binary.json"
    write_published(small_file, full.cases[:40], "small", "binary", labels)
    small = load_published(small_file)
    cases = reference_cases([small, full], OPTS)
    assert len(cases) == 39 and full.cases[3] not in cases
    assert reference_cases([small], ScoringOptions(paper_compat=True)) == list(small.cases)
    root = exp_dir.parent
    rows = reference_inputs(root, OPTS, cases=cases, exclude=[small, full])
    assert rows and {r.pred.n for r in rows} == {39}
    # the score command shows the same rows on the same cases
    r = CliRunner().invoke(cli, ["score", str(small_file), "--reference", str(root), "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    import json

    shown = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    assert {d["n"] for d in shown if d.get("reference")} == {39}
