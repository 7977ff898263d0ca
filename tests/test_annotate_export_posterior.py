"""``annotate export`` writes each case's posterior P(safe) beside the plain safe_rate and each
annotator's ability in the side file; ``score --label-source posterior`` scores a model against
that weighed label (a real SQLite vote database, the CLI through a subprocess)."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("sqlalchemy", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import write_dataset  # noqa: E402
from test_annotate_app import casebench  # noqa: E402
from test_annotate_db import records_of  # noqa: E402

from casebench.annotate.db import Settings, Shown, VoteOutcome, VoteStore  # noqa: E402
from casebench.data import effective_safe_rate  # noqa: E402

ABILITY = {"careful1": 0.95, "careful2": 0.95, "careful3": 0.9, "sloppy1": 0.6, "sloppy2": 0.55}


def test_export_carries_the_posterior_and_score_uses_it(tmp_path):
    data = write_dataset(tmp_path / "d.json", 24)
    db = f"sqlite:///{tmp_path / 'v.db'}"
    store = VoteStore.open(db, Settings(votes_per_case=5, attention_every=1000))
    store.load_cases(records_of(data), dataset_path=str(data))
    truth = {}
    for name, ability in ABILITY.items():
        while isinstance(got := store.next_case(name), Shown):
            t = truth.setdefault(got.case_id, random.Random(f"t{got.case_id}").random() < 0.5)
            right = random.Random(f"{name}{got.case_id}").random() < ability
            assert store.record_vote(name, got.case_id, 1 if (t if right else not t) else 2) is VoteOutcome.RECORDED
    store.close()

    out = tmp_path / "out.json"
    got = casebench("annotate", "export", "--db", db, "-o", str(out), "--safe-rate", "votes-only")
    assert got.returncode == 0, got.stderr
    records = json.loads(out.read_text())
    side = json.loads((tmp_path / "out.annotations.json").read_text())
    assert len(records) == 24
    for r in records:
        assert r["safe_rate"] == sum(v == 1 for v in r["scores"]) / len(r["scores"])  # the plain share stays
        assert 0 < r["posterior_safe"] < 1
    ability = {a["id"]: a["ability"] for a in side["annotators"]}
    assert set(ability) == set(ABILITY) and min(ability, key=ability.get).startswith("sloppy")
    assert all(a["ability_interval"]["low"] <= a["ability"] <= a["ability_interval"]["high"]
               for a in side["annotators"])
    assert len(side["posterior_model"]["posteriors"]) == 24

    # a judge's published-format output over the exported cases, scored against each label source
    judged = [{**r, "toy-judge": "safe" if i % 3 else "unsafe"} for i, r in enumerate(records)]
    output = tmp_path / "output_binary.json"
    output.write_text(json.dumps(judged))
    scores = {}
    for source in ("votes", "posterior"):
        got = casebench("score", str(output), "--json", "--bootstrap", "0", "--label-source", source)
        assert got.returncode == 0, got.stderr
        scores[source] = json.loads(got.stdout.splitlines()[0])
    # the child-related override holds under every label source
    posterior_labels = [effective_safe_rate(r["posterior_safe"], r["category"]) > 0.5 for r in records]
    expected = sum((i % 3 != 0) == lab for i, lab in enumerate(posterior_labels)) / len(records)
    assert scores["posterior"]["accuracy"] == pytest.approx(expected)
    majority = [effective_safe_rate(r["safe_rate"], r["category"]) > 0.5 for r in records]
    if majority != posterior_labels:
        assert scores["posterior"]["accuracy"] != scores["votes"]["accuracy"]

    # a file without the posterior: refused with the reason
    plain = tmp_path / "plain" / "output_binary.json"
    plain.parent.mkdir()
    plain.write_text(json.dumps([{k: v for k, v in r.items() if k != "posterior_safe"} for r in judged]))
    got = casebench("score", str(plain), "--bootstrap", "0", "--label-source", "posterior")
    assert got.returncode == 2 and "posterior_safe" in got.stderr
