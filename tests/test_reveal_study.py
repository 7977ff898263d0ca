"""The reveal study (``study --reveal``): the arms full, concat, early, late and resample run on the
same pairs against a loopback chatbot, each arm's paired difference against full, the order x
intent interaction and recovery; a second invocation re-uses every run and asks nothing."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import read_manifest
from casebench.runs.study import REVEAL_ARMS, parse_arms
from servers.fault_server import FaultServer
from test_reveal import reply


def invoke(*args: Any):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_reveal_study_runs_every_arm_on_the_same_pairs_and_compares_each_with_full(tmp_path, real_data_path):
    root = tmp_path / "runs"
    base = ["study", "--model", "openai/bot-x", "--mode", "respond", "--data", real_data_path, "--pairs", "5",
            "--out-root", root, "--no-progress", "--bootstrap", "200"]
    with FaultServer(answer_fn=reply, latency=0.0) as srv:
        r = invoke(*base, "--reveal", "full,early,late,concat,resample", "--base-url", srv.base_url)
        assert r.exit_code == 0, r.output
        # 10 cases: full and concat once each, early and late four turns each, resample four times
        assert srv.count == 10 + 10 + 40 + 40 + 40
        out = r.output
        for arm in ("early", "late", "concat", "resample"):
            assert f"{arm} vs full: 10 paired cases" in out  # each arm's paired difference against full
        assert "MDD" in out and "Benjamini-Hochberg" in out and "people: majority" in out
        assert "Order x intent" in out and "Recovery" in out and "single answers" in out
        n = srv.count
        again = invoke(*base, "--reveal", "full,early,late,concat,resample", "--base-url", srv.base_url, "--json")
        assert again.exit_code == 0, again.output
        assert srv.count == n  # every run re-used
    d = json.loads(again.output[again.output.index("{"):])  # after the progress lines on stderr
    assert [a["arm"] for a in d["arms"]] == ["full", "early", "late", "concat", "resample"]
    assert {(p["a"], p["b"]) for p in d["pairs"]} == {(a, "full") for a in ("early", "late", "concat", "resample")}
    assert {i["arm"] for i in d["order_x_intent"]} == {"early", "late", "concat", "resample"}
    assert {x["arm"] for x in d["recovery"]} == {"early", "late"}
    cases = {tuple(read_manifest(p).cases) for p in root.iterdir()}
    assert len(cases) == 1  # the same pairs in every arm
    resample = next(p for p in root.iterdir() if p.name.endswith("_resample4"))
    assert read_manifest(resample).samples == 4 and read_manifest(resample).asked.context_as == "user"
    # the finished runs analysed as inputs give the same study
    r = invoke("study", *sorted(root.iterdir()), "--bootstrap", "200", "--data", real_data_path)
    assert r.exit_code == 0, r.output
    assert "reveal study" in r.output and "late vs full" in r.output


def test_reveal_arms_are_checked():
    assert parse_arms("late,full,early") == ("full", "late", "early")
    assert set(REVEAL_ARMS) == {"full", "concat", "early", "late", "resample"}
    r = invoke("study", "--model", "openai/x", "--mode", "binary", "--reveal", "full,late")
    assert r.exit_code != 0 and "--mode respond" in r.output
    r = invoke("study", "--model", "openai/x", "--mode", "respond", "--reveal", "full,sideways")
    assert r.exit_code != 0 and "sideways" in r.output
