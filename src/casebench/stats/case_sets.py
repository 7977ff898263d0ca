"""Whether inputs can be compared, and over which cases.

Every paired statistic (``compare``, ``diff``, the overview's matrix, the ablation and placement
studies) first has to know that its inputs are cases of one dataset and which cases each pair
shares. That check is a question about the inputs, not about any test, and several modules ask it
without comparing anything (``diff`` pairs two runs' answers, the leaderboard groups its rows by
case set), so it lives here, apart from the statistics of ``compare``.

Inputs must come from the same dataset (the content fingerprint of the cases they share, the CI
parameters an ablation removed left out) and share at least one case; otherwise ``CompareError``
says which inputs differ and how. Inputs over different subsets of one dataset are accepted: a
pair is compared over the cases both hold; ``case_set_groups`` groups inputs by the cases they
hold, so inputs over different case sets are never read as ranked together.
"""

from __future__ import annotations

import itertools
from typing import Sequence

from ..data import cases_fingerprint
from ..predictions import Predictions


class CompareError(ValueError):
    """Inputs that cannot be compared (different datasets or case sets, too few inputs)."""


def input_label(i: int) -> str:
    """A, B, ..., Z, AA, AB, ... (short names for inputs in tables)."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def check_comparable(preds: Sequence[Predictions], names: Sequence[str] | None = None,
                     pairs: Sequence[tuple[int, int]] | None = None) -> None:
    """Raise ``CompareError`` unless every pair of inputs shares cases of one dataset.

    The dataset check compares the content fingerprint of the cases two inputs share, so it
    holds between a dataset file, a run directory and a published ``exp/`` file alike; the CI
    parameters either input removed (an ablation condition) are left out of both fingerprints, so
    an ablation file whose contexts lack them pairs with its full-context file. Inputs over
    different subsets of one dataset are accepted: a pair is compared over the cases both hold
    (``case_sets`` and ``PairComparison.shared`` say how many); inputs with no case in common
    are refused. ``pairs``: only these index pairs are checked (default: every pair).
    """
    if len(preds) < 2:
        raise CompareError("comparing needs at least two inputs")
    names = list(names or [p.source for p in preds])
    problems = []
    todo = list(pairs) if pairs is not None else list(itertools.combinations(range(len(preds)), 2))
    # inputs holding exactly the first input's cases are checked against it once each (a
    # fingerprint of all their cases: the cost stays linear in the inputs); other pairs over the
    # cases they share
    ref = preds[0]
    ref_idx = tuple(int(c) for c in ref.case_indices)
    same = {i for i, p in enumerate(preds) if tuple(int(c) for c in p.case_indices) == ref_idx}
    for i in sorted(same - {0}):
        if not any(i in (x, y) and x in same and y in same for x, y in todo):
            continue
        p = preds[i]
        ignore = tuple(dict.fromkeys([*ref.removed, *p.removed]))
        fa, fb = ref.fingerprint(ignore), p.fingerprint(ignore)
        if fa != fb:
            problems.append(f"{names[0]} and {names[i]} are not from the same dataset (the content of their cases "
                            f"differs: fingerprints {fa[:12]} and {fb[:12]})")
    for i, j in todo:
        if i in same and j in same:
            continue
        a, b = preds[i], preds[j]
        common = shared_cases(a, b)
        if not common:
            problems.append(f"{names[i]} ({a.n} cases) and {names[j]} ({b.n} cases) have no case in common")
            continue
        pos_a = {int(c): k for k, c in enumerate(a.case_indices)}
        pos_b = {int(c): k for k, c in enumerate(b.case_indices)}
        ignore = tuple(dict.fromkeys([*a.removed, *b.removed]))
        fa = cases_fingerprint([a.cases[pos_a[c]] for c in common], ignore)
        fb = cases_fingerprint([b.cases[pos_b[c]] for c in common], ignore)
        if fa != fb:
            problems.append(
                f"{names[i]} and {names[j]} are not from the same dataset (the content of the {len(common)} cases "
                f"they share differs: fingerprints {fa[:12]} and {fb[:12]})")
    if problems:
        raise CompareError("cannot compare these inputs:\n  " + "\n  ".join(problems))


def shared_cases(a: Predictions, b: Predictions) -> list[int]:
    """The case indices both inputs hold, in ``a``'s order."""
    mine = {int(c) for c in b.case_indices}
    return [int(c) for c in a.case_indices if int(c) in mine]


def case_set_groups(preds: Sequence[Predictions]) -> list[list[int]]:
    """The inputs grouped by the set of cases they hold (first appearance first): inputs of one
    group can be ranked together; inputs of different groups only paired over what they share."""
    groups: dict[frozenset[int], list[int]] = {}
    for i, p in enumerate(preds):
        groups.setdefault(frozenset(int(c) for c in p.case_indices), []).append(i)
    return list(groups.values())


def comparable_groups(preds: Sequence[Predictions]) -> list[list[int]]:
    """The inputs ``compare`` accepts together: groups of inputs linked by sharing cases of the
    same content (ablated parameters left out), so inputs over subsets of one dataset fall in
    one group and inputs of another dataset in another. Inputs with identical cases are grouped
    first (one fingerprint each), then those groups are joined pairwise."""
    ignore = tuple(dict.fromkeys(n for p in preds for n in p.removed))
    same: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for i, p in enumerate(preds):
        same.setdefault((p.fingerprint(ignore), tuple(int(c) for c in p.case_indices)), []).append(i)
    groups = list(same.values())
    merged: list[list[int]] = []
    for g in groups:
        joined = [m for m in merged if _linked(preds[m[0]], preds[g[0]])]
        for m in joined:
            merged.remove(m)
        merged.append(sorted(sum(joined, []) + g))
    return sorted(merged, key=lambda g: g[0])


def _linked(a: Predictions, b: Predictions) -> bool:
    try:
        check_comparable([a, b])
    except CompareError:
        return False
    return True


def union_positions(preds: Sequence[Predictions]) -> dict[int, int]:
    """Each case index held by any input -> its position among all of them (the first input's
    order, then each new case as it appears): the cases one set of resamples draws from."""
    pos: dict[int, int] = {}
    for p in preds:
        for c in p.case_indices:
            pos.setdefault(int(c), len(pos))
    return pos
