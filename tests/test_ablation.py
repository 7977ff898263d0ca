"""The ablation study (``casebench.stats.ablation``, ``casebench.runs.study`` and ``casebench ablate``).

Published ablation files do not exist locally, so the analysis tests write their own in the
published format at run time: the real dataset's records plus a synthetic judge's prediction
(nothing of it is committed). The running test drives a real loopback OpenAI-compatible server
whose answer depends only on which CI parameters the prompt still holds, so every expected
figure follows from that rule and the human labels.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from casebench.present.study_text import format_ablation
from casebench.runs.study import ablation_run_dir
from casebench.stats.metrics import METRIC
from casebench.stats.ablation import AblationStudyError, ablation_conditions, analyse_ablation, canonical
from casebench.cli import cli
from casebench.data import load_dataset
from casebench.stats.result import score_predictions
from casebench.stats.options import ScoringOptions
from casebench.published import load_published, published_file_name, write_published
from servers.fault_server import FaultServer


def write_study(root: Path, dataset, mode: str = "prob", model: str = "synth", seed: int = 0,
                conditions=None) -> list[Path]:
    """A synthetic judge's ablation files: noisier (and more 'unsafe') the more is removed, a few
    answers missing, so paper-compatible and default scoring differ. As in the authors' files, an
    ablation file's contexts lack the removed CI parameters."""
    rng = np.random.default_rng(seed)
    g = np.array([c.human_safe_rate for c in dataset])
    paths = []
    for cond in conditions or ablation_conditions():
        p = np.clip(g + rng.normal(0, 0.12 + 0.06 * len(cond), len(g)) - 0.04 * len(cond), 0.0, 1.0)
        if mode == "score":
            values: list = [float(1 + 9 * x) for x in p]
        elif mode == "binary":
            values = ["safe" if x > 0.5 else "unsafe" for x in p]
        else:
            values = [float(x) for x in p]
        for i in rng.choice(len(values), size=4, replace=False):
            values[int(i)] = None
        path = root / f"safety_{model}" / published_file_name(mode, cond)
        write_published(path, [c.ablated(cond) for c in dataset.cases], model, mode, values)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def study(real_dataset, tmp_path_factory) -> list[Path]:
    return write_study(tmp_path_factory.mktemp("abl"), real_dataset, mode="score")


# ------------------------------------------------------------------------------ conditions


def test_default_conditions_are_full_singles_pairs_then_all():
    conds = ablation_conditions()
    assert conds == [
        (), ("sender",), ("recipient",), ("transmission_principle",),
        ("sender", "recipient"), ("sender", "transmission_principle"), ("recipient", "transmission_principle"),
        ("sender", "recipient", "transmission_principle"),
    ]


def test_sub_parameters_and_larger_sets():
    assert ablation_conditions("urgency") == [(), ("urgency",)]
    conds = ablation_conditions("sender,urgency,confidentiality,recipient")
    sizes = [len(c) for c in conds]
    assert sizes.count(1) == 4 and sizes.count(2) == 6 and sizes.count(4) == 1 and 3 not in sizes
    assert canonical(("recipient", "sender")) == ("sender", "recipient")
    with pytest.raises(ValueError, match="unknown CI parameter"):
        ablation_conditions("sendr")


# ------------------------------------------------------------------------------ analysis


def test_per_condition_figures_equal_paper_compatible_scores(study):
    preds = [load_published(p) for p in study]
    res = analyse_ablation(preds, ScoringOptions(paper_compat=True, n_boot=200, bootstrap_seed=4))
    assert len(res.conditions) == 8 and res.conditions[0].removed == ()
    by_cond = {c.removed: c for c in res.conditions}
    for p in preds:
        want = score_predictions(p, ScoringOptions(paper_compat=True, n_boot=200, bootstrap_seed=4))
        got = by_cond[canonical(p.removed)].score
        assert got.values == want.values and got.ci == want.ci
    full = by_cond[()].score.values
    for c in res.conditions[1:]:
        assert c.n_paired == 900 and c.dropped == 0
        for m, d in c.diffs.items():
            if METRIC[m].unit == "pair":
                # context figures are compared over the query pairs both inputs answered both cases of
                # (a few answers are missing), not over each input's own pairs
                assert d.diff == pytest.approx(d.a - d.b, abs=1e-12)
            else:
                assert d.diff == pytest.approx(c.score.values[m] - full[m], abs=1e-12)
            assert d.ci[0] <= d.diff <= d.ci[1]
    # removing everything hurts this synthetic judge clearly
    everything = by_cond[("sender", "recipient", "transmission_principle")]
    assert everything.diffs["accuracy"].diff < 0 and everything.diffs["accuracy"].significant
    assert "full context" in format_ablation(res)


def test_cli_ablate_reproduces_cli_score_paper_compat(study):
    runner = CliRunner()
    r = runner.invoke(cli, ["ablate", *map(str, study), "--paper-compat", "--bootstrap", "100", "--json"])
    assert r.exit_code == 0, r.output
    got = {tuple(c["removed"]): c for c in json.loads(r.stdout)["conditions"]}
    r2 = runner.invoke(cli, ["score", "--paper-compat", "--bootstrap", "0", "--json", *map(str, study)])
    assert r2.exit_code == 0, r2.output
    for line in r2.stdout.splitlines():
        s = json.loads(line)
        cond = got[tuple(canonical(s["removed"]))]
        for m in ("accuracy", "safe_recall", "unsafe_recall", "f1_safe", "f1_unsafe", "pcc", "brier"):
            assert cond["score"][m] == pytest.approx(s[m], abs=1e-12), m
        if s["removed"]:
            assert cond["difference_from_full"]["metrics"]["accuracy"]["ci"][0] is not None
    text = runner.invoke(cli, ["ablate", *map(str, study), "--bootstrap", "100"]).stdout
    assert "- sender, recipient, transmission_principle" in text and "vs  full context" in text


def test_ablation_files_lack_the_removed_parameters_and_still_pair(study):
    full, sender = load_published(study[0]), load_published(study[1])
    assert sender.removed == ("sender",) and "sender" not in sender.cases[0].context
    assert "sender" in full.cases[0].context
    res = analyse_ablation([sender, full], ScoringOptions(n_boot=50))
    assert [c.removed for c in res.conditions] == [(), ("sender",)] and res.conditions[1].n_paired > 0


def test_any_subset_of_conditions_with_the_full_context(study):
    """The study needs the full context and nothing else: any subset of the conditions works."""
    preds = [load_published(p) for p in study]
    picks = [0, 4, 7]  # full, one pair, all three removed
    res = analyse_ablation([preds[i] for i in reversed(picks)], ScoringOptions(n_boot=50, bootstrap_seed=2))
    assert [c.removed for c in res.conditions] == [canonical(preds[i].removed) for i in picks]
    # each condition's difference is the same as in the full study (same resamples, same pairs)
    whole = analyse_ablation(preds, ScoringOptions(n_boot=50, bootstrap_seed=2))
    by_cond = {c.removed: c for c in whole.conditions}
    for c in res.conditions[1:]:
        for m, d in c.diffs.items():
            assert (d.diff, d.ci) == (by_cond[c.removed].diffs[m].diff, by_cond[c.removed].diffs[m].ci)
    only_full = analyse_ablation(preds[:1], ScoringOptions(n_boot=20))
    assert len(only_full.conditions) == 1
    assert "only the full context was given" in format_ablation(only_full)


def test_votes_labels_in_ablate_equal_votes_labels_in_score(study):
    runner = CliRunner()
    r = runner.invoke(cli, ["ablate", *map(str, study[:3]), "--label-source", "votes", "--bootstrap", "50", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["settings"]["label_source"] == "votes"
    got = {tuple(c["removed"]): c["score"] for c in res["conditions"]}
    r2 = runner.invoke(cli, ["score", "--label-source", "votes", "--bootstrap", "50", "--json", *map(str, study[:3])])
    r3 = runner.invoke(cli, ["score", "--bootstrap", "50", "--json", *map(str, study[:3])])
    assert r2.exit_code == 0 and r3.exit_code == 0
    changed = False
    for votes_line, published_line in zip(r2.stdout.splitlines(), r3.stdout.splitlines()):
        s, pub = json.loads(votes_line), json.loads(published_line)
        cond = got[tuple(canonical(s["removed"]))]
        for m in ("accuracy", "safe_recall", "unsafe_recall", "pcc", "bce"):
            assert cond[m] == s[m], m
        changed |= s["accuracy"] != pub["accuracy"]
    assert changed  # the votes-only labels differ from the published ones on some cases
    text = runner.invoke(cli, ["ablate", *map(str, study[:2]), "--label-source", "votes", "--bootstrap", "20"]).stdout
    assert "labels: the majority of each case's votes alone" in text
    r = runner.invoke(cli, ["ablate", *map(str, study[:2]), "--label-source", "votes", "--paper-compat"])
    assert r.exit_code == 2 and "--paper-compat uses the published labels" in r.output


def test_default_mode_drops_unanswered_cases(study):
    preds = [load_published(p) for p in study[:2]]
    res = analyse_ablation(preds, ScoringOptions(n_boot=50))
    c = res.conditions[1]
    missing = (~preds[0].answered) | (~preds[1].answered)
    assert c.dropped == int(missing.sum()) > 0 and c.n_paired == 900 - c.dropped


def test_study_errors_are_clear(study, real_dataset, tmp_path):
    preds = [load_published(p) for p in study]
    with pytest.raises(AblationStudyError, match="no full-context input"):
        analyse_ablation(preds[1:], ScoringOptions(n_boot=10))
    with pytest.raises(AblationStudyError, match="appears twice"):
        analyse_ablation([preds[0], preds[1], preds[1]], ScoringOptions(n_boot=10))
    other = write_study(tmp_path, real_dataset, mode="score", model="other", conditions=[("sender",)])
    with pytest.raises(AblationStudyError, match="one model in one mode"):
        analyse_ablation([preds[0], load_published(other[0])], ScoringOptions(n_boot=10))
    r = CliRunner().invoke(cli, ["ablate", *map(str, study[1:3])])
    assert r.exit_code == 2 and "no full-context input" in r.output
    r = CliRunner().invoke(cli, ["ablate"])
    assert r.exit_code == 2 and "--model" in r.output


# ------------------------------------------------------------------------------ running


def _rule(body) -> str:
    """safe exactly when the prompt holds both or neither of sender and recipient."""
    prompt = body["messages"][-1]["content"]
    label = "safe" if ('"sender"' in prompt) == ('"recipient"' in prompt) else "unsafe"
    return json.dumps({"judgement": label, "explanation": "rule"})


def test_ablate_runs_missing_conditions_then_reuses_them(tmp_path, small_data_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    ds = load_dataset(small_data_path)
    human_safe = np.array([c.human_safe for c in ds])
    with FaultServer(answer_fn=_rule) as srv:
        args = ["ablate", "--model", "openai/judge-x", "--mode", "binary", "--params", "sender,recipient",
                "--data", str(small_data_path), "--base-url", srv.base_url, "--out-root", str(tmp_path / "runs"),
                "--no-progress", "--bootstrap", "100", "--json"]
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        assert srv.count == 4 * len(ds)  # four conditions, one request per case
        res = json.loads(r.stdout)
        acc = {tuple(c["removed"]): c["score"]["accuracy"] for c in res["conditions"]}
        all_safe, all_unsafe = human_safe.mean(), 1 - human_safe.mean()
        assert acc == pytest.approx({(): all_safe, ("sender",): all_unsafe, ("recipient",): all_unsafe,
                                     ("sender", "recipient"): all_safe})
        diff = {tuple(c["removed"]): c["difference_from_full"] for c in res["conditions"]}
        assert diff[("sender",)]["metrics"]["accuracy"]["diff"] == pytest.approx(all_unsafe - all_safe)
        # the same verdicts: no difference, and Newcombe's interval around it, never a point
        same = diff[("sender", "recipient")]["metrics"]["accuracy"]
        assert same["ci_bootstrap"] == [0.0, 0.0] and same["ci"][0] < 0.0 < same["ci"][1]
        for cond in acc:
            assert (ablation_run_dir(tmp_path / "runs", "openai/judge-x", "binary", cond, dataset_sha256=ds.sha256)
                    / "manifest.json").is_file()
        # again: every condition is complete, nothing is asked
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        assert srv.count == 4 * len(ds)
        assert r.stderr.count("reused") == 4
        # and the finished runs can be re-analysed as inputs
        dirs = [str(ablation_run_dir(tmp_path / "runs", "openai/judge-x", "binary", c, dataset_sha256=ds.sha256))
                for c in acc]
        r = CliRunner().invoke(cli, ["ablate", *dirs, "--bootstrap", "50", "--json"])
        assert r.exit_code == 0, r.output
        again = {tuple(c["removed"]): c["score"]["accuracy"] for c in json.loads(r.stdout)["conditions"]}
        assert again == acc
        # in text, the figures of this 8-case study carry the small-sample note, and no difference
        # is marked significant (each says why)
        r = CliRunner().invoke(cli, ["ablate", *dirs, "--bootstrap", "50"])
        assert r.exit_code == 0, r.output
        assert "†" in r.stdout and "† from fewer than 30 cases" in r.stdout
        assert " *" not in r.stdout and "(no mark: 8 paired cases < 30)" in r.stdout


def test_a_study_loads_its_backend_once(tmp_path, small_data_path, monkeypatch):
    """Every condition of a run study shares one backend: built once (for a local model: loaded
    once), used by each condition that asks, and closed at the end; a study with nothing left
    to ask builds none."""
    import casebench.runs.execute as execute
    from casebench.runs.config import RunConfig
    from casebench.runs.study import run_ablation

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    built = []
    real = execute.make_run_backend

    def counting(config):  # the real factory, counted
        backend = real(config)
        built.append(backend)
        return backend

    monkeypatch.setattr(execute, "make_run_backend", counting)
    ds = load_dataset(small_data_path)
    with FaultServer(answer_fn=_rule) as srv:
        base = RunConfig(mode="binary", model="openai/judge-x", data=small_data_path, progress=False,
                         backend_options={"base_url": srv.base_url})
        runs = run_ablation(base, "sender,recipient", out_root=tmp_path / "runs", dataset=ds)
        assert [r.action for r in runs] == ["ran"] * 4 and all(r.status == "complete" for r in runs)
        assert srv.count == 4 * len(ds)
        assert len(built) == 1 and built[0].client.is_closed()
        for r in runs:  # every condition's manifest records that same backend
            manifest = json.loads((r.run_dir / "manifest.json").read_text())
            assert manifest["history"][-1]["backend"] == json.loads(json.dumps(built[0].describe()))
        again = run_ablation(base, "sender,recipient", out_root=tmp_path / "runs", dataset=ds)
        assert [r.action for r in again] == ["reused"] * 4 and len(built) == 1


def test_ablate_needs_model_and_mode_together(small_data_path, study):
    r = CliRunner().invoke(cli, ["ablate", "--model", "openai/x", "--data", str(small_data_path)])
    assert r.exit_code == 2 and "--mode" in r.output
    r = CliRunner().invoke(cli, ["ablate", str(study[0]), "--model", "openai/x", "--mode", "binary"])
    assert r.exit_code == 2 and "not both" in r.output
