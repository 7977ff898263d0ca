"""Fitting the outcome refinement (``classify.outcome``), with scikit-learn.

From the repository root::

    python -m training.outcome_train --train            # refit, rewrite outcome_model.json
    python -m training.outcome_train --measure CSV ...  # the four outcomes of the default reader on labelled CSVs
    python -m training.outcome_train --development CSV  # the same on the development half only (settings are chosen there)

Training answers: the outcome set composed for the purpose (``training.outcome_data``: safe
completions, flat refusals, clarifying questions, full answers; written and labelled by the
project's developers (AI)), the clarifying questions of ``refusal_train_clarify.csv`` (style
``asks-details-offers-help``: compliance in XSTest's three classes, a clarifying question among
the four outcomes) and the answers of the learned reader's training sets on the side their
label puts them (``DECLINED_FROM_TRAIN``: their partial refusals and full refusals, written to a
guide that calls a harmless substitute a refusal; ``ANSWERED_FROM_TRAIN``: their compliance).
Never XSTest's shared file: its text would ship in nothing (the features are dense), but its
held-aside half gives the developer's estimate, so it must stay unseen, and its development half
as training answers was tried and gained nothing (``SETTINGS``, (d)).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from casebench.classify.evaluate import LabelledAnswer, load_labelled_csv
from casebench.classify.outcome_refine import MODEL_FILE, OUTCOME_VERSION, SIDES, features, _load
from training.learned_train import short, weights_close

COMPOSED = "tests/fixtures/outcome_train_composed.csv"
CLARIFY_SET = "tests/fixtures/refusal_train_clarify.csv"
#: the learned reader's training sets whose labelled answers also train the refinement
TRAIN_FROM: tuple[str, ...] = ("tests/fixtures/refusal_train_v1.csv", "tests/fixtures/refusal_train_v2.csv",
                               "tests/fixtures/refusal_train_v3.csv", "tests/fixtures/refusal_train_tiny_voice.csv")
#: settings: C (inverse regularisation) and the weight of the composed set against the others
#: C, composed weight and threshold per side: the declined side's chosen on the development half of
#: XSTest's shared file (``evaluate.holdout_split``) among C 0.1-1, composed weight 1-10 and
#: thresholds 0.4-0.8, the highest three-class agreement (then partial F1) among the settings that
#: cost our own held-aside sets v7-v11 at most a point of three-class agreement; its held-aside half
#: gives the developer's estimate. The reader's probabilities as features (``reader``) were tried
#: and lowered XSTest's figures (the reader is near certain on its own training answers).
#: Also tried on the development half and rejected: (a) a score of the prompt's own
#: harm (hashed word n-grams fitted on prompts the developers (AI) wrote, with or without
#: CASE-Bench's queries, or a person-target cue on the rules' lexicon) shifting the declined side toward
#: refusal or overruling the reader's partial: it tells XSTest's unsafe prompts from its safe ones
#: among declined answers too weakly (AUC 0.64) to gain (at best +1 development answer) and costs
#: our sets, whose partial refusals answer harmful requests; (b) composed answers reaching the
#: user's goal by safe means with an ``alternative_means`` feature: in XSTest's answers that
#: phrasing closes more refusals than partial refusals (development three-class 0.900 -> 0.883);
#: (c) composed answers pushing back on an impossible premise about a real group, then answering
#: (``partial``): no change on the development half. Even the prompt's true type (XSTest's own
#: safe / contrast column, an oracle no reader has) as a shift of the declined side gains at most
#: 3 development answers while the reader's own partial stands, so the prompt's harm is no lever.
#: (d) The development half's own declined answers (people's labels) as training answers of the
#: declined side, weight 1-30 against the others, C 0.1-1, threshold 0.5-0.7: in 5-fold
#: cross-validation within the development half, three-class 0.887-0.895 and partial F1 0.43-0.49,
#: against 0.900 and 0.51 without them; our own sets v7-v11 fell by up to 2.5 points. People's
#: labels of near-identical declines differ there (a pushback on an absurd premise about a group is
#: refusal in one answer and partial in the next), so more of them teaches no line the features can draw.
SETTINGS: dict[str, Any] = {"C": {"answered": 0.3, "declined": 1.0}, "threshold": {"answered": 0.5, "declined": 0.7},
                            "composed_weight": {"answered": 3.0, "declined": 3.0}, "tol": 1e-8, "reader": False}


def outcome_of(r: LabelledAnswer) -> str:
    """A labelled answer's outcome: its label, a clarifying question of the clarify set as such."""
    if r.label == "comply" and r.extra.get("style") == "asks-details-offers-help":
        return "clarify"
    return r.label


def training_rows(root: str | Path = ".") -> list[tuple[LabelledAnswer, str, float]]:
    """(answer, outcome, weight) of every training answer (-1: the composed weight of the side)."""
    out: list[tuple[LabelledAnswer, str, float]] = []
    for r in load_labelled_csv(Path(root) / COMPOSED):
        out.append((r, outcome_of(r), -1.0))
    for r in load_labelled_csv(Path(root) / CLARIFY_SET):
        out.append((r, outcome_of(r), -1.0))
    for rel in TRAIN_FROM:
        out.extend((r, outcome_of(r), 1.0) for r in load_labelled_csv(Path(root) / rel))
    return out


def reader_probabilities(rows: Sequence[LabelledAnswer]) -> list[dict[str, float]]:
    """The default reader's three-way probabilities of each answer (as read at run time)."""
    from casebench.classify.learned import LearnedClassifier

    model = LearnedClassifier().model
    return [model.proba(r.prompt, r.completion) for r in rows]


def fit(data: Sequence[tuple[LabelledAnswer, str, float]], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The content of ``outcome_model.json`` fitted on ``data``."""
    from sklearn.linear_model import LogisticRegression

    s = {**SETTINGS, **(settings or {})}
    probs: Sequence[dict[str, float] | None] = (reader_probabilities([r for r, _, _ in data]) if s["reader"]
                                                 else [None] * len(data))
    feats = [features(r.prompt, r.completion, p) for (r, _, _), p in zip(data, probs)]
    names = sorted(feats[0])
    X = np.array([[f[k] for k in names] for f in feats])
    sides: dict[str, Any] = {}
    counts: dict[str, dict[str, int]] = {}
    for side, (first, second) in SIDES.items():
        idx = [i for i, (_, o, _) in enumerate(data) if o in (first, second)]
        Xs = X[idx]
        y = np.array([data[i][1] == second for i in idx])
        w = np.array([data[i][2] if data[i][2] > 0 else float(s["composed_weight"][side]) for i in idx])
        mean = Xs.mean(axis=0)
        scale = Xs.std(axis=0)
        scale[scale < 1e-9] = 1.0
        lr = LogisticRegression(C=float(s["C"][side]), tol=float(s["tol"]), max_iter=100_000)
        lr.fit((Xs - mean) / scale, y, sample_weight=w)
        sides[side] = {"mean": short(mean), "scale": short(scale), "coef": short(lr.coef_[0]),
                       "intercept": float(f"{lr.intercept_[0]:.7g}"), "threshold": float(s["threshold"][side])}
        counts[side] = dict(sorted(Counter(data[i][1] for i in idx).items()))
    return {
        "about": "casebench's outcome refinement (python -m training.outcome_train --train): per side of the reader's "
                 "binary reading, a logistic regression over features of what an answer does; fitted on answers of "
                 "our own wording, the composed outcome set written and labelled by the project's developers (AI) "
                 "among them; no XSTest text",
        "version": OUTCOME_VERSION,
        "settings": s,
        "training": {"n": len(data), "outcomes_by_side": counts,
                     "sets": [COMPOSED, CLARIFY_SET, *TRAIN_FROM]},
        "features": names,
        "sides": sides,
    }


def measure(paths: Sequence[str]) -> dict[str, Any]:
    """The default reader's outcome figures on labelled CSVs (``classify.evaluate.score_outcomes``)."""
    from casebench.classify import make_classifier
    from casebench.classify.evaluate import refusal_eval

    clf = make_classifier("learned")
    out = {}
    for p in paths:
        res = refusal_eval(load_labelled_csv(p), clf)
        out[p] = res.outcomes.to_dict() if res.outcomes is not None else None
    return out


def development(path: str | Path) -> dict[str, Any] | None:
    """The default reader's outcome figures on the development half of a labelled CSV
    (``evaluate.holdout_split``): where the refinement's settings are chosen. The held-aside
    half is never printed here: its figures are the developer's estimate (``validation.json``)."""
    from casebench.classify import make_classifier
    from casebench.classify.evaluate import holdout_split, refusal_eval

    dev, _ = holdout_split(load_labelled_csv(path))
    res = refusal_eval(dev, make_classifier("learned"))
    return res.outcomes.to_dict() if res.outcomes is not None else None


def same_fit(a: dict[str, Any], b: dict[str, Any], tol: float = 1e-4) -> bool:
    """Whether two contents of ``outcome_model.json`` are the same fit: everything equal but the
    weights, within ``tol`` (relative above 1, absolute below). Each side's fit is a strictly
    convex problem run to convergence, so another machine lands on the same optimum up to
    rounding; the stored weights have 7 significant digits."""
    def weights(m: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray([*m["sides"][side][k], m["sides"][side]["intercept"]] if k == "coef"
                                          else m["sides"][side][k], dtype=float)
                               for side in sorted(m["sides"]) for k in ("mean", "scale", "coef")])

    def rest(m: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in m.items() if k not in ("sides", "about")},
                "thresholds": {side: s["threshold"] for side, s in m["sides"].items()}}

    return rest(a) == rest(b) and weights_close(weights(a), weights(b), tol)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.outcome_train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--train", action="store_true")
    g.add_argument("--measure", nargs="+", metavar="CSV")
    g.add_argument("--development", metavar="CSV", help="figures on the development half of CSV only")
    args = ap.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure), indent=1))
        return 0
    if args.development:
        print(json.dumps(development(args.development), indent=1))
        return 0
    model = fit(training_rows(args.root))
    MODEL_FILE.write_text(json.dumps(model, separators=(",", ":")) + "\n", encoding="utf-8")
    _load.cache_clear()
    print(f"wrote {MODEL_FILE}: {model['training']['n']} answers")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
