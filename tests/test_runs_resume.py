"""A run directory never lies: a resume that would change how answers are made is refused,
naming each difference, and leaves the manifest byte for byte as it was; each invocation adds
its own history entry and rewrites no earlier one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import read_manifest
from servers.fault_server import FaultServer
from test_runs import write_dataset


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def data(tmp_path) -> Path:
    return write_dataset(tmp_path / "cases.json", 6)


def test_every_answer_changing_option_is_compared_on_resume(tmp_path, data):
    out = tmp_path / "run"
    templates = tmp_path / "templates.py"
    templates.write_text('judge = "Q: {query} C: {context} J?"\njudgescore = "{query} {context}"\n'
                         'judgelogits = "{query} {context}"\n')
    with FaultServer(latency=0.0) as srv:
        base = ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", data, "--base-url", srv.base_url,
                "-o", out, "--no-progress", "--no-report"]
        r = invoke(*base)
        assert r.exit_code == 0, r.output
        before = (out / "manifest.json").read_bytes()
        n = srv.count
        changes = {
            ("--extra-body", '{"top_k": 5}'): "backend_options.extra_body",
            ("--system", "Be brief."): "settings.system",
            ("--templates", str(templates)): "template_sha256",
            ("--context-as", "system"): "context_as",
            ("--full-answers",): "stop_at_verdict",
            ("--max-tokens", "99"): "settings.max_tokens",
            ("--remove", "urgency"): "removed",
        }
        for extra, field in changes.items():
            r = invoke(*base, *extra)
            assert r.exit_code == 2, (extra, r.output)
            assert field in r.output and "refusing to resume" in r.output, (extra, r.output)
            assert (out / "manifest.json").read_bytes() == before, extra  # byte for byte
        # several differences at once are all named
        r = invoke(*base, "--system", "x", "--max-tokens", "7")
        assert r.exit_code == 2 and "settings.system" in r.output and "settings.max_tokens" in r.output
        assert srv.count == n  # nothing was asked
        first_url = srv.base_url
        # transport options may change: a resume through another URL is the same run
        with FaultServer(latency=0.0) as other:
            other_url = other.base_url
            r = invoke(*base[:-6], "--base-url", other.base_url, "-o", out, "--no-progress", "--no-report",
                       "--timeout", "30")
            assert r.exit_code == 0, r.output
    m = read_manifest(out)
    assert [h.transport["base_url"] for h in m.history] == [first_url, other_url]
    assert m.history[1].transport["timeout"] == 30.0 and m.history[0].transport["timeout"] == 60.0
    first = json.loads(before)["history"][0]
    assert json.loads((out / "manifest.json").read_text())["history"][0] == first  # never rewritten
    assert m.history[1].asked == 0 and m.history[0].asked == 6


@pytest.mark.slow
def test_prob_method_change_of_a_finished_local_run_is_refused(tmp_path, data, embedded_model):
    out = tmp_path / "run"
    base = ["run", "--mode", "prob", "--data", data, "--limit", "2", "-o", out, "--no-progress", "--no-report"]
    r = invoke(*base)
    assert r.exit_code == 0, r.output
    m = read_manifest(out)
    assert m.asked.backend_options["prob_method"] == "first-token" and m.asked.backend_options["dtype"] == "auto"
    before = (out / "manifest.json").read_bytes()
    r = invoke(*base, "--prob-method", "continuation")
    assert r.exit_code == 2
    assert "backend_options.prob_method: 'first-token' -> 'continuation'" in r.output
    assert (out / "manifest.json").read_bytes() == before
    r = invoke(*base, "--dtype", "bfloat16")
    assert r.exit_code == 2 and "backend_options.dtype" in r.output
    assert (out / "manifest.json").read_bytes() == before
    # the default given explicitly is the same run
    r = invoke(*base, "--prob-method", "first-token")
    assert r.exit_code == 0, r.output
    assert len(read_manifest(out).history) == 2
