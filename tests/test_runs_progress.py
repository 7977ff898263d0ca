"""Issue 37, item 4: the expected duration is measured on the run's own answers, after a full
round of the requests in flight, and the run says so until then.

No assertion here rests on how fast anything is: only on when the estimate is said (after how
many answers) and on what it says it was measured on."""

from __future__ import annotations

import re

from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.progress import Progress
from test_runs import write_dataset


def test_the_estimate_waits_for_a_full_round_of_concurrent_answers(tmp_path, fault_server):
    """8 cases asked 4 at a time: the first line says the duration follows the first answers; the
    estimate is said once 4 answers came back (answers asked together come back together, so the
    first of them alone would over-estimate fourfold), naming what it was measured on."""
    data = write_dataset(tmp_path / "cases.json", 8)
    r = CliRunner().invoke(cli, ["run", "--model", "openai/judge-x", "--mode", "binary", "--data", str(data),
                                 "--base-url", fault_server.base_url, "--max-connections", "4", "--no-report",
                                 "-o", str(tmp_path / "run"), "--min-coverage", "0"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    first = next(i for i, x in enumerate(lines) if "asking 8 requests" in x)
    assert "the expected duration follows, measured on this run's first answers" in lines[first]
    said = [x for x in lines if "expected duration: about" in x]
    assert len(said) == 1, r.output
    assert re.search(r"for 8 requests \(.* to go; measured on this run's first 4 answers: [0-9.]+ answers/s over ",
                     said[0]), said[0]
    assert "about 3 min" not in r.output


def test_no_estimate_before_its_measurement():
    """Until a full round came back, there is no expected duration (the lines say "measuring")."""
    p = Progress(total=20, initial=0, enabled=False, in_flight=8)
    for _ in range(7):
        p.update(1, "")
        assert p.expected_seconds() is None
    p.update(1, "")
    assert p.expected_seconds() is not None
    # a batch backend: measured when its first call ends
    b = Progress(total=20, initial=0, enabled=False, from_answers=False, in_flight=16)
    b.update(3, "")
    assert b.expected_seconds() is None
    b.call_done()
    assert b.expected_seconds() is not None
    # fewer requests left than in flight: measured once they are all back
    s = Progress(total=10, initial=8, enabled=False, in_flight=8)
    assert s.measure_after == 2


def test_before_any_answer_the_token_rate_gives_an_upper_bound_once(monkeypatch, capsys):
    """A local model decoding a long batch: once tokens have flowed ``TOKEN_RATE_AFTER_S`` (the
    clock here is the test's, so nothing rests on speed), one line says the expected duration from
    the token rate and the token budget left; once answers measure the pace they say it again."""
    from types import SimpleNamespace

    from casebench.runs import progress as progress_module

    now = [100.0]
    # the progress module's clock alone (plain lines: stderr is not a terminal here)
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    p = Progress(total=12, initial=0, enabled=None, in_flight=2, token_budget=12 * 64.0)
    assert "measured on this run's token rate, then its first answers" in capsys.readouterr().err
    p.tokens(20)  # the first report: the rate is counted from here on (its tokens came before it)
    now[0] += 1.0
    p.tokens(20)
    assert p.token_rate() is None and "expected duration" not in capsys.readouterr().err
    now[0] += progress_module.TOKEN_RATE_AFTER_S
    p.tokens(60)  # 80 tokens over 4 s since the first report: 20 tok/s
    said = capsys.readouterr().err
    assert p.token_rate() == 20.0
    assert "at most about" in said and "measured on this run's token rate, 20.0 tok/s" in said
    assert "with up to 668 tokens still to generate" in said  # 768 budget - 100 counted
    now[0] += 10.0
    p.tokens(20)
    assert "expected duration" not in capsys.readouterr().err  # said once
    p.update(2, "")
    said = capsys.readouterr().err
    assert "expected duration: about" in said and "measured on this run's first 2 answers" in said
