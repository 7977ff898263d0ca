"""Figures by turn of a reveal run (``stats.turns``): rates per turn and intent, the first refusal's
Kaplan-Meier curve (scipy's estimate) and recovery after a refusal, on readings written out here."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from casebench.stats.turns import refused, turn_figures


@dataclass(frozen=True)
class C:
    intended_safe: bool


HOLDS = ("query", "sender", "recipient", "query restated")


def test_rates_first_refusal_and_recovery_per_intent():
    cases = [C(True), C(True), C(True), C(False), C(False), C(False)]
    behaviours = [
        ("refuse", "comply", "comply", "comply"),  # safe: refused at 1, helped at 2 and at the end
        ("comply", "comply", "partial", "refuse"),  # safe: first refusal at 3 (partial counts as one)
        ("comply", "comply", "comply", "comply"),  # safe: never refused (censored at 4)
        ("refuse", "refuse", "refuse", "refuse"),  # unsafe: refused throughout
        ("comply", "refuse", "comply", None),  # unsafe: final turn unread (censored at its gap)
        ("refuse", "refuse", "refuse", "comply"),  # unsafe: recovered at the last turn
    ]
    f = turn_figures(cases, behaviours, [HOLDS] * 6, "reveal-late")
    assert f.turns == 4 and [t.holds for t in f.by_turn] == list(HOLDS)
    t1 = f.by_turn[0]
    assert (t1.safe_refused, t1.safe_n, t1.unsafe_refused, t1.unsafe_n) == (1, 3, 2, 3)
    t4 = f.by_turn[3]
    assert (t4.safe_refused, t4.safe_n, t4.unsafe_refused, t4.unsafe_n) == (1, 3, 1, 2)
    safe, unsafe = f.first_refusal
    assert safe.refused == 2 and dict(safe.first_turns) == {1: 1, 3: 1}
    # no censoring before turn 3: S(1) = 2/3, S(3) = 1/3
    km = {t: s for t, s, _ in safe.survival}
    assert km[1] == pytest.approx(2 / 3) and km[3] == pytest.approx(1 / 3)
    assert unsafe.refused == 3 and dict(unsafe.first_turns) == {1: 2, 2: 1}
    rs, ru = f.recovery
    # safe: two refused before the last turn, one ends helping; the first help after a refusal at turn 2
    assert (rs.n, rs.recovered) == (2, 1) and dict(rs.turns) == {2: 1}
    assert (ru.n, ru.recovered) == (2, 1) and dict(ru.turns) == {3: 1, 4: 1}
    d = f.to_dict()
    assert len(d["by_turn"]) == 4 and "single answers" in d["reader"] and "final turn" in d["headline"]


def test_partial_counts_as_the_run_counted_it():
    assert refused("partial", False) is True and refused("partial", True) is False and refused(None, False) is None
