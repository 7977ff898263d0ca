"""Issue 37, items 1 and 2: nested, seeded selections; a run directory that grows in place; and
exports of a subset run that score with the dataset known.

Along the user's path: the CLI against a scripted OpenAI-compatible server on loopback that logs
every request (``servers.fault_server``), over the published dataset (read from ../shared at run
time) or small datasets of our own wording."""

from __future__ import annotations

import collections
import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.data import load_dataset
from casebench.runs.record import Selection, read_manifest
from casebench.runs.select import (
    SELECTION_PROCEDURE, growth_refusal, interleave, select_cases, stratified_indices, stratified_pairs,
)
from test_runs import invented_record

MARK = re.compile(r"\[q(\d+) (safe|unsafe)\]")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write_pairs(path: Path, sizes: dict[str, int]) -> Path:
    """Invented query pairs: ``sizes[category]`` queries, each in a safe- and an unsafe-intent
    context; each context carries ``[qN safe|unsafe]`` so the server's log says which case it got."""
    recs = []
    q = 0
    for cat, n in sizes.items():
        for _ in range(n):
            for safe in (True, False):
                rec = invented_record(q, cat, safe)
                rec["query"] = f"How should I store {cat} items over the winter? (question {q})"
                rec["context"]["sender"]["nature_of_the_interaction"] += f" [q{q} {'safe' if safe else 'unsafe'}]"
                recs.append(rec)
            q += 1
    path.write_text(json.dumps(recs, indent=1))
    return path


def asked_cases(server) -> list[str]:
    """The case markers of every chat request the server got, in order."""
    out = []
    for r in server.requests:
        if r.path.endswith("/chat/completions"):
            text = json.dumps(r.body["messages"])
            out.extend(m.group(0) for m in MARK.finditer(text))
    return out


# ------------------------------------------------------------------------------- the selection


def test_a_larger_selection_holds_the_smaller_and_stays_stratified(real_dataset):
    """Same seed: every --pairs N (and --stratified N) holds every smaller one; each category's
    share stays within one of its proportional share; 45 pairs are one per category, 90 cases of
    --stratified one per category x intent (as before)."""
    cats = collections.Counter(c.category for c in real_dataset)
    for seed in (0, 3):
        prev: set[int] = set()
        for n in (1, 5, 10, 45, 46, 90, 200, 450):
            cur = set(stratified_pairs(real_dataset, n, seed))
            assert prev <= cur and len(cur) == 2 * n
            per_cat = collections.Counter(real_dataset[i].category for i in cur)
            for cat, size in cats.items():  # pairs per category within one of n * share
                assert abs(per_cat[cat] / 2 - n * size / len(real_dataset)) < 1 + 1e-9, (n, cat)
            prev = cur
        prev = set()
        for n in (3, 45, 90, 91, 300, 900):
            cur = set(stratified_indices(real_dataset, n, seed))
            assert prev <= cur and len(cur) == n
            prev = cur
    assert len({real_dataset[i].category for i in stratified_pairs(real_dataset, 45, 0)}) == 45
    strata = collections.Counter((real_dataset[i].category, real_dataset[i].intended_safe)
                                 for i in stratified_indices(real_dataset, 90, 7))
    assert len(strata) == 90
    assert stratified_pairs(real_dataset, 10, 0) != stratified_pairs(real_dataset, 10, 1)


def test_uneven_categories_keep_their_share_in_every_prefix(tmp_path):
    """Categories of 12, 6 and 2 queries: in every prefix each has its share to within one."""
    ds = load_dataset(write_pairs(tmp_path / "p.json", {"garden tools": 12, "pet care": 6, "library rules": 2}))
    sizes = {"garden tools": 12, "pet care": 6, "library rules": 2}
    prev: set[int] = set()
    for n in range(1, 21):
        cur = set(stratified_pairs(ds, n, seed=11))
        assert prev <= cur
        per_cat = collections.Counter(ds[i].category for i in cur)
        for cat, size in sizes.items():
            assert abs(per_cat[cat] / 2 - n * size / 20) < 1, (n, cat, per_cat)
        prev = cur


def test_interleave_is_a_stratified_order_of_every_item():
    groups = [list("abcdef"), list("xy"), list("PQRS")]
    order = interleave(groups, random.Random(1))
    assert sorted(order) == sorted("abcdefxyPQRS")
    for g in groups:  # each group in its own order
        assert [x for x in order if x in g] == g
    assert order == interleave(groups, random.Random(1))


def test_selection_records_its_procedure_and_old_runs_keep_theirs(real_dataset):
    """A new seeded selection records procedure 2; procedure 1 (casebench before nesting) is
    reproduced unchanged, so a run recorded under it resumes on exactly its cases."""
    cases, sel = select_cases(real_dataset, pairs=5, seed=0)
    assert sel.procedure == SELECTION_PROCEDURE == 2 and sel.effective_procedure == 2
    old = Selection("pairs=5 seed=0", seed=0, pairs=5)  # a manifest written before the field
    assert old.effective_procedure == 1
    v1, _ = select_cases(real_dataset, pairs=5, seed=0, procedure=1)
    assert v1 != cases and len(v1) == 10
    assert "procedure 1" in growth_refusal(old, v1, Selection("pairs=10 seed=0", seed=0, pairs=10, procedure=1),
                                           select_cases(real_dataset, pairs=10, seed=0, procedure=1)[0])


# ------------------------------------------------------------------------------- runs that grow


def test_pilot_grows_in_place_and_a_fresh_run_selects_the_same_cases(tmp_path, real_data_path, fault_server):
    """The issue's "done when": --pairs 5, then --pairs 10 in the same directory asks 20 cases in
    all, none twice; the manifest records the growth and changes nothing else; a fresh --pairs 10
    selects exactly the grown run's cases; the export of the grown run scores with the dataset
    known and agrees with the run's own score."""
    fault_server.answer_fn = lambda body: ('{"judgement": "unsafe"}' if len(json.dumps(body["messages"])) % 3 == 0
                                           else '{"judgement": "safe"}')
    grown, fresh = tmp_path / "pilot", tmp_path / "fresh"
    base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", real_data_path,
            "--base-url", fault_server.base_url, "--no-progress", "--no-report", "--min-coverage", "0"]

    r = invoke(*base, "--pairs", "5", "-o", grown)
    assert r.exit_code == 0, r.output
    pilot = read_manifest(grown)
    assert fault_server.count == 10 and len(pilot.asked.cases) == 10

    r = invoke(*base, "--pairs", "10", "-o", grown)
    assert r.exit_code == 0, r.output
    bodies = [json.dumps(q.body["messages"]) for q in fault_server.requests]
    assert fault_server.count == 20 and len(set(bodies)) == 20  # 20 cases in all, none asked twice
    assert "grows from pairs=5 seed=0 (10 cases) to pairs=10 seed=0: asking the 10 new cases" in r.output
    m = read_manifest(grown)
    assert set(pilot.asked.cases) < set(m.asked.cases) and len(m.asked.cases) == 20
    assert m.selection.pairs == 10 and m.selection.procedure == SELECTION_PROCEDURE
    assert m.history[0].grew is None
    assert m.history[1].grew == {"from": "pairs=5 seed=0", "to": "pairs=10 seed=0", "cases_before": 10,
                                 "cases_added": 10}
    # everything else in the manifest as it was
    before, after = pilot.to_dict(), m.to_dict()
    for key in ("dataset", "templates_source", "price", "retry", "created_at", "casebench_version"):
        assert before[key] == after[key], key
    assert {k: v for k, v in before["asked"].items() if k != "cases"} == \
           {k: v for k, v in after["asked"].items() if k != "cases"}
    records = [json.loads(x) for x in (grown / "records.jsonl").read_text().splitlines()]
    assert sorted(r["case"] for r in records) == sorted(m.asked.cases)

    # the same command again asks nothing
    r = invoke(*base, "--pairs", "10", "-o", grown)
    assert r.exit_code == 0 and fault_server.count == 20

    # a fresh --pairs 10 (its own directory) selects exactly the grown run's cases
    r = invoke(*base, "--pairs", "10", "-o", fresh)
    assert r.exit_code == 0, r.output
    assert read_manifest(fresh).asked.cases == m.asked.cases

    # the export of the grown run scores with the dataset known, as the run does
    out = tmp_path / "output_binary.json"
    r = invoke("export", grown, "-o", out)
    assert r.exit_code == 0, r.output
    exported = json.loads(out.read_text())
    assert [rec["dataset_record"] for rec in exported] == m.asked.cases
    of_run = invoke("score", grown, "--data", real_data_path, "--json", "--bootstrap", "50")
    of_file = invoke("score", out, "--data", real_data_path, "--json", "--bootstrap", "50")
    assert of_run.exit_code == 0, of_run.output
    assert of_file.exit_code == 0, of_file.output
    a, b = json.loads(of_run.output.splitlines()[-1]), json.loads(of_file.output.splitlines()[-1])
    assert _figures(a) == _figures(b) and _figures(a)


def _figures(d):
    """The numbers of a ``score --json`` object (paths and names left out)."""
    if isinstance(d, dict):
        return {k: _figures(v) for k, v in d.items() if k not in ("source", "path", "input", "name", "meta")
                and _figures(v) not in ({}, [], None)}
    if isinstance(d, list):
        return [_figures(v) for v in d]
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def test_a_run_never_shrinks_nor_changes_seed_or_kind(tmp_path, fault_server):
    data = write_pairs(tmp_path / "p.json", {"garden tools": 6, "pet care": 4})
    run = tmp_path / "run"
    base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", data, "--base-url",
            fault_server.base_url, "--no-progress", "--no-report", "-o", run]
    assert invoke(*base, "--pairs", "4").exit_code == 0
    before = (run / "manifest.json").read_bytes()
    n = fault_server.count
    for extra, says in ((["--pairs", "3"], "smaller than the run's 4"),
                        (["--pairs", "6", "--seed", "1"], "seed 0, the command's with seed 1"),
                        (["--stratified", "10"], "only a larger --limit, --stratified or --pairs"),
                        (["--pairs", "6", "--temperature", "0.5"], "settings.temperature")):
        r = invoke(*base, *extra)
        assert r.exit_code == 2, (extra, r.output)
        assert "refusing to resume" in r.output and says in r.output, (extra, r.output)
        assert (run / "manifest.json").read_bytes() == before
    assert fault_server.count == n
    # --limit grows too (its prefixes nest by construction)
    lim = tmp_path / "lim"
    assert invoke(*base[:-1], lim, "--limit", "3").exit_code == 0
    assert invoke(*base[:-1], lim, "--limit", "7").exit_code == 0
    assert read_manifest(lim).asked.cases == list(range(7))
    asked = asked_cases(fault_server)[-7:]  # the two invocations on it: each case once
    assert sorted(asked) == sorted(f"[q{i // 2} {'safe' if i % 2 == 0 else 'unsafe'}]" for i in range(7))


def test_a_run_recorded_under_the_old_selection_resumes_on_its_own_cases(tmp_path, fault_server):
    """A run whose manifest records no selection procedure (casebench before nested selections)
    is never reinterpreted: the same command resumes it on exactly its cases (procedure 1), and a
    larger N is refused with the reason, naming what to do."""
    data = write_pairs(tmp_path / "p.json", {"garden tools": 8, "pet care": 6, "library rules": 4})
    run = tmp_path / "run"
    base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", data, "--base-url",
            fault_server.base_url, "--no-progress", "--no-report", "-o", run]
    ds = load_dataset(data)
    assert invoke(*base, "--pairs", "5").exit_code == 0
    # rewrite it as the old casebench wrote it: procedure-1 cases, no procedure recorded, a
    # record missing so the resume has something to ask
    old_cases = stratified_pairs(ds, 5, 0, procedure=1)
    assert old_cases != stratified_pairs(ds, 5, 0)
    m = json.loads((run / "manifest.json").read_text())
    m["asked"]["cases"] = old_cases
    del m["selection"]["procedure"]
    (run / "manifest.json").write_text(json.dumps(m))
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    kept = [r for r in recs if r["case"] in old_cases[1:]]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    fault_server.reset()
    r = invoke(*base, "--pairs", "5")
    assert r.exit_code == 0, r.output
    m2 = read_manifest(run)
    assert m2.asked.cases == old_cases and m2.selection.procedure is None
    assert sorted(r2["case"] for r2 in map(json.loads, (run / "records.jsonl").read_text().splitlines())) \
        == sorted(old_cases)
    r = invoke(*base, "--pairs", "8")
    assert r.exit_code == 2 and "selection procedure 1" in r.output and "do not nest" in r.output, r.output


def test_export_of_a_subset_scores_with_the_dataset_from_the_environment(tmp_path, fault_server, monkeypatch):
    """The dataset known from $CASEBENCH_DATA (no --data): the export of a 3-pair run is checked
    record by record against the records it names, and scores as the run does; a file edited to
    name another record is refused, naming the record and the field."""
    data = write_pairs(tmp_path / "p.json", {"garden tools": 6, "pet care": 4})
    monkeypatch.setenv("CASEBENCH_DATA", str(data))
    run, out = tmp_path / "run", tmp_path / "output_binary.json"
    r = invoke("run", "--model", "openai/judge-x", "--mode", "binary", "--base-url", fault_server.base_url,
               "--pairs", "3", "--no-progress", "--no-report", "-o", run, "--min-coverage", "0")
    assert r.exit_code == 0, r.output
    assert invoke("export", run, "-o", out).exit_code == 0
    of_run, of_file = invoke("score", run, "--json"), invoke("score", out, "--json")
    assert of_run.exit_code == 0 and of_file.exit_code == 0, (of_run.output, of_file.output)
    a, b = json.loads(of_run.output.splitlines()[-1]), json.loads(of_file.output.splitlines()[-1])
    assert _figures(a) == _figures(b) and a["n"] == b["n"] == 6, (a, b)
    recs = json.loads(out.read_text())
    recs[1]["dataset_record"] = recs[0]["dataset_record"]
    out.write_text(json.dumps(recs))
    r = invoke("score", out, "--json")
    assert r.exit_code == 2 and "record 1, field 'dataset_record': names dataset record" in r.output, r.output
    # an export without the field (an older casebench) is told what is wrong and what to do
    for rec in recs:
        del rec["dataset_record"]
    out.write_text(json.dumps(recs))
    r = invoke("score", out, "--json")
    assert r.exit_code == 2 and "export it again with this casebench" in r.output, r.output


def test_stratified_grows_and_a_default_folder_points_at_the_smaller_run(tmp_path, fault_server, monkeypatch):
    """--stratified grows in place like --pairs; a larger selection in its own default folder
    says which smaller run beside it `-o` would grow instead (it still asks what was asked)."""
    monkeypatch.chdir(tmp_path)
    data = write_pairs(tmp_path / "p.json", {"garden tools": 6, "pet care": 4})
    base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", data, "--base-url",
            fault_server.base_url, "--no-progress", "--no-report", "--min-coverage", "0"]
    r = invoke(*base, "--stratified", "4")
    assert r.exit_code == 0, r.output
    small = Path(r.output.split("run: ")[1].split()[0])
    assert small.name.endswith("_strat4")
    r = invoke(*base, "--stratified", "8")
    assert r.exit_code == 0, r.output
    assert f"{small} already holds 4 of these 8 cases, asked with the same settings: `-o {small}` grows" in r.output
    n = fault_server.count
    assert n == 12
    r = invoke(*base, "--stratified", "8", "-o", small)
    assert r.exit_code == 0, r.output
    assert fault_server.count == n + 4
    m = read_manifest(small)
    assert len(m.asked.cases) == 8 and m.selection.stratified == 8 and m.history[-1].grew["cases_added"] == 4


def test_a_run_under_a_mutation_grows_and_asks_only_the_new_reworded_cases(tmp_path, fault_server):
    """A Caesar-encoded pilot grows like any run: only the new cases are asked, each reworded."""
    data = write_pairs(tmp_path / "p.json", {"garden tools": 6, "pet care": 4})
    run = tmp_path / "run"
    base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", data, "--base-url",
            fault_server.base_url, "--mutation", "caesar", "--no-progress", "--no-report", "-o", run,
            "--min-coverage", "0"]
    assert invoke(*base, "--pairs", "2").exit_code == 0
    r = invoke(*base, "--pairs", "4")
    assert r.exit_code == 0, r.output
    bodies = [json.dumps(q.body["messages"]) for q in fault_server.requests if q.path.endswith("/chat/completions")]
    assert len(bodies) == 8 == len(set(bodies))
    assert not any("How should I store" in b for b in bodies)  # every query encoded
    m = read_manifest(run)
    assert len(m.asked.cases) == 8 and m.mutation == "caesar" and m.history[-1].grew["cases_added"] == 4
