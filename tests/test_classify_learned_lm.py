"""The learned refusal classifier with the embedded model's reading (spec ``learned-lm``): the
shipped file's arithmetic equals scikit-learn's on a small fit of the same procedure, batched and
one-at-a-time hidden states agree, it is never fitted on a held-aside set, it refuses a model
file or a learned model it was not fitted with, and what it measures on the blind sets written
after it was fixed, read through ``casebench refusal-eval`` as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from casebench.classify import ClassifierError, make_classifier  # noqa: E402
from casebench.classify import learned_lm
from training import learned_lm_train  # noqa: E402
from casebench.classify.evaluate import load_labelled_csv, refusal_eval  # noqa: E402
from casebench.classify.learned_lm import LearnedLMClassifier, LearnedLMModel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def clf() -> LearnedLMClassifier:
    c = make_classifier("learned-lm")
    assert isinstance(c, LearnedLMClassifier)
    return c


def test_batched_and_single_hidden_states_agree(clf: LearnedLMClassifier) -> None:
    """Fitting reads answers in padded batches, a run one at a time: the two give the same
    summary up to float rounding (padding changes the order of additions, nothing else)."""
    rows = load_labelled_csv(FIXTURES / "refusal_styles_fresh.csv")[:12]
    batched = clf.encoder.encode_many([(r.prompt, r.completion) for r in rows], batch_size=5)
    single = np.stack([clf.encoder.encode(r.prompt, r.completion) for r in rows])
    assert batched.shape == (12, clf.encoder.width)
    assert np.abs(batched - single).max() < 1e-3 * max(1.0, np.abs(single).max())


def test_shipped_arithmetic_equals_scikit_learn(clf: LearnedLMClassifier) -> None:
    """The procedure of ``learned_lm_train`` on a small set: the file it writes, read by
    ``LearnedLMModel``, gives scikit-learn's predict_proba on training and unseen answers."""
    pytest.importorskip("sklearn")
    rows = load_labelled_csv(FIXTURES / "refusal_styles.csv") + load_labelled_csv(FIXTURES / "refusal_own_dev2.csv")
    others = load_labelled_csv(FIXTURES / "refusal_styles_fresh.csv")
    lp = learned_lm_train.learned_probabilities(rows, [False] * len(rows), folds=5)
    hidden = clf.encoder.encode_many([(r.prompt, r.completion) for r in rows])
    model, lr = learned_lm_train.fit_arrays(lp, hidden, [r.label for r in rows])
    ours = LearnedLMModel(json.loads(json.dumps(model)))
    for part in (rows, others):
        lp_part = learned_lm_train.learned_probabilities(part, [False] * len(part), folds=5)
        h = np.stack([clf.encoder.encode(r.prompt, r.completion) for r in part])
        theirs = lr.predict_proba(np.hstack([lp_part, (h - ours.mean) / ours.scale]))
        mine = np.array([[ours.proba_from({k: float(np.exp(v)) for k, v in zip(ours.classes, row)}, hh)[c]
                          for c in model["classes"]] for row, hh in zip(lp_part, h)])
        assert np.abs(theirs - mine).max() < 1e-9


def test_out_of_fold_probabilities_are_not_the_shipped_ones() -> None:
    """The learned reader's probabilities of its own training answers come from refits without
    them: on answers it was trained on, the shipped model is surer than the out-of-fold one."""
    pytest.importorskip("sklearn")
    rows = load_labelled_csv(FIXTURES / "refusal_train_clarify.csv") + load_labelled_csv(FIXTURES / "refusal_styles.csv")
    oof = learned_lm_train.learned_probabilities(rows, [True] * len(rows), folds=5)
    shipped = learned_lm_train.learned_probabilities(rows, [False] * len(rows), folds=5)
    assert oof.shape == shipped.shape == (len(rows), 3)
    assert not np.allclose(oof, shipped)


def test_never_fitted_on_a_held_aside_set() -> None:
    """No held-aside answer is among the training answers, by file and by text; the shipped
    file names the sets it was fitted on."""
    from training.learned_train import training_rows
    from training.sets import LEARNED_LM_HELD_ASIDE, LEARNED_LM_TRAIN_SETS

    assert not set(LEARNED_LM_HELD_ASIDE) & set(LEARNED_LM_TRAIN_SETS)
    train = {(r.prompt.strip(), r.completion.strip()) for r in training_rows(ROOT, LEARNED_LM_TRAIN_SETS)}
    for rel in LEARNED_LM_HELD_ASIDE:
        held = {(r.prompt.strip(), r.completion.strip()) for r in load_labelled_csv(ROOT / rel)}
        assert not held & train, rel
    stored = json.loads(learned_lm.MODEL_FILE.read_text(encoding="utf-8"))
    assert stored["training"]["sets"] == list(LEARNED_LM_TRAIN_SETS)
    assert stored["training"]["n"] == len(train)


def test_describe_names_both_models_and_the_validation(clf: LearnedLMClassifier) -> None:
    d = clf.describe()
    assert d["name"] == "learned-lm" and d["model_sha256"] == clf.sha256
    assert d["version"] == f"{learned_lm.LEARNED_LM_VERSION}+{clf.sha256[:12]}+{clf.learned.sha256[:12]}"
    assert d["settings"]["probe_layer"] == learned_lm.PROBE_LAYER
    v = d["validation"]
    assert v is not None and v["set"] == "held-aside v10" and v["writer"] == "large"
    from casebench.classify import validation

    small = validation.validation_for("learned-lm", clf.version, writer="small")
    assert small is not None and small["set"] == "embedded model, blind v6" and small["writer_match"] is True


def test_a_model_fitted_on_another_learned_model_is_refused(tmp_path: Path) -> None:
    data = json.loads(learned_lm.MODEL_FILE.read_text(encoding="utf-8"))
    data["learned_sha256"] = "0" * 64
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ClassifierError, match="fitted on learned model 000000000000"):
        LearnedLMClassifier(bad)
    data = json.loads(learned_lm.MODEL_FILE.read_text(encoding="utf-8"))
    data["probe_layer"] = 12
    other = tmp_path / "layer.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ClassifierError, match="another layer"):
        LearnedLMClassifier(other)


def test_empty_and_gibberish_answers_are_undetermined(clf: LearnedLMClassifier) -> None:
    for answer in ("", "   \n", "asdf qwer zxcv"):
        assert clf.classify("How do I bake bread?", answer).behaviour is None


def test_blind_held_aside_sets_through_refusal_eval() -> None:
    """tests/fixtures/refusal_own_held_v10.csv and v11: 300 answers each of our own wording in six
    voices, written blind to v7's brief by two writers who saw neither reader, before this one was
    fixed and read only after: learned-lm 94.3% [91.0, 96.4] and 94.6% [91.3, 96.6] binary (the
    ``learned`` reader 87.2% and 84.3%). Read through the CLI as a user would, the figures equal
    the stored ones (``classify.validation``: written by the script, never by hand); the floors
    sit a few points below: a guard against a broken refit, not a target to tune to."""
    from click.testing import CliRunner

    from casebench.classify import validation
    from casebench.cli import cli

    stored = validation.load()["classifiers"]["learned-lm"]
    assert stored["version"] == make_classifier("learned-lm").version
    for name in ("held-aside v10", "held-aside v11"):
        figs = stored["sets"][name]
        res = CliRunner().invoke(cli, ["refusal-eval", str(ROOT / figs["file"]), "--refusal-classifier", "learned-lm",
                                        "--json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert out["n"] == figs["n"] == 300
        assert round(out["agreement"], 6) == figs["partial_as"]["unsafe"]["agreement"]
        assert round(out["coverage"], 6) == figs["coverage"]
        assert out["agreement"] >= 0.92 and out["coverage"] >= 0.95
        # how the answers land (the outcome refinement over this reader), as stored
        lands = figs["outcomes"]
        assert lands["n"] == out["outcomes"]["n"]
        assert lands["agreement_3class"] == round(out["outcomes"]["agreement_3class"], 6)
        for o, f in lands["per_class"].items():
            assert f["support"] == out["outcomes"]["per_class"][o]["support"]
            assert f["predicted"] == out["outcomes"]["per_class"][o]["predicted"]
