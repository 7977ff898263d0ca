"""Which cases a run asks: all, the first N, an explicit list, or a seeded stratified subset.

The stratified subsets (``--stratified N`` cases, ``--pairs N`` whole query pairs) are
deterministic for a dataset, ``n`` and ``seed`` (the same cases on every machine), so a main job
on a CPU and one on a GPU score the same cases. They are also **nested** (selection procedure
``SELECTION_PROCEDURE``): with one seed, the dataset is put in one fixed order once (a seeded
permutation within each category, then the categories interleaved in proportion to their size),
and ``n`` takes a prefix of that order. A larger ``n`` therefore holds every case of a smaller one
and stays stratified, so a 5-pair pilot grows into a 10-pair run by asking only the new pairs
(``execute.check_resumable``), and a fresh 10-pair run selects exactly the grown run's cases.

Procedure 1 (casebench before the nested order; a run whose manifest records no procedure)
drew each ``n`` afresh, so its subsets did not nest. It is kept, unchanged, so that such a run
resumes on exactly its own cases and is never reinterpreted under the new order.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any, Sequence, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from ..data import Dataset

from .record import RunError, Selection

T = TypeVar("T")

#: the selection procedure of seeded subsets this casebench writes (recorded in the manifest):
#: 2 = nested prefixes of one seeded, stratified order; 1 = a fresh draw per size (not nested)
SELECTION_PROCEDURE = 2
#: the procedures this casebench can reproduce
PROCEDURES = (1, 2)


# --------------------------------------------------------------------------------------------
# Procedure 2: one seeded, stratified order; a selection of n is its first n items


def interleave(groups: Sequence[Sequence[T]], rng: random.Random) -> list[T]:
    """Every item of ``groups`` (each already in its own order) in one sequence whose every
    prefix is stratified: item k+1 comes from the group furthest behind its proportional share
    of k+1 items (``(k+1) * size / total - taken``), ties broken by a seeded order of the groups.
    Each group's count in any prefix is then within one item of its proportional share, and a
    prefix of the sequence is the same whatever its length (so selections nest). Exact integer
    arithmetic: the same order on every machine."""
    sizes = [len(g) for g in groups]
    total = sum(sizes)
    tie = list(range(len(groups)))
    rng.shuffle(tie)
    rank = {g: r for r, g in enumerate(tie)}
    taken = [0] * len(groups)
    out: list[T] = []
    for k in range(1, total + 1):
        best = max((g for g in range(len(groups)) if taken[g] < sizes[g]),
                   key=lambda g: (k * sizes[g] - taken[g] * total, -rank[g]))
        out.append(groups[best][taken[best]])
        taken[best] += 1
    return out


def _shuffled(items: Sequence[T], rng: random.Random) -> list[T]:
    out = sorted(items)  # type: ignore[type-var]
    rng.shuffle(out)
    return out


def _query_pairs(dataset: Sequence[Any]) -> dict[str, list[tuple[int, int]]]:
    """Per category, the (case, case) index pairs of each query asked in one safe-intent and one
    unsafe-intent context of that category (a query with other cases is never a pair)."""
    by_query: dict[str, list[Any]] = {}
    for c in dataset:
        by_query.setdefault(c.query, []).append(c)
    by_cat: dict[str, list[tuple[int, int]]] = {}
    for group in by_query.values():
        if len(group) == 2 and group[0].intended_safe != group[1].intended_safe and group[0].category == group[1].category:
            by_cat.setdefault(group[0].category, []).append((group[0].index, group[1].index))
    return by_cat


def case_order(dataset: Sequence[Any], seed: int = 0) -> list[int]:
    """Every case of ``dataset`` in the seeded, stratified order ``--stratified`` takes prefixes
    of: within each category the two intents interleaved in proportion (each a seeded
    permutation), then the categories interleaved in proportion to their size."""
    rng = random.Random(seed)
    by_cat: dict[str, dict[bool, list[int]]] = {}
    for c in dataset:
        by_cat.setdefault(c.category, {}).setdefault(bool(c.intended_safe), []).append(c.index)
    per_cat = []
    for cat in sorted(by_cat):
        intents = [_shuffled(by_cat[cat][i], rng) for i in sorted(by_cat[cat])]
        per_cat.append(interleave(intents, rng))
    return interleave(per_cat, rng)


def pair_order(dataset: Sequence[Any], seed: int = 0) -> list[tuple[int, int]]:
    """Every query pair of ``dataset`` in the seeded, stratified order ``--pairs`` takes
    prefixes of: a seeded permutation within each category, the categories interleaved in
    proportion to their number of pairs."""
    rng = random.Random(seed)
    by_cat = _query_pairs(dataset)
    return interleave([_shuffled(by_cat[k], rng) for k in sorted(by_cat)], rng)


def stratified_indices(dataset: "Sequence[Any] | Dataset", n: int, seed: int = 0, procedure: int = SELECTION_PROCEDURE) -> list[int]:
    """A seeded subset of ``n`` cases, stratified by category, then by intended safety: the first
    ``n`` of ``case_order`` (45 cases of the published dataset are one per category, 90 one per
    category x intent), in dataset order. A larger ``n`` with the same seed holds this subset."""
    cases = list(dataset)
    if not 0 < n <= len(cases):
        raise RunError(f"--stratified {n}: must be between 1 and the dataset's {len(cases)} cases")
    if procedure == 1:
        return _stratified_indices_v1(cases, n, seed)
    return sorted(case_order(cases, seed)[:n])


def stratified_pairs(dataset: "Sequence[Any] | Dataset", n: int, seed: int = 0, procedure: int = SELECTION_PROCEDURE) -> list[int]:
    """The cases of a seeded subset of ``n`` query pairs, stratified by category: both cases of
    each chosen query (its safe-intent and its unsafe-intent context), so per-pair context
    figures (``stats.pairs.pair_by_query``) have pairs to read. The first ``n`` pairs of
    ``pair_order`` (45 pairs of the published dataset are one per category, 90 cases), in dataset
    order. A larger ``n`` with the same seed holds this subset."""
    cases = list(dataset)
    total = sum(len(v) for v in _query_pairs(cases).values())
    if not 0 < n <= total:
        raise RunError(f"--pairs {n}: must be between 1 and the dataset's {total} query pairs")
    if procedure == 1:
        return _stratified_pairs_v1(cases, n, seed)
    return sorted(i for pair in pair_order(cases, seed)[:n] for i in pair)


def select_cases(dataset: "Sequence[Any] | Dataset", *, limit: int | None = None, cases: Sequence[int] | None = None,
                 stratified: int | None = None, seed: int = 0,
                 pairs: int | None = None, procedure: int = SELECTION_PROCEDURE) -> tuple[list[int], Selection]:
    """The case indices a run asks (dataset order) and how they were chosen. ``procedure``: the
    selection procedure of a seeded subset (an older run's, to reproduce its cases)."""
    chosen = [x is not None for x in (limit, cases, stratified, pairs)]
    if sum(chosen) > 1:
        raise RunError("choose one of --limit, --stratified, --pairs and an explicit case list")
    if procedure not in PROCEDURES:
        raise RunError(f"selection procedure {procedure} is not one this casebench knows ({PROCEDURES}); "
                       "a newer casebench wrote this run")
    n = len(dataset)
    if limit is not None:
        if limit < 1:
            raise RunError(f"--limit must be at least 1, got {limit}")
        return list(range(min(limit, n))), Selection(f"limit={limit}", limit=limit)
    if stratified is not None:
        return (stratified_indices(dataset, stratified, seed, procedure),
                Selection(f"stratified={stratified} seed={seed}", stratified=stratified, seed=seed,
                          procedure=procedure))
    if pairs is not None:
        return (stratified_pairs(dataset, pairs, seed, procedure),
                Selection(f"pairs={pairs} seed={seed}", seed=seed, pairs=pairs, procedure=procedure))
    if cases is not None:
        picked = sorted(dict.fromkeys(int(c) for c in cases))
        bad = [c for c in picked if not 0 <= c < n]
        if bad or not picked:
            raise RunError(f"case index {bad[0] if bad else '(none)'} is not in the dataset (0..{n - 1})")
        return picked, Selection("explicit")
    return list(range(n)), Selection("all")


def growth_refusal(old: Selection, old_cases: Sequence[int], new: Selection, new_cases: Sequence[int]) -> str | None:
    """Why a run selected by ``old`` cannot become one selected by ``new`` (None: it can grow).

    A run grows in place when the new selection is the same kind (``--limit``, ``--stratified``,
    ``--pairs``) with the same seed and procedure, is larger, and holds every case already asked:
    only the new cases are asked, the records already there stay as they are."""
    kind = old.kind
    if kind is None or kind != new.kind:
        return (f"the run's cases were chosen by {old.how!r}, the command chooses {new.how!r}; only a larger "
                "--limit, --stratified or --pairs of the same kind and seed grows a run")
    if kind != "limit" and old.seed != new.seed:
        return f"the run's cases were chosen with seed {old.seed}, the command's with seed {new.seed}"
    if kind != "limit" and not old.effective_procedure == new.effective_procedure == SELECTION_PROCEDURE:
        return (f"the run's cases were chosen by selection procedure {old.effective_procedure} (casebench "
                f"before nested selections), whose subsets of different sizes do not nest; keep --{kind} "
                f"{getattr(old, kind)} to resume it, or start a new run directory (-o) to ask "
                f"{getattr(new, kind)}")
    if getattr(new, kind) < getattr(old, kind):
        return (f"--{kind} {getattr(new, kind)} is smaller than the run's {getattr(old, kind)}; a run never "
                "shrinks (score a subset with `casebench compare --pairs N`, or start a new directory)")
    missing = sorted(set(old_cases) - set(new_cases))
    if missing:
        return f"the new selection leaves out case(s) already asked ({', '.join(map(str, missing[:5]))})"
    return None


# --------------------------------------------------------------------------------------------
# Procedure 1, kept unchanged: an earlier run resumes on exactly its cases


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


def _stratified_indices_v1(cases: Sequence[Any], n: int, seed: int) -> list[int]:
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


def _stratified_pairs_v1(cases: Sequence[Any], n: int, seed: int) -> list[int]:
    by_cat = _query_pairs(cases)
    rng = random.Random(seed)
    cats = sorted(by_cat)
    alloc = _largest_remainder([len(by_cat[k]) for k in cats], n, rng)
    chosen: list[int] = []
    for cat, k in zip(cats, alloc):
        for pair in rng.sample(sorted(by_cat[cat]), k):
            chosen.extend(pair)
    return sorted(chosen)
