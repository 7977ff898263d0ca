"""Published reference rows: the one path by which the authors' published models are shown
beside a user's inputs (``score``, ``report``, the end of ``run``), and their one cache on disk.

A reference row is one published output file (``published.reference_files``: a model over the
full contexts) scored under the user's ``ScoringOptions``, on the user's cases when they are a
subset (a 90-case run stands beside each published model on those 90 cases, matched by query,
intent and category: ``published.restrict_to``). Published files already among the user's
inputs (same model, mode and removals) are left out.

Scoring 17 published files takes a while (every figure's bootstrap), so each row's figures are
kept on disk, one JSON file per row (``ReferenceCache``: the score as ``Score.to_dict`` writes
it and people's references on its pairs; never a pickle). The key is the SHA-256 of the file
(its path and its bytes), the dataset it was checked against, the options, the case subset and
the casebench version (with the code of ``stats/``, so a changed formula is another key even
between releases): a stale entry is never read, and an unreadable or unwritable cache is a miss,
never a failure. ``score`` reads kept rows without loading their files; ``report`` and the end
of ``run`` load the files (their plots need the predictions) and hand the kept figures to
``stats.result.score_input``, which then computes none of them.

A module of its own, beside ``stats`` (which never reads files): it loads published files
(``published``) and scores them (``stats``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .stats.metrics import METRIC, Score
from .stats.options import ScoringOptions
from .stats.result import Kept, ScoredInput, score_input

if TYPE_CHECKING:  # pragma: no cover
    from .data import Case, Dataset
    from .predictions import Predictions

#: the layout of a kept row (another layout is another key)
CACHE_FORMAT = 1


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_version() -> str:
    """What the figures of this casebench depend on: its version, the source of ``stats/`` (a
    changed formula changes it even between releases) and the registered metrics (a plugin
    metric adds figures)."""
    from . import __version__

    h = hashlib.sha256(__version__.encode())
    for f in sorted((Path(__file__).parent / "stats").glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    h.update(",".join(METRIC).encode())
    return h.hexdigest()


def case_keys(cases: Sequence["Case"]) -> list[tuple[str, bool, str]]:
    """How a case subset is matched and keyed: each case's query, intent and category."""
    return [(c.query, bool(c.intended_safe), c.category) for c in cases]


class ReferenceCache:
    """Reference rows kept on disk under ``root`` (default: casebench's cache directory,
    ``cache.cache_dir() / "scores"``), one JSON file per row (see the module docstring)."""

    def __init__(self, root: str | Path | None = None) -> None:
        if root is None:
            from .cache import cache_dir

            root = cache_dir() / "scores"
        self.root = Path(root)

    @staticmethod
    def key(file: str | Path, options: ScoringOptions, cases: Sequence[Any] | None = None,
            datasets: Sequence[str | Path] = ()) -> str:
        """The key of the row of ``file`` (checked against the datasets ``datasets``) under
        ``options`` over the case subset ``cases`` (``case_keys``; None: every case of the file).
        Raises OSError when a file cannot be read."""
        from . import __version__

        parts = {
            "format": CACHE_FORMAT,
            "file": [os.path.abspath(file), _file_sha256(Path(file))],
            "datasets": [_file_sha256(Path(f)) for f in datasets],
            "options": options.key(),
            "cases": None if cases is None else [list(c) if isinstance(c, (list, tuple)) else c for c in cases],
            "version": __version__,
            "code": code_version(),
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / f"reference-{key}.json"

    def get(self, key: str) -> Kept | None:
        """The kept row of ``key``, or None (a miss: absent, unreadable or of another layout)."""
        try:
            d = json.loads(self.path(key).read_text(encoding="utf-8"))
            if d.get("format") != CACHE_FORMAT:
                return None
            return Kept(Score.from_dict(d["score"]), d.get("people"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, scored: ScoredInput) -> None:
        """Keep the row ``scored`` under ``key`` (atomically; a failure to write is ignored)."""
        from .atomic import write_text_atomic

        d = {"format": CACHE_FORMAT, "score": scored.score.to_dict(), "people": scored.people.pairs}
        try:
            write_text_atomic(self.path(key), json.dumps(d, default=float))
        except (OSError, TypeError, ValueError):
            pass


@dataclass(frozen=True)
class _Row:
    """One reference file on its way to a row: its path, the datasets it is keyed on, its key
    (None: not keyable, no cache) and what the cache holds for it."""

    file: Path
    key: str | None
    kept: Kept | None


def _rows(root: str | Path, options: ScoringOptions, cases: Sequence["Case"] | None, dataset: "Dataset | None",
          cache: ReferenceCache) -> tuple[list[Path], Iterator[_Row]]:
    """The reference files under ``root`` and, lazily, each one's key and kept row. Raises
    ``DatasetError`` naming the directory when it holds none."""
    from .data import DatasetError
    from .published import reference_dataset_path, reference_files

    files = reference_files(root)
    if not files:
        raise DatasetError(Path(root), [(None, None, "no published output files (exp/safety_<model>/output_<mode>.json) "
                                                     "here; fetch them with `casebench data fetch`")])
    subset = None if cases is None else case_keys(cases)

    def each() -> Iterator[_Row]:
        for f in files:
            checked = [Path(dataset.path)] if dataset is not None else [d for d in [reference_dataset_path(f)] if d]
            try:
                key: str | None = cache.key(f, options, subset, checked)
            except OSError:
                key = None
            yield _Row(f, key, cache.get(key) if key else None)

    return files, each()


def _load(f: Path, cases: Sequence["Case"] | None, dataset: "Dataset | None") -> "Predictions | None":
    """The published file ``f`` (checked against ``dataset``), on ``cases`` alone when given
    (None when it holds none of them)."""
    from .published import load_published, restrict_to

    pred = load_published(f, reference=dataset)
    return pred if cases is None else restrict_to(pred, cases)


def reference_cases(preds: Sequence["Predictions"], options: ScoringOptions) -> list["Case"]:
    """The one case policy of reference rows (``score``, ``report`` and the end of ``run`` alike):
    the cases every input scored (answered; every case with ``paper_compat``), in the first
    input's order. The published models are scored on these, so a 450-case run stands beside them
    on its 450 cases, and ``casebench report RUN`` shows the rows the report ``run`` wrote shows."""
    def key(c: "Case") -> tuple[str, bool, str]:
        return (c.query, bool(c.intended_safe), c.category)

    def scored(p: "Predictions") -> list["Case"]:
        return list(p.cases) if options.paper_compat else [c for c, a in zip(p.cases, p.answered) if a]

    if not preds:
        return []
    common = set.intersection(*[{key(c) for c in scored(p)} for p in preds])
    return [c for c in scored(preds[0]) if key(c) in common]


def _identity(x: Any) -> tuple[str, str, tuple[str, ...]]:
    """What makes a published file the same input as another: model, mode, removals."""
    return (x.model, str(x.mode), tuple(x.removed))


def reference_inputs(root: str | Path, options: ScoringOptions, *, cases: Sequence["Case"] | None = None,
                     dataset: "Dataset | None" = None, exclude: Sequence[Any] = (),
                     cache: ReferenceCache | None = None) -> list[ScoredInput]:
    """The published models under ``root`` as scored inputs (``stats.result.ScoredInput``) under
    ``options``, each computed once per file, dataset, options, case subset and version and kept
    on disk (see the module docstring). ``cases``: score them on these cases alone (another
    input's, e.g. a run's answered cases); ``dataset``: check each file against it; ``exclude``:
    inputs (anything with ``model``, ``mode``, ``removed``) whose published file is left out.
    Raises ``DatasetError`` (a file that does not fit, a directory without published files)."""
    cache = cache or ReferenceCache()
    skip = {_identity(x) for x in exclude}
    _, rows = _rows(root, options, cases, dataset, cache)
    out = []
    for row in rows:
        pred = _load(row.file, cases, dataset)
        if pred is None or _identity(pred) in skip:
            continue
        scored = score_input(pred, options, kept=row.kept)
        if row.kept is None and row.key:
            cache.put(row.key, scored)
        out.append(scored)
    return out


def reference_scores(root: str | Path, options: ScoringOptions, *, cases: Sequence["Case"] | None = None,
                     dataset: "Dataset | None" = None, exclude: Sequence[Any] = (),
                     cache: ReferenceCache | None = None) -> list[Score]:
    """The scores of ``reference_inputs`` (same arguments), read from the rows kept on disk
    without loading their files where they were kept before; only the others are loaded and
    scored (and kept)."""
    cache = cache or ReferenceCache()
    skip = {_identity(x) for x in exclude}
    _, rows = _rows(root, options, cases, dataset, cache)
    out = []
    for row in rows:
        if row.kept is not None:
            if _identity(row.kept.score) not in skip:
                out.append(row.kept.score)
            continue
        pred = _load(row.file, cases, dataset)
        if pred is None or _identity(pred) in skip:
            continue
        scored = score_input(pred, options)
        if row.key:
            cache.put(row.key, scored)
        out.append(scored.score)
    return out
