"""The one ranking of inputs: by the figure a board names (accuracy unless said), with tie groups
from paired tests, never re-ranked by another figure.

Why tie groups: on 900 cases most adjacent accuracy differences between good judges are within
sampling error, and a bare rank promises an order the data do not give. A *tie group* is the
inputs a paired, clustered test cannot separate from the first of a ranking: the leader (the
input with the best figure) is tested against every input below it with McNemar's test for
clustered matched pairs (``compare.mcnemar_clustered``, clustered by query: the two contexts of
a query are one piece of evidence), over the cases both scored; the p-values of those
comparisons are adjusted together (Benjamini-Hochberg at ``alpha``). The group runs from the
leader down to the last input before the first one the adjusted test separates from it; the
next group starts at that input, which is tested in the same way against every input below it.
So tie groups are contiguous in the ranking and group 1 holds the leader and everything tied
with it.

Why accuracy and not a switch: accuracy differences near people's ceiling are attenuated (the
recorded label is sometimes not people's population majority), not noise, and the paired test
already carries their sampling error; Brier against the vote share rewards hedging (a judge
that always says 0.5 beats every model). Brier and the ceiling are columns beside the rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..predictions import Predictions
from .result import ScoredInput

#: the figure a board ranks by unless it names another
RANK_FIGURE = "accuracy"
#: the paired test behind the tie groups, as the outputs name it
TIE_TEST = ("McNemar's test for clustered matched pairs (Durkalski et al. 2003), clustered by query, "
            "each input against its group's first over the cases both scored; Benjamini-Hochberg over "
            "each group's comparisons")


def kind_of(pred: Predictions) -> str:
    """Which kind an input is ranked among: ``respond`` (what a chatbot did), ``judge`` (what a
    model said) or ``ablated`` (a model less some CI parameters, not a competitor of the model):
    every board and table ranks each kind among its own."""
    if pred.removed:
        return "ablated"
    return "respond" if pred.mode.reads_behaviour else "judge"


@dataclass(frozen=True)
class RankedInput:
    """One input's place in a ``Ranking``.

    ``position``: the input's position among those ranked; ``rank``: 1 = best figure;
    ``tie_group``: 1 = not separable from the first input; ``leader``: the position of its
    group's first input; ``value``: its ranking figure; ``diff``: the leader's figure minus its
    own over the cases both scored (0 for the first input); ``p`` / ``p_adjusted``: the paired
    test against the leader (None for the first input, or where no case is shared); ``paired``:
    the cases the test rests on; ``separated``: whether the adjusted test separated it from the
    leader of the group above (it then leads its own group, and ``diff``, ``p`` and ``paired``
    are of that test)."""

    position: int
    rank: int
    tie_group: int
    leader: int
    value: float
    diff: float
    p: float | None
    p_adjusted: float | None
    paired: int
    separated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "rank": self.rank, "tie_group": self.tie_group, "leader": self.leader,
                "value": _num(self.value), "diff_from_leader": _num(self.diff), "p": _num(self.p),
                "p_adjusted": _num(self.p_adjusted), "paired_cases": self.paired, "separated": self.separated}


@dataclass(frozen=True)
class Ranking:
    """Inputs ranked by ``figure`` (best first), each with its tie group (``RankedInput``);
    ``rows`` are in rank order. ``test`` says how tie groups were formed."""

    figure: str
    alpha: float
    cluster: str
    rows: tuple[RankedInput, ...]
    test: str = TIE_TEST

    @property
    def order(self) -> list[int]:
        """The ranked inputs' positions, best first."""
        return [r.position for r in self.rows]

    def of(self, position: int) -> RankedInput:
        """The row of the input at ``position``."""
        return next(r for r in self.rows if r.position == position)

    @property
    def first_group(self) -> list[int]:
        """Positions of the inputs tied with the first."""
        return [r.position for r in self.rows if r.tie_group == 1]

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "alpha": self.alpha, "cluster": self.cluster, "test": self.test,
                "rows": [r.to_dict() for r in self.rows]}


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _figure(fig: ScoredInput, figure: str) -> float:
    v = fig.score.values.get(figure, float("nan"))
    return float(v) if v is not None and math.isfinite(v) else float("nan")


def _aligned(a: ScoredInput, b: ScoredInput, cluster: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correctness of ``a`` and ``b`` on the cases both scored (matched by dataset index), and
    each such case's cluster label."""
    from .bootstrap import case_clusters

    ia = {int(c): k for k, c in enumerate(a.pred.case_indices)}
    both = [(ia[int(c)], k) for k, c in enumerate(b.pred.case_indices)
            if int(c) in ia and a.scored_mask[ia[int(c)]] and b.scored_mask[k]]
    if not both:
        return np.zeros(0, bool), np.zeros(0, bool), np.zeros(0, int)
    ka = np.array([x for x, _ in both], dtype=int)
    kb = np.array([y for _, y in both], dtype=int)
    clusters = case_clusters([a.pred.cases[k] for k in ka], cluster)
    return a.correct_all[ka], b.correct_all[kb], clusters


def rank_inputs(inputs: Sequence[ScoredInput], figure: str = RANK_FIGURE, *, alpha: float | None = None,
                cluster: str = "query") -> Ranking:
    """Rank ``inputs`` by ``figure`` (a correctness figure: ``accuracy``, for judges and respond
    runs alike), best first, an undefined figure last, equal figures in the given order, with
    tie groups as the module docstring says. ``alpha``: the adjusted tests' level (default: the
    first input's ``ScoringOptions.alpha``). Raises ``ValueError`` for a figure the paired
    McNemar test does not test (it tests who is right on each case)."""
    from .fdr import bh_adjust
    from .paired_tests import mcnemar_clustered

    if figure != RANK_FIGURE:
        raise ValueError(f"tie groups come from McNemar's test of who is right on each case: rank by "
                         f"{RANK_FIGURE!r}, not {figure!r}")
    a = alpha if alpha is not None else (inputs[0].options.alpha if inputs else 0.05)
    values = [_figure(f, figure) for f in inputs]
    order = sorted(range(len(inputs)), key=lambda i: -values[i] if math.isfinite(values[i]) else math.inf)
    rows: dict[int, RankedInput] = {}
    group, start = 0, 0
    while start < len(order):
        group += 1
        lead = order[start]
        rest = order[start + 1:]
        prev = rows.get(lead)  # a later group's first keeps its test against the group above
        rows[lead] = (RankedInput(lead, start + 1, group, lead, values[lead], 0.0, None, None,
                                  int(inputs[lead].scored), False) if prev is None
                      else RankedInput(lead, start + 1, group, lead, values[lead], prev.diff, prev.p, prev.p_adjusted,
                                       prev.paired, True))
        if not math.isfinite(values[lead]):  # undefined figure: a group of its own, untested
            start += 1
            continue
        tested: list[tuple[int, float, float, int]] = []  # position, p, diff, paired
        for j in rest:
            ca, cb, cl = _aligned(inputs[lead], inputs[j], cluster)
            if not len(ca) or not math.isfinite(values[j]):
                tested.append((j, float("nan"), float("nan"), len(ca)))
                continue
            mc = mcnemar_clustered(ca, cb, cl)
            tested.append((j, float(mc["p"]), float(ca.mean() - cb.mean()), len(ca)))
        ps = [p for _, p, _, _ in tested if math.isfinite(p)]
        adjusted = iter(bh_adjust(ps, a)[0].tolist())
        ended = False
        nxt = len(order)
        for k, (j, p, d, n) in enumerate(tested, start=start + 1):
            pa = next(adjusted) if math.isfinite(p) else float("nan")
            # not separable: a test that does not reject; an untestable input separates
            sep = not (math.isfinite(pa) and pa >= a)
            if sep and not ended:
                ended, nxt = True, k
            rows[j] = RankedInput(j, k + 1, group if not ended else group + 1, lead, values[j], d,
                                  p if math.isfinite(p) else None, pa if math.isfinite(pa) else None, n, sep)
        start = nxt
    ranked = tuple(sorted(rows.values(), key=lambda r: r.rank))
    return Ranking(figure, a, cluster, ranked)
