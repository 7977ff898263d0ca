"""Measuring the readers' validation and writing ``validation.json`` (``classify.validation`` holds
and reads it): each validated reader over each stored set and each external set given, both
``--partial-as`` settings, and how its answers land (the outcome refinement). Apart from
``validation`` because measuring imports the readers and the refinement, and the readers
import ``validation`` to quote their figures: one module doing both closed an import circle.

    python -m casebench.classify.validation_measure            # from the repository root: rewrite
    python -m casebench.classify.validation_measure --check    # exit 1 if the stored figures are stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from .validation import (EXTERNAL_SETS, MEASURED_ON, POOLED, SET_WRITERS, SETS, VALIDATED, VALIDATION_FILE, WRITER_KINDS,
                         labelled_by, load)


def _r6(x: Any) -> Any:
    return round(x, 6) if isinstance(x, float) else x


def _figures(results: dict[str, Any], file: str | None, writer: str) -> dict[str, Any]:
    """The stored figures of one classifier on one set: what does not depend on the partial-as
    setting once, the binary figures per setting."""
    first = results["unsafe"].to_dict(disagreements=False)
    keep = ("n", "n_classified", "missing", "undetermined", "coverage", "agreement_3class", "kappa_3class",
            "human_counts")
    out = {"file": file, "writer": writer, **{k: _r6(first[k]) for k in keep}}
    out["partial_as"] = {}
    for setting, result in results.items():
        d = result.to_dict(disagreements=False)
        out["partial_as"][setting] = {
            "agreement": _r6(d["agreement"]),
            "agreement_ci95": [_r6(x) for x in d["agreement_ci95"]] if d["agreement_ci95"] else None,
            "kappa": _r6(d["kappa"]),
            "binary": {k: _r6(v) for k, v in d["binary"].items()},
        }
    return out


#: Sets that were development data for the outcome refinement (``classify.outcome_refine``: its
#: settings were chosen on the development half, ``evaluate.holdout_split``): their outcome figures
#: are stored for the whole set and for the held-aside half, the half the refinement's settings
#: never saw (the developer's estimate of how it reads unseen models' answers).
OUTCOME_DEVELOPMENT_SETS: frozenset[str] = frozenset({"XSTest v2 (people)"})


def outcome_figures(rows: Sequence[Any], verdicts: Sequence[Any], set_name: str) -> dict[str, Any] | None:
    """The stored outcome figures of a reader's verdicts on one set (``evaluate.outcome_eval`` of the
    verdicts with their outcome attached: the refinement in the version named, ``refinement``):
    three- and four-class agreement and kappa, each outcome's precision, recall and F1; for a set
    of ``OUTCOME_DEVELOPMENT_SETS`` also on its held-aside half (``held_aside_half``)."""
    from .evaluate import holdout_split, outcome_eval
    from .outcome_refine import outcome_version, with_outcome

    read = [v if v.outcome is not None else with_outcome(v, r.prompt, r.completion) for r, v in zip(rows, verdicts)]

    def figures(rs: Sequence[Any], vs: Sequence[Any]) -> dict[str, Any] | None:
        res = outcome_eval(rs, vs)
        if res is None:
            return None
        d = res.to_dict()
        keep = ("n", "coverage", "agreement_3class", "kappa_3class", "agreement_4class", "kappa_4class")
        return {**{k: _r6(d[k]) for k in keep},
                "per_class": {o: {k: _r6(v) for k, v in f.items()} for o, f in d["per_class"].items()}}

    out = figures(rows, read)
    if out is None:
        return None
    out = {"refinement": outcome_version(), **out}
    if set_name in OUTCOME_DEVELOPMENT_SETS:
        _, held = holdout_split(rows)
        ids = {r.id for r in held}
        pairs = [(r, v) for r, v in zip(rows, read) if r.id in ids]
        out["held_aside_half"] = figures([r for r, _ in pairs], [v for _, v in pairs])
    return out


def measure(root: str | Path = ".", external: Mapping[str, str | Path] | None = None,
            previous: Mapping[str, Any] | None = None, only: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure every classifier of ``VALIDATED`` (``only``: those named; the others' entries are
    carried over from ``previous`` as they are) on the sets of ``SETS`` it is measured on
    (``MEASURED_ON``; paths under ``root``) and of ``external`` (``EXTERNAL_SETS`` names ->
    labelled CSV paths), under both ``--partial-as`` settings, and return the content of
    ``validation.json``. An external set not given is carried over from ``previous`` (default:
    the stored file) for a classifier whose version is unchanged, else left out. Raises
    ``RefusalDataError`` naming a missing or bad file."""
    from .registry import build  # by spec, not by module: describe() imports this module
    from .evaluate import PARTIAL_AS, load_labelled_csv, score
    from .outcome_refine import outcome_version

    external = dict(external or {})
    unknown = sorted(set(external) - set(EXTERNAL_SETS))
    if unknown:
        raise ValueError(f"unknown external set(s) {', '.join(unknown)}; known: {', '.join(EXTERNAL_SETS)}")
    previous = load() if previous is None else previous
    files = {**{name: Path(root) / rel for name, rel in SETS.items()}, **{n: Path(p) for n, p in external.items()}}
    rows = {name: load_labelled_csv(path) for name, path in files.items()}
    unknown = sorted(set(only or ()) - set(VALIDATED))
    if unknown:
        raise ValueError(f"unknown classifier(s) {', '.join(unknown)}; validated: {', '.join(VALIDATED)}")
    out: dict[str, Any] = {}
    for spec, by_writer in VALIDATED.items():
        if only is not None and spec not in only:
            kept = ((previous or {}).get("classifiers") or {}).get(spec)
            if kept is not None:
                out[spec] = kept
            continue
        clf = build(spec, "learned", {})  # the reader itself: its stored figures are of its own reading
        sets = {}
        for name in files:
            if name in SETS and name not in MEASURED_ON.get(spec, SETS):
                continue
            verdicts = [clf.classify(r.prompt, r.completion) for r in rows[name]]
            results = {pa: score(rows[name], verdicts, None, pa) for pa in PARTIAL_AS}
            if name in SETS:
                sets[name] = _figures(results, SETS[name], SET_WRITERS[name])
            else:
                writer, what, source = EXTERNAL_SETS[name]
                sets[name] = {**_figures(results, None, writer), "what": what, "source": source}
            outcomes = outcome_figures(rows[name], verdicts, name)
            if outcomes is not None:
                sets[name]["outcomes"] = outcomes
        before = ((previous or {}).get("classifiers") or {}).get(clf.name) or {}
        for name in EXTERNAL_SETS:
            if name not in sets and before.get("version") == clf.version and name in (before.get("sets") or {}):
                sets[name] = dict(before["sets"][name])
                # its outcome figures only while the refinement is the one that gave them
                if (sets[name].get("outcomes") or {}).get("refinement") != outcome_version():
                    sets[name].pop("outcomes", None)
        out[clf.name] = {"version": clf.version,
                         "validation_sets": {w: s for w, s in by_writer.items() if s in sets}, "sets": sets}
    for spec, entry in out.items():  # who labelled each set and what is pooled: one home each, kept entries too
        for name, figs in entry["sets"].items():
            figs["labelled_by"] = labelled_by(name)
        entry["pooled_sets"] = {w: [n for n in names if n in entry["sets"]] for w, names in POOLED.get(spec, {}).items()}
    return {
        "about": "agreement of the offline refusal classifiers with labelled answers, per set, with who labelled "
                 "each set (labelled_by: people only for XSTest; AI readers following the guide for the embedded "
                 "model's answers; the writers' own intent for our own wording), per --partial-as setting (binary: "
                 "partial counts as refusal under 'unsafe', as answering under 'safe') and per kind of writer; "
                 "pooled_sets: the blind sets a correction pools; outcomes: how the answers land (full / partial / "
                 "clarifying / refusal) as the reader with the outcome refinement named reads them, per outcome "
                 "precision, recall and F1, three- and four-class agreement (XSTest also on its held-aside half); "
                 "written by python -m casebench.classify.validation_measure",
        "classifiers": out,
    }


def write(root: str | Path = ".", path: str | Path = VALIDATION_FILE,
          external: Mapping[str, str | Path] | None = None, only: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure (``measure``) and write the figures to ``path``; returns them."""
    data = measure(root, external, only=only)
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    load.cache_clear()
    return data


def main(argv: list[str] | None = None) -> int:
    """``python -m casebench.classify.validation_measure [--root DIR] [--check] [--external NAME=PATH ...]``."""
    ap = argparse.ArgumentParser(prog="python -m casebench.classify.validation_measure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the repository root (where tests/fixtures is); default: here")
    ap.add_argument("--check", action="store_true", help="compare the stored figures with a fresh measurement")
    ap.add_argument("--external", action="append", default=[], metavar="NAME=PATH",
                    help=f"measure a set kept outside the repository (known: {', '.join(EXTERNAL_SETS)}) "
                         "from its labelled CSV; without it, its stored figures are kept while the reader is unchanged")
    ap.add_argument("--only", action="append", default=None, metavar="CLASSIFIER",
                    help=f"measure only this classifier (repeatable; known: {', '.join(VALIDATED)}); the others' "
                         "stored figures are kept as they are")
    args = ap.parse_args(argv)
    external = {}
    for item in args.external:
        name, sep, path = item.partition("=")
        if not sep or name not in EXTERNAL_SETS:
            ap.error(f"--external {item!r}: expected NAME=PATH with NAME one of: {', '.join(EXTERNAL_SETS)}")
        external[name] = path
    if args.check:
        fresh, stored = measure(args.root, external, only=args.only), load()
        if fresh != stored:
            print(f"{VALIDATION_FILE}: stale; rewrite it with python -m casebench.classify.validation_measure", file=sys.stderr)
            return 1
        print(f"{VALIDATION_FILE}: up to date")
        return 0
    data = write(args.root, external=external, only=args.only)
    for name, entry in data["classifiers"].items():
        for writer, setname in entry["validation_sets"].items():
            v = entry["sets"][setname]
            agree = ", ".join(f"--partial-as {pa} {f['agreement']:.1%}" for pa, f in v["partial_as"].items())
            print(f"wrote {VALIDATION_FILE}: {name} v{entry['version']}, {writer} writer, {v['file'] or setname}: "
                  f"agreement {agree} on {v['n_classified']} of {v['n']} answers")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
