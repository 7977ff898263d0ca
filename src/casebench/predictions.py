"""Per-case predictions of one run or one published output file.

This is the hand-over point between producing answers (runs, published files) and judging them
(metrics, compare, report): whatever produced them, predictions are arrays aligned with a list of
cases. Missing answers stay missing (NaN); only paper-compatible scoring fills them, as the
published script did.

Verdict mass (prob mode): the probability the model put on the verdict words at all (safe plus
unsafe, before P(safe) is renormalised over the two). A model that answers in the verdict format
puts nearly all of it there; one that wants to write "The ..." puts a few per cent, and its P(safe)
is renormalised from that sliver: noise, not a judgement. Below ``min_verdict_mass`` (default
``DEFAULT_MIN_VERDICT_MASS``) a case counts as not answered in default scoring (``answered``,
``low_mass``); paper-compatible scoring reads the value as the authors' script did. A scoring
command's threshold is a scoring option (``ScoringOptions.min_verdict_mass``), applied through a
view of the predictions (``at_min_verdict_mass``): loaded predictions are never changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .data import Case, cases_fingerprint
from .input_state import InputState
from .modes import Mode, get_mode

#: below this verdict mass a prob-mode case counts as missing in default scoring
#: (``--min-verdict-mass``)
DEFAULT_MIN_VERDICT_MASS = 0.5


def verdict_mass_warning(model: str, summary: Mapping[str, Any]) -> str:
    """What a median verdict mass below the threshold means, naming the model."""
    med, thr = float(summary["median"]), float(summary["threshold"])
    return (f"{model} puts a median of {100 * med:.1f}% of its first-token probability on the verdict words "
            f"({summary['below']} of {summary['known']} cases below {100 * thr:.0f}%): its P(safe) is renormalised "
            f"from that sliver, so prob-mode figures for this model measure noise, not its judgement. Default "
            f"scoring counts those cases as missing (--min-verdict-mass); use a model that answers in the verdict "
            f"format, or --mode respond to measure what this model does as the chatbot.")


@dataclass(frozen=True)
class TurnReadings:
    """What the reader read at each turn of each case's conversation (sample 0; a reveal run
    asks one conversation per case), for the figures by turn (``stats.turns``): per case, the
    behaviour (comply / partial / refuse, None: no reading) of turns 1..n, and what each user
    turn held. ``partial_as_safe``: the run counted a partial answer as answering."""

    behaviours: tuple[tuple[str | None, ...], ...]
    holds: tuple[tuple[str, ...], ...]
    placement: str
    partial_as_safe: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"placement": self.placement, "partial_as_safe": self.partial_as_safe,
                "behaviours": [list(b) for b in self.behaviours], "holds": [list(h) for h in self.holds]}



@dataclass(repr=False)
class Predictions:
    """Aggregated predictions, one per case, aligned with ``cases``.

    ``label``: 1.0 safe, 0.0 unsafe, NaN missing. ``value``: the raw continuous prediction (the
    mean 1-10 score in score mode, P(safe) in prob mode, NaN in binary mode or when missing).
    ``verdict_mass``: prob mode, the probability mass on the verdict tokens per case (NaN where
    unknown; None when the source records none, as in the published files); cases below
    ``min_verdict_mass`` are not ``answered``.

    What the predictions are of, typed: ``mode`` (the ``modes.Mode`` object; a name given is
    resolved once, here, and the name is written only where predictions go to disk or JSON),
    ``removed`` (the CI parameters left out of the contexts) and
    ``context_as`` (the context placement, ``prompts.CONTEXT_PLACEMENTS``; by default the mode's
    own, which is what a published file was asked with). For a run: ``pending`` (requests without
    a final record yet; their cases are missing) and ``behaviour`` (per case, what the refusal
    classifier read of each answer, for modes that read behaviour). ``meta``: provenance only
    (the file format, the run directory, ...), never read to score.
    """

    source: str
    model: str
    mode: Mode
    cases: list[Case]
    label: np.ndarray
    value: np.ndarray
    removed: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)
    context_as: str = ""
    pending: int = 0
    behaviour: Optional[list[list[Optional[str]]]] = None
    verdict_mass: np.ndarray | None = None
    min_verdict_mass: float = DEFAULT_MIN_VERDICT_MASS
    #: the query mutation the answers were asked under (``mutations``: SORRY-Bench's name, e.g.
    #: "caesar"); None: the queries in the dataset's wording (people voted on that wording only)
    mutation: str | None = None
    #: whether the input is whole (``input_state``): a run or inspect log says (requests not yet
    #: asked or failed, the command that resumes it); None: an input that cannot be unfinished
    #: (a published file)
    state: InputState | None = None
    #: respond runs: per case, the outcome (``classify.outcome``: refuse / clarify / partial /
    #: comply, None where not read) of each answer; None when the source records none
    outcome: Optional[list[list[Optional[str]]]] = None
    #: a live reveal run (``--context-as reveal-early/late``): what the reader read at every turn
    #: of each case's conversation (``TurnReadings``); the figures above are the final turn's
    turns: "TurnReadings | None" = None

    def __post_init__(self) -> None:
        from .prompts import check_placement

        self.label = np.asarray(self.label, dtype=float)
        self.value = np.asarray(self.value, dtype=float)
        if not (len(self.cases) == len(self.label) == len(self.value)):
            raise ValueError("cases, label and value must have the same length")
        m = self.mode = get_mode(self.mode)
        self.context_as = self.context_as or m.default_context_as
        try:
            check_placement(self.context_as)
        except ValueError as e:
            raise ValueError(f"{self.source}: {e}") from None
        if self.behaviour is not None and len(self.behaviour) != len(self.cases):
            raise ValueError(f"{self.source}: behaviour must have one entry per case")
        if self.outcome is not None and len(self.outcome) != len(self.cases):
            raise ValueError(f"{self.source}: outcome must have one entry per case")
        if self.verdict_mass is not None:
            self.verdict_mass = np.asarray(self.verdict_mass, dtype=float)
            if len(self.verdict_mass) != len(self.cases):
                raise ValueError("verdict_mass must have one value per case")
        if not 0.0 <= float(self.min_verdict_mass) <= 1.0:
            raise ValueError(f"the minimum verdict mass must be in [0, 1], got {self.min_verdict_mass!r}")

    @classmethod
    def from_values(
        cls, source: str, model: str, mode: "str | Mode", cases: Sequence[Case], values: Sequence[Any],
        removed: tuple[str, ...] = (), meta: dict | None = None, *, context_as: str = "", pending: int = 0,
        behaviour: list[list[str | None]] | None = None, verdict_mass: Sequence[float | None] | None = None,
        mutation: str | None = None, state: InputState | None = None, outcome: list[list[str | None]] | None = None,
    ) -> "Predictions":
        """Build from raw values, one per case, as the mode defines them (``modes``): e.g.
        ``"safe"``/``"unsafe"``/None in binary mode, a score or P(safe) (or None) otherwise;
        ``verdict_mass`` per case (None: unknown)."""
        m = get_mode(mode)
        mass = None if verdict_mass is None else np.array([np.nan if v is None else float(v) for v in verdict_mass])
        return cls(source, model, m, list(cases), m.labels(values), m.numeric(values), tuple(removed),
                   dict(meta or {}), context_as, pending, behaviour, mass, mutation=mutation, state=state,
                   outcome=outcome)

    @property
    def complete(self) -> bool:
        """No request is pending (always true for a published file)."""
        return self.pending == 0 and (self.state is None or self.state.complete)

    @property
    def partial(self) -> bool:
        """An unfinished input (``state`` says so): its figures rest on part of its cases."""
        return self.state is not None and not self.state.complete

    @property
    def n(self) -> int:
        return len(self.cases)

    @property
    def has_value(self) -> np.ndarray:
        """Cases with a prediction for this mode, whatever its verdict mass."""
        return self.mode.answered(self.value, self.label)

    def at_min_verdict_mass(self, threshold: float | None) -> "Predictions":
        """These predictions read at another minimum verdict mass (``ScoringOptions.min_verdict_mass``):
        ``self`` when ``threshold`` is None or already this one, else a new view sharing every
        array, so that scoring applies a threshold without changing the loaded predictions
        (``stats.result.score_input`` keeps its result by the predictions it was given and the
        options, so the view is made once per input and options)."""
        if threshold is None or float(threshold) == float(self.min_verdict_mass):
            return self
        return replace(self, min_verdict_mass=float(threshold))

    def take(self, positions: Sequence[int]) -> "Predictions":
        """This input on the cases at these positions alone, in that order: a larger input seen
        over another input's cases (``published.restrict_to``, ``stats.overview.on_cases``).
        Every per-case field goes with its case (the readings by turn of a reveal run too);
        ``meta["restricted_to"]`` says how many cases are kept."""
        keep = [int(i) for i in positions]
        idx = np.array(keep, dtype=int)
        turns = self.turns
        if turns is not None:
            turns = replace(turns, behaviours=tuple(turns.behaviours[i] for i in keep),
                            holds=tuple(turns.holds[i] for i in keep))
        return replace(
            self, cases=[self.cases[i] for i in keep], label=self.label[idx], value=self.value[idx],
            behaviour=None if self.behaviour is None else [self.behaviour[i] for i in keep],
            outcome=None if self.outcome is None else [self.outcome[i] for i in keep],
            verdict_mass=None if self.verdict_mass is None else self.verdict_mass[idx],
            meta={**self.meta, "restricted_to": len(keep)}, turns=turns,
        )

    def __repr__(self) -> str:
        """Short, so a notebook shows what these are, not every case (``cases`` holds them)."""
        pend = f", pending={self.pending}" if self.pending else ""
        return (f"Predictions({self.name!r}, source={self.source!r}, cases={self.n}, "
                f"answered={int(self.answered.sum())}{pend})")

    @property
    def low_mass(self) -> np.ndarray:
        """Cases with a prediction whose verdict mass is below ``min_verdict_mass``."""
        if self.verdict_mass is None:
            return np.zeros(self.n, dtype=bool)
        with np.errstate(invalid="ignore"):
            return self.has_value & (self.verdict_mass < self.min_verdict_mass)

    @property
    def answered(self) -> np.ndarray:
        """Cases with a usable prediction for this mode: a value, and (prob mode) a verdict mass
        not below ``min_verdict_mass`` where one is known."""
        return self.has_value & ~self.low_mass

    def verdict_mass_summary(self) -> dict[str, Any] | None:
        """The verdict mass over the cases with a value and a known mass: ``median``, ``below``
        (how many under the threshold), ``known`` (how many have a mass), ``threshold``; None
        when no case has one (text modes, published files)."""
        if self.verdict_mass is None:
            return None
        known = self.has_value & ~np.isnan(self.verdict_mass)
        if not known.any():
            return None
        masses = self.verdict_mass[known]
        return {"median": float(np.median(masses)), "below": int(self.low_mass.sum()), "known": int(known.sum()),
                "threshold": float(self.min_verdict_mass)}

    @property
    def coverage(self) -> float:
        return float(self.answered.mean()) if self.n else 0.0

    @property
    def is_continuous(self) -> bool:
        return self.mode.continuous

    @property
    def p_safe(self) -> np.ndarray:
        """P(safe) per case (NaN where missing); in label-only modes the 0/1 label itself."""
        return self.mode.p_safe(self.value, self.label)

    @property
    def human_rate(self) -> np.ndarray:
        """The human safe_rate after the child-related override."""
        return np.array([c.human_safe_rate for c in self.cases], dtype=float)

    @property
    def human_safe(self) -> np.ndarray:
        return np.array([c.human_safe for c in self.cases], dtype=bool)

    @property
    def case_indices(self) -> np.ndarray:
        return np.array([c.index for c in self.cases], dtype=int)

    @property
    def dataset_fingerprint(self) -> str:
        return cases_fingerprint(self.cases, self.removed)

    def fingerprint(self, ignore: Sequence[str] = ()) -> str:
        """The cases' fingerprint with the CI parameters ``ignore`` (and this input's own
        removals) left out: two inputs hold the same cases when their fingerprints agree with
        the union of both inputs' removals."""
        key = tuple(dict.fromkeys([*self.removed, *ignore]))
        # hashing 900 contexts is slow and a report asks for it many times: kept beside the
        # predictions (never in them; the cases are never changed once loaded)
        return _fingerprint(self, key)

    @property
    def placement_note(self) -> str:
        """``" (context as system)"`` when the context placement is not the mode's own, else ""."""
        return "" if self.context_as == self.mode.default_context_as else f" (context as {self.context_as})"

    @property
    def name(self) -> str:
        """A short display name: model, mode, placement (when not the mode's own), ablation and
        query mutation."""
        tail = f" -{','.join(self.removed)}" if self.removed else ""
        mut = f" ({self.mutation})" if self.mutation else ""
        return f"{self.model} [{self.mode}]{self.placement_note}{tail}{mut}"


def _fingerprint(pred: Predictions, ignore: tuple[str, ...]) -> str:
    """The cases fingerprint of ``pred`` less ``ignore``, hashed once per scoring session."""
    from .session import memo_by_object

    return memo_by_object("cases fingerprint", pred, ignore, lambda: cases_fingerprint(pred.cases, ignore))
