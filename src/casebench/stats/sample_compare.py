"""Paired comparison of two evaluations of any task, scorer by scorer, over the samples both scored.

The input is plain data: per input, ``values[scorer][sample_id]`` (one number per sample; an
inspect log gives it through ``inspect_log.load_sample_scores``) and, for clusters,
a label per sample. Nothing here knows about CASE-Bench's cases: this is what two inspect logs of
*any* task get from ``casebench compare LOG_A LOG_B``. Every test is one casebench already uses
for its own comparisons, from its one home:

* **the paired difference of the mean**, A - B over the samples both scored, with a percentile
  interval from the paired bootstrap (``bootstrap.cluster_resample_weights``: with a cluster field,
  whole clusters are drawn, so samples that share a cluster count as the correlated evidence
  they are; without, every sample is its own cluster, the plain paired bootstrap);
* **McNemar's test** when both inputs' values of a scorer are 0/1 (``compare.mcnemar_exact``;
  clustered, ``compare.mcnemar_clustered``, Durkalski et al. 2003); otherwise the paired
  bootstrap p (``bootstrap.bootstrap_p``) is the primary test;
* **Benjamini-Hochberg** over the primary p-values of every scorer (and every pair of inputs):
  one family, one decision per table (``fdr.bh_adjust``: scipy ``false_discovery_control``);
* **the minimum detectable difference** (``compare.mdd``): what the paired design had 80% power
  to detect at ``alpha``, from McNemar's null SE for 0/1 scores and from the SD of the paired
  bootstrap differences otherwise.

No difference is marked significant from fewer than ``metrics.MIN_PAIRED`` paired samples, nor
(McNemar) from fewer than ``metrics.MIN_DISCORDANT`` discordant ones; the p-values are shown.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from ..jsonutil import json_safe
from .schema import SCHEMA_VERSION
from .bootstrap import bootstrap_p, cluster_labels, cluster_resample_weights, p_floor, percentile_ci
from .paired_tests import PairedDiff, mcnemar_clustered, mcnemar_exact, mdd
from .metrics import MIN_DISCORDANT, MIN_PAIRED
from .small_sample import FEW_CLUSTERS


class SampleCompareError(ValueError):
    """Inputs that cannot be compared (no sample in common, a cluster field missing)."""


@dataclass
class ScoredSamples:
    """One input: its name and source, and per scorer the value of each sample it scored."""

    name: str
    source: str
    values: Mapping[str, Mapping[str, float]]
    #: per sample, the field a cluster is read from (``cluster_by``); None: no metadata
    metadata: Mapping[str, Mapping[str, Any]] | None = None


@dataclass
class ScorerDiff(PairedDiff):
    """One scorer of one pair of inputs over the ``n`` samples both scored (``PairedDiff``):
    ``binary`` scorers are tested by McNemar (``mcnemar``: its counts); ``only_a``/``only_b``:
    samples one input scored alone."""

    KEY_FIELDS = ("scorer", "n")

    scorer: str = field(kw_only=True)
    n: int = field(kw_only=True)
    binary: bool = field(kw_only=True)
    mcnemar: dict[str, Any] | None = None
    only_a: int = 0
    only_b: int = 0


@dataclass
class SamplePair:
    a: int
    b: int
    shared: int
    scorers: dict[str, ScorerDiff]


@dataclass
class SampleComparison:
    inputs: list[dict[str, Any]]
    pairs: list[SamplePair]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "schema_version": SCHEMA_VERSION, "kind": "per-scorer paired comparison of samples", "inputs": self.inputs, "settings": self.settings,
            "pairs": [{"a": self.inputs[p.a]["label"], "b": self.inputs[p.b]["label"], "shared_samples": p.shared,
                       "scorers": {k: v.to_dict() for k, v in p.scorers.items()}} for p in self.pairs],
        })


def _is_binary(x: np.ndarray) -> bool:
    return bool(x.size) and bool(np.all((x == 0.0) | (x == 1.0)))


def cluster_of(inp: ScoredSamples, ids: Sequence[str], by: str) -> list[Hashable]:
    """The value of the metadata field ``by`` of each sample (``SampleCompareError`` naming the
    first sample without it)."""
    out: list[Hashable] = []
    for sid in ids:
        md = (inp.metadata or {}).get(sid)
        if not isinstance(md, Mapping) or by not in md:
            raise SampleCompareError(f"{inp.source}: sample {sid!r} has no metadata field {by!r} (--cluster-by)")
        v = md[by]
        out.append(v if isinstance(v, Hashable) else repr(v))
    return out


def _span(x: np.ndarray, y: np.ndarray) -> float | None:
    """The width of the range a sample's value lies in: 1 for scores in [0, 1], else the
    observed span of both inputs' values (None where every value is the same outside [0, 1])."""
    v = np.concatenate([x, y]) if x.size or y.size else np.zeros(0)
    if not v.size:
        return None
    if float(v.min()) >= 0.0 and float(v.max()) <= 1.0:
        return 1.0
    w = float(v.max() - v.min())
    return w if w > 0 else None


def _degenerate(boot_ci: Sequence[float]) -> bool:
    from .bootstrap import degenerate

    return all(math.isfinite(c) for c in boot_ci) and degenerate(boot_ci)


def _small_sample(d: np.ndarray, labels: np.ndarray, span: float | None,
                  level: float) -> tuple[list[float], float, str, float]:
    """The interval and p of the mean paired difference ``d`` from its ``K`` clusters, one method
    for both (``small_sample.cluster_mean``): Student's t on K - 1 df over the cluster totals,
    clipped to the difference's range ``[-span, span]``; where the differences have no spread
    (identical inputs, or every sample moved alike) the exact interval of a bounded mean and its
    own test of 0 (never a point). Without a known range and no spread: none.
    Returns ``(ci, p, test, se)``."""
    from .small_sample import cluster_mean

    if span is None and not (d.size and float(np.ptp(d)) > 0):
        return [float("nan"), float("nan")], float("nan"), "none (no spread, no known range)", float("nan")
    width = math.inf if span is None else span  # with spread and no known range: t, unclipped
    fig = cluster_mean(d, labels, (-width, width), level)
    return [fig.ci[0], fig.ci[1]], fig.p, fig.test, fig.se


def compare_scorer(scorer: str, a: Mapping[str, float], b: Mapping[str, float], *, clusters: Mapping[str, Hashable] | None,
                   n_boot: int, seed: int, level: float, alpha: float) -> ScorerDiff:
    """One scorer of one pair (before the adjustment): see the module docstring."""
    ids = [s for s in a if s in b]
    x = np.array([a[s] for s in ids], dtype=float)
    y = np.array([b[s] for s in ids], dtype=float)
    d = x - y
    n = len(ids)
    binary = _is_binary(x) and _is_binary(y)
    labels = (cluster_labels([clusters[s] for s in ids]) if clusters is not None
              else np.arange(n, dtype=int))
    clustered = clusters is not None and n > 0 and int(labels.max()) + 1 < n
    mean_a = float(x.mean()) if n else float("nan")
    mean_b = float(y.mean()) if n else float("nan")
    diff = float(d.mean()) if n else float("nan")
    ci, p_boot, se = [float("nan")] * 2, float("nan"), float("nan")
    if n and n_boot > 0:
        W = cluster_resample_weights(labels, n_boot, seed)
        tot = W.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.where(tot > 0, W @ d / np.where(tot > 0, tot, 1), np.nan)
        ci, p_boot = percentile_ci(boot, level), bootstrap_p(boot)
        fin = boot[np.isfinite(boot)]
        se = float(np.std(fin, ddof=1)) if fin.size > 1 else float("nan")
    mc = None
    test, p = "bootstrap", p_boot
    k = int(labels.max()) + 1 if n else 0
    span = _span(x, y)
    if n and not binary and (k < FEW_CLUSTERS or _degenerate(boot_ci=ci)):
        # few clusters, or a bootstrap that gave a point: one small-sample method for both the
        # interval and the p (so they cannot disagree), inside the difference's range
        ci, p, test, se = _small_sample(d, labels, span, level)
        p_boot = p
    elif n and binary and _degenerate(boot_ci=ci):
        ci, _, _, _ = _small_sample(d, labels, span, level)
    if binary and n:
        mc = mcnemar_clustered(x == 1.0, y == 1.0, labels) if clustered else mcnemar_exact(x == 1.0, y == 1.0)
        test, p, se = ("mcnemar_clustered" if clustered else "mcnemar"), mc["p"], mc["se"]
    withheld = None
    if n < MIN_PAIRED:
        withheld = f"{n} paired samples < {MIN_PAIRED}"
    elif mc is not None and mc["a_only"] + mc["b_only"] < MIN_DISCORDANT:
        withheld = f"{mc['a_only'] + mc['b_only']} discordant samples < {MIN_DISCORDANT}"
    return ScorerDiff(mean_a, mean_b, diff, ci, p_boot, test,
                      None if p is None or (isinstance(p, float) and math.isnan(p)) else float(p),
                      scorer=scorer, n=n, binary=binary, mcnemar=mc, mdd=mdd(se, alpha), withheld=withheld, only_a=len(a) - n, only_b=len(b) - n,
                      p_floor=p_floor(n_boot) if test == "bootstrap" and n_boot > 0 else None)


def compare_samples(inputs: Sequence[ScoredSamples], *, cluster_by: str | None = None, n_boot: int = 2000,
                    seed: int = 0, level: float = 0.95, alpha: float = 0.05) -> SampleComparison:
    """Every pair of ``inputs``, every scorer both have, over the samples both scored; then
    Benjamini-Hochberg over all primary p-values together. ``cluster_by``: a sample metadata
    field whose equal values form a cluster (read from the first input of each pair; the
    second's must agree where it has the field)."""
    from .fdr import bh_adjust

    if len(inputs) < 2:
        raise SampleCompareError("a comparison needs at least two inputs")
    pairs: list[SamplePair] = []
    for i, j in itertools.combinations(range(len(inputs)), 2):
        A, B = inputs[i], inputs[j]
        common = [s for s in A.values if s in B.values]
        if not common:
            raise SampleCompareError(f"{A.source} and {B.source} share no scorer (theirs: "
                                     f"{', '.join(sorted(A.values)) or 'none'}; {', '.join(sorted(B.values)) or 'none'})")
        ids = sorted({s for k in common for s in A.values[k] if s in B.values[k]})
        if not ids:
            raise SampleCompareError(f"{A.source} and {B.source} share no scored sample")
        clusters = None
        if cluster_by is not None:
            ca = dict(zip(ids, cluster_of(A, ids, cluster_by)))
            if B.metadata is not None:
                for sid in ids:
                    md = B.metadata.get(sid)
                    if isinstance(md, Mapping) and cluster_by in md and md[cluster_by] != ca[sid] \
                            and repr(md[cluster_by]) != ca[sid]:
                        raise SampleCompareError(f"sample {sid!r}: {cluster_by!r} is {ca[sid]!r} in {A.source} "
                                                 f"but {md[cluster_by]!r} in {B.source}")
            clusters = ca
        scorers = {k: compare_scorer(k, A.values[k], B.values[k], clusters=clusters, n_boot=n_boot, seed=seed,
                                     level=level, alpha=alpha) for k in common}
        pairs.append(SamplePair(i, j, len(ids), scorers))
    tested = [s for pc in pairs for s in pc.scorers.values() if s.p is not None and math.isfinite(s.p)]
    if tested:
        p_adj, reject = bh_adjust(np.array([s.p for s in tested], dtype=float), alpha)
        for s, r, pa in zip(tested, reject, p_adj):
            s.p_adjusted = float(pa)
            s.significant = bool(r) and s.withheld is None
    described = [{"label": chr(ord("A") + k) if k < 26 else f"#{k + 1}", "name": x.name, "source": x.source,
                  "scorers": sorted(x.values)} for k, x in enumerate(inputs)]
    settings = {"difference": "A - B, the mean over the samples both scored", "bootstrap": n_boot, "seed": seed,
                "level": level, "alpha": alpha, "cluster_by": cluster_by,
                "independence": (None if cluster_by else "samples taken as independent (no --cluster-by): samples "
                                 "that share a query, a case or a document are correlated evidence, and then the "
                                 "intervals are too narrow and the p-values too small"),
                "few_clusters": f"below {FEW_CLUSTERS} clusters (samples, unclustered) a difference of scores that "
                                "are not 0/1 gets Student's t on K - 1 df, interval and p alike",
                "adjustment": "Benjamini-Hochberg over every scorer's primary p-value",
                "tests": "McNemar for 0/1 scores (clustered with --cluster-by), else the paired bootstrap",
                "mdd": f"the smallest difference each test had 80% power to detect at alpha {alpha}",
                "min_paired": MIN_PAIRED, "min_discordant": MIN_DISCORDANT, "p_floor": p_floor(n_boot)}
    return SampleComparison(described, pairs, settings)


def disagreements(a: ScoredSamples, b: ScoredSamples) -> list[dict[str, Any]]:
    """The samples where the two inputs' values of a scorer differ, scorer by scorer (sample ids
    in order), with both values."""
    out = []
    for k in sorted(set(a.values) & set(b.values)):
        for sid in sorted((s for s in a.values[k] if s in b.values[k]), key=_id_key):
            if a.values[k][sid] != b.values[k][sid]:
                out.append({"scorer": k, "sample": sid, "a": a.values[k][sid], "b": b.values[k][sid]})
    return out


def _id_key(sid: str) -> tuple[int, Any]:
    try:
        return (0, int(sid))
    except ValueError:
        return (1, sid)
