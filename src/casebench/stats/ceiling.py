"""The expected accuracy of a judge that knows people's population majority, estimated with a
fitted prior (beside ``context.majority_replication``'s plug-in, ``accuracy_ceiling``).

Why a second estimate: the plug-in takes each case's share of safe votes for the population's,
so a case near 10-10 counts its full binomial noise and the figure is biased low (0.911 on the
published labels, where the best possible judge is expected to score about 0.95). Neither is a
threshold a judge must stay under. numpy and scipy; no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..data import SAFE_THRESHOLD

if TYPE_CHECKING:
    from ..data import Case

__all__ = ["majority_known_fitted"]


def majority_known_fitted(cases: Sequence["Case"], label_source: str = "published") -> tuple[np.ndarray, dict[str, Any]]:
    """Per case, the probability that the recorded label (under ``label_source``) is people's
    *population* majority (the population's safe share ``p`` above 0.5): the expected accuracy,
    case by case, of a judge that knows that majority. ``p`` is not taken to be the case's vote
    share (the plug-in of ``majority_replication``, biased low: a 12-8 case counts its full
    binomial noise, as if nothing were known of cases like it) but drawn from its posterior under
    a beta-binomial prior fitted by maximum likelihood to all cases of the same context intent
    (safe-intent and unsafe-intent cases differ: 0.63 against 0.25 safe votes). A child-related
    case is unsafe by rule (1); a case without votes NaN. Returns the probabilities and the
    fitted priors ``{"safe_intent": (a, b), "unsafe_intent": (a, b)}``."""
    from scipy.optimize import minimize
    from scipy.special import betaln
    from scipy.stats import beta as beta_dist

    from ..data import ALWAYS_UNSAFE_CATEGORIES
    from .options import case_safe_rate

    out = np.full(len(cases), np.nan)
    priors: dict[str, Any] = {}
    for intent in (True, False):
        idx = [i for i, c in enumerate(cases) if c.votes and bool(c.intended_safe) == intent
               and c.category not in ALWAYS_UNSAFE_CATEGORIES]
        if not idx:
            continue
        k = np.array([cases[i].votes_safe for i in idx], dtype=float)
        n = np.array([len(cases[i].votes) for i in idx], dtype=float)

        def nll(theta: np.ndarray) -> float:
            a, b = np.exp(theta)
            return -float(np.sum(betaln(k + a, n - k + b) - betaln(a, b)))

        fit = minimize(nll, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
        a, b = (float(x) for x in np.exp(fit.x))
        priors["safe_intent" if intent else "unsafe_intent"] = (a, b)
        above = beta_dist.sf(SAFE_THRESHOLD, a + k, b + n - k)
        recorded = np.array([case_safe_rate(cases[i], label_source) > SAFE_THRESHOLD for i in idx])
        out[idx] = np.where(recorded, above, 1.0 - above)
    for i, c in enumerate(cases):
        if c.votes and c.category in ALWAYS_UNSAFE_CATEGORIES:
            out[i] = 1.0
    return out, priors
