"""Every option validated where it is given (issue 27, item 5): the Python API's config objects
refuse nonsense at construction, the CLI before anything is asked; every command that takes a
dataset reads $CASEBENCH_DATA the same way; every exit code is documented in --help and the
README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.config import RunConfig
from casebench.runs.record import RunError
from casebench.stats.options import ScoringOptions
from test_runs import write_dataset

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_DATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "empty-cache"))


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("kw, says", [
    ({"mode": "bogus"}, "unknown mode 'bogus'"),
    ({"mode": "binary", "temperature": -1}, "--temperature must be a number from 0 to 2"),
    ({"mode": "binary", "temperature": 50}, "--temperature must be a number from 0 to 2, got 50"),
    ({"mode": "binary", "samples": 0}, "--samples must be a whole number of at least 1"),
    ({"mode": "binary", "top_p": 0}, "--top-p must be a number above 0"),
    ({"mode": "binary", "max_tokens": 0}, "--max-tokens"),
    ({"mode": "binary", "max_cost": float("nan")}, "--max-cost"),
    ({"mode": "binary", "parse_retries": -1}, "--parse-retries"),
    ({"mode": "binary", "reask": "twice"}, "--reask must be one of repair, same"),
    ({"mode": "binary", "context_as": "footer"}, "--context-as must be one of"),
    ({"mode": "binary", "stratified": 0}, "--stratified"),
])
def test_run_config_refuses_nonsense_at_construction(kw, says):
    with pytest.raises(RunError, match=re.escape(says)):
        RunConfig(**kw)


def test_the_other_config_objects_refuse_nonsense_at_construction():
    from casebench.runs.config import RetryPolicy

    with pytest.raises(RunError, match="--max-attempts must be a whole number of at least 1"):
        RetryPolicy(max_attempts=0)
    pytest.importorskip("sqlalchemy")
    from casebench.annotate.db import Settings, StoreError

    with pytest.raises(StoreError, match="votes_per_case must be a whole number of at least 1"):
        Settings(votes_per_case=0)
    with pytest.raises(StoreError, match="reserve_seconds"):
        Settings(votes_per_case=3, reserve_seconds=-5)


def test_run_config_takes_sensible_values():
    cfg = RunConfig(mode="score", temperature=0, top_p=1.0, samples=3, max_cost=float("inf"))
    assert cfg.mode == "score"


def test_scoring_options_refuse_a_negative_bootstrap():
    with pytest.raises(ValueError, match="n_boot"):
        ScoringOptions(n_boot=-1)


def test_cli_refuses_a_negative_temperature_before_asking(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 2)
    res = invoke("run", "--model", "openai/m", "--base-url", "http://127.0.0.1:9/v1", "--mode", "binary",
                 "--data", str(data), "-o", str(tmp_path / "run"), "--temperature", "-1", "--no-progress")
    assert res.exit_code == 2 and "Invalid value for '--temperature': -1 is not in the range 0<=x<=2" in res.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag, value, says", [
    ("--temperature", "50", "Invalid value for '--temperature': 50 is not in the range 0<=x<=2"),
    ("--temperature", "nan", "Invalid value for '--temperature': nan is not a finite number"),
    ("--timeout", "-5", "Invalid value for '--timeout': -5 is not in the range x>0"),
    ("--timeout", "0", "Invalid value for '--timeout': 0 is not in the range x>0"),
    ("--max-tokens", "0", "Invalid value for '--max-tokens': 0 is not in the range x>=1"),
    ("--max-connections", "0", "Invalid value for '--max-connections': 0 is not in the range x>=1"),
    ("--pairs", "0", "Invalid value for '--pairs': 0 is not in the range x>=1"),
    ("--max-cost", "-1", "Invalid value for '--max-cost': -1 is not in the range x>=0"),
    ("--batch-poll", "0", "Invalid value for '--batch-poll': 0 is not in the range x>0"),
    ("--parse-retries", "-1", "Invalid value for '--parse-retries': -1 is not in the range x>=0"),
])
def test_run_checks_each_option_in_the_users_words_before_any_request(tmp_path, fault_server, flag, value, says):
    """Issue 37, item 5: each option is checked where it is given, in the flag and the value the
    user wrote (not "--call-timeout ... got 0.0" for --timeout -5), with the providers' ranges, and
    nothing reaches the server (which logs every request) nor the run directory."""
    data = write_dataset(tmp_path / "cases.json", 2)
    res = invoke("run", "--model", "openai/m", "--base-url", fault_server.base_url, "--mode", "binary",
                 "--data", str(data), "-o", str(tmp_path / "run"), flag, value, "--no-progress")
    assert res.exit_code == 2, res.output
    assert says in res.output, res.output
    assert "call-timeout" not in res.output
    assert fault_server.count == 0 and not (tmp_path / "run").exists()


def test_temperature_within_the_range_is_sent(tmp_path, fault_server):
    """The boundary of the range is accepted and sent as given."""
    data = write_dataset(tmp_path / "cases.json", 2)
    res = invoke("run", "--model", "openai/m", "--base-url", fault_server.base_url, "--mode", "binary",
                 "--data", str(data), "-o", str(tmp_path / "run"), "--temperature", "2", "--no-progress",
                 "--no-report", "--min-coverage", "0")
    assert res.exit_code == 0, res.output
    sent = [r.body for r in fault_server.requests if r.path.endswith("/chat/completions")]
    assert len(sent) == 2 and {b["temperature"] for b in sent} == {2}


def test_backend_option_ranges_apply_to_the_python_api_options_too():
    """The registry's ``Option.minimum`` is what the CLI's range comes from; ``convert`` applies
    it to a value given without the CLI, in the option's flag."""
    from casebench.backends.http import TIMEOUT

    with pytest.raises(ValueError, match=re.escape("--timeout must be above 0, got -5")):
        TIMEOUT.convert(-5)
    assert TIMEOUT.convert(2.5) == 2.5


def test_cli_refuses_a_negative_bootstrap(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 2)
    res = invoke("score", str(data), "--bootstrap", "-1")
    assert res.exit_code == 2 and "--bootstrap" in res.output


def test_human_reads_casebench_data_like_the_other_commands(tmp_path, monkeypatch):
    data = write_dataset(tmp_path / "cases.json", 8)
    res = invoke("human", "--json", "--draws", "10")
    assert res.exit_code == 2 and "no dataset: pass DATA, set $CASEBENCH_DATA" in res.output
    monkeypatch.setenv("CASEBENCH_DATA", str(data))
    for args in (["human", "--json", "--draws", "10"], ["human", "stats", "--json", "--draws", "10"]):
        res = invoke(*args)
        assert res.exit_code == 0, res.output
        assert f"data: {data} (from $CASEBENCH_DATA)" in res.output
        assert str(data) in res.output.split("(from $CASEBENCH_DATA)", 1)[1]  # the stats are of that file
    res = invoke("data", "info", "--json")
    assert res.exit_code == 0 and f"data: {data} (from $CASEBENCH_DATA)" in res.output
    res = invoke("human", str(data), "--json", "--draws", "10")  # the argument wins, and is not announced
    assert res.exit_code == 0 and "from $CASEBENCH_DATA" not in res.output
    res = invoke("prompts", "--mode", "binary")
    assert res.exit_code == 0 and f"data: {data} (from $CASEBENCH_DATA)" in res.output
    assert res.output.count('"index"') == 8


def test_commands_that_need_a_dataset_say_how_to_name_one(tmp_path):
    pytest.importorskip("sqlalchemy")
    for args in (["human", "--json"], ["data", "validate"], ["annotate", "serve", "--db",
                                                            f"sqlite:///{tmp_path / 'v.db'}"]):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "no dataset: pass" in res.output and "set $CASEBENCH_DATA" in res.output
    res = invoke("prompts", "--mode", "binary")  # prompts can show the demo set, and says so
    assert res.exit_code == 0 and "the demo set shipped with casebench" in res.output


def test_every_exit_code_is_documented_in_help_and_readme():
    help_text = " ".join(invoke("--help").output.split())
    readme = " ".join(README.read_text().split())
    for code, what in ((0, "success"), (1, "failure"), (2, "bad input"), (3, "--min-coverage"),
                       (130, "interrupted")):
        assert re.search(rf"\b{code} [^;]*{re.escape(what)}", help_text), (code, help_text)
        assert re.search(rf"\b{code} [^;]*{re.escape(what)}", readme), code


def test_json_errors_say_where_without_stammering(tmp_path):
    """Issue 37: the decoder's message may end in "at" ("Unterminated string starting at"); the
    place follows in parentheses, never as "at at line 1"."""
    bad = tmp_path / "cases.json"
    bad.write_text('[{"query": "abc')
    for args in (["data", "validate", str(bad)],
                 ["run", "--model", "openai/m", "--mode", "binary", "--extra-body", '{"top_k": "5'],
                 ["run", "--model", "openai/m", "--mode", "binary", "--prices", str(bad)]):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "Unterminated string starting at (" in res.output and "at at" not in res.output, res.output
