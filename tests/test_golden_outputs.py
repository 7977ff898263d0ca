"""Every figure ``score``, ``compare``, ``ablate``, ``human`` and ``report`` print on the published
files stays what it was when the goldens were recorded (``tests/golden/record.py``): every word
and every rounded figure byte for byte, and every number printed at full precision (JSON, CSV) to
1e-12 relative. Full-precision floats differ in their last bit between numpy builds and CPUs
(vectorised sums add in another order), which says nothing about the figures.

A deliberate change of figures (a new metric rule, a new report section) records them again, in a
commit that says why:

    PYTHONPATH=src python tests/golden/record.py            # all goldens
    PYTHONPATH=src python tests/golden/record.py --only report

The commands run in-process on ``../shared/casebench`` with 200 bootstrap resamples (about 30 s
on 2 cores); the goldens hold figures, category and model names and file paths only.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))

import record  # noqa: E402  (tests/golden/record.py)


@pytest.fixture(scope="module")
def shared(real_data_path, exp_dir) -> Path:
    if len(record.MAIN_FILES) != 18:
        pytest.skip(f"expected the 18 published output files, found {len(record.MAIN_FILES)}")
    return record.SHARED


#: any decimal number; one written with more than 6 decimals on either side is full precision
#: (compared to 1e-12 relative), any other is a rounded figure (byte for byte). A full-precision
#: float can print short on one machine and long on another (0.658125 vs 0.6581250000000001).
_NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d(?:\.\d+)?[eE][-+]?\d+")
_FULL = re.compile(r"-?\d+\.\d{7,}(?:[eE][-+]?\d+)?|-?\d(?:\.\d+)?[eE][-+]?\d+")


def _same_number(a: str, b: str) -> bool:
    if a == b:
        return True
    if not (_FULL.fullmatch(a) or _FULL.fullmatch(b)):
        return False  # two rounded figures that differ
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-15)


def same_output(want: str, got: str) -> bool:
    """Equal text, where full-precision numbers may differ in their last bits (1e-12 relative)."""
    if want == got:
        return True
    if _NUMBER.split(want) != _NUMBER.split(got):
        return False
    w_nums, g_nums = _NUMBER.findall(want), _NUMBER.findall(got)
    return all(_same_number(a, b) for a, b in zip(w_nums, g_nums))  # equal splits: as many numbers


def test_same_output_tolerates_last_bits_only():
    assert same_output('{"r": 0.12345678901234567}', '{"r": 0.12345678901234562}')
    assert not same_output('{"r": 0.1234567890123}', '{"r": 0.1234567890999}')
    assert not same_output("accuracy 0.8123", "accuracy 0.8124")  # rounded figures: byte for byte
    assert not same_output('{"accuracy": 0.12345678}', '{"accuracy_x": 0.12345678}')
    # a float that prints short here and long on another CPU is the same figure
    assert same_output('{"ci": [0.658125, 0.7]}', '{"ci": [0.6581250000000001, 0.7]}')
    assert not same_output('{"ci": [0.658125]}', '{"ci": [0.658126]}')


@pytest.mark.parametrize("name", list(record.CASES))
def test_output_is_unchanged(shared, name):
    want = record.golden_path(name).read_text(encoding="utf-8")
    got = record.run_case(name)
    if not same_output(want, got):
        diff = "".join(list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "golden", "now"))[:60])
        pytest.fail(f"{name}: the output differs from tests/golden/{name}.txt\n{diff}")


def test_every_golden_has_a_command():
    stored = {p.stem for p in record.HERE.glob("*.txt")}
    assert stored == set(record.CASES)


def test_goldens_hold_no_text_of_the_data(real_dataset):
    """No query, and no context value longer than a category name, is in a committed golden."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in record.HERE.glob("*.txt")}

    def strings(x):
        if isinstance(x, str):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from strings(v)

    needles = {c.query for c in real_dataset} | {s for c in real_dataset for s in strings(dict(c.context)) if len(s) > 40}
    found = [(name, n[:30]) for name, t in texts.items() for n in needles if n in t]
    assert not found, f"data text in goldens: {found[:3]}"
    # the per-pair rows of the human JSON are stored as a digest
    assert set(json.loads(texts["human_json.txt"])["pairs"]) == {"rows", "sha256"}
