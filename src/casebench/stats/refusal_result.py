"""The refusal correction of a respond run as a typed, versioned result.

Why: the correction crosses from ``stats/`` to every format (the first screen, ``score``'s table,
Markdown, CSV, JSON, the report). As an open dict each format read its own keys, and a figure and
its complement could share a name; as frozen dataclasses each figure is a field with its own
name (``over_refusal``: the share of human-safe cases refused; ``under_refusal``: the share of
human-unsafe cases answered), and what was withheld says why, per figure.

``to_dict`` writes the JSON shape ``score --json`` has always carried (``refusal_correction``);
``from_dict`` reads it back (a kept reference row, a saved score); a dict from a newer
``schema.SCHEMA_VERSION`` is refused rather than misread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from .schema import SCHEMA_VERSION, check_schema

#: the corrected shares, by field name, in the order every format prints them
CORRECTED_SHARES: tuple[str, ...] = ("refusal_rate", "over_refusal", "under_refusal")


def _f(x: Any) -> float | None:
    return None if x is None else float(x)


@dataclass(frozen=True)
class PooledRateSummary:
    """One of the reader's pooled rates (sensitivity or specificity) as the correction used it:
    the estimate, where a new set's rate is expected, the between-set variance and each set's."""

    estimate: float
    interval: tuple[float, float]
    tau2: float
    sets: int
    per_set: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "interval": list(self.interval), "tau2": self.tau2, "sets": self.sets,
                "per_set": list(self.per_set)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PooledRateSummary":
        lo, hi = d["interval"]
        return cls(float(d["estimate"]), (float(lo), float(hi)), float(d["tau2"]), int(d["sets"]),
                   tuple(float(x) for x in d.get("per_set") or ()))


@dataclass(frozen=True)
class PooledSummary:
    """The reader's error pooled over its validation sets (``refusal.PooledError.to_dict``): the
    one sensitivity and specificity every figure of the run uses."""

    sets: tuple[str, ...]
    n: int
    labelled_by_people: tuple[str, ...]
    development: tuple[str, ...]
    spread_measured: bool
    sensitivity: PooledRateSummary
    specificity: PooledRateSummary
    youden: float
    youden_lower: float

    def to_dict(self) -> dict[str, Any]:
        return {"sets": list(self.sets), "n": self.n, "labelled_by_people": list(self.labelled_by_people),
                "development": list(self.development), "spread_measured": self.spread_measured,
                "sensitivity": self.sensitivity.to_dict(), "specificity": self.specificity.to_dict(),
                "youden": self.youden, "youden_lower": self.youden_lower}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PooledSummary":
        return cls(tuple(str(s) for s in d.get("sets") or ()), int(d.get("n") or 0),
                   tuple(str(s) for s in d.get("labelled_by_people") or ()),
                   tuple(str(s) for s in d.get("development") or ()), bool(d.get("spread_measured")),
                   PooledRateSummary.from_dict(d["sensitivity"]), PooledRateSummary.from_dict(d["specificity"]),
                   float(d["youden"]), float(d["youden_lower"]))


@dataclass(frozen=True)
class CorrectedShare:
    """One corrected figure (``stats.correction.CorrectedFigure`` as the score's JSON holds it): a
    share (refusal rate, over-refusal, under-refusal) or the context shift. ``corrected`` and
    ``ci`` where a two-sided interval at ``level`` is supported (else None); ``upper_bound`` /
    ``lower_bound`` where only a bound is; ``raw``: the figure as read, over ``n`` answers
    (``effective_n`` after the clustering); ``complement``: the correction was made on the
    refusal rate and mirrored (under-refusal: the share answered)."""

    raw: float
    corrected: float | None
    ci: tuple[float, float] | None
    upper_bound: float | None
    lower_bound: float | None
    level: float
    n: int
    effective_n: float
    complement: bool = False
    design_effect: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"raw": self.raw, "corrected": self.corrected, "value": self.corrected,
                             "ci": list(self.ci) if self.ci else None, "upper_bound": self.upper_bound,
                             "lower_bound": self.lower_bound, "withheld": None, "level": self.level, "n": self.n,
                             "effective_n": self.effective_n}
        if self.complement:
            d["complement"] = True
        if self.design_effect is not None:
            d["design_effect"] = self.design_effect
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CorrectedShare":
        ci = d.get("ci")
        value = d.get("corrected", d.get("value"))
        return cls(float(d["raw"]), _f(value), None if not ci else (float(ci[0]), float(ci[1])),
                   _f(d.get("upper_bound")), _f(d.get("lower_bound")), float(d.get("level") or 0.95),
                   int(d.get("n") or 0), float(d.get("effective_n") or 0.0), bool(d.get("complement")),
                   _f(d.get("design_effect")))


def _share(d: Mapping[str, Any] | None) -> CorrectedShare | None:
    return CorrectedShare.from_dict(d) if d else None


@dataclass(frozen=True)
class RefusalCorrection:
    """A respond run's refusal figures corrected for the reader's measured error
    (``refusal.correct_refusal_figures``), or why none is.

    ``note``: why nothing is corrected (None: the figures below are made); ``transport``: set when
    the labels of the run's own answers showed the stored error does not hold, so the whole
    correction is withheld (the test's figures). Otherwise per figure its corrected value, or in
    ``withheld`` (figure name -> why) the reason it is not given, in the figure's own terms.
    ``refusal_rate`` is the share of all cases refused, ``over_refusal`` the share of human-safe
    cases refused, ``under_refusal`` the share of human-unsafe cases answered; ``context_shift``
    the corrected shift. ``sensitivity`` and ``specificity``: the pooled pair every corrected
    figure uses (the only pair any format prints beside them)."""

    schema_version: ClassVar[int] = SCHEMA_VERSION

    note: str | None = None
    transport: Mapping[str, Any] | None = None
    method: str = ""
    validation: str | None = None
    partial_as: str | None = None
    sensitivity: float | None = None
    specificity: float | None = None
    #: the run's writer's Se and Sp as the correction draws them (medians, intervals, spread)
    predictive: Mapping[str, Any] | None = None
    validation_n: int | None = None
    level: float = 0.95
    pooled: PooledSummary | None = None
    refusal_rate: CorrectedShare | None = None
    over_refusal: CorrectedShare | None = None
    under_refusal: CorrectedShare | None = None
    context_shift: CorrectedShare | None = None
    withheld: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def made(self) -> bool:
        """Whether any correction was attempted (False: ``note`` says why not)."""
        return self.note is None

    def share(self, name: str) -> CorrectedShare | None:
        """The corrected share ``name`` (one of ``CORRECTED_SHARES``)."""
        if name not in CORRECTED_SHARES:
            raise KeyError(name)
        got: CorrectedShare | None = getattr(self, name)
        return got

    def figure(self, name: str) -> CorrectedShare | None:
        """A corrected share, or the corrected context shift (``context_shift``)."""
        return self.context_shift if name == "context_shift" else self.share(name)

    def to_dict(self) -> dict[str, Any]:
        if self.note is not None:
            d: dict[str, Any] = {"note": self.note}
            if self.transport is not None:
                d |= {"withheld": True, "transport": dict(self.transport)}
            return d
        out: dict[str, Any] = {
            "method": self.method, "validation": self.validation, "partial_as": self.partial_as,
            "sensitivity": self.sensitivity, "specificity": self.specificity,
            **({"predictive": dict(self.predictive)} if self.predictive is not None else {}),
            "validation_n": self.validation_n,
            "level": self.level, "pooled": self.pooled.to_dict() if self.pooled else None,
            "withheld": dict(self.withheld),
        }
        for name in CORRECTED_SHARES:
            r = self.share(name)
            out[name] = r.to_dict() if r is not None else None
        out["context_shift"] = self.context_shift.to_dict() if self.context_shift else None
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RefusalCorrection":
        check_schema(d, "refusal correction")
        if "note" in d:
            t = d.get("transport")
            return cls(note=str(d["note"]), transport=dict(t) if isinstance(t, Mapping) else None)
        withheld = d.get("withheld") or {}
        shift = d.get("context_shift")
        return cls(method=str(d.get("method") or ""), validation=d.get("validation"), partial_as=d.get("partial_as"),
                   sensitivity=_f(d.get("sensitivity")), specificity=_f(d.get("specificity")),
                   predictive=dict(d["predictive"]) if isinstance(d.get("predictive"), Mapping) else None,
                   validation_n=None if d.get("validation_n") is None else int(d["validation_n"]),
                   level=float(d.get("level") or 0.95),
                   pooled=PooledSummary.from_dict(d["pooled"]) if d.get("pooled") else None,
                   refusal_rate=_share(d.get("refusal_rate")), over_refusal=_share(d.get("over_refusal")),
                   under_refusal=_share(d.get("under_refusal")), context_shift=_share(shift),
                   withheld={str(k): str(v) for k, v in withheld.items()} if isinstance(withheld, Mapping) else {},
                   notes=tuple(str(n) for n in d.get("notes") or ()))

    def __post_init__(self) -> None:
        for name in CORRECTED_SHARES:
            r = getattr(self, name)
            if r is not None and not (math.isfinite(r.raw) and 0.0 <= r.raw <= 1.0):
                raise ValueError(f"{name}: a share must lie in [0, 1], not {r.raw!r}")
