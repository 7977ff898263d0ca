"""Benjamini-Hochberg over one family of p-values: the one home of every adjusted p-value and
significance mark (paired comparisons, the accuracy matrix, the ranking's tie groups, the human
votes' tests, sample comparisons).

scipy's ``false_discovery_control`` (the step-up adjusted p-values), not statsmodels'
``multipletests``: the same figures, and scipy.stats is loaded by every command that tests
anything, while statsmodels loads pandas (about 0.3 s) for this alone; a report loads it only
for the human votes' statistics, in its helper process (``offload``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def bh_adjust(p: Sequence[float] | np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The adjusted p-values of ``p`` (one family) and which are rejected at ``alpha``
    (adjusted p <= alpha)."""
    from scipy.stats import false_discovery_control

    arr = np.asarray(p, dtype=float)
    if not arr.size:
        return arr, np.zeros(0, dtype=bool)
    adj = np.asarray(false_discovery_control(arr, method="bh"), dtype=float)
    return adj, adj <= alpha
