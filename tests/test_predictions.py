"""``Predictions.take``: an input seen over some of its cases keeps every per-case field with its case
(the one home of ``published.restrict_to`` and ``stats.overview.on_cases``)."""

from __future__ import annotations

import numpy as np

from casebench.data import load_dataset
from casebench.predictions import Predictions, TurnReadings


def test_take_keeps_every_per_case_field_with_its_case(small_data_path):
    cases = load_dataset(small_data_path).cases[:4]
    turns = TurnReadings(tuple((f"b{i}",) for i in range(4)), tuple((f"h{i}",) for i in range(4)), "reveal-late")
    pred = Predictions("mine", "m", "respond", cases, label=[1, 0, 1, np.nan], value=[1, 0, 1, np.nan],
                       behaviour=[[f"x{i}"] for i in range(4)], outcome=[[f"o{i}"] for i in range(4)],
                       verdict_mass=[0.1, 0.2, 0.3, 0.4], turns=turns, context_as="reveal-late")
    sub = pred.take([3, 1])
    assert [c.index for c in sub.cases] == [cases[3].index, cases[1].index]
    assert np.isnan(sub.label[0]) and sub.label[1] == 0 and sub.value[1] == 0
    assert sub.behaviour == [["x3"], ["x1"]] and sub.outcome == [["o3"], ["o1"]]
    assert sub.verdict_mass is not None and sub.verdict_mass.tolist() == [0.4, 0.2]
    assert sub.turns is not None and sub.turns.behaviours == (("b3",), ("b1",)) and sub.turns.holds == (("h3",), ("h1",))
    assert sub.meta["restricted_to"] == 2 and pred.n == 4  # the input itself is unchanged
