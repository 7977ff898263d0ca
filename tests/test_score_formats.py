"""``casebench score --format table|csv|md|json`` carry the same content, and small samples are
told apart (issue 18, items 3 and 4).

The formats are parsed back independently and compared figure by figure, at the precision each
prints: every figure, every CI bound, every breakdown group asked with ``--by`` (and none that
was not asked), the small-sample note and the undefined figures. Inputs: a published file (900
cases) and a 12-case subset of it written as a published file, so that notes and undefined
figures occur.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import Case
from casebench.predictions import Predictions
from casebench.present.numbers import SMALL, UNDEFINED
from casebench.present.score_formats import FORMATS
from casebench.present.score_text import text_table
from casebench.published import load_published, write_published
from casebench.stats.options import ScoringOptions
from casebench.stats.metrics import BREAKDOWN_METRICS, METRIC, MIN_CASES, metric_names
from casebench.stats.result import score_predictions

BY = ["--by", "category", "--by", "intent"]


@pytest.fixture(scope="module")
def inputs(exp_dir, tmp_path_factory) -> list[str]:
    full = exp_dir / "safety_gpt-4o" / "output_score.json"
    p = load_published(full)
    small = tmp_path_factory.mktemp("formats") / "safety_small" / "output_score.json"
    write_published(small, p.cases[:12], "small", "score", [float(v) for v in p.value[:12]])
    return [str(full), str(small)]


def _score(inputs, fmt: str, *extra: str) -> str:
    r = CliRunner().invoke(cli, ["score", *inputs, "--format", fmt, "--bootstrap", "100", *extra])
    assert r.exit_code == 0, r.output
    return r.output


# ------------------------------------------------------------------------------ parsers
# Each returns {(source or model, kind, group): {metric: (value, lo, hi, small)}}; kind and group
# are "" for the whole input. A value is a float, None for undefined.


def _num(cell: str) -> float | None:
    cell = cell.strip().rstrip(SMALL)
    return None if cell == UNDEFINED else float(cell)


def from_json(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        d = json.loads(line)
        groups = [("", "", d)] + [(k, g, r) for k, rows in d.get("breakdowns", {}).items() for g, r in rows.items()]
        for kind, group, r in groups:
            figs = {}
            for m in METRIC:
                if m in r:
                    lo, hi = r["ci"].get(m, (None, None))  # a count (context_pairs) has no CI
                    small = r["cases_of"].get(m, MIN_CASES) < MIN_CASES and r[m] is not None
                    figs[m] = (r[m], lo, hi, small)
            out[(d["source"], kind, group)] = figs
    return out


def from_csv(text: str) -> dict:
    out = {}
    for row in csv.DictReader(io.StringIO(text)):
        figs = {}
        for m in METRIC:
            if row[m] == "":
                continue
            v = None if row[m] == UNDEFINED else float(row[m])
            lo, hi = (None if row.get(f"{m}_ci_{b}", "") in (UNDEFINED, "") else float(row[f"{m}_ci_{b}"])
                      for b in ("lo", "hi"))
            n = row.get(f"{m}_n", "")  # blank for a count (context_pairs): no note
            figs[m] = (v, lo, hi, v is not None and n != "" and int(n) < MIN_CASES)
        out[(row["source"], row["by"], row["group"])] = figs
    return out


_CELL = re.compile(r"^(\S+?)(†?)(?: \[(\S+), (\S+)\])?$")


def from_markdown(text: str, sources: dict[str, str]) -> dict:
    """``sources``: model -> source (the main table names inputs by model)."""
    out: dict = {}
    blocks = text.split("\n\n")
    head = None
    for block in blocks:
        lines = [x for x in block.splitlines() if x.startswith("|")]
        if not lines:
            m = re.match(r"\*\*(\S+) \[\w+\] by (\w+)\*\* \((.*)\)", block.strip())
            head = (m.group(3), m.group(2)) if m else None
            continue
        cols = [c.strip() for c in lines[0].strip("|").split("|")]
        for line in lines[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            row = dict(zip(cols, cells))
            key = (sources[row["model"]], "", "") if "model" in row else (head[0], head[1], row["group"])
            figs = {}
            for m in METRIC:
                if row.get(m):
                    v, mark, lo, hi = _CELL.match(row[m]).groups()
                    figs[m] = (_num(v), _num(lo) if lo else None, _num(hi) if hi else None, bool(mark))
            out[key] = figs
    return out


def from_table(text: str) -> dict:
    out: dict = {}
    labels = {METRIC[m].label: m for m in METRIC}
    source = kind = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("  source: "):
            source, kind = line[len("  source: "):], ""
            out[(source, "", "")] = {}
        elif source is not None and kind == "" and line.startswith("  cases "):
            pairs = re.search(r", (\d+) query pairs with both contexts answered", line)
            if pairs:  # a count, in the cases' line
                out[(source, "", "")]["context_pairs"] = (float(pairs.group(1)), None, None, False)
        elif line.startswith("  by "):
            kind = line[len("  by "):]
            cols = lines[i + 1].split()[1:]  # after "n"
            i += 2
            while i < len(lines) and lines[i].startswith("  ") and not lines[i].startswith("  by "):
                name_part, rest = re.match(r"^  (.+?)\s{2,}(\d+\s.*)$", lines[i]).groups()
                n_and_figs = rest.split()
                cis = re.findall(r"\[(\S+), (\S+)\]", lines[i + 1])
                figs = {}
                for m, v, (lo, hi) in zip(cols, n_and_figs[1:], cis):
                    figs[m] = (_num(v), _num(lo), _num(hi), v.endswith(SMALL))
                out[(source, kind, name_part.strip())] = figs
                i += 2
            continue
        elif source is not None and kind == "":
            # the figure, its interval (headed "95% CI" unless a heading row says it), people's beside it
            m = re.match(r"^  (.+?)\s+(\S+)(?:\s+(?:95% CI )?\[(\S+), (\S+)\]‡?)?(?:\s+(?:[-\d.]+|–)){0,2}$", line)
            if m and m.group(1).strip() in labels:
                v = m.group(2)
                lo, hi = (_num(x) if x else None for x in (m.group(3), m.group(4)))
                out[(source, "", "")][labels[m.group(1).strip()]] = (_num(v), lo, hi, v.endswith(SMALL))
        i += 1
    return out


def _agree(ref: dict, other: dict, digits: dict[str, int], name: str) -> None:
    assert set(other) == set(ref), f"{name}: other groups {set(other) ^ set(ref)}"
    for key, figs in ref.items():
        assert set(other[key]) == set(figs), f"{name} {key}: metrics {set(other[key]) ^ set(figs)}"
        for m, (v, lo, hi, small) in figs.items():
            ov, olo, ohi, osmall = other[key][m]
            tol = 0.5 * 10 ** -digits[m] + 1e-12
            for a, b in ((v, ov), (lo, olo), (hi, ohi)):
                if a is None or (isinstance(a, float) and math.isnan(a)):
                    assert b is None, f"{name} {key} {m}: {b} where undefined"
                else:
                    assert b is not None and abs(a - b) <= tol, f"{name} {key} {m}: {b} vs {a}"
            assert osmall == small, f"{name} {key} {m}: small-sample note"


@pytest.mark.parametrize("by", [BY, ["--by", "intent"], []], ids=["category+intent", "intent", "none"])
def test_every_format_carries_the_same_figures_cis_breakdowns_and_notes(inputs, by):
    ref = from_json(_score(inputs, "json", *by))
    kinds = {k for (_, k, _) in ref if k}
    assert kinds == {by[i + 1] for i in range(0, len(by), 2)}  # --by means the same in JSON
    full = {m: 15 for m in METRIC}  # CSV: full precision
    table = {m: METRIC[m].digits for m in METRIC}
    md = {m: METRIC[m].digits - 1 for m in METRIC}
    _agree(ref, from_csv(_score(inputs, "csv", *by)), full, "csv")
    _agree(ref, from_table(_score(inputs, "table", *by)), table, "table")
    sources = {"gpt-4o": inputs[0], "small": inputs[1]}
    _agree(ref, from_markdown(_score(inputs, "md", *by), sources), md, "md")
    if by:
        # the breakdowns hold the breakdown metrics that apply to the mode, with CIs
        # (the per-pair context figures only by category: one intent holds no query pair)
        some = next(v for (_, k, _), v in ref.items() if k)
        kind = next(k for (_, k, _) in ref if k)
        want = {m for m in BREAKDOWN_METRICS if m in metric_names("score")}
        if kind == "intent":
            want -= {"context_shift", "context_follow"}
        assert set(some) == want
        # the 12-case input: every figure has the note, and an undefined one is shown as such
        assert all(f[3] or f[0] is None for m, f in ref[(inputs[1], "", "")].items()
                   if METRIC[m].interval)  # (a count, context_pairs, has none)


def test_notes_are_stated_under_the_table(inputs):
    for fmt in ("table", "md"):
        text = _score(inputs, fmt, "--by", "intent")
        assert f"{SMALL} from fewer than {MIN_CASES} cases" in text
        assert "Wilson" in text  # the CIs line (in full under --explain)
        assert f"{UNDEFINED} undefined" in text  # safe recall of the unsafe contexts' group


# ------------------------------------------------------------------------------ small samples


def _cases(rates, cat="c"):
    return [Case(i, f"q{i}", {}, bool(i % 2), (1, 2, 1), r, cat) for i, r in enumerate(rates)]


def test_wilson_cis_do_not_collapse_at_zero_or_one():
    """A perfect 4-case judge: the bootstrap would give [1, 1]; the Wilson interval does not."""
    cases = _cases([0.9, 0.1, 0.8, 0.2])
    s = score_predictions(Predictions.from_values("x", "m", "binary", cases, ["safe", "unsafe", "safe", "unsafe"]), ScoringOptions(n_boot=200))
    lo, hi = s.ci["accuracy"]
    assert s.values["accuracy"] == 1.0 and hi == 1.0 and lo < 0.6
    lo, hi = s.ci["safe_recall"]
    assert lo < 0.5 < hi
    # every figure from fewer than 30 cases (or pairs) carries the note; a count (context_pairs) does not
    assert set(s.small()) == {m for m in s.values if METRIC[m].interval and not math.isnan(s.values[m])}
    assert SMALL in text_table([s]) and f"from fewer than {MIN_CASES} cases" in text_table([s])


def test_f1_with_nothing_answered_is_undefined_in_every_format():
    cases = _cases([0.9, 0.1, 0.8, 0.2])
    p = Predictions.from_values("x", "m", "binary", cases, [None] * 4)
    s = score_predictions(p, ScoringOptions(n_boot=50))
    assert all(math.isnan(s.values[m]) for m in ("accuracy", "f1_safe", "f1_unsafe"))
    d = json.loads(FORMATS["json"]([s]))
    assert d["f1_safe"] is None and d["accuracy"] is None
    row = next(csv.DictReader(io.StringIO(FORMATS["csv"]([s]))))
    assert row["f1_safe"] == row["accuracy"] == UNDEFINED
    table = FORMATS["table"]([s])
    assert re.search(rf"F1 safe\s+{UNDEFINED}\s", table) and "0.0000" not in table
    assert f"| {UNDEFINED} | {UNDEFINED} |" in FORMATS["md"]([s])
    # paper-compatible scoring prints what the authors' script (sklearn) prints: 0.0
    pc = score_predictions(Predictions.from_values("x", "m", "binary", _cases([0.1, 0.2]), ["unsafe", "unsafe"]),
                           ScoringOptions(paper_compat=True, n_boot=0))
    assert pc.values["f1_safe"] == 0.0
    assert math.isnan(score_predictions(Predictions.from_values("x", "m", "binary", _cases([0.1, 0.2]),
                                                                ["unsafe", "unsafe"]), ScoringOptions(n_boot=0)).values["f1_safe"])


def test_calibration_figures_are_not_printed_for_respond_mode():
    cases = _cases([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    meta = {"behaviour": [["comply"], ["refuse"], ["partial"], ["refuse"], ["comply"], ["comply"]]}
    p = Predictions.from_values("x", "m", "respond", cases, [1.0, 0.0, 0.0, 0.0, 1.0, 1.0], meta=meta)
    s = score_predictions(p, ScoringOptions(n_boot=50))
    assert not {"bce", "brier", "ece"} & set(s.values) and {"pcc", "refusal_rate", "partial_rate"} <= set(s.values)
    text = FORMATS["table"]([s])
    assert "BCE" not in text and "Brier" not in text and "ECE" not in text
    d = json.loads(FORMATS["json"]([s]))
    assert "bce" not in d and "bce" not in d["ci"]
    row = next(csv.DictReader(io.StringIO(FORMATS["csv"]([s]))))
    assert row["bce"] == row["brier"] == row["ece"] == ""  # blank: does not apply
    assert row["refusal_rate"] != ""


def test_refusal_rate_gets_a_wilson_interval():
    cases = _cases([0.9, 0.1, 0.8, 0.2])
    meta = {"behaviour": [["refuse"]] * 4}
    s = score_predictions(Predictions.from_values("x", "m", "respond", cases, [0.0] * 4, meta=meta), ScoringOptions(n_boot=50))
    assert s.values["refusal_rate"] == 1.0
    lo, hi = s.ci["refusal_rate"]
    assert hi == 1.0 and lo < 0.6
    assert np.isfinite(lo)
