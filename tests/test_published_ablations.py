"""The authors' ablation files are read, validated against their declared removals, scored and
analysed like any input.

Only one of the authors' 25 ablation files is in ../shared; the others are rebuilt here from the
real dataset in the authors' layout (contexts with the removed parameters absent, the name
declaring them), each holding the llama370B full-context predictions, so that every reader path
sees the 15 conditions of the llama370B study (full context and 14 removals). Nothing of the data
is written into the repository: the files live in a temporary directory.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import ablate_context

#: The llama370B study's conditions: each group, each sub-parameter, and the three group pairs.
CONDITIONS = [
    ("sender",), ("recipient",), ("transmission_principle",), ("nature_of_the_interaction",), ("platform_type",),
    ("type",), ("background",), ("sender_purpose",), ("confidentiality",), ("source_accountability",),
    ("urgency",), ("sender", "recipient"), ("sender", "transmission_principle"),
    ("recipient", "transmission_principle"),
]


@pytest.fixture(scope="module")
def study(exp_dir, tmp_path_factory):
    src = exp_dir / "safety_llama370B" / "output_logits.json"
    records = json.loads(src.read_text())
    folder = tmp_path_factory.mktemp("exp") / "safety_llama370B"
    folder.mkdir()
    files = [folder / "output_logits.json"]
    files[0].write_text(src.read_text())
    for removed in CONDITIONS:
        recs = [dict(r, context=ablate_context(r["context"], removed)) for r in records]
        f = folder / f"output_logits_{','.join(removed)}.json"
        f.write_text(json.dumps(recs))
        files.append(f)
    return files


def test_score_paper_compat_json_prints_one_object_per_published_file(study, exp_dir):
    others = sorted(p for p in exp_dir.glob("safety_*/output_*.json") if "llama370B" not in str(p))
    inputs = [*study, *others]
    r = CliRunner().invoke(cli, ["score", "--paper-compat", "--json", "--bootstrap", "0", *map(str, inputs)])
    assert r.exit_code == 0, r.output
    objs = [json.loads(line) for line in r.output.splitlines() if line.strip()]
    # the 15 rebuilt llama370B conditions plus the 16 other published files (19 in ../shared, 3 of llama370B)
    assert len(study) == 15 and len(others) == 16
    assert len(objs) == len(inputs)
    removed = {tuple(o["removed"]) for o in objs}
    assert ("sender", "transmission_principle") in removed and ("sender",) in removed
    full = next(o for o in objs if o["source"].endswith("safety_llama370B/output_logits.json"))
    assert round(full["accuracy"], 5) == 0.87222


def test_ablate_over_the_published_study_prints_conditions_and_paired_differences(study):
    r = CliRunner().invoke(cli, ["ablate", "--bootstrap", "100", *map(str, study)])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "15 conditions" in out
    for removed in CONDITIONS:
        assert ", ".join(removed) in out, removed
