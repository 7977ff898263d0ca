"""The mutation study: does *how the query is worded* (SORRY-Bench's query mutations) move a
model's verdicts?

The inputs are one model in one mode, one run in the dataset's own wording (``base``) and one per
mutation (``mutations``: ciphers, translations, paraphrases of the query; the contexts untouched).
It is a one-factor study (``placement.analyse_factor`` over ``MUTATION``), so each wording gets the
same figures as a placement (its one scoring result, its context figures beside people's), and
each mutation is compared with the base wording alone (paired tests, Benjamini-Hochberg over the
mutations and metrics), not with every other mutation: the question is what a rewording changes.

What it adds to the machinery, and why it lives here:

* the wording consistency (``wording_consistency``): how often the model's verdict (in respond
  mode, its read behaviour: answered or refused) on a case is unchanged by the rewording, a share
  of the cases both wordings answered with a Wilson interval widened by the query clusters'
  design effect (the two contexts of a query move together);
* the notes its output carries: people voted on the base wording only, so a mutated run is
  scored against those votes and people's context figures are the base wording's.

The text of a study is ``present.study_text.format_placements``; the report's section is
``present.report_studies``'.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..naming import BASE_WORDING, mutation_of
from ..predictions import Predictions
from .options import DEFAULT_OPTIONS, ScoringOptions
from .placement import Consistency, Factor, PlacementResult, analyse_factor, placement_of

__all__ = ["MUTATION", "analyse_mutations", "wording_consistency"]


def wording_consistency(a: Predictions, base: Predictions, options: ScoringOptions = DEFAULT_OPTIONS,
                        factor_level: str = "", baseline: str = BASE_WORDING) -> Consistency:
    """How often ``a``'s verdict on a case equals ``base``'s, over the cases both answered
    (see ``Consistency``)."""
    from .bootstrap import cluster_labels, proportion_design_effect, wilson_ci

    a = a.at_min_verdict_mass(options.min_verdict_mass)
    base = base.at_min_verdict_mass(options.min_verdict_mass)
    pos = {int(c): k for k, c in enumerate(base.case_indices)}
    rows = [(k, pos[int(c)]) for k, c in enumerate(a.case_indices)
            if int(c) in pos and a.answered[k] and base.answered[pos[int(c)]]]
    if not rows:
        return Consistency(factor_level, baseline, 0, 0, 0, float("nan"), [float("nan")] * 2)
    ia, ib = np.array(rows).T
    same = (a.label[ia] == base.label[ib]).astype(float)
    labels = cluster_labels([a.cases[k].query for k in ia])
    deff = max(1.0, proportion_design_effect(same, np.ones_like(same), labels)) if not options.paper_compat else 1.0
    n, k = len(same), int(same.sum())
    n_eff = n / deff
    return Consistency(factor_level, baseline, n, int(labels.max()) + 1, k, k / n,
                       wilson_ci(k / n * n_eff, n_eff, options.level), deff)


#: the mutation study's factor: each wording against the base one, the placement held fixed
MUTATION = Factor(
    "mutation", mutation_of, (("context placement", placement_of),), baseline=BASE_WORDING,
    against_baseline=wording_consistency,
    notes=(("people", "people voted on the base wording only: every level is scored against those votes, "
                      "and people's context figures are those of the base wording"),
           ("consistency", "share of the cases both wordings answered whose verdict (respond: answered or "
                           "refused) is unchanged; Wilson interval widened by the query clusters' design "
                           "effect")))


def analyse_mutations(preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS) -> PlacementResult:
    """The mutation study (``analyse_factor`` over ``MUTATION``): the base-wording input and
    one input per mutation; each mutation's figures, its paired differences from the base
    wording (context shift and follow among them) and its wording consistency."""
    return analyse_factor(preds, MUTATION, options)
