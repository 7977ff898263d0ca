"""The typed blocks that leave ``stats/`` round-trip through ``to_dict``/``from_dict`` and JSON:
a comparison (``compare --json``), people's references of an input. (The refusal correction and
the score: ``test_refusal_result``.)"""

from __future__ import annotations

import json

import pytest

from casebench.loader import load_predictions
from casebench.session import scoring_session
from casebench.stats.compare import Comparison, MetricDiff, compare
from casebench.stats.options import ScoringOptions
from casebench.stats.result import PeopleReferences, score_input
from casebench.stats.schema import SCHEMA_VERSION

OPTS = ScoringOptions(n_boot=50)


def _json(d: object) -> object:
    return json.loads(json.dumps(d))


def test_comparison_round_trips(exp_dir) -> None:
    a = load_predictions(exp_dir / "safety_gpt-4o" / "output_binary.json")
    b = load_predictions(exp_dir / "safety_gpt-4o" / "output_score.json")
    c = compare([a, b], OPTS)
    d = _json(c.to_dict())
    assert d["schema_version"] == SCHEMA_VERSION
    back = Comparison.from_dict(d)
    assert _json(back.to_dict()) == d
    (pair,) = back.pairs
    assert (pair.a, pair.b) == (0, 1) and isinstance(pair.metrics["accuracy"], MetricDiff)
    assert pair.metrics["accuracy"].diff == pytest.approx(c.pairs[0].metrics["accuracy"].diff)
    with pytest.raises(ValueError, match="newer"):
        Comparison.from_dict({**d, "schema_version": SCHEMA_VERSION + 1})


def test_people_references_round_trip(exp_dir) -> None:
    pred = load_predictions(exp_dir / "safety_gpt-4o" / "output_binary.json")
    with scoring_session():
        people = score_input(pred, OPTS).people
    assert people.pairs is not None and people.cases is not None
    d = _json(people.to_dict())
    back = PeopleReferences.from_dict(d)
    assert back.pair_count == people.pair_count and back.follow()[0] == pytest.approx(people.follow()[0])
    assert _json(back.to_dict()) == d
    assert PeopleReferences.from_dict(_json(PeopleReferences().to_dict())) == PeopleReferences()
