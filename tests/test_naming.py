"""Names that tell inputs apart (``casebench.naming``), as ``score``, ``compare`` and every format
print them: two runs of one loopback judge that differ only in where the context goes, and a
published file beside them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli


@pytest.fixture(scope="module")
def placement_runs(real_data_path, tmp_path_factory) -> list[Path]:
    """The same judge over the same 6 query pairs, the context in the prompt and as the system prompt."""
    from servers.fault_server import FaultServer

    from casebench.runs.execute import RunConfig, run

    def answer(body) -> str:
        text = " ".join(m["content"] for m in body["messages"])
        return json.dumps({"judgement": "safe" if len(text) % 3 else "unsafe", "explanation": "a rule"})

    tmp = tmp_path_factory.mktemp("placement")
    mp = pytest.MonkeyPatch()
    mp.delenv("OPENAI_API_KEY", raising=False)
    mp.delenv("OPENAI_BASE_URL", raising=False)
    outs = []
    try:
        with FaultServer(answer_fn=answer) as srv:
            for where in ("user", "system"):
                out = tmp / where
                s = run(RunConfig(mode="binary", model="openai/judge", data=real_data_path, out=out, pairs=6,
                                  context_as=where, backend_options={"base_url": srv.base_url}, progress=False))
                assert s.status == "complete"
                outs.append(out)
    finally:
        mp.undo()
    return outs


def _score(*args: str) -> str:
    r = CliRunner().invoke(cli, ["score", *args, "--bootstrap", "0", "--no-reference"])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_two_placements_are_told_apart_in_every_format(placement_runs):
    a, b = map(str, placement_runs)
    want = ["openai/judge [binary] (context as user)", "openai/judge [binary] (context as system)"]
    table = _score(a, b)
    assert [line for line in table.splitlines() if line.startswith("openai/")] == want
    assert "judge [binary]\n" not in table  # never the model without its backend, never one name for two
    objs = [json.loads(line) for line in _score(a, b, "--json").splitlines()]
    assert [o["name"] for o in objs] == want and [o["model"] for o in objs] == ["judge", "judge"]
    rows = list(csv.DictReader(io.StringIO(_score(a, b, "--format", "csv"))))
    assert [r["name"] for r in rows] == want
    md = _score(a, b, "--format", "md")
    assert all(f"| {n} | judge | binary |" in md for n in want)
    # shown alone, a run in its mode's own placement needs no placement in its name
    assert json.loads(_score(a, "--json"))["name"] == "openai/judge [binary]"
    assert json.loads(_score(b, "--json"))["name"] == "openai/judge [binary] (context as system)"


def test_compare_names_both_placements(placement_runs):
    a, b = map(str, placement_runs)
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "50", "--json"])
    assert r.exit_code == 0, r.output
    names = [d["name"] for d in json.loads(r.stdout)["inputs"]]
    assert names == ["openai/judge [binary] (context as user)", "openai/judge [binary] (context as system)"]
    r = CliRunner().invoke(cli, ["compare", a, b, "--bootstrap", "50"])
    assert "A  openai/judge [binary] (context as user)" in r.stdout
    assert "B  openai/judge [binary] (context as system)" in r.stdout


def test_score_json_is_one_object_per_input_then_reference_objects(placement_runs, exp_dir):
    """``score --json``: one object per input, then the published models shown beside it, each its
    own object marked ``"reference": true`` (and named as published)."""
    r = CliRunner().invoke(cli, ["score", str(placement_runs[0]), "--json", "--bootstrap", "0",
                                 "--reference", str(exp_dir)])
    assert r.exit_code == 0, r.output
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert objs[0]["name"] == "openai/judge [binary]" and "reference" not in objs[0]
    refs = objs[1:]
    assert refs and all(o["reference"] is True and o["name"].endswith(" (published)") for o in refs)
    assert all(o["n"] == objs[0]["n"] for o in refs)  # on the cases the input scored


def test_names_without_a_run(real_dataset):
    """Facets are named only where they set inputs apart; a published file names no backend;
    inputs that still share a name get their file name."""
    from casebench.naming import display_names
    from casebench.predictions import Predictions

    cases = real_dataset.cases[:4]

    def pred(source: str, model: str, mode: str = "binary", **kw) -> Predictions:
        return Predictions.from_values(source, model, mode, cases, ["safe"] * 4, **kw)

    assert display_names([pred("a/output_binary.json", "m"), pred("b/output_binary.json", "m")]) == [
        "m [binary] (a/output_binary.json)", "m [binary] (b/output_binary.json)"]
    assert display_names([pred("a", "m"), pred("a", "m")]) == ["m [binary] (a) #1", "m [binary] (a) #2"]
    assert display_names([pred("x", "m"), pred("y", "m", removed=("sender",))]) == ["m [binary]", "m [binary] − sender"]
    run = pred("runs/r", "m", meta={"model_spec": "hf/org/m"})
    assert display_names([run, pred("p", "m")]) == ["hf/org/m [binary]", "m [binary]"]
