"""The cases where two inputs disagree (``casebench diff A B``).

Two inputs over the same cases (runs or published files, as ``compare`` accepts them) disagree on
a case when both answered it and

* their verdicts differ (safe / unsafe: a judge's verdict, or for a respond run whether the
  chatbot answered), or
* both read behaviour (respond) and what the chatbot did differs (comply / partial / refuse,
  each case's most frequent reading), even where the verdicts agree (comply and partial with
  ``--partial-as safe``).

Each disagreement carries what people said: the share of safe votes among the case's votes as
cast (the published safe_rate where a case has no votes), people's label under the label source
(with the benchmark's always-unsafe categories), how far people lean (``|share - 0.5|``, 0 to 0.5: a case where people
lean hard and the inputs still differ is one where one of them is plainly wrong) and which input
agrees with people's label. Cases only one input answered are counted, not listed: a missing
answer is no verdict to disagree with.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..predictions import Predictions
from .case_sets import CompareError, check_comparable
from .options import case_safe_rate, check_label_source

#: how ``diff`` can order its rows
DIFF_SORTS: tuple[str, ...] = ("lean", "index", "category")


@dataclass
class Disagreement:
    """One case two inputs disagree on. ``a`` and ``b``: what each did (``safe`` / ``unsafe``,
    or for respond runs ``comply`` / ``partial`` / ``refuse``); ``a_value`` / ``b_value``: the
    continuous prediction (score or P(safe)) where there is one; ``people_safe_share``: the share of
    safe votes; ``lean``: ``|share - 0.5|``; ``people``: people's label; ``agrees``: ``A``, ``B`` or
    ``neither`` (both verdicts the same but behaviours differ: ``both``); ``query``: None under
    ``show_text=False``."""

    index: int
    category: str
    context: str
    a: str
    b: str
    a_value: float | None
    b_value: float | None
    people_safe_share: float
    lean: float
    people: str
    agrees: str
    query: str | None = None
    #: respond inputs: how each one's answer landed (``classify.outcome``: the most frequent
    #: outcome of the case's answers), None where not read
    a_outcome: str | None = None
    b_outcome: str | None = None

    @property
    def flat_vs_partial(self) -> str | None:
        """Which input refuses flat what the other partially helps with (``A`` or ``B``), else None."""
        pair = (self.a_outcome, self.b_outcome)
        return "A" if pair == ("refuse", "partial") else "B" if pair == ("partial", "refuse") else None


@dataclass
class DiffResult:
    """Every disagreement of two inputs, sorted (``sort``), and the counts around them."""

    a: dict[str, Any]
    b: dict[str, Any]
    shared: int
    both_answered: int
    only_one_answered: int
    what: str
    sort: str
    label_source: str
    rows: list[Disagreement] = field(default_factory=list)

    @property
    def disagree(self) -> int:
        return len(self.rows)

    @property
    def flat_vs_partial(self) -> list[Disagreement]:
        """The cases where one input refuses flat what the other partially helps with."""
        return [r for r in self.rows if r.flat_vs_partial is not None]

    def to_dict(self) -> dict[str, Any]:
        from ..jsonutil import json_safe

        return json_safe({"a": self.a, "b": self.b, "shared": self.shared, "both_answered": self.both_answered,
                          "only_one_answered": self.only_one_answered, "disagree": self.disagree,
                          "compared": self.what, "sort": self.sort, "label_source": self.label_source,
                          "flat_vs_partial": [{"case": r.index, "refuses_flat": r.flat_vs_partial}
                                              for r in self.flat_vs_partial],
                          "cases": [asdict(r) for r in self.rows]})


def _describe(p: Predictions, name: str) -> dict[str, Any]:
    return {"name": name, "source": p.source, "model": p.model, "mode": p.mode.name, "n": p.n,
            **({"state": p.state.to_dict()} if p.state is not None else {})}


def _most_frequent(per_case: list[list[str | None]] | None, pos: int, order: tuple[str, ...]) -> str | None:
    """The most frequent reading of one case's answers (ties: the first in ``order``, least help
    first, so a split reading is never called more help than it gave); None if unread."""
    if per_case is None:
        return None
    read = [b for b in per_case[pos] if b]
    if not read:
        return None
    counts = Counter(read)
    top = max(counts.values())
    return next(b for b in (*order, *sorted(counts)) if counts.get(b) == top)


def _behaviour(p: Predictions, pos: int) -> str | None:
    """A respond input's behaviour of one case (comply / partial / refuse)."""
    return _most_frequent(p.behaviour, pos, ("refuse", "partial", "comply"))


def _outcome(p: Predictions, pos: int) -> str | None:
    """A respond input's outcome of one case (``classify.outcome``)."""
    return _most_frequent(p.outcome, pos, ("refuse", "clarify", "partial", "comply"))


def _reading(p: Predictions, pos: int) -> tuple[str, str]:
    """(verdict, what is shown) of one answered case of ``p``."""
    verdict = "safe" if p.label[pos] == 1.0 else "unsafe"
    if p.mode.reads_behaviour:
        return verdict, _behaviour(p, pos) or verdict
    return verdict, verdict


def _value(p: Predictions, pos: int) -> float | None:
    if not p.is_continuous or p.mode.reads_behaviour:
        return None
    v = float(p.value[pos])
    return None if math.isnan(v) else v


def diff_inputs(a: Predictions, b: Predictions, *, sort: str = "lean", show_text: bool = True,
                label_source: str = "published") -> DiffResult:
    """The cases ``a`` and ``b`` disagree on (see the module docstring), over the cases both hold.

    ``sort``: ``lean`` (people lean hardest first, then by case index), ``index``, or ``category``
    (then lean). ``show_text``: include each case's query (False: the case index only).
    ``label_source``: people's label (``options.LABEL_SOURCES``). Raises ``CompareError`` when
    the inputs are not over cases of one dataset, ``ValueError`` for an unknown sort."""
    if sort not in DIFF_SORTS:
        raise ValueError(f"unknown sort {sort!r}; choose one of {', '.join(DIFF_SORTS)}")
    check_label_source(label_source)
    check_comparable([a, b])
    pos_b = {int(c): k for k, c in enumerate(b.case_indices)}
    both_behaviour = a.mode.reads_behaviour and b.mode.reads_behaviour
    what = "behaviours" if both_behaviour else "verdicts"
    shared = both = one = 0
    rows: list[Disagreement] = []
    for i, c in enumerate(a.cases):
        j = pos_b.get(int(a.case_indices[i]))
        if j is None:
            continue
        shared += 1
        ans_a, ans_b = bool(a.answered[i]), bool(b.answered[j])
        if ans_a != ans_b:
            one += 1
        if not (ans_a and ans_b):
            continue
        both += 1
        (va, sa), (vb, sb) = _reading(a, i), _reading(b, j)
        oa, ob = (_outcome(a, i), _outcome(b, j)) if both_behaviour else (None, None)
        if va == vb and not (both_behaviour and (sa != sb or oa != ob)):
            continue
        # the votes as cast (the always-unsafe categories' override is a rule, not a vote: it
        # decides people's label below, not their share)
        share = c.votes_safe / len(c.votes) if c.votes else float(c.safe_rate)
        people_safe = case_safe_rate(c, label_source) > 0.5
        people = "safe" if people_safe else "unsafe"
        agrees = ("both" if va == vb else "A" if va == people else "B" if vb == people else "neither")
        rows.append(Disagreement(int(c.index), c.category, "safe" if c.intended_safe else "unsafe", sa, sb,
                                 _value(a, i), _value(b, j), float(share),
                                 float(abs(share - 0.5)) if not math.isnan(share) else float("nan"),
                                 people, agrees, c.query if show_text else None, oa, ob))
    key = {"lean": lambda r: (-np.nan_to_num(r.lean, nan=-1.0), r.index),
           "index": lambda r: (r.index,),
           "category": lambda r: (r.category, -np.nan_to_num(r.lean, nan=-1.0), r.index)}[sort]
    rows.sort(key=key)
    from ..naming import display_names

    na, nb = display_names([a, b])
    return DiffResult(_describe(a, na), _describe(b, nb), shared, both, one, what, sort, label_source, rows)


def diff_table_rows(res: DiffResult) -> tuple[list[str], list[list[Any]]]:
    """The columns and rows of a diff (the CSV and the text table share them)."""
    values = any(r.a_value is not None or r.b_value is not None for r in res.rows)
    outcomes = any(r.a_outcome is not None or r.b_outcome is not None for r in res.rows)
    head = ["case", "category", "context", "A", "B", *(["A_value", "B_value"] if values else []),
            *(["A_outcome", "B_outcome", "flat_vs_partial"] if outcomes else []),
            "people_safe_share", "lean", "people", "agrees"]
    show_text = any(r.query is not None for r in res.rows)
    if show_text:
        head.append("query")
    rows = []
    for r in res.rows:
        row: list[Any] = [r.index, r.category, r.context, r.a, r.b, *([r.a_value, r.b_value] if values else []),
                          *([r.a_outcome, r.b_outcome, r.flat_vs_partial or ""] if outcomes else []),
                          r.people_safe_share, r.lean, r.people, r.agrees]
        if show_text:
            row.append(r.query)
        rows.append(row)
    return head, rows


__all__ = ["DIFF_SORTS", "Disagreement", "DiffResult", "diff_inputs", "diff_table_rows", "CompareError"]
