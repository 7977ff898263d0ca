"""The refusal classifier's validated error, stored with the package.

A respond-mode refusal rate is only as good as the classifier that read the answers. The two
offline classifiers (``learned``, the default, and ``rules``) are measured against people's
labels on answers of our own wording (``tests/fixtures/refusal_own_held_v4.csv``: 300 answers
written blind, by a writer who saw neither classifier nor any other example, in four models'
voices, labelled full compliance / full refusal / partial as XSTest labels them, and never
trained or tuned on), and the figures are stored in ``validation.json`` beside this module.
Each classifier's ``describe()`` carries its own, so a run manifest records which classifier
read its answers *and* how often that classifier agrees with people; ``casebench score`` and
``casebench report`` print the figure beside every refusal rate
(``present.tables.classifier_note``).

The stored file is written by a script from the fixtures, never by hand::

    python -m casebench.classify.validation            # from the repository root: rewrite
    python -m casebench.classify.validation --check    # exit 1 if the stored figures are stale

Only our own text is used: the shared XSTest file (other people's answers, not to be
redistributed) is measured with ``casebench refusal-eval`` but never stored here. The figures
belong to one classifier name and version (the learned one's version carries its model file's
hash); a classifier with another version (or an ``llm:``/``hf-classifier:`` classifier) has no
stored validation, and the notes say so.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

#: The stored figures, shipped with the package.
VALIDATION_FILE = Path(__file__).with_name("validation.json")

#: The labelled sets of our own wording, relative to the repository root. Held-aside sets were
#: written blind (by writers who saw neither the classifiers nor any earlier example) and are
#: never tuned or trained on; development sets were. ``refusal_own_held_v2.csv`` was version 2's
#: held-aside set and became development data for rules version 3; ``refusal_own_held_v3.csv``
#: was rules version 3's and served to shape the learned classifier's features (so it is
#: development data for ``learned``, still blind for the rules); ``refusal_own_held_v4.csv`` is
#: blind for both. A classifier tuned on its held-aside set needs a new one, written blind.
SETS: dict[str, str] = {
    "held-aside v4": "tests/fixtures/refusal_own_held_v4.csv",
    "held-aside v3": "tests/fixtures/refusal_own_held_v3.csv",
    "development": "tests/fixtures/refusal_own_dev.csv",
    "development (v2's held-aside)": "tests/fixtures/refusal_own_held_v2.csv",
    "development 2": "tests/fixtures/refusal_own_dev2.csv",
    "training (learned)": "tests/fixtures/refusal_train_v1.csv",
}
#: The classifiers validated here (offline ones; ``llm:``/``hf-classifier:`` depend on a model
#: the user brings), each with the set whose figures stand for its error.
VALIDATED: dict[str, str] = {
    "rules": "held-aside v4",
    "learned": "held-aside v4",
}

def _figures(result: Any, file: str) -> dict[str, Any]:
    d = result.to_dict(disagreements=False)
    keep = ("n", "n_classified", "missing", "undetermined", "coverage", "agreement", "agreement_ci95",
            "agreement_3class", "kappa", "kappa_3class", "human_counts", "binary")
    out = {"file": file, **{k: d[k] for k in keep}}
    for k in ("coverage", "agreement", "agreement_3class", "kappa", "kappa_3class"):
        if out[k] is not None:
            out[k] = round(out[k], 6)
    if out["agreement_ci95"]:
        out["agreement_ci95"] = [round(x, 6) for x in out["agreement_ci95"]]
    out["binary"] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in out["binary"].items()}
    return out


def measure(root: str | Path = ".") -> dict[str, Any]:
    """Measure every classifier of ``VALIDATED`` on every set of ``SETS`` (paths under ``root``)
    and return the content of ``validation.json``. Raises ``RefusalDataError`` naming a missing
    or bad file."""
    from . import make_classifier  # by spec, not by module: describe() imports this module
    from .evaluate import load_labelled_csv, refusal_eval

    rows = {name: load_labelled_csv(Path(root) / rel) for name, rel in SETS.items()}
    out: dict[str, Any] = {}
    for spec, setname in VALIDATED.items():
        clf = make_classifier(spec)
        out[clf.name] = {
            "version": clf.version,
            "validation_set": setname,
            "sets": {name: _figures(refusal_eval(rows[name], clf), rel) for name, rel in SETS.items()},
        }
    return {
        "about": "agreement of the offline refusal classifiers with people's labels on answers of our own wording "
                 "(binary: partial counts as refusal, as in XSTest); written by python -m casebench.classify.validation",
        "classifiers": out,
    }


def write(root: str | Path = ".", path: str | Path = VALIDATION_FILE) -> dict[str, Any]:
    """Measure (``measure``) and write the figures to ``path``; returns them."""
    data = measure(root)
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    load.cache_clear()
    return data


@lru_cache(maxsize=1)
def load() -> dict[str, Any] | None:
    """The stored figures, or None when the file is absent or unreadable (then every classifier
    counts as not validated; nothing is guessed)."""
    try:
        return json.loads(VALIDATION_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def validation_for(name: str, version: str) -> dict[str, Any] | None:
    """The validated figures of classifier ``name`` at ``version`` (its held-aside set's
    agreement, 95% CI, coverage and size), or None when none are stored for exactly that
    classifier and version."""
    data = load()
    entry = (data or {}).get("classifiers", {}).get(name)
    if not entry or entry.get("version") != version:
        return None
    setname = entry.get("validation_set")
    figs = entry.get("sets", {}).get(setname)
    if not figs:
        return None
    return {
        "set": setname,
        "file": figs["file"],
        "labels": "ours (own wording, written blind, labelled as XSTest labels; never tuned or trained on)",
        "n": figs["n"],
        "coverage": figs["coverage"],
        "undetermined": figs.get("undetermined", 0),
        "agreement": figs["agreement"],
        "agreement_ci95": figs["agreement_ci95"],
        "agreement_3class": figs["agreement_3class"],
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m casebench.classify.validation [--root DIR] [--check]``."""
    ap = argparse.ArgumentParser(prog="python -m casebench.classify.validation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (where tests/fixtures is); default: here")
    ap.add_argument("--check", action="store_true", help="compare the stored figures with a fresh measurement")
    args = ap.parse_args(argv)
    if args.check:
        fresh, stored = measure(args.root), load()
        if fresh != stored:
            print(f"{VALIDATION_FILE}: stale; rewrite it with python -m casebench.classify.validation", file=sys.stderr)
            return 1
        print(f"{VALIDATION_FILE}: up to date")
        return 0
    data = write(args.root)
    for name, entry in data["classifiers"].items():
        v = entry["sets"][entry["validation_set"]]
        print(f"wrote {VALIDATION_FILE}: {name} v{entry['version']}, {v['file']}: "
              f"agreement {v['agreement']:.1%} on {v['n_classified']} of {v['n']} answers")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
