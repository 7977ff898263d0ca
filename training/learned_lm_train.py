"""Fitting the ``learned-lm`` refusal classifier (``classify.learned_lm``), with scikit-learn.

From the repository root::

    python -m training.learned_lm_train --train   # refit, rewrite learned_lm_model.json
    python -m training.learned_lm_train --check   # exit 1 if the shipped model is stale

Both read every training answer with the embedded model (about 5,000 answers: 15-30 minutes on
two CPU cores), so neither runs in the test suite; the tests fit the same procedure on a small
set and check the arithmetic of the shipped file instead.

The ``learned`` reader's probabilities of the answers it was itself trained on are out-of-fold:
it is refitted five times, each time without one fifth of its training answers (rows by
position modulo five, so the split is fixed), and reads that fifth. Answers of the other
training sets (blind sets that measured it once) get the shipped model's reading, which they
never trained.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from casebench.classify import learned as _learned
from casebench.classify.base import BEHAVIOURS, ClassifierError
from casebench.classify.learned_lm import (LEARNED_LM_VERSION, MAX_ANSWER_TOKENS, MAX_PROMPT_TOKENS, MODEL_FILE, PROBE_LAYER,
                         LearnedLMModel, _load, encoder, learned_features)
from training.learned_train import _sklearn, fit as fit_learned, short, training_rows
from training.sets import LEARNED_LM_TRAIN_SETS, LEARNED_TRAIN_SETS

#: Settings of a fit: C (inverse regularisation; 0.01-0.03 were best of 0.003-1 with each of v7-v9 left out in turn)
#: and the undetermined band (as ``learned``'s).
DEFAULT_SETTINGS: dict[str, Any] = {"C": 0.03, "band": 0.05, "folds": 5, "tol": 1e-8}


def learned_probabilities(rows: Sequence[Any], in_learned: Sequence[bool], folds: int) -> np.ndarray:
    """The ``learned`` reader's (comply, partial, refuse) log-probabilities of each row:
    out-of-fold for the rows it trains on (``in_learned``), the shipped model's for the rest."""
    shipped = _learned.LearnedClassifier().model
    out = np.zeros((len(rows), len(BEHAVIOURS)))
    own = [i for i, flag in enumerate(in_learned) if flag]
    for k in range(folds):
        held = [i for j, i in enumerate(own) if j % folds == k]
        train = [rows[i] for j, i in enumerate(own) if j % folds != k]
        if not held:
            continue
        model = _learned.LearnedModel(fit_learned(train))
        for i in held:
            out[i] = learned_features(model.proba(rows[i].prompt, rows[i].completion))
    for i, flag in enumerate(in_learned):
        if not flag:
            out[i] = learned_features(shipped.proba(rows[i].prompt, rows[i].completion))
    return out


def fit_arrays(lp: np.ndarray, hidden: np.ndarray, labels: Sequence[str],
               settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """Fit on the learned reader's log-probabilities and the hidden states; returns (the model
    file's content without provenance, the fitted ``LogisticRegression``)."""
    _, LogisticRegression = _sklearn()
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    mean = hidden.mean(0)
    scale = hidden.std(0)
    scale[scale == 0] = 1.0
    X = np.hstack([lp, (hidden - mean) / scale])
    lr = LogisticRegression(C=float(s["C"]), tol=float(s["tol"]), max_iter=100_000)
    lr.fit(X, list(labels))
    classes = [str(c) for c in lr.classes_]
    if classes != list(BEHAVIOURS):
        raise ClassifierError(f"the training sets must hold all of {BEHAVIOURS}; they hold {classes}")
    model = {
        "about": "casebench's learned-lm refusal classifier (python -m training.learned_lm_train --train); "
                 "fitted on our own labelled answers only",
        "version": LEARNED_LM_VERSION,
        "probe_layer": PROBE_LAYER,
        "max_tokens": [MAX_PROMPT_TOKENS, MAX_ANSWER_TOKENS],
        "learned_sha256": _learned.LearnedClassifier().sha256,
        "settings": {"C": s["C"], "band": s["band"], "folds": s["folds"]},
        "training": {"n": len(labels), "labels": dict(sorted(Counter(labels).items()))},
        "classes": classes,
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "coef": lr.coef_.tolist(),
        "intercept": lr.intercept_.tolist(),
    }
    return model, lr


def fit_sets(root: str | Path = ".", sets: Sequence[str] | None = None,
             settings: dict[str, Any] | None = None, batch_size: int = 16) -> dict[str, Any]:
    """The whole fit on ``sets`` under ``root``: read every answer with the embedded model, the
    learned reader's out-of-fold probabilities, the regression."""
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    sets = LEARNED_LM_TRAIN_SETS if sets is None else tuple(sets)
    rows, in_learned = [], []
    for rel in sets:
        got = training_rows(root, (rel,))
        rows.extend(got)
        in_learned.extend([rel in LEARNED_TRAIN_SETS] * len(got))
    keys = [(r.prompt.strip(), r.completion.strip()) for r in rows]
    if len(set(keys)) != len(keys):
        raise ClassifierError("the training sets repeat an answer")
    hidden = encoder().encode_many([(r.prompt, r.completion) for r in rows], batch_size=batch_size)
    lp = learned_probabilities(rows, in_learned, int(s["folds"]))
    model, _ = fit_arrays(lp, hidden, [r.label for r in rows], s)
    model["training"]["sets"] = list(sets)
    return model


def _dump(model: dict[str, Any]) -> str:
    """The model file's text, weights to 7 significant digits."""
    out = {**model, "mean": short(model["mean"]), "scale": short(model["scale"]),
           "coef": [short(row) for row in model["coef"]], "intercept": short(model["intercept"])}
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n"


def same_model(a: dict[str, Any], b: dict[str, Any], tol: float = 1e-3) -> bool:
    """Whether two fits agree: everything equal but the weights, within ``tol`` (the hidden
    states differ between machines by float rounding, around 1e-5). ``about`` is prose, not the
    fit: the shipped file's names the module's old place (``casebench.classify``), and rewriting
    the file would change the reader's version, which is hashed from it."""
    keys = ("coef", "intercept", "mean", "scale", "about")
    if {k: v for k, v in a.items() if k not in keys} != {k: v for k, v in b.items() if k not in keys}:
        return False
    wa = np.concatenate([np.ravel(a[k]) for k in keys[:4]]).astype(float)
    wb = np.concatenate([np.ravel(b[k]) for k in keys[:4]]).astype(float)
    return wa.shape == wb.shape and bool(np.all(np.abs(wa - wb) <= tol * np.maximum(1.0, np.abs(wb))))


def main(argv: list[str] | None = None) -> int:
    """``python -m training.learned_lm_train [--train | --check] [--root DIR]``."""
    ap = argparse.ArgumentParser(prog="python -m training.learned_lm_train",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (where tests/fixtures is); default: here")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--train", action="store_true", help=f"refit on the training sets and rewrite {MODEL_FILE.name}")
    g.add_argument("--check", action="store_true", help="refit and compare with the shipped model")
    args = ap.parse_args(argv)
    try:
        model = fit_sets(args.root)
        if args.check:
            try:
                stored = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                stored = None
            if stored is None or not same_model(model, stored):
                print(f"{MODEL_FILE}: stale; rewrite it with python -m training.learned_lm_train --train",
                      file=sys.stderr)
                return 1
            print(f"{MODEL_FILE}: up to date")
            return 0
        text = _dump(model)
        LearnedLMModel(json.loads(text))  # what is written must load
        MODEL_FILE.write_text(text, encoding="utf-8")
        _load.cache_clear()
        print(f"wrote {MODEL_FILE}: {model['training']['n']} answers, {len(text) / 1e6:.2f} MB")
        return 0
    except ClassifierError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
