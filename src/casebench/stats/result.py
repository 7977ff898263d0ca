"""One scoring pass per input: the one place an input's figures are computed, and kept.

Every consumer of a score (``casebench score``, ``compare``, ``ablate``, the placement study,
say-do, the report, the CLI after ``casebench run``, the inspect metric) asks ``score_input``
for an input's ``ScoredInput`` and reads it; none rebuilds the scoring arrays or runs a
bootstrap of its own over one input's figures. ``score_input`` builds the input's scoring
arrays (``metrics.scoring_arrays``) once per ``ScoringOptions``, computes every figure with its
interval and the count it rests on (``metrics.score_arrays``), the per-case figures behind the
report's plots and the per-pair context table (``context.pair_table``), and keeps the result on
the predictions (the options are frozen and hashable, so they are the key): a second consumer of
the same input with the same options gets the same object. The predictions are treated as fixed
once scored (nothing in casebench changes loaded predictions; the minimum verdict mass is an
option, applied through a view, ``Predictions.at_min_verdict_mass``).

Later analyses attach what they compute per input to its result rather than keep it beside:
``ScoredInput.attach`` adds a named block (e.g. people's figures on the input's cases), and
``ScoredInput.add_figure`` a figure with its interval and count, which every table then shows.

Published reference rows (``score --reference``) are scored once per set of files, dataset,
case subset, options and code version and kept on disk (``ReferenceScoreCache``), so a later
call reads them instead of loading and scoring 17 files again. The report keeps the whole
``ScoredInput`` of each published reference input the same way (``reference_input``), so a later
report reads its reference rows back instead of scoring them again.

``BUILDS`` counts, per input source, how often its scoring arrays were built: the tests check
that a report over several inputs builds each input's arrays once.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..data import Case
from ..predictions import Predictions
from .metrics import (
    ECE_BINS, METRIC, Score, ScoringArrays, breakdown_kinds, ece_bins, score_arrays, score_breakdowns, scoring_arrays,
)
from .options import DEFAULT_OPTIONS, ScoringOptions

#: per input source, how many times its scoring arrays were built (instrumentation for tests)
BUILDS: Counter[str] = Counter()


@dataclass
class Reliability:
    """The reliability curve of one input: per non-empty ECE bin (``metrics.ECE_BINS``
    equal-width bins of P(safe)), its mean P(safe), its mean human safe_rate, its case count and
    its centre."""

    p_mean: np.ndarray
    g_mean: np.ndarray
    count: np.ndarray
    centres: np.ndarray


def reliability_curve(a: ScoringArrays) -> Reliability | None:
    """The reliability curve of scored cases with a P(safe); None without one (or no case)."""
    if a.p is None:
        return None
    p = np.clip(np.asarray(a.p, dtype=float), 0, 1)
    if not len(p):
        return None
    bins = ece_bins(p)
    cnt = np.bincount(bins, minlength=ECE_BINS)
    keep = cnt > 0
    pm = np.bincount(bins, weights=p, minlength=ECE_BINS)[keep] / cnt[keep]
    gm = np.bincount(bins, weights=a.g, minlength=ECE_BINS)[keep] / cnt[keep]
    centres = (np.arange(ECE_BINS) + 0.5)[keep] / ECE_BINS
    return Reliability(pm, gm, cnt[keep], centres)


@dataclass(eq=False, repr=False)
class ScoredInput:
    """One input scored once under one ``ScoringOptions``: everything any command shows of it.

    ``pred``: the predictions as scored (at the options' minimum verdict mass); ``arrays`` and
    ``mask``: its scoring arrays and which of its cases are scored (every case with
    paper-compatible scoring, else those answered); ``score``: every figure with its interval
    and the count it rests on (``Score.cases_of``); ``category_accuracy``: accuracy per category
    over the scored cases; ``g``: the human safe_rate of the scored cases; ``p``: their P(safe),
    or the predicted label (0/1) for a label-only input; ``reliability``: None for a label-only
    input; ``scored_mask`` / ``correct_all``: per case of the input (all of them, in order)
    scored, and right where scored; ``scored_cases``: the scored cases (``g`` and ``p`` follow
    their order); ``pairs``: the per-pair context table (``context.pair_table``), None without
    pairs; ``people``: people's references on the pairs it answered (computed on first use);
    ``blocks``: what later analyses attached (``attach``), by name.
    """

    pred: Predictions
    options: ScoringOptions
    arrays: ScoringArrays
    mask: np.ndarray
    score: Score
    category_accuracy: dict[str, float]
    g: np.ndarray
    p: np.ndarray
    reliability: Reliability | None
    scored_mask: np.ndarray
    correct_all: np.ndarray
    scored_cases: tuple[Case, ...]
    pairs: dict[str, np.ndarray] | None = None
    blocks: dict[str, Any] = field(default_factory=dict)
    _broken_down: dict[tuple[str, ...], Score] = field(default_factory=dict)
    _people: list[dict[str, Any] | None] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"ScoredInput({self.pred.name!r}, scored={self.scored}/{self.pred.n})"

    @property
    def scored(self) -> int:
        """How many cases are scored."""
        return int(self.mask.sum())

    @property
    def binary(self) -> bool:
        """A label-only input (no continuous P(safe))."""
        return not self.pred.is_continuous

    def with_breakdowns(self, breakdowns: bool | Sequence[str]) -> Score:
        """The score with the asked breakdowns (``metrics.BREAKDOWNS``), from the same arrays;
        each kind is computed once."""
        kinds = breakdown_kinds(breakdowns)
        if not kinds:
            return self.score
        if kinds not in self._broken_down:
            self._broken_down[kinds] = replace(
                self.score, breakdowns=score_breakdowns(self.pred, self.arrays, self.mask, self.options, kinds))
        return self._broken_down[kinds]

    def people_references(self) -> dict[str, Any] | None:
        """People's references on the pairs this input answered (``context.score_people``: one
        person, the majority, under the options' label source), computed on first use from
        these arrays and kept; None when the arrays hold no pairs."""
        if not self._people:
            from .context import score_people

            o = self.options
            self._people.append(score_people(self.arrays, self.scored_cases, n_boot=o.n_boot, seed=o.bootstrap_seed,
                                             level=o.level, label_source=o.label_source))
        return self._people[0]

    @property
    def people(self) -> dict[str, Any] | None:
        """``people_references`` of an input with at least one pair (the report's per-input
        people block), else None."""
        if self.arrays.pairs is None or not len(self.arrays.pairs):
            return None
        return self.people_references()

    def attach(self, name: str, block: Any) -> None:
        """Attach a named block of figures computed on this input by a later analysis (e.g.
        people's figures on its cases); ``to_dict`` carries it under ``name``."""
        if name in self.score.to_dict():
            raise ValueError(f"{name!r} is a key of the score itself; attach the block under another name")
        self.blocks[name] = block

    def add_figure(self, name: str, value: float, ci: Sequence[float] | None = None, cases: int | None = None) -> None:
        """Add a figure computed beside the metric table (its name must be a registered metric,
        so every table knows its label and digits), with its interval and the count it rests on."""
        if name not in METRIC:
            raise ValueError(f"{name!r} is not a registered metric (stats.metrics.register_metric)")
        self.score.values[name] = float(value)
        if ci is not None:
            self.score.ci[name] = [float(ci[0]), float(ci[1])]
        if cases is not None:
            self.score.cases_of[name] = int(cases)

    def to_dict(self) -> dict[str, Any]:
        """The score as ``casebench score --json`` writes it, plus every attached block."""
        d = self.score.to_dict()
        for k, v in self.blocks.items():
            d[k] = v.to_dict() if hasattr(v, "to_dict") else v
        return d


def _build(pred: Predictions, options: ScoringOptions, human_rate: np.ndarray | None = None) -> ScoredInput:
    BUILDS[pred.source] += 1
    a, mask = scoring_arrays(pred, options, human_rate)
    score = score_arrays(pred, a, mask, options)
    c = np.array([x.category for x in pred.cases], dtype=object)[mask]
    acc = {}
    for cat in sorted(set(c.tolist())):
        sel = c == cat
        acc[cat] = float(a.correct[sel].mean()) if sel.any() else float("nan")
    continuous = pred.is_continuous
    p = a.p if continuous else a.pred_safe.astype(float)
    correct_all = np.zeros(pred.n, dtype=bool)
    correct_all[np.flatnonzero(mask)] = a.correct
    pairs = None
    if a.pairs is not None and len(a.pairs):
        from .context import pair_table

        pairs = pair_table(a)
    return ScoredInput(pred, options, a, np.asarray(mask, dtype=bool), score, acc, a.g, p,
                       reliability_curve(a) if continuous else None, np.asarray(mask, dtype=bool), correct_all,
                       tuple(x for x, m in zip(pred.cases, mask) if m), pairs)


def score_input(pred: Predictions, options: ScoringOptions = DEFAULT_OPTIONS) -> ScoredInput:
    """The one ``ScoredInput`` of ``pred`` under ``options``: built on the first call, the same
    object afterwards (kept on the predictions, keyed by the options and the threshold they are
    read at). Raises ``options.LabelSourceError`` when the cases cannot be labelled."""
    eff, kept, key = _kept(pred, options)
    if key not in kept:
        kept[key] = _build(eff, options)
    return kept[key]


def _kept(pred: Predictions, options: ScoringOptions) -> tuple[Predictions, dict[Any, ScoredInput], Any]:
    """The predictions as ``options`` read them, the results kept on them, and the key of
    ``options`` among those (the one keying ``score_input`` and ``reference_input`` share)."""
    eff = pred.at_min_verdict_mass(options.min_verdict_mass)
    kept: dict[Any, ScoredInput] = eff.__dict__.setdefault("_scored", {})
    return eff, kept, (options, float(eff.min_verdict_mass))


def score_predictions(
    pred: Predictions, options: ScoringOptions = DEFAULT_OPTIONS, *, breakdowns: bool | Sequence[str] = False,
    human_rate: np.ndarray | None = None,
) -> Score:
    """Every metric of ``pred`` with its CI and count (``score_input(...).score``), optionally
    broken down (``breakdowns``: the kinds of ``metrics.BREAKDOWNS``, or True for all).

    ``human_rate``: score against these human safe_rates instead of the options' label source
    (an explicit array; such a score is computed afresh, not kept)."""
    if human_rate is not None:
        return _build(pred.at_min_verdict_mass(options.min_verdict_mass), options, human_rate).with_breakdowns(breakdowns)
    return score_input(pred, options).with_breakdowns(breakdowns)


# --------------------------------------------------------------------------------------------
# Published reference rows, scored once and kept on disk


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
    from .. import __version__

    h = hashlib.sha256(__version__.encode())
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    h.update(",".join(METRIC).encode())
    return h.hexdigest()


class ReferenceScoreCache:
    """Scores of published reference files kept on disk under ``root`` (casebench's cache
    directory, ``cache.cache_dir() / "scores"``), one JSON file per key.

    The key (``key``) is the SHA-256 of: each input file's SHA-256 (and the dataset's, which the
    files are checked against), the scoring options, the case subset and ``code_version``; any
    change in them is another key, so a stale entry is never read. ``get`` and ``put`` never
    fail the command: an unreadable or unwritable cache is a miss."""

    def __init__(self, root: str | Path | None = None) -> None:
        if root is None:
            from ..cache import cache_dir

            root = cache_dir() / "scores"
        self.root = Path(root)

    @staticmethod
    def key(files: Sequence[str | Path], options: ScoringOptions, cases: Sequence[Any] | None = None,
            extra: Sequence[str | Path] = ()) -> str:
        """The key of the scores of ``files`` (checked against the datasets ``extra``) under
        ``options`` over the case subset ``cases`` (None: every case of each file)."""
        parts = {
            "files": [_file_sha256(Path(f)) for f in files],
            "datasets": [_file_sha256(Path(f)) for f in extra],
            "options": options.key(),
            "cases": None if cases is None else [c if isinstance(c, (list, tuple)) else int(c) for c in cases],
            "code": code_version(),
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / f"reference-{key}.json"

    def get(self, key: str) -> list[Score] | None:
        """The kept scores of ``key``, or None (a miss)."""
        p = self._path(key)
        try:
            rows = json.loads(p.read_text(encoding="utf-8"))
            return [Score.from_dict(r) for r in rows]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, scores: Sequence[Score]) -> None:
        """Keep ``scores`` under ``key`` (atomically; a failure to write is ignored)."""
        from ..atomic import write_text_atomic

        try:
            write_text_atomic(self._path(key), json.dumps([s.to_dict() for s in scores]))
        except OSError:
            pass


def reference_scores(files: Sequence[str | Path], options: ScoringOptions,
                     load: Callable[[], Sequence[Predictions]], *, datasets: Sequence[str | Path] = (),
                     cache: ReferenceScoreCache | None = None, cases: Sequence[Any] | None = None) -> list[Score]:
    """The scores of the published reference ``files`` under ``options``: read from ``cache``
    (default: casebench's cache directory) when they were scored before with the same files,
    datasets, options, case subset (``cases``: what ``load`` restricts the files to, as
    JSON-ready keys) and code, else ``load()``-ed, scored once and kept."""
    cache = cache or ReferenceScoreCache()
    key = cache.key(files, options, cases=cases, extra=datasets)
    got = cache.get(key)
    if got is not None:
        return got
    scores = [score_input(p, options).score for p in load()]
    cache.put(key, scores)
    return scores


def reference_input(pred: Predictions, options: ScoringOptions, *, datasets: Sequence[str | Path] = (),
                    cache: ReferenceScoreCache | None = None) -> ScoredInput:
    """The ``ScoredInput`` of one published reference input ``pred`` (loaded from the file
    ``pred.source``, checked against the datasets ``datasets``) under ``options``, as the report
    shows it: read from ``cache`` (default: casebench's cache directory; the key is
    ``ReferenceScoreCache.key`` of the file, datasets, options, the input's cases and the code
    version) when it was scored before, else scored once (``score_input``, with people's
    references on its pairs) and kept. Either way it is also kept on ``pred``, so ``score_input``
    (and every consumer of it) returns this very result. An input not read from a file is
    scored without the disk cache; an unreadable or unwritable cache is a miss."""
    source = Path(pred.source) if pred.source else None
    if source is None or not source.is_file():
        return score_input(pred, options)
    eff, kept, mem_key = _kept(pred, options)
    if mem_key in kept:
        return kept[mem_key]
    cache = cache or ReferenceScoreCache()
    cases = [(c.query, bool(c.intended_safe), c.category) for c in pred.cases]
    try:
        key = cache.key([source], options, cases=cases, extra=datasets)
    except OSError:
        return score_input(pred, options)
    path = cache.root / f"report-reference-{key}.pickle"
    got: ScoredInput | None = None
    try:
        with open(path, "rb") as f:
            got = pickle.load(f)
        if not isinstance(got, ScoredInput) or got.pred is not None:
            got = None
    except Exception:  # a missing, stale or damaged entry is a miss, never a failure
        got = None
    if got is not None:
        got.pred = eff  # the result refers to these predictions, as if scored here
        kept[mem_key] = got
        return got
    scored = score_input(pred, options)
    _ = scored.people  # people's references on its pairs: the report shows them beside each row
    try:
        from ..atomic import write_bytes_atomic

        write_bytes_atomic(path, pickle.dumps(replace(scored, pred=None), protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # an unwritable cache only costs the next call a rescoring
        pass
    return scored
