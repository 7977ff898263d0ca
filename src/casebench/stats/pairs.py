"""The two contexts of each query: pairs of cases (one intended-safe, one intended-unsafe).

The data has no query id, so the two contexts of a query are paired by identical ``query`` text.
A query pairs when it has exactly one intended-safe and one intended-unsafe case; any other query
(partner missing, or more cases than two) is skipped and counted. The one pairing of casebench:
the human statistics (``human``), the per-pair context figures of every input (``context``,
through ``metrics.scoring_arrays``; the placement study reads them from the input's score), the
paired comparisons (``compare``) and the selection of whole pairs (``runs.select``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..data import Case

if TYPE_CHECKING:  # pragma: no cover
    from ..predictions import Predictions


@dataclass(frozen=True)
class Pairing:
    """The two contexts of each query, as positions among the cases paired (``pair_by_query``'s
    ``cases``: a dataset's, an input's, or the voted cases of ``human.VoteTable``)."""

    pairs: tuple[tuple[int, int], ...]  # (intended-safe position, intended-unsafe position)
    skipped_cases: int
    skipped_queries: int


def pair_by_query(cases: Sequence[Case]) -> Pairing:
    """Pair cases by identical query text: one intended-safe and one intended-unsafe each."""
    groups: dict[str, list[int]] = {}
    for pos, c in enumerate(cases):
        groups.setdefault(c.query, []).append(pos)
    pairs: list[tuple[int, int]] = []
    skipped_cases = skipped_queries = 0
    for positions in groups.values():
        safe = [p for p in positions if cases[p].intended_safe]
        unsafe = [p for p in positions if not cases[p].intended_safe]
        if len(safe) == 1 and len(unsafe) == 1:
            pairs.append((safe[0], unsafe[0]))
        else:
            skipped_queries += 1
            skipped_cases += len(positions)
    pairs.sort()
    return Pairing(tuple(pairs), skipped_cases, skipped_queries)


def pair_positions(pred: "Predictions", mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The query pairs of ``pred`` both of whose cases are answered and scored (``mask``).

    Returns their (k, 2) positions among the scored cases (safe-intent case, unsafe-intent case)
    and their (k,) places among all the pairs of ``pred``'s cases (``pair_by_query``), the
    rows a pair resample draws from."""
    pairing = pair_by_query(pred.cases)
    allp = np.array(pairing.pairs, dtype=int).reshape(-1, 2)
    ok = pred.answered & np.asarray(mask, dtype=bool)
    keep = ok[allp[:, 0]] & ok[allp[:, 1]] if len(allp) else np.zeros(0, dtype=bool)
    pos = np.cumsum(mask) - 1
    return pos[allp[keep]].reshape(-1, 2), np.flatnonzero(keep)
