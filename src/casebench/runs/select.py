"""Which cases a run asks: all, the first N, an explicit list, or a seeded stratified subset.

The stratified subset is deterministic for a dataset, ``n`` and ``seed`` (the same cases on every
machine), so a main job on a CPU and one on a GPU score the same cases.
"""

from __future__ import annotations

import math
import random
from typing import Any, Sequence

from .record import RunError, Selection


def _largest_remainder(sizes: Sequence[int], n: int, rng: random.Random) -> list[int]:
    """Split ``n`` across groups proportionally to ``sizes`` (Hamilton's method); ties in the
    remainders are broken at random (seeded), and no group gets more than its size."""
    total = sum(sizes)
    quotas = [n * s / total for s in sizes]
    alloc = [min(int(math.floor(q)), s) for q, s in zip(quotas, sizes)]
    order = sorted(range(len(sizes)), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), rng.random()))
    left = n - sum(alloc)
    while left > 0:
        progressed = False
        for i in order:
            if left and alloc[i] < sizes[i]:
                alloc[i] += 1
                left -= 1
                progressed = True
        if not progressed:  # pragma: no cover - n <= total makes this impossible
            break
    return alloc


def stratified_indices(dataset: Sequence[Any], n: int, seed: int = 0) -> list[int]:
    """A seeded subset of ``n`` cases, stratified by category, then by intended safety.

    ``n`` is split across categories in proportion to their size (so 45 cases of the published
    dataset are one per category, 90 are one per category x intent), then within each category
    across the two intents, then drawn at random within each stratum. Deterministic for a given
    dataset, ``n`` and ``seed``; the indices come back in dataset order.
    """
    cases = list(dataset)
    if not 0 < n <= len(cases):
        raise RunError(f"--stratified {n}: must be between 1 and the dataset's {len(cases)} cases")
    rng = random.Random(seed)
    by_cat: dict[str, dict[bool, list[int]]] = {}
    for c in cases:
        by_cat.setdefault(c.category, {}).setdefault(bool(c.intended_safe), []).append(c.index)
    cats = sorted(by_cat)
    cat_alloc = _largest_remainder([sum(len(v) for v in by_cat[k].values()) for k in cats], n, rng)
    chosen: list[int] = []
    for cat, k in zip(cats, cat_alloc):
        if not k:
            continue
        intents = sorted(by_cat[cat])
        alloc = _largest_remainder([len(by_cat[cat][i]) for i in intents], k, rng)
        for intent, m in zip(intents, alloc):
            if m:
                chosen.extend(rng.sample(by_cat[cat][intent], m))
    return sorted(chosen)


def stratified_pairs(dataset: Sequence[Any], n: int, seed: int = 0) -> list[int]:
    """The cases of a seeded subset of ``n`` query pairs, stratified by category: both cases of
    each chosen query (its safe-intent and its unsafe-intent context), so per-pair context
    figures (``stats.pairs.pair_by_query``) have pairs to read. ``n`` is split across
    categories in proportion to their number of pairs (45 pairs of the published dataset are one
    per category, 90 cases); a query with other than one case of each intent is never chosen.
    Deterministic for a dataset, ``n`` and ``seed``; the indices come back in dataset order."""
    cases = list(dataset)
    by_query: dict[str, list[Any]] = {}
    for c in cases:
        by_query.setdefault(c.query, []).append(c)
    by_cat: dict[str, list[tuple[int, int]]] = {}
    for group in by_query.values():
        if len(group) == 2 and group[0].intended_safe != group[1].intended_safe and group[0].category == group[1].category:
            by_cat.setdefault(group[0].category, []).append((group[0].index, group[1].index))
    total = sum(len(v) for v in by_cat.values())
    if not 0 < n <= total:
        raise RunError(f"--pairs {n}: must be between 1 and the dataset's {total} query pairs")
    rng = random.Random(seed)
    cats = sorted(by_cat)
    alloc = _largest_remainder([len(by_cat[k]) for k in cats], n, rng)
    chosen: list[int] = []
    for cat, k in zip(cats, alloc):
        for pair in rng.sample(sorted(by_cat[cat]), k):
            chosen.extend(pair)
    return sorted(chosen)


def select_cases(dataset: Sequence[Any], *, limit: int | None = None, cases: Sequence[int] | None = None,
                 stratified: int | None = None, seed: int = 0,
                 pairs: int | None = None) -> tuple[list[int], Selection]:
    """The case indices a run asks (dataset order) and how they were chosen."""
    chosen = [x is not None for x in (limit, cases, stratified, pairs)]
    if sum(chosen) > 1:
        raise RunError("choose one of --limit, --stratified, --pairs and an explicit case list")
    n = len(dataset)
    if limit is not None:
        if limit < 1:
            raise RunError(f"--limit must be at least 1, got {limit}")
        return list(range(min(limit, n))), Selection(f"limit={limit}", limit=limit)
    if stratified is not None:
        return (stratified_indices(dataset, stratified, seed),
                Selection(f"stratified={stratified} seed={seed}", stratified=stratified, seed=seed))
    if pairs is not None:
        return (stratified_pairs(dataset, pairs, seed),
                Selection(f"pairs={pairs} seed={seed}", seed=seed, pairs=pairs))
    if cases is not None:
        picked = sorted(dict.fromkeys(int(c) for c in cases))
        bad = [c for c in picked if not 0 <= c < n]
        if bad or not picked:
            raise RunError(f"case index {bad[0] if bad else '(none)'} is not in the dataset (0..{n - 1})")
        return picked, Selection("explicit")
    return list(range(n)), Selection("all")
