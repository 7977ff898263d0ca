"""Every figure ``score``, ``compare``, ``ablate``, ``human`` and ``report`` print on the published
files stays what it was when the goldens were recorded (``tests/golden/record.py``), byte for byte.

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


@pytest.mark.parametrize("name", list(record.CASES))
def test_output_is_unchanged(shared, name):
    want = record.golden_path(name).read_text(encoding="utf-8")
    got = record.run_case(name)
    if got != want:
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
