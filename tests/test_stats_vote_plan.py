"""The votes-per-case planner (``stats.vote_plan``): Fisher's rejection table as scipy's test,
plans that meet their target where one vote fewer does not, an unreachable target said so, the
plan from a pilot in the app's database through ``annotate plan -o`` into ``annotate serve
--votes-per-case PLAN.json``, and the plan for CASE-Bench's own votes (read at run time)."""

from __future__ import annotations

import json
import random

import pytest
from scipy.stats import fisher_exact

from casebench.stats.vote_plan import PilotCase, PlanError, fisher_rejects, plan_votes


def pilot(n_queries: int = 40, votes: int = 12, seed: int = 0) -> list[PilotCase]:
    """Queries with both contexts; people's safe shares vary from query to query."""
    rng = random.Random(seed)
    out = []
    for q in range(n_queries):
        for safe_ctx, mean in ((True, 0.65), (False, 0.3)):
            share = min(0.98, max(0.02, rng.gauss(mean, 0.15)))
            out.append(PilotCase(sum(rng.random() < share for _ in range(votes)), votes, safe_ctx, f"q{q}"))
    return out


@pytest.mark.parametrize("k", [1, 5, 12])
def test_fisher_table_is_scipys_test(k):
    table = fisher_rejects(k, 0.05)
    for x in range(k + 1):
        for y in range(k + 1):
            assert table[x, y] == (fisher_exact([[x, k - x], [y, k - y]]).pvalue <= 0.05), (x, y)


def test_plans_meet_their_target_and_one_vote_fewer_does_not():
    p = pilot()
    width = plan_votes(p, "width", 0.3, draws=10)
    assert width.votes_per_case is not None and width.reached <= 0.3 and width.reached_p90 is not None
    assert plan_votes(p, "width", 0.3, draws=10, max_votes=width.votes_per_case - 1).votes_per_case is None
    power = plan_votes(p, "power", 0.7, draws=10)
    assert power.votes_per_case is not None and power.reached >= 0.7 and power.pairs == 40
    fewer = plan_votes(p, "power", 0.7, draws=10, max_votes=power.votes_per_case - 1)
    assert fewer.votes_per_case is None and fewer.reached < 0.7 and fewer.at_votes == power.votes_per_case - 1
    assert {f.kind for f in power.fits} == {"intended_safe", "intended_unsafe"}
    assert plan_votes(p, "power", 0.7, draws=10).to_dict() == power.to_dict()  # seeded


def test_a_plan_refuses_what_it_cannot_plan():
    with pytest.raises(PlanError, match="at least 5"):
        plan_votes(pilot()[:3], "width", 0.2)
    only_safe = [c for c in pilot() if c.intended_safe]
    with pytest.raises(PlanError, match="both its contexts"):
        plan_votes(only_safe, "power", 0.8)
    with pytest.raises(PlanError, match="width"):
        plan_votes(pilot(), "width", 1.5)


def test_the_plan_for_case_benchs_own_votes(real_data_path):
    from casebench.data import load_dataset

    ds = load_dataset(real_data_path)
    cases = [PilotCase(sum(1 for v in c.votes if v == 1), len(c.votes), c.intended_safe, c.query) for c in ds]
    plan = plan_votes(cases, "power", 0.8, draws=10)
    print("CASE-Bench, power 0.8:", plan.votes_per_case, plan.reached)
    assert plan.pilot_votes == 18000 and plan.pairs == 450
    assert plan.votes_per_case is not None and 20 < plan.votes_per_case < 80
    # its own 20 votes a case detect the context effect of fewer than 80% of its queries
    assert plan_votes(cases, "power", 0.8, draws=10, max_votes=20).reached < 0.8


@pytest.mark.slow
def test_a_pilot_in_the_app_plans_the_study(tmp_path):
    pytest.importorskip("starlette", reason="the web extra is not installed")
    from servers.annotate_server import AnnotateServer, write_dataset
    from test_annotate_app import casebench
    from test_annotate_db import records_of

    from casebench.annotate.db import Settings, Shown, VoteOutcome, VoteStore

    data = write_dataset(tmp_path / "d.json", 16, pairs=True)
    db = f"sqlite:///{tmp_path / 'pilot.db'}"
    store = VoteStore.open(db, Settings(votes_per_case=8, attention_every=1000))
    store.load_cases(records_of(data), dataset_path=str(data))
    rng = random.Random(1)
    for j in range(8):
        while isinstance(got := store.next_case(f"p{j}"), Shown):
            safe = rng.random() < (0.75 if got.record["context_intended_to_be_safe"] else 0.25)
            assert store.record_vote(f"p{j}", got.case_id, 1 if safe else 2) is VoteOutcome.RECORDED
    store.close()

    plan_file = tmp_path / "plan.json"
    got = casebench("annotate", "plan", "--db", db, "--target-power", "0.8", "--draws", "10", "-o", str(plan_file))
    assert got.returncode == 0, got.stderr
    plan = json.loads(plan_file.read_text())
    n = plan["votes_per_case"]
    assert isinstance(n, int) and plan["pilot_votes"] == 128 and plan["pairs"] == 8
    assert f"votes per case: {n}" in got.stdout and "--votes-per-case" in got.stdout
    with AnnotateServer(data, f"sqlite:///{tmp_path / 'study.db'}", "--votes-per-case", str(plan_file)) as srv:
        assert f"votes per case: {n}" in "".join(srv.banner)
        assert srv.admin()["votes_per_case"] == n
    bad = casebench("annotate", "plan", "--db", db)
    assert bad.returncode != 0 and "one target" in bad.stderr
    plan_file.write_text(json.dumps({"votes_per_case": None}))
    refused = casebench("annotate", "serve", str(data), "--db", f"sqlite:///{tmp_path / 'x.db'}",
                        "--votes-per-case", str(plan_file))
    assert refused.returncode == 2 and "votes_per_case" in refused.stderr
