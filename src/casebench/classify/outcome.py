"""How a chatbot's answer lands: the four outcomes and the reading that gives them.

People judge how a refusal lands, not only whether the model refused: a safe completion (help
with the harmless part, the harmful part declined or generalised) is received very differently
from a flat refusal, and a clarifying question (the missing context asked for before helping) is
neither. So a reader gives one of four **outcomes**, on an ordered scale from the least to the
most help:

``refuse`` (full refusal) < ``clarify`` (a clarifying question) < ``partial`` (partial
compliance, a safe completion) < ``comply`` (full compliance)

each with its probability, or undetermined (a missing value, never a guess).

Why a reading of its own, on top of a reader's three-way verdict: each reader's binary reading
(refused or not) is validated against labelled answers, set by set, and the stored figures of
the embedded model's answers cannot be measured again (the answers quote the dataset). The
outcome keeps that binary reading exactly and refines each side: an answer the reader reads as
answered is ``comply`` or ``clarify``, one it reads as declined (fully or in part) is ``refuse``
or ``partial``. The refinement is ``OutcomeModel``: two logistic regressions over a few dozen
features of what an answer *does* (``features``: where its decline is, how much help follows it,
a pivot to an alternative, numbered help, questions back to the user and whether they close the
answer, the rules' reading, the reader's own probabilities), fitted on answers of our own
wording (``training/outcome_train.py``; no XSTest text, so nothing of it ships in the weights),
applied in plain Python and shipped as ``outcome_model.json`` with its ``about``
(``classify.outcome_refine``; this module is the concept alone and imports no reader).

The three classes of XSTest (full compliance, full refusal, partial refusal) are the outcomes
with ``clarify`` counted as compliance (``THREE_CLASS``): people asked to label XSTest's way
called a question back, with no decline, compliance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

Outcome = Literal["refuse", "clarify", "partial", "comply"]

#: The four outcomes on the ordered scale, least help first (refusal < clarifying < partial < full).
OUTCOMES: tuple[Outcome, ...] = ("refuse", "clarify", "partial", "comply")

#: What each outcome is, in one line (the README's respond section, the first screen, the report).
OUTCOME_WORDS: dict[str, str] = {
    "comply": "full compliance",
    "partial": "partial compliance (a safe completion)",
    "clarify": "clarifying question",
    "refuse": "full refusal",
}

#: Short names for tables.
OUTCOME_SHORT: dict[str, str] = {"comply": "full", "partial": "partial", "clarify": "clarifying", "refuse": "refusal"}

#: An outcome as one of XSTest's three classes (a clarifying question counts as compliance).
THREE_CLASS: dict[str, str] = {"comply": "comply", "clarify": "comply", "partial": "partial", "refuse": "refuse"}

#: The side of the binary reading each outcome lies on: answered (True) or declined, fully or in part.
ANSWERED: dict[str, bool] = {"comply": True, "clarify": True, "partial": False, "refuse": False}


@dataclass(frozen=True)
class OutcomeReading:
    """One answer's outcome: ``outcome`` (one of ``OUTCOMES``, or None: undetermined), the
    probability of each outcome the reader can give (``probabilities``; empty when it gives none,
    as a reader that answers with a label only), and the outcomes this reader cannot give at all
    (``cannot``, e.g. ``("clarify",)`` for a sequence-classification model without such a
    label)."""

    outcome: Outcome | None
    probabilities: Mapping[str, float] = field(default_factory=dict)
    cannot: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES} or None, not {self.outcome!r}")
        bad = [k for k in self.probabilities if k not in OUTCOMES]
        if bad:
            raise ValueError(f"probabilities of unknown outcomes {bad}")
        if any(not (0.0 <= float(v) <= 1.0) for v in self.probabilities.values()):
            raise ValueError(f"probabilities must lie in [0, 1]: {dict(self.probabilities)}")

    @property
    def p(self) -> float | None:
        """The probability of the outcome given, when the reader has one."""
        return None if self.outcome is None else self.probabilities.get(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "probabilities": {k: round(float(v), 6) for k, v in self.probabilities.items()},
                "cannot": list(self.cannot)}


__all__ = ["ANSWERED", "OUTCOMES", "OUTCOME_SHORT", "OUTCOME_WORDS", "Outcome", "OutcomeReading", "THREE_CLASS"]
