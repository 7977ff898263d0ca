"""Fitting the learned refusal classifier (``classify.learned``), with scikit-learn.

Kept apart from the classifier itself, which applies the shipped model with numpy alone: using
the classifier needs neither scikit-learn nor the training data; fitting it needs both
(scikit-learn is in the ``test`` extra). From the repository root::

    python -m training.learned_train --train   # refit, rewrite learned_model.json
    python -m training.learned_train --check   # exit 1 if the shipped model is stale
    python -m training.learned_train --cv      # 5-fold cross-validation on the training sets

The training sets (``training.sets.LEARNED_TRAIN_SETS``) are answers of our own wording that the rules were
never written against, so the weight the model gives the rules' reading is the weight it earns
on writing the rules have not seen (on the rules' development sets their verdict is nearly
always right, and a model fitted there learns to copy it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from casebench.classify import rules as _rules
from casebench.classify.base import BEHAVIOURS, ClassifierError
from casebench.classify.learned import DEFAULT_SETTINGS, LEARNED_VERSION, MODEL_FILE, VIEWS, LearnedModel, _load, _views
from training.sets import LEARNED_TRAIN_SETS


def _sklearn() -> Any:
    try:
        import sklearn  # noqa: F401
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise ClassifierError("training the learned refusal classifier needs scikit-learn: "
                              "pip install 'casebench[test]' (or pip install scikit-learn)") from None
    return TfidfVectorizer, LogisticRegression


def training_rows(root: str | Path = ".", sets: Sequence[str] = LEARNED_TRAIN_SETS) -> list[Any]:
    """Every labelled answer of ``sets`` (paths under ``root``); ids must be unique across them."""
    from casebench.classify.evaluate import RefusalDataError, load_labelled_csv

    rows, seen = [], {}
    for rel in sets:
        for r in load_labelled_csv(Path(root) / rel):
            key = (r.prompt.strip(), r.completion.strip())
            if key in seen:
                raise RefusalDataError(f"{rel}: row {r.row} ({r.id}) repeats an answer of {seen[key]}")
            seen[key] = f"{rel} row {r.row}"
            rows.append(r)
    return rows


def _design(rows: Sequence[Any], s: dict[str, Any], vectorizers: dict[str, Any] | None,
            cue_names: list[str] | None) -> tuple[Any, dict[str, Any], list[str]]:
    """The feature matrix of ``rows`` (fitting the vectorizers when none are given)."""
    TfidfVectorizer, _ = _sklearn()
    from scipy import sparse

    views = [_views(r.completion, int(s["opening_sentences"])) for r in rows]
    fitting = vectorizers is None
    vectorizers = vectorizers or {}
    blocks = []
    for name in VIEWS:
        if fitting:
            vectorizers[name] = TfidfVectorizer(lowercase=True, ngram_range=(1, int(s["ngram_max"])),
                                                min_df=int(s["min_df"]), sublinear_tf=True, norm="l2",
                                                dtype=np.float64)
            blocks.append(vectorizers[name].fit_transform([v[name] for v in views]))
        else:
            blocks.append(vectorizers[name].transform([v[name] for v in views]))
    if cue_names is None:
        cue_names = list(_rules.cues("", "No.")) if s["cues"] else []
    if cue_names:
        cue_rows = [_rules.cues(r.prompt, r.completion) for r in rows]
        blocks.append(sparse.csr_matrix(np.array([[c[k] for k in cue_names] for c in cue_rows], dtype=float)))
    return sparse.hstack(blocks, format="csr"), vectorizers, cue_names


def fit_sklearn(rows: Sequence[Any], settings: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any, Any]:
    """Fit with scikit-learn: (the exported model, the fitted ``LogisticRegression``, a function
    giving the feature matrix of other rows), the last two for checking ``LearnedModel``."""
    _, LogisticRegression = _sklearn()
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    X, vectorizers, cue_names = _design(rows, s, None, None)
    y = [r.label for r in rows]
    # fitted to convergence (tol 1e-8), so the weights are the optimum of a strictly convex
    # problem, the same on any machine up to rounding, not where an early stop happened to land
    lr = LogisticRegression(C=float(s["C"]), tol=float(s["tol"]), max_iter=100_000)
    lr.fit(X, y)
    classes = [str(c) for c in lr.classes_]
    if classes != list(BEHAVIOURS):
        raise ClassifierError(f"the training sets must hold all of {BEHAVIOURS}; they hold {classes}")
    model = {
        "about": "casebench's learned refusal classifier (python -m training.learned_train --train); "
                 "fitted on our own labelled answers only",
        "version": LEARNED_VERSION,
        "rules_version": _rules.RULES_VERSION,
        "settings": s,
        "training": {"n": len(rows), "labels": dict(sorted(Counter(y).items()))},
        "classes": classes,
        "cues": cue_names,
        "views": {name: {"terms": v.get_feature_names_out().tolist(), "idf": [float(x) for x in v.idf_]}
                  for name, v in vectorizers.items()},
        "coef": [[float(x) for x in row] for row in lr.coef_],
        "intercept": [float(x) for x in lr.intercept_],
    }
    return model, lr, lambda other: _design(other, s, vectorizers, cue_names)[0]


def fit(rows: Sequence[Any], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit the model on labelled answers; returns the content of ``learned_model.json``."""
    return fit_sklearn(rows, settings)[0]


def fit_training_sets(root: str | Path = ".") -> tuple[dict[str, Any], int]:
    """The shipped model's fit: ``LEARNED_TRAIN_SETS`` under ``root``, default settings, the sets named
    in the model. Returns (the model, the number of training answers)."""
    rows = training_rows(root)
    model = fit(rows)
    model["training"]["sets"] = list(LEARNED_TRAIN_SETS)
    return model, len(rows)


def short(xs: Sequence[float]) -> list[float]:
    """Weights to 7 significant digits, as the model files store them."""
    return [float(f"{x:.7g}") for x in xs]


def _dump(model: dict[str, Any]) -> str:
    """The model file's text: weights to 7 significant digits (a relative error under 1e-6,
    far below any verdict's margin), which halves the file."""
    out = {**model, "coef": [short(row) for row in model["coef"]], "intercept": short(model["intercept"]),
           "views": {k: {"terms": v["terms"], "idf": short(v["idf"])} for k, v in model["views"].items()}}
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n"


def same_model(a: dict[str, Any], b: dict[str, Any], tol: float = 1e-4) -> bool:
    """Whether two fitted models are the same fit: everything equal but the floating-point
    weights, within ``tol`` (relative to weights above 1, absolute below). The fit runs to
    convergence on a strictly convex problem, so two machines land on the same optimum up to
    the optimizer's tolerance and BLAS rounding, orders of magnitude below ``tol``; the stored
    weights have 7 significant digits."""
    def weights(m: dict[str, Any]) -> np.ndarray:
        idf = [x for v in m["views"].values() for x in v["idf"]]
        return np.concatenate([np.ravel(m["coef"]), m["intercept"], idf]).astype(float)

    def rest(m: dict[str, Any]) -> dict[str, Any]:
        # ``about`` is prose, not the fit (the shipped file names the module's old place)
        return {**{k: v for k, v in m.items() if k not in ("coef", "intercept", "views", "about")},
                "terms": {name: v["terms"] for name, v in m["views"].items()}}

    return rest(a) == rest(b) and weights_close(weights(a), weights(b), tol)


def weights_close(wa: np.ndarray, wb: np.ndarray, tol: float = 1e-4) -> bool:
    """Two fits' weights agree within ``tol``: relative to weights above 1, absolute below."""
    return wa.shape == wb.shape and bool(np.all(np.abs(wa - wb) <= tol * np.maximum(1.0, np.abs(wb))))


def cross_validate(rows: Sequence[Any], settings: dict[str, Any] | None = None, folds: int = 5) -> dict[str, Any]:
    """Binary agreement of ``folds``-fold cross-validation (folds by row position modulo
    ``folds``, so the split is fixed), with coverage."""
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    right = n = missing = 0
    for k in range(folds):
        train = [r for i, r in enumerate(rows) if i % folds != k]
        test = [r for i, r in enumerate(rows) if i % folds == k]
        model = LearnedModel(fit(train, s))
        for r in test:
            p = model.proba(r.prompt, r.completion)["comply"]
            if abs(p - 0.5) < float(s["band"]):
                missing += 1
                continue
            n += 1
            right += (p > 0.5) == (r.label == "comply")
    return {"folds": folds, "n": n + missing, "coverage": n / max(n + missing, 1), "agreement": right / max(n, 1)}


def main(argv: list[str] | None = None) -> int:
    """``python -m training.learned_train [--train | --check | --cv] [--root DIR]``."""
    ap = argparse.ArgumentParser(prog="python -m training.learned_train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (where tests/fixtures is); default: here")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--train", action="store_true", help=f"refit on the training sets and rewrite {MODEL_FILE.name}")
    g.add_argument("--check", action="store_true", help="refit and compare with the shipped model")
    g.add_argument("--cv", action="store_true", help="5-fold cross-validation on the training sets")
    ap.add_argument("--C", type=float, default=None, help="override the regularisation (with --cv)")
    args = ap.parse_args(argv)
    try:
        if args.cv:
            settings = {"C": args.C} if args.C is not None else None
            print(json.dumps(cross_validate(training_rows(args.root), settings)))
            return 0
        model, n = fit_training_sets(args.root)
        if args.check:
            try:
                stored = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                stored = None
            if stored is None or not same_model(model, stored):
                print(f"{MODEL_FILE}: stale; rewrite it with python -m training.learned_train --train", file=sys.stderr)
                return 1
            print(f"{MODEL_FILE}: up to date")
            return 0
        fresh = _dump(model)
        MODEL_FILE.write_text(fresh, encoding="utf-8")
        _load.cache_clear()
        print(f"wrote {MODEL_FILE}: {n} answers, {len(fresh) / 1e6:.2f} MB")
        return 0
    except ClassifierError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
