"""Statistics of the human votes: context effect, category differences, agreement, power.

The paper's central claim is statistical (context changes people's safety judgements; a handful
of annotators is not enough), and this module computes every figure behind it from the votes in
a dataset file, with scipy / statsmodels / krippendorff doing the statistics.

Which votes are used
    Each case's ``votes`` exactly as stored in the file that was loaded (``scores``). The plain
    dataset holds the 20 human votes per case; the published ``exp/`` files hold 21, the last
    being the context's intent, so run these statistics on the dataset file. Cases may hold any
    number of votes, differing per case; every figure uses each case's own count. Cases with no
    votes at all are left out of everything (and counted in ``dataset.cases_without_votes``).

Pairs
    The data has no id, so the two contexts of a query are paired by identical ``query`` text.
    A query pairs when it has exactly one intended-safe and one intended-unsafe case; any other
    query (partner missing, or more cases than two) is skipped by the paired figures and counted.

Clustering
    Votes are clustered: 20 per case, two cases per query, ten queries per category. Every test
    that spans cases is therefore paired over queries, never pooled over votes: the context
    effect (``paired``) and each category's effect (``categories``) are Wilcoxon signed-rank
    tests of the per-query differences (safe-context share - unsafe-context share), by the exact
    sign-flip distribution (``signed_rank_exact``; ties are the rule with 20 votes a case). The
    only test on votes themselves is the one within a query (``pairs``): Fisher's exact test of
    its two cases' votes (their annotators are independent of each other, and no case's votes
    are pooled with another's), Benjamini-Hochberg adjusted over all the queries. The pooled vote
    shares (``votes``) are descriptive only.

Multiple testing
    One Benjamini-Hochberg family per table, and each output says which: the categories'
    Wilcoxon tests over the categories, the queries' Fisher tests over the queries.

People's context effect
    One figure, the same in ``casebench human``, ``casebench score`` and the report:
    ``context_effect`` holds people's two references over every pair (``stats.context.
    people_references``: one person's expected shift, the majority's follow) under the label
    source, and under both label sources, since the published safe_rate counts the intent as a
    21st vote that breaks a 10-10 tie towards the intent.

Degenerate tables
    When every vote in both cases of a query is the same (both shares 0, or both 1), Fisher's
    test gives p = 1 (no difference), as for any other pair of equal shares; such a pair is never
    significant.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..data import ALWAYS_UNSAFE_CATEGORIES, SAFE_THRESHOLD, Case
from .pairs import Pairing, pair_by_query  # noqa: F401  (re-exported: pairing lives in stats/pairs)
from .options import LABEL_SOURCES, LabelSource, LabelSourceError, case_safe_rate, check_label_source  # noqa: F401
from .fdr import bh_adjust
from .schema import SCHEMA_VERSION

DEFAULT_DRAWS = 1000


class HumanStatsError(ValueError):
    """The data cannot give the asked statistics (e.g. no case holds any vote)."""


# --------------------------------------------------------------------------------------------
# Labels


def votes_majority_safe(case: Case) -> bool | None:
    """The label from the case's own votes alone: safe when strictly more than half say safe.

    A tie (as many safe as unsafe votes, possible with an even count) is **unsafe**, the same
    rule as the published ``safe_rate > 0.5`` (0.5 is unsafe). Unlike the published label, no
    intent vote is added and no category override is applied: this is what the annotators said.
    Returns None for a case with no votes (there is no majority to read).
    """
    n = len(case.votes)
    if n == 0:
        return None
    return 2 * case.votes_safe > n


def label_safe(case: Case, source: LabelSource = "published") -> bool | None:
    """The human label of a case from the chosen source.

    ``published``: the published rule (safe_rate over the votes plus the intent vote, > 0.5,
    with the always-unsafe category override), i.e. ``case.human_safe``.
    ``votes``: the majority of the votes alone (a tie is unsafe), with the always-unsafe
    category override kept, since it is a rule of the benchmark, not a vote; this is what
    ``casebench score --label-source votes`` scores against (``Case.votes_safe_rate``). None
    when the case has no votes.
    """
    rate = case_safe_rate(case, source)  # LabelSourceError (a ValueError) for an unknown source
    return None if math.isnan(rate) else rate > SAFE_THRESHOLD


# --------------------------------------------------------------------------------------------
# Per-case vote table and pairing


@dataclass(frozen=True)
class VoteTable:
    """The per-case vote counts the statistics work on (cases with at least one vote)."""

    cases: tuple[Case, ...]
    safe: np.ndarray  # safe votes per case
    n: np.ndarray  # votes per case
    intended_safe: np.ndarray  # bool per case

    @classmethod
    def from_cases(cls, cases: Sequence[Case]) -> "VoteTable":
        cs = tuple(cases)
        return cls(
            cases=cs,
            safe=np.array([c.votes_safe for c in cs], dtype=np.int64),
            n=np.array([len(c.votes) for c in cs], dtype=np.int64),
            intended_safe=np.array([c.intended_safe for c in cs], dtype=bool),
        )

    @property
    def share(self) -> np.ndarray:
        return np.asarray(self.safe / self.n)

    def where(self, mask: np.ndarray) -> "VoteTable":
        idx = np.flatnonzero(mask)
        return VoteTable(
            cases=tuple(self.cases[i] for i in idx),
            safe=self.safe[idx],
            n=self.n[idx],
            intended_safe=self.intended_safe[idx],
        )


# --------------------------------------------------------------------------------------------
# Tests


def _num(x: Any) -> float | None:
    """A JSON-ready float (None for NaN / infinity / None)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _share_block(table: VoteTable) -> dict[str, Any]:
    votes = int(table.n.sum())
    safe = int(table.safe.sum())
    return {
        "cases": len(table.cases),
        "votes": votes,
        "safe_votes": safe,
        "share": safe / votes if votes else None,
    }


def vote_shares(table: VoteTable) -> dict[str, Any]:
    """Pooled safe-vote shares by context kind: descriptive only. Votes are clustered within
    cases and queries, so no test is made on these pools (the context effect is tested over
    queries, ``paired_tests``)."""
    s = table.where(table.intended_safe)
    u = table.where(~table.intended_safe)
    return {"safe_contexts": _share_block(s), "unsafe_contexts": _share_block(u), "all": _share_block(table)}


def _pair_differences(table: VoteTable, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per query, safe-context share - unsafe-context share of the votes alone: one correctly
    rounded division of exact integers, so equal differences are equal floats and the
    signed-rank test sees ties as ties (share_a - share_b would add rounding noise)."""
    out = []
    for ps, pu in pairs:
        na, nb = int(table.n[ps]), int(table.n[pu])
        out.append((int(table.safe[ps]) * nb - int(table.safe[pu]) * na) / (na * nb))
    return np.array(out, dtype=float)


#: above this many nonzero differences the signed-rank test uses the normal approximation (and
#: says so); at or below it, the exact sign-flip distribution (``signed_rank_exact``)
EXACT_SIGNED_RANK_MAX = 5000


def signed_rank_exact(d: np.ndarray) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test of ``d`` by the *exact* sign-flip distribution, ties
    included (zero differences dropped, as Wilcoxon's own procedure does; tied |d| get their
    average rank).

    Under the null each nonzero difference is positive or negative with probability 1/2,
    independently, so the distribution of T+ (the sum of the ranks of the positive differences)
    is the convolution of n two-point distributions {0, r_i}; with average ranks every r_i is a
    multiple of 1/2, so doubled they are integers and the distribution is an array of
    probabilities built one difference at a time (numpy, O(n x sum of ranks): about 0.01 s for a
    category's ten queries, well under a second for 450). p = min(1, 2 min(P(T+ <= t), P(T+ >=
    t))). This is what a permutation test over all 2^n sign flips computes, without drawing or
    enumerating them. Above ``EXACT_SIGNED_RANK_MAX`` nonzero differences: the normal
    approximation with the tie correction, and ``method`` says so.

    Returns ``statistic`` (min(T+, T-), as scipy reports), ``p``, ``n`` (nonzero differences)
    and ``method``; ``p`` None when every difference is zero."""
    from scipy.stats import rankdata

    d = np.asarray(d, dtype=float)
    nz = d[d != 0]
    n = int(nz.size)
    if n == 0:
        return {"statistic": None, "p": None, "n": 0, "method": "no nonzero difference"}
    ranks = rankdata(np.abs(nz))
    t_plus = float(ranks[nz > 0].sum())
    total = float(ranks.sum())
    stat = min(t_plus, total - t_plus)
    if n > EXACT_SIGNED_RANK_MAX:
        from scipy.stats import norm

        _, counts = np.unique(ranks, return_counts=True)
        var = n * (n + 1) * (2 * n + 1) / 24 - float(np.sum(counts ** 3 - counts)) / 48
        z = (t_plus - total / 2) / math.sqrt(var) if var > 0 else 0.0
        return {"statistic": stat, "p": float(min(1.0, 2 * norm.sf(abs(z)))), "n": n,
                "method": f"normal approximation with tie correction (n = {n} > {EXACT_SIGNED_RANK_MAX})"}
    r2 = np.rint(2 * ranks).astype(int)  # average ranks are multiples of 1/2
    return {"statistic": stat, "p": _two_sided(_sign_flip_distribution(r2), int(round(2 * t_plus))), "n": n,
            "method": "exact sign-flip distribution (ties by average rank)"}


def _sign_flip_distribution(r2: np.ndarray) -> np.ndarray:
    """P(2 T+ = k) for k = 0 .. sum(r2): the convolution of the two-point distributions {0, r}
    with probability 1/2 each (``signed_rank_exact``)."""
    dist = np.zeros(int(r2.sum()) + 1)
    dist[0] = 1.0
    top = 0
    for r in r2.tolist():
        new = dist[:top + r + 1] * 0.5
        new[r:] += dist[:top + 1] * 0.5
        dist[:top + r + 1] = new
        top += r
    return dist


def _two_sided(dist: np.ndarray, t2: int) -> float:
    """Two-sided p of the doubled statistic ``t2`` under the distribution ``dist``."""
    lower = float(dist[:t2 + 1].sum())
    upper = float(dist[t2:].sum())
    return float(min(1.0, 2 * min(lower, upper)))


def _wilcoxon(d: np.ndarray) -> tuple[float | None, float | None]:
    """The two-sided Wilcoxon signed-rank test of ``d`` (``signed_rank_exact``: exact, zero
    differences dropped); None, None when every difference is zero."""
    res = signed_rank_exact(d)
    return _num(res["statistic"]), res["p"]


def fisher_exact_p(safe1: int, n1: int, safe2: int, n2: int) -> float:
    """Fisher's exact test (two-sided, scipy) of the 2x2 table of safe and unsafe votes in two
    cases: exact at any count, so it holds where the z-test's normal approximation does not (20
    votes a case, shares near 0 or 1)."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[safe1, n1 - safe1], [safe2, n2 - safe2]]).pvalue)


def category_effects(table: VoteTable, pairing: Pairing,
                     alpha: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per category: shares by context kind (descriptive), and the Wilcoxon signed-rank test of
    its queries' per-query differences (paired over queries: votes cluster within cases and
    queries), Benjamini-Hochberg adjusted over the tested categories."""
    cats = sorted({c.category for c in table.cases})
    cat_arr = np.array([c.category for c in table.cases], dtype=object)
    rows: list[dict[str, Any]] = []
    for cat in cats:
        sub = table.where(cat_arr == cat)
        s = sub.where(sub.intended_safe)
        u = sub.where(~sub.intended_safe)
        bs, bu = _share_block(s), _share_block(u)
        pairs = [(a, b) for a, b in pairing.pairs if table.cases[a].category == cat]
        d = _pair_differences(table, pairs)
        stat, p = _wilcoxon(d)
        rows.append({
            "category": cat,
            "cases_safe_contexts": bs["cases"],
            "cases_unsafe_contexts": bu["cases"],
            "votes_safe_contexts": bs["votes"],
            "votes_unsafe_contexts": bu["votes"],
            "share_safe_contexts": bs["share"],
            "share_unsafe_contexts": bu["share"],
            "pairs": len(pairs),
            "mean_difference": float(d.mean()) if len(d) else None,
            "statistic": stat,
            "p": p,
            "p_adjusted": None,
            "significant": False,
        })
    tested = [r for r in rows if r["p"] is not None]
    if tested:
        p_adj, reject = bh_adjust([r["p"] for r in tested], alpha)
        for r, rej, pa in zip(tested, reject.tolist(), p_adj.tolist()):
            r["p_adjusted"] = float(pa)
            r["significant"] = bool(rej)
    summary = {
        "count": sum(r["significant"] for r in rows),
        "of": len(tested),
        "alpha": alpha,
        "test": "Wilcoxon signed-rank over the category's queries (per-query safe-context share - unsafe-context "
                "share of the votes alone), two-sided, zero differences dropped, exact sign-flip distribution "
                "(ties by average rank)",
        "adjustment": "Benjamini-Hochberg over the tested categories (one family: the table of categories)",
    }
    return rows, summary


def paired_tests(
    table: VoteTable, pairing: Pairing, alpha: float, per_query: bool = True,
) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """Wilcoxon signed-rank over queries (exact), and Fisher's exact test within each query's two
    contexts, Benjamini-Hochberg adjusted over every query (one family: the table of queries);
    ``per_query=False``: the Wilcoxon test alone (no per-query rows, no count of them)."""
    share = table.share
    rows: list[dict[str, Any]] = []
    d_arr = _pair_differences(table, pairing.pairs)
    for (ps, pu), d in zip(pairing.pairs if per_query else [], d_arr.tolist()):
        cs, cu = table.cases[ps], table.cases[pu]
        # within one query: the two cases' annotators are independent, no vote pooled across cases
        p = fisher_exact_p(int(table.safe[ps]), int(table.n[ps]), int(table.safe[pu]), int(table.n[pu]))
        rows.append({
            "safe_case": cs.index,
            "unsafe_case": cu.index,
            "category": cs.category,
            "votes_safe_context": int(table.n[ps]),
            "votes_unsafe_context": int(table.n[pu]),
            "share_safe_context": float(share[ps]),
            "share_unsafe_context": float(share[pu]),
            "difference": d,
            "p": p,
            "p_adjusted": None,
            "significant": False,
        })
    if rows:
        adj, rej = bh_adjust([r["p"] for r in rows], alpha)
        for r, pa, rj in zip(rows, adj.tolist(), rej.tolist()):
            r["p_adjusted"], r["significant"] = float(pa), bool(rj)
    nonzero = int(np.count_nonzero(d_arr))
    wx = signed_rank_exact(d_arr)
    stat, pval = _num(wx["statistic"]), wx["p"]
    diffs = d_arr.tolist()
    paired = {
        "pairs": len(pairing.pairs),
        "skipped_cases": pairing.skipped_cases,
        "skipped_queries": pairing.skipped_queries,
        "nonzero_differences": nonzero,
        "mean_difference": float(d_arr.mean()) if diffs else None,
        "median_difference": float(np.median(d_arr)) if diffs else None,
        "statistic": stat,
        "p": pval,
        "method": wx["method"],
        "test": "Wilcoxon signed-rank on per-query (safe-context share - unsafe-context share) of the votes "
        f"alone, two-sided, zero differences dropped, {wx['method']}; paired over queries, "
        "so the votes' clustering within cases and queries is respected",
    }
    if not per_query:
        return paired, None, rows
    sig = [r for r in rows if r["significant"]]
    significant = {
        "count": len(sig),
        "of": len(rows),
        "alpha": alpha,
        "higher_in_safe_context": sum(r["difference"] > 0 for r in sig),
        "higher_in_unsafe_context": sum(r["difference"] < 0 for r in sig),
        "test": "Fisher's exact test between a query's two cases (safe and unsafe votes of each; their annotators "
        "are independent of each other; no case's votes are pooled with another's), two-sided",
        "adjustment": f"Benjamini-Hochberg over all {len(rows)} queries (one family), significant where the "
                      f"adjusted p <= {alpha:g}",
    }
    return paired, significant, rows


def kruskal_by_category(table: VoteTable) -> dict[str, Any]:
    """Kruskal-Wallis across categories of the per-case safe share, per context kind."""
    from scipy.stats import kruskal

    out: dict[str, Any] = {}
    for key, mask in (("safe_contexts", table.intended_safe), ("unsafe_contexts", ~table.intended_safe)):
        sub = table.where(mask)
        groups: dict[str, list[float]] = {}
        for c, sh in zip(sub.cases, sub.share):
            groups.setdefault(c.category, []).append(float(sh))
        h = p = None
        if len(groups) >= 2 and len(set(float(x) for x in sub.share)) > 1:
            res = kruskal(*groups.values())
            h, p = _num(res.statistic), _num(res.pvalue)
        out[key] = {"H": h, "p": p, "groups": len(groups), "cases": len(sub.cases)}
    out["test"] = "Kruskal-Wallis H (tie-corrected, scipy.stats.kruskal) of per-case safe share by category"
    return out


def _agreement(table: VoteTable) -> dict[str, Any]:
    import krippendorff
    from statsmodels.stats.inter_rater import fleiss_kappa

    counts = np.column_stack([table.safe, table.n - table.safe])
    out: dict[str, Any] = {"fleiss_kappa": None, "krippendorff_alpha": None, "cases": len(table.cases)}
    if not len(table.cases):
        return out
    pairable = counts[table.n >= 2]
    if not (pairable[:, 0].sum() and pairable[:, 1].sum()):
        # chance agreement is 1 when every vote is the same: both coefficients are 0/0
        out["note"] = "every vote is the same: agreement beyond chance is undefined"
        return out
    if len(set(table.n.tolist())) == 1:
        out["fleiss_kappa"] = _num(fleiss_kappa(counts, method="fleiss"))
    else:
        out["note"] = "Fleiss' kappa needs the same number of votes per case; see Krippendorff's alpha"
    out["krippendorff_alpha"] = _num(krippendorff.alpha(value_counts=pairable, level_of_measurement="nominal"))
    return out


def agreement(table: VoteTable) -> dict[str, Any]:
    """Fleiss' kappa and Krippendorff's alpha (nominal): all cases and by context kind.

    Votes are anonymous (no annotator id), so Krippendorff's alpha is computed from the per-case
    value counts, which is exactly its definition for nominal data without rater identities.
    """
    out = _agreement(table)
    out["safe_contexts"] = _agreement(table.where(table.intended_safe))
    out["unsafe_contexts"] = _agreement(table.where(~table.intended_safe))
    return out


def majority(table: VoteTable) -> dict[str, Any]:
    """Votes-only majorities by context kind, and how they differ from the published label."""
    out: dict[str, Any] = {}
    for key, mask in (("safe_contexts", table.intended_safe), ("unsafe_contexts", ~table.intended_safe)):
        sub = table.where(mask)
        twice = 2 * sub.safe
        out[key] = {
            "cases": len(sub.cases),
            "safe": int(np.sum(twice > sub.n)),
            "unsafe": int(np.sum(twice < sub.n)),
            "ties": int(np.sum(twice == sub.n)),
        }
    changes: Counter[str] = Counter()
    for c in table.cases:
        pub, vot = c.human_safe, votes_majority_safe(c)
        if pub == vot:
            continue
        changes["total"] += 1
        changes["published_safe_votes_unsafe" if pub else "published_unsafe_votes_safe"] += 1
        if c.category in ALWAYS_UNSAFE_CATEGORIES:
            changes["always_unsafe_category"] += 1
        elif 2 * c.votes_safe == len(c.votes):
            changes["tie"] += 1
        else:
            changes["other"] += 1
    keys = (
        "total", "published_safe_votes_unsafe", "published_unsafe_votes_safe",
        "tie", "always_unsafe_category", "other",
    )
    out["label_changes"] = {k: int(changes[k]) for k in keys}
    out["label_changes"]["note"] = (
        "published label (safe_rate > 0.5 over the votes plus the intent vote, always-unsafe "
        "categories unsafe) vs votes-only majority (tie = unsafe); 'tie': the votes tie and the "
        "intent vote broke it; 'always_unsafe_category': the category override decided"
    )
    return out


def labels(table: VoteTable, source: LabelSource) -> dict[str, Any]:
    """Label counts under the chosen source, and how many differ from the published labels."""
    got = [label_safe(c, source) for c in table.cases]
    changed = sum(1 for c, g in zip(table.cases, got) if g != c.human_safe)
    return {
        "source": source,
        "safe": sum(1 for g in got if g),
        "unsafe": sum(1 for g in got if g is False),
        "changed_from_published": changed,
    }


# --------------------------------------------------------------------------------------------
# How many annotators are enough


def stability(
    table: VoteTable, draws: int = DEFAULT_DRAWS, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """How often a random k-annotator majority equals the full-panel majority, k = 1, 3, 5, ...

    For each case and each draw, k of the case's own votes are drawn without replacement (the
    number of safe votes among them is hypergeometric, sampled by numpy for all cases and draws
    at once). Only cases with more than k votes count at that k, and cases whose full panel ties
    are left out (they have no majority to reproduce). ``exact`` is the expectation of the same
    quantity from the hypergeometric distribution (scipy), which the draws estimate.
    """
    from scipy.stats import hypergeom

    if draws < 1:
        raise ValueError("draws must be at least 1")
    rng = np.random.default_rng(seed)
    keep = 2 * table.safe != table.n
    s, n = table.safe[keep], table.n[keep]
    ref_safe = 2 * s > n
    max_n = int(table.n.max()) if len(table.n) else 0
    rows: list[dict[str, Any]] = []
    for k in range(1, max_n, 2):
        m = n > k
        if not m.any():
            continue
        sk, nk, rk = s[m], n[m], ref_safe[m]
        drawn = rng.hypergeometric(sk, nk - sk, k, size=(draws, len(sk)))
        agree_drawn = np.where(rk, 2 * drawn > k, 2 * drawn < k)
        # P(safe majority among k) = P(X > k/2) = sf(floor(k/2)) for X ~ Hypergeom(n, s, k)
        p_safe_major = hypergeom.sf(k // 2, nk, sk, k)
        exact = np.where(rk, p_safe_major, 1.0 - p_safe_major)
        rows.append({
            "k": k,
            "agreement": float(agree_drawn.mean()),
            "exact": float(exact.mean()),
            "cases": int(m.sum()),
        })
    settings = {
        "draws": draws,
        "seed": seed,
        "cases_excluded_ties": int((~keep).sum()),
        "reference": "majority of all of the case's votes; k votes drawn without replacement",
    }
    return rows, settings


def power_analysis(
    p1: float, p2: float, alpha: float = 0.05, power: float = 0.8, n: int | None = None
) -> dict[str, Any]:
    """Annotators per context to detect p1 vs p2, or the power ``n`` annotators per context reach.

    Two independent proportions, equal group sizes, two-sided, effect size Cohen's h
    (statsmodels ``proportion_effectsize`` and ``NormalIndPower``).
    """
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    for name, v in (("p1", p1), ("p2", p2)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be a proportion in [0, 1], got {v}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    h = float(proportion_effectsize(p1, p2))
    engine = NormalIndPower()
    out: dict[str, Any] = {"p1": p1, "p2": p2, "effect_size_h": h, "alpha": alpha}
    if n is not None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        out["n"] = int(n)
        out["power"] = float(engine.power(effect_size=h, nobs1=n, alpha=alpha, ratio=1.0))
        return out
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if h == 0.0:
        raise ValueError("p1 equals p2: there is no difference to detect, no number of annotators suffices")
    if power <= alpha:
        raise ValueError(f"power ({power}) must exceed alpha ({alpha})")

    def power_at(k: int) -> float:
        return float(engine.power(effect_size=h, nobs1=k, alpha=alpha, ratio=1.0))

    # The smallest whole number of annotators reaching the power (power rises with n): found on
    # statsmodels' power function directly, because its root finder fails for very large effects.
    hi = 1
    while power_at(hi) < power:
        hi *= 2
    lo = hi // 2  # power_at(lo) < power, or lo == 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= power else (mid, hi)
    n_int = hi
    needed: float | None = None
    if n_int > 1:
        import warnings

        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the root finder may probe nobs < 0 on its way
            needed = _num(engine.solve_power(effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=1.0))
    out.update({
        "power": power,
        "n_exact": needed,
        "n": n_int,
        "achieved_power": float(engine.power(effect_size=h, nobs1=n_int, alpha=alpha, ratio=1.0)),
    })
    return out


def design_power(
    table: VoteTable, pairing: Pairing, p1: float | None, p2: float | None, alpha: float
) -> dict[str, Any]:
    """Power the released design had for the observed overall effect, per query pair.

    Each pair is a two-proportion test between its two contexts with their own vote counts;
    the design power is the mean over pairs (one design of 20 vs 20 votes in the released data).
    """
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    out: dict[str, Any] = {"p1": p1, "p2": p2, "alpha": alpha, "effect_size_h": None,
                           "designs": [], "power": None, "annotators_for_80_percent": None}
    if p1 is None or p2 is None:
        return out
    h = float(proportion_effectsize(p1, p2))
    out["effect_size_h"] = h
    engine = NormalIndPower()
    designs = Counter((int(table.n[a]), int(table.n[b])) for a, b in pairing.pairs)
    total = 0.0
    for (na, nb), count in sorted(designs.items()):
        pw = float(engine.power(effect_size=h, nobs1=na, alpha=alpha, ratio=nb / na))
        out["designs"].append({"votes_safe_context": na, "votes_unsafe_context": nb, "pairs": count, "power": pw})
        total += pw * count
    if designs:
        out["power"] = total / sum(designs.values())
    if h != 0.0:
        out["annotators_for_80_percent"] = power_analysis(p1, p2, alpha=alpha, power=0.8)["n"]
    return out


# --------------------------------------------------------------------------------------------
# Everything


def people_context_effect(ref: dict[str, Any], paired: dict[str, Any]) -> dict[str, Any]:
    """People's context effect, the one figure ``human``, ``score`` and the report show: one
    person's expected shift and the majority's follow over every pair (``ref``:
    ``context.human_references``) under the label source, the same under the other source (so the
    intent vote's part is stated), and the test over queries (``paired``: votes alone)."""
    src = ref["label_source"]
    other = "votes" if src == "published" else "published"
    both = ref["by_label_source"]

    def pick(source: str) -> dict[str, Any]:
        return {"one_person_shift": both[source]["one_person"]["context_shift"],
                "one_person_shift_ci": both[source]["one_person"]["ci"].get("context_shift"),
                "majority_follow": both[source]["majority"]["context_follow"],
                "majority_follow_ci": both[source]["majority"]["ci"].get("context_follow")}

    pd = ref["people_differ"]
    return {
        "label_source": src,
        "pairs": ref["context_pairs"],
        "one_person": ref["one_person"],
        "majority": ref["majority"],
        "with_intent_vote": pick("published"),
        "votes_alone": pick("votes"),
        "other_label_source": other,
        "people_differ": pd,
        "raw_votes_mean_difference": paired["mean_difference"],
        "test": {"name": "Wilcoxon signed-rank over queries (votes alone; see 'paired')", "p": paired["p"],
                 "statistic": paired["statistic"], "queries": paired["pairs"]},
        "note": ("the published safe_rate counts the intent as a 21st vote: it adds 1/21 to each intended-safe "
                 "case and breaks a 10-10 tie towards the intent; "
                 f"{pd['intent_tie_break']} of the {pd['with_intent_vote']} pairs people label differently "
                 "differ only by that tie-break. raw_votes_mean_difference: the votes alone without the "
                 "child-related override (the tested differences)"),
    }


def human_stats(
    cases: Iterable[Case],
    alpha: float = 0.05,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    label_source: LabelSource = "published",
    per_query: bool = True,
) -> dict[str, Any]:
    """Every statistic of the human votes, as one JSON-ready dict (see the module docstring).
    ``per_query=False`` leaves out the per-query Fisher tests (``pairs`` empty,
    ``pairs_significant`` None): 450 exact tests a reader that shows only the summary (the
    report) does not need."""
    if not 0.0 < alpha < 1.0:
        raise HumanStatsError(f"alpha must be in (0, 1), got {alpha}")
    try:
        check_label_source(label_source)
    except LabelSourceError as e:
        raise HumanStatsError(str(e)) from None
    all_cases = list(cases)
    voted = [c for c in all_cases if c.votes]
    if not voted:
        raise HumanStatsError("no case holds any vote: there is nothing to analyse")
    table = VoteTable.from_cases(voted)
    pairing = pair_by_query(voted)

    votes = vote_shares(table)
    cats, cats_sig = category_effects(table, pairing, alpha)
    paired, pairs_sig, pair_rows = paired_tests(table, pairing, alpha, per_query)
    stab, stab_settings = stability(table, draws=draws, seed=seed)
    per_case = Counter(len(c.votes) for c in all_cases)
    from .context import human_references

    ref = human_references(voted, seed=seed, label_source=label_source)
    effect = people_context_effect(ref, paired)
    return {
        "schema_version": SCHEMA_VERSION,
        "dataset": {
            "cases": len(all_cases),
            "cases_without_votes": len(all_cases) - len(voted),
            "votes_per_case": {str(k): v for k, v in sorted(per_case.items())},
            "categories": len(cats),
            "alpha": alpha,
            "note": "votes as stored in the file ('scores'); run on the dataset file, not on "
            "exp/ outputs (whose 21st vote is the context's intent)",
        },
        "votes": votes,
        "context_effect": effect,
        "categories": cats,
        "categories_significant": cats_sig,
        "paired": paired,
        "pairs_significant": pairs_sig,
        "kruskal_wallis": kruskal_by_category(table),
        "agreement": agreement(table),
        "majority": majority(table),
        "labels": labels(table, label_source),
        "stability": stab,
        "stability_settings": stab_settings,
        "power": design_power(
            table, pairing, votes["safe_contexts"]["share"], votes["unsafe_contexts"]["share"], alpha
        ),
        "pairs": pair_rows,
        # the references every judge is shown beside (``stats.context``)
        "annotator_agreement": ref["annotator_agreement"],
        "oracle_vote_agreement": ref["oracle_vote_agreement"],
        "bce_floor": ref["bce_floor"],
        "context_shift": ref["context_shift"],
        "context_follow": ref["context_follow"],
        "references": ref,
    }
