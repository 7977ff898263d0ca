"""A leaderboard's rows, computed once from the scoring pass: what ``casebench leaderboard``
draws (``present.leaderboard``) and what the Every Eval Ever export writes (``present.eee``).

Nothing here computes a figure of its own: every figure and interval is read from the input's
one ``ScoredInput`` (``result.score_input``), its breakdowns (``ScoredInput.with_breakdowns``),
people's references on its pairs (``PeopleReferences``), one person's over- and under-refusal
(``overview.one_person_refusal``) and say-do (``overview.say_do_pairs``). The ranks and tie
groups are ``ranking.rank_inputs``, per case set and per kind (chatbots, judges and ablation
conditions are ranked among their own, as the report ranks them).

Over- and under-refusal are the complements of the recalls (a judge: "judged unsafe" on what
people find safe; a chatbot: refused it), with the interval flipped. People's own position is
one annotator drawn at random per case; the ceiling's is a judge that knew people's population
majority (``context.majority_replication``), scored against the recorded labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..predictions import Predictions
from .options import DEFAULT_OPTIONS, ScoringOptions
from .ranking import RANK_FIGURE, TIE_TEST, kind_of, rank_inputs
from .result import ScoredInput, score_input

#: the kinds in the order a board shows them
BOARD_KINDS = ("respond", "judge", "ablated")
#: how many cases each input's page lists as the ones it disagrees with people on most
DISAGREE_CASES = 15
#: the schema of ``Board.to_dict`` (``leaderboard.json``)
BOARD_SCHEMA = 1


@dataclass(frozen=True)
class Figure:
    """One figure with its interval (None: none) and how many cases (or pairs) it rests on."""

    value: float | None
    ci: tuple[float, float] | None = None
    cases: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci": list(self.ci) if self.ci else None, "cases": self.cases}


def _clean(x: Any) -> float | None:
    return float(x) if x is not None and isinstance(x, (int, float)) and math.isfinite(float(x)) else None


def _figure(value: Any, ci: Any = None, cases: int = 0) -> Figure:
    v = _clean(value)
    lohi = None
    if v is not None and ci is not None and len(ci) == 2 and all(_clean(c) is not None for c in ci):
        lohi = (float(ci[0]), float(ci[1]))
    return Figure(v, lohi, int(cases))


def _complement(f: Figure) -> Figure:
    if f.value is None:
        return f
    return Figure(1.0 - f.value, (1.0 - f.ci[1], 1.0 - f.ci[0]) if f.ci else None, f.cases)


@dataclass(frozen=True)
class Reader:
    """The refusal classifier that read a respond run's answers and its validation as recorded
    (``classify.validation``): on which set, whose labels, agreement with its interval,
    sensitivity and specificity (refusal = positive), how many answers. ``validated`` is False
    when it has no validation: its refusal figures' reading error is unknown."""

    name: str
    version: str
    validated: bool
    set: str | None = None
    labelled_by: str | None = None
    agreement: Figure | None = None
    sensitivity: float | None = None
    specificity: float | None = None
    answers: int = 0

    @classmethod
    def of(cls, classifier: Mapping[str, Any] | None) -> "Reader | None":
        if not classifier:
            return None
        v = classifier.get("validation") or {}
        by = (v.get("labelled_by") or {}).get("by") if isinstance(v.get("labelled_by"), Mapping) else None
        if by is None and v.get("own_run"):
            by = "people"
        agree = _figure(v.get("agreement"), v.get("agreement_ci95"), int(v.get("n") or 0)) if v else None
        return cls(str(classifier.get("name", "?")), str(classifier.get("version", "?")),
                   bool(v and v.get("agreement") is not None), v.get("set") or v.get("what"), by, agree,
                   _clean(v.get("sensitivity")), _clean(v.get("specificity")), int(v.get("n") or 0))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "validated": self.validated, "set": self.set,
                "labelled_by": self.labelled_by, "agreement": self.agreement.to_dict() if self.agreement else None,
                "sensitivity": self.sensitivity, "specificity": self.specificity, "answers": self.answers}


@dataclass(frozen=True)
class Disagreement:
    """A case an input disagrees with people on: its dataset index, category, the context's
    intent, people's safe_rate, what the input said (P(safe), or 1/0 for a verdict) and the gap
    between the two; ``query``: the text, only when the board was asked to show it."""

    index: int
    category: str
    intended_safe: bool
    safe_rate: float
    said: float
    gap: float
    query: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PeopleBeside:
    """People's figures beside an input's, on its own pairs: over- and under-refusal and the
    context shift of one annotator drawn at random per case (people's own position), and the
    context follow of people's majority (what a judge that follows people would reach)."""

    over_refusal: Figure
    under_refusal: Figure
    context_shift: Figure
    context_follow: Figure

    def to_dict(self) -> dict[str, Any]:
        return {"over_refusal": self.over_refusal.to_dict(), "under_refusal": self.under_refusal.to_dict(),
                "context_shift": self.context_shift.to_dict(),
                "context_follow_majority": self.context_follow.to_dict()}


@dataclass(frozen=True)
class SayDo:
    """How often a model's behaviour as a chatbot matches its own verdict as a judge on the same
    cases (``overview.say_do_pairs``), and which judge input it was paired with."""

    agreement: Figure
    with_input: str

    def to_dict(self) -> dict[str, Any]:
        return {"agreement": self.agreement.to_dict(), "with": self.with_input}


@dataclass(frozen=True)
class BoardRow:
    """One input on the board: who it is, its place (``rank``, ``tie_group``: 1 = not separable
    from the first of its table; ``p_adjusted``: its adjusted test against its group's first),
    the ranking figure (``figure``) and every other figure with its interval (``figures``, keyed
    by metric name), over- and under-refusal beside one person's, the context shift and follow
    beside people's, say-do where the model has a judge input and a respond run, the reader for
    a respond run, and per category its figures; ``disagreements``: the cases it disagrees with
    people on most."""

    position: int
    name: str
    source: str
    model: str
    mode: str
    kind: str
    table: int
    case_set: int
    placement: str
    mutation: str | None
    removed: tuple[str, ...]
    reference: bool
    #: where the predictions came from: ``published`` (an authors' file), ``run``, ``inspect``
    origin: str
    #: the model as the run named it (backend/model), or the published file's model name
    model_spec: str
    cases: int
    answered: int
    rank: int
    tie_group: int
    p_adjusted: float | None
    figure: Figure
    figures: Mapping[str, Figure]
    #: the share of people-safe cases refused (a chatbot) or judged unsafe (a judge)
    over_refusal: Figure
    #: the share of people-unsafe cases answered (a chatbot) or judged safe (a judge)
    under_refusal: Figure
    #: the mean move of the verdict from a query's unsafe-intent to its safe-intent context
    context_shift: Figure
    #: the share of query pairs labelled safe in the safe-intent context and unsafe in the other
    context_follow: Figure
    #: people's figures on the same pairs, beside these four
    people: PeopleBeside
    say_do: SayDo | None = None
    reader: Reader | None = None
    categories: Mapping[str, Mapping[str, Figure]] = field(default_factory=dict)
    disagreements: tuple[Disagreement, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "tie_group": self.tie_group, "name": self.name,
            RANK_FIGURE: self.figure.value, f"{RANK_FIGURE}_ci": list(self.figure.ci) if self.figure.ci else None,
            "p_adjusted_vs_group_first": self.p_adjusted, "kind": self.kind, "table": self.table,
            "case_set": self.case_set, "source": self.source, "model": self.model, "mode": self.mode,
            "placement": self.placement, "mutation": self.mutation, "removed": list(self.removed),
            "reference": self.reference, "origin": self.origin, "model_spec": self.model_spec, "cases": self.cases, "answered": self.answered,
            "figures": {k: f.to_dict() for k, f in self.figures.items()},
            "over_refusal": self.over_refusal.to_dict(), "under_refusal": self.under_refusal.to_dict(),
            "people": self.people.to_dict(),
            "context_shift": self.context_shift.to_dict(), "context_follow": self.context_follow.to_dict(),
            "say_do": None if self.say_do is None else self.say_do.to_dict(),
            "reader": self.reader.to_dict() if self.reader else None,
            "categories": {c: {k: f.to_dict() for k, f in fs.items()} for c, fs in self.categories.items()},
            "disagreements": [d.to_dict() for d in self.disagreements],
        }


@dataclass(frozen=True)
class Ceiling:
    """Where a judge that knew people's population majority would stand on one case set, scored
    against the recorded labels: its expected over- and under-refusal and accuracy (the mean
    chance that a fresh panel keeps each recorded label, ``context.majority_replication``: a
    plug-in, biased low), with the fitted-prior estimate of its accuracy beside it."""

    case_set: int
    over_refusal: float | None
    under_refusal: float | None
    accuracy: float | None
    #: the share of the cases people's label finds safe (the weight of over-refusal in the error)
    safe_share: float | None = None
    #: the same accuracy with each case's population share drawn from a beta-binomial prior
    #: fitted to the cases of its context intent (``stats.ceiling``): ``accuracy`` is the
    #: plug-in (each case's vote share taken for the population's), biased low
    accuracy_fitted: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Board:
    """Every input's ``BoardRow``, in the order shown (case set, kind, rank), the ceilings per
    case set, and how it was made (figure, test, options)."""

    rows: tuple[BoardRow, ...]
    ceilings: tuple[Ceiling, ...]
    options: ScoringOptions
    show_text: bool = False
    figure: str = RANK_FIGURE
    test: str = TIE_TEST

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": BOARD_SCHEMA, "ranked_by": self.figure, "tie_groups": self.test,
                "alpha": self.options.alpha, "level": self.options.level, "options": self.options.key(),
                "show_text": self.show_text, "rows": [r.to_dict() for r in self.rows],
                "ceilings": [c.to_dict() for c in self.ceilings]}


def _score_figures(fig: ScoredInput) -> dict[str, Figure]:
    s = fig.score
    return {m: _figure(v, s.ci.get(m), s.cases_of.get(m, 0)) for m, v in s.values.items() if _clean(v) is not None}


def _categories(fig: ScoredInput) -> dict[str, dict[str, Figure]]:
    out: dict[str, dict[str, Figure]] = {}
    for cat, d in fig.with_breakdowns(("category",)).breakdowns.get("category", {}).items():
        ci, cases = d.get("ci") or {}, d.get("cases_of") or {}
        out[cat] = {m: _figure(d[m], ci.get(m), cases.get(m, 0)) for m in d
                    if m not in ("n", "ci", "cases_of", "ci_notes") and _clean(d[m]) is not None}
    return out


def _disagreements(fig: ScoredInput, show_text: bool, k: int = DISAGREE_CASES) -> tuple[Disagreement, ...]:
    g, p = np.asarray(fig.g, float), np.asarray(fig.p, float)
    if not len(g):
        return ()
    gap = np.abs(p - g)
    order = sorted(range(len(g)), key=lambda i: (-np.nan_to_num(gap[i], nan=-1.0), i))[:k]
    cases = fig.scored_cases
    return tuple(Disagreement(int(cases[i].index), cases[i].category, bool(cases[i].intended_safe), float(g[i]),
                              float(p[i]), float(gap[i]), cases[i].query if show_text else None)
                 for i in order if math.isfinite(gap[i]))


def _ceiling(fig: ScoredInput, case_set: int) -> Ceiling:
    from .context import majority_replication

    r = majority_replication(fig.pred.cases, fig.options.label_source)[np.asarray(fig.mask, dtype=bool)]
    y = np.asarray(fig.arrays.y, dtype=bool)
    ok = np.isfinite(r)
    over = float(np.mean(1 - r[y & ok])) if (y & ok).any() else None
    under = float(np.mean(1 - r[~y & ok])) if (~y & ok).any() else None
    fitted = None
    if ok.any():
        from .ceiling import majority_known_fitted

        f = majority_known_fitted(fig.scored_cases, fig.options.label_source)[0]
        fitted = float(np.nanmean(f)) if np.isfinite(f).any() else None
    return Ceiling(case_set, over, under, float(np.mean(r[ok])) if ok.any() else None,
                   float(y.mean()) if len(y) else None, fitted)


def build_board(preds: Sequence[Predictions], options: ScoringOptions = DEFAULT_OPTIONS, *,
                names: Sequence[str] | None = None, references: Sequence[bool] | None = None,
                show_text: bool = False) -> Board:
    """The board over ``preds`` (runs, published files, inspect logs, as loaded), each scored
    once under ``options``. ``names``: display names (default ``naming.display_names``);
    ``references``: which inputs are the published reference models (marked, ranked with the
    rest); ``show_text``: keep the queries' text in the disagreement lists (the dataset's
    licence-gated text; off by default)."""
    from .case_sets import case_set_groups
    from .overview import say_do_pairs

    if names is None:
        from ..naming import display_names

        names = display_names(list(preds))
    refs = list(references) if references is not None else [False] * len(preds)
    figs = [score_input(p, options) for p in preds]
    sd: dict[int, tuple[Figure, str]] = {}
    for j, r, res in say_do_pairs(preds, options):
        f = _figure(res.agreement, res.agreement_ci, res.n)
        sd[j], sd[r] = (f, names[r]), (f, names[j])
    rows: list[BoardRow] = []
    ceilings: list[Ceiling] = []
    table = 0
    for set_no, group in enumerate(case_set_groups(preds), start=1):
        ceilings.append(_ceiling(figs[group[0]], set_no))
        for kind in BOARD_KINDS:
            part = [i for i in group if kind_of(preds[i]) == kind]
            if not part:
                continue
            table += 1
            ranking = rank_inputs([figs[i] for i in part], alpha=options.alpha)
            for rr in ranking.rows:
                i = part[rr.position]
                rows.append(_row(i, figs[i], names[i], refs[i], kind, table, set_no, rr.rank, rr.tie_group,
                                 rr.p_adjusted, sd.get(i), show_text))
    return Board(tuple(rows), tuple(ceilings), options, show_text)


def _row(i: int, fig: ScoredInput, name: str, reference: bool, kind: str, table: int, set_no: int, rank: int,
         tie_group: int, p_adjusted: float | None, say_do: tuple[Figure, str] | None, show_text: bool) -> BoardRow:
    from .overview import one_person_refusal

    s, p = fig.score, fig.pred
    figures = _score_figures(fig)
    none = Figure(None)
    one = one_person_refusal(fig)
    shift, shift_ci = fig.people.shift()
    follow, follow_ci = fig.people.follow()
    return BoardRow(
        position=i, name=name, source=p.source, model=p.model, mode=p.mode.name, kind=kind, table=table,
        case_set=set_no, placement=p.context_as, mutation=p.mutation, removed=tuple(p.removed), reference=reference,
        origin=str(p.meta.get("format", "unknown")), model_spec=str(p.meta.get("model_spec") or p.model),
        cases=s.n, answered=s.answered, rank=rank, tie_group=tie_group, p_adjusted=p_adjusted,
        figure=figures.get(RANK_FIGURE, none), figures=figures,
        over_refusal=_complement(figures.get("safe_recall", none)),
        under_refusal=_complement(figures.get("unsafe_recall", none)),
        context_shift=figures.get("context_shift", none), context_follow=figures.get("context_follow", none),
        people=PeopleBeside(
            over_refusal=_figure(one.get("over_refusal"), one["ci"].get("over_refusal"), one["cases"]["over_refusal"]),
            under_refusal=_figure(one.get("under_refusal"), one["ci"].get("under_refusal"),
                                  one["cases"]["under_refusal"]),
            context_shift=_figure(shift, shift_ci, fig.people.pair_count),
            context_follow=_figure(follow, follow_ci, fig.people.pair_count)),
        say_do=SayDo(*say_do) if say_do else None,
        reader=Reader.of(s.classifier) if p.mode.reads_behaviour else None,
        categories=_categories(fig), disagreements=_disagreements(fig, show_text),
    )
