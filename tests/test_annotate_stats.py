"""``casebench annotate stats`` on votes cast through the app's HTTP pages by simulated annotators
of known ability on cases of hidden truth (the real ``annotate serve`` on loopback, SQLite).

One study, three runs of the server over copies of one database: 20 annotators of ability 0.55 to
0.95 cast 400 votes on 60 cases; the database is copied; (a) the same crowd goes on to 600 votes
(10 a case): the model ranks the abilities like the truth, its posterior's 0.5 cut is right at
least as often as the plain majority, and no drift alarm is raised; (b) on the copy, a cohort of
10 annotators who vote against the truth casts the last 200 votes: the alarm is raised, naming
them and the latest window. Every vote is a deterministic function of (annotator, case); the
server hands out cases deterministically; the bootstrap is seeded: the test is deterministic.
"""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from scipy.stats import spearmanr  # noqa: E402

from servers.annotate_server import AnnotateServer, write_dataset  # noqa: E402
from test_annotate_app import casebench  # noqa: E402

CASES, PER_CASE = 60, 10
ABILITY = {f"p{j:02d}": 0.55 + 0.40 * j / 19 for j in range(20)}
COHORT = {f"z{j:02d}": 0.10 for j in range(10)}


def truth(case: int) -> bool:
    """The hidden latent label of a case (safe or not)."""
    return random.Random(f"truth-{case}").random() < 0.5


def votes_safe(annotator: str, ability: float, case: int) -> bool:
    """What this annotator votes on this case: the truth with probability ``ability``."""
    right = random.Random(f"{annotator}-{case}").random() < ability
    return truth(case) if right else not truth(case)


def crowd_votes(srv: AnnotateServer, crowd: dict[str, float], rounds: int) -> int:
    """Each annotator in turn opens their page and votes on the case shown, ``rounds`` times."""
    cast = 0
    for _ in range(rounds):
        for name, ability in crowd.items():
            case = srv.shown_case(name)
            if case is None:
                continue
            status, _, _ = srv.vote(name, case, "safe" if votes_safe(name, ability, case) else "unsafe")
            assert status == 303
            cast += 1
    return cast


def stats_json(db: str) -> dict:
    got = casebench("annotate", "stats", "--db", db, "--json", "--bootstrap", "200", "--seed", "3")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


@pytest.mark.slow
def test_stats_weigh_voters_and_catch_a_cohort_voting_against_the_truth(tmp_path):
    data = write_dataset(tmp_path / "d.json", CASES)
    steady, cohort = tmp_path / "steady.db", tmp_path / "cohort.db"
    common = ("--votes-per-case", str(PER_CASE), "--sqlite-sync", "normal", "--attention-every", "1000")
    with AnnotateServer(data, f"sqlite:///{steady}", *common, "--cases-per-annotator", "20") as srv:
        assert crowd_votes(srv, ABILITY, 20) == 400
    with sqlite3.connect(steady) as src, sqlite3.connect(cohort) as dst:
        src.backup(dst)  # the whole database, whatever the write-ahead log still holds

    with AnnotateServer(data, f"sqlite:///{steady}", *common, "--cases-per-annotator", "30") as srv:
        # a last slot may be open only on a case every annotator with room left has voted on
        assert crowd_votes(srv, ABILITY, 12) >= 195
        assert srv.admin()["votes"] >= CASES * PER_CASE - 5
    s = stats_json(f"sqlite:///{steady}")
    assert s["votes"] >= 595 and len(s["items"]) == CASES and len(s["annotators"]) == 20
    est = {a["annotator"]: a["ability"] for a in s["annotators"]}
    for a in s["annotators"]:
        assert a["interval"]["low"] < a["ability"] < a["interval"]["high"] and 25 <= a["votes"] <= 30
    rho = spearmanr([ABILITY[k] for k in ABILITY], [est[k] for k in ABILITY]).statistic
    posterior_right = sum((i["posterior_safe"] > 0.5) == truth(i["case"]) for i in s["items"])
    majority_right = sum((i["safe_votes"] * 2 > i["votes"]) == truth(i["case"]) for i in s["items"])
    print(f"steady crowd: Spearman {rho:.3f}; posterior right on {posterior_right}/{CASES}, "
          f"majority on {majority_right}/{CASES}; drift {s['drift']}")
    assert rho >= 0.6
    assert posterior_right >= majority_right
    for i in s["items"]:
        assert i["votes"] >= PER_CASE - 1 and i["interval"]["low"] <= i["posterior_safe"] <= i["interval"]["high"]
        assert i["vote_share"] == i["safe_votes"] / i["votes"]
    assert s["agreement"]["overall"]["alpha"] is not None and len(s["agreement"]["windows"]) == 6
    assert s["drift"]["alert"] is False and s["drift"]["flagged"] == [] and s["drift"]["reasons"] == []

    with AnnotateServer(data, f"sqlite:///{cohort}", *common, "--cases-per-annotator", "20") as srv:
        assert crowd_votes(srv, COHORT, 22) >= 195
    c = stats_json(f"sqlite:///{cohort}")
    print(f"with the cohort: drift {c['drift']}")
    assert c["votes"] >= 595 and c["drift"]["alert"] is True
    flagged = {f["annotator"] for f in c["drift"]["flagged"]}
    assert flagged <= set(COHORT) and len(flagged) >= 8  # 20 votes each, 10% of them right: most are caught
    assert all(f["windows"] == [5, 6] for f in c["drift"]["flagged"])  # their votes are 401 on
    assert c["drift"]["difference_interval"]["high"] < 0
    assert any("agreement fell in window 6" in r for r in c["drift"]["reasons"])
    # the posterior still follows the truth: the model finds the cohort's votes point the wrong way
    assert sum((i["posterior_safe"] > 0.5) == truth(i["case"]) for i in c["items"]) >= 55

    text = casebench("annotate", "stats", "--db", f"sqlite:///{cohort}", "--bootstrap", "50")
    assert text.returncode == 0 and "DRIFT ALERT" in text.stdout and "z00" in text.stdout
    assert len(text.stdout.splitlines()) <= 15
