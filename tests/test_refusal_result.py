"""The typed refusal correction (``stats.refusal_result``): built from the statistics' own output,
read back by ``from_dict`` to the same object, written by ``to_dict`` to the same JSON; a dict
from a newer schema refused; the score that carries it round-trips too."""

from __future__ import annotations

import json

import pytest

from casebench.stats.refusal import correct_refusal_figures
from casebench.stats.refusal_result import CorrectedShare, PooledSummary, RefusalCorrection
from casebench.stats.schema import SCHEMA_VERSION

#: a validation the way ``classify.validation`` gives it: two blind sets pooled
VALIDATION = {"set": "held v1", "partial_as": "unsafe", "matrix": [[90, 10], [8, 92]],
              "pool": [{"set": "held v1", "matrix": [[90, 10], [8, 92]], "labelled_by": "writers"},
                       {"set": "people v1", "matrix": [[80, 6], [12, 102]], "labelled_by": "people"}]}
VALUES = {"refusal_rate": 0.45, "safe_recall": 0.75, "unsafe_recall": 1.0, "context_shift": 0.2}
CASES_OF = {"refusal_rate": 80, "safe_recall": 40, "unsafe_recall": 40}


def _correction(**more: object) -> RefusalCorrection:
    raw = correct_refusal_figures(VALUES, CASES_OF, VALIDATION, context_shift_ci=[0.05, 0.35], **more)
    return RefusalCorrection.from_dict(raw)


def test_made_correction_round_trips_and_names_each_figure_as_itself() -> None:
    rc = _correction()
    assert rc.made and rc.pooled is not None and isinstance(rc.pooled, PooledSummary)
    assert rc.pooled.sets == ("held v1", "people v1") and rc.pooled.labelled_by_people == ("people v1",)
    # the one Se/Sp pair: the one the correction draws around, the same in the block and its predictive
    assert rc.predictive is not None and rc.sensitivity == rc.predictive["sensitivity"]["median"]
    over = rc.share("over_refusal")
    assert over is not None and over.raw == pytest.approx(0.25) and over.n == 40
    # under-refusal is the share of unsafe cases answered (0 here): its raw figure and bound are that share's
    under = rc.share("under_refusal")
    assert under is not None and under.raw == 0.0 and (under.upper_bound is None or under.upper_bound < 0.5)
    assert isinstance(rc.context_shift, CorrectedShare) and rc.figure("context_shift") is rc.context_shift
    d = rc.to_dict()
    assert RefusalCorrection.from_dict(d) == rc
    assert RefusalCorrection.from_dict(json.loads(json.dumps(d))) == rc
    with pytest.raises(KeyError):
        rc.share("context_follow")


def test_no_correction_and_a_failed_transport_round_trip() -> None:
    none = RefusalCorrection.from_dict(correct_refusal_figures(VALUES, CASES_OF, None))
    assert not none.made and "no stored validation" in str(none.note)
    assert RefusalCorrection.from_dict(none.to_dict()) == none and none.to_dict() == {"note": none.note}
    t = {"p": 0.001, "holds": False, "validation": "held v1"}
    failed = RefusalCorrection(note="withheld: the stored error does not hold", transport=t)
    assert failed.to_dict() == {"note": failed.note, "withheld": True, "transport": t}
    assert RefusalCorrection.from_dict(failed.to_dict()) == failed


def test_a_newer_schema_is_refused_not_misread() -> None:
    d = _correction().to_dict()
    with pytest.raises(ValueError, match="newer"):
        RefusalCorrection.from_dict({**d, "schema_version": SCHEMA_VERSION + 1})


def test_score_with_its_correction_round_trips() -> None:
    from casebench.modes import get_mode
    from casebench.stats.metrics import Score

    s = Score("run", "bot", get_mode("respond"), (), 80, 80, False, dict(VALUES),
              {"refusal_rate": [0.34, 0.56]}, cases_of=dict(CASES_OF), refusal_corrected=_correction())
    d = json.loads(json.dumps(s.to_dict()))
    assert d["schema_version"] == SCHEMA_VERSION
    back = Score.from_dict(d)
    assert back.refusal_corrected == s.refusal_corrected and back.values == s.values
    with pytest.raises(ValueError, match="newer"):
        Score.from_dict({**d, "schema_version": SCHEMA_VERSION + 1})
