"""Causes in plain words, early (issue 27, item 2): a transport failure says its cause without
-v (connection refused, name not resolved, TLS, HTTP status and the server's message); a server
that refuses every connection before anything has answered ends the run at once with that cause
(one attempt per request, not eight); what was answered before is kept; the progress counters
count failed requests as the summary does.

Real sockets throughout: a closed loopback port, an unresolvable name (.invalid is reserved), a
plain-HTTP scripted server spoken to over TLS, and the scripted fault server
(tests/servers/fault_server.py). No timing is asserted: attempts and messages are.
"""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import iter_records, read_manifest
from servers.fault_server import Fault, FaultServer
from test_runner import binary_answer
from test_runs import case_of, write_dataset


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CASEBENCH_PRICES", "CASEBENCH_DATA"):
        monkeypatch.delenv(var, raising=False)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run(base_url: str, data: Path, out: Path, *more: str, model: str = "openai/judge-x"):
    return invoke("run", "--model", model, "--mode", "binary", "--data", str(data), "--base-url", base_url,
                  "-o", str(out), "--no-report", *more)


def test_a_refused_connection_ends_the_run_at_once_with_its_cause(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 6)
    out = tmp_path / "run"
    res = run(f"http://127.0.0.1:{closed_port()}/v1", data, out, "--no-progress")
    assert res.exit_code == 1, res.output
    assert "connection refused" in res.output and "nothing has answered there yet" in res.output
    assert not re.search(r"retry \d", res.output)  # no retry loop: nothing ever connected
    m = read_manifest(out)
    assert m.status.value == "failed" and "connection refused" in (m.message or "")
    assert m.history[-1].retries == 0
    assert list(iter_records(out)) == []  # nothing asked, nothing recorded as an answer


def test_a_name_that_does_not_resolve_ends_the_run_with_that_cause(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")  # a remote name needs a key; it never leaves here
    data = write_dataset(tmp_path / "cases.json", 2)
    res = run("http://no-such-host.invalid/v1", data, tmp_path / "run", "--no-progress")
    assert res.exit_code == 1, res.output
    assert "host name not resolved" in res.output and not re.search(r"retry \d", res.output)


def test_a_server_gone_after_answers_keeps_them_and_says_why(tmp_path):
    """Answers paid for are kept; the resume that finds the server gone stops at once, says why,
    and leaves the records as they were."""
    data = write_dataset(tmp_path / "cases.json", 4)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        srv.rule = lambda rec: Fault.status(503) if rec.prompt and case_of(rec.prompt) >= 2 else None
        res = run(srv.base_url, data, out, "--no-progress", "--max-attempts", "1", "--max-connections", "1")
        assert res.exit_code == 1 and "2 request(s) failed in transport" in res.output, res.output
        url = srv.base_url
    kept = (out / "records.jsonl").read_bytes()
    res = run(url, data, out, "--no-progress", "--max-attempts", "1", "--max-connections", "1")  # the same command
    assert res.exit_code == 1, res.output
    assert "connection refused" in res.output and not re.search(r"retry \d", res.output)
    assert (out / "records.jsonl").read_bytes() == kept
    m = read_manifest(out)
    assert m.status.value == "failed" and "connection refused" in (m.message or "")
    assert m.totals.answered == 2 and m.totals.pending == 2


def test_tls_and_http_status_causes_are_said_without_verbose_once_per_cause(tmp_path):
    data = write_dataset(tmp_path / "cases.json", 4)
    with FaultServer(answer_fn=binary_answer) as srv:
        # TLS spoken to a plain-HTTP server: the handshake fails (the server answers, so it retries)
        tls = srv.base_url.replace("http://", "https://")
        res = run(tls, data, tmp_path / "tls", "--no-progress", "--max-attempts", "2", "--limit", "1")
        assert res.exit_code == 1, res.output
        assert "TLS" in res.output and "last cause" in res.output

        srv.rule = lambda rec: Fault.status(503, body={"error": {"message": "overloaded, try later"}}) \
            if rec.prompt and case_of(rec.prompt) in (1, 2) else None
        res = run(srv.base_url, data, tmp_path / "http", "--max-attempts", "3", "--max-connections", "1")
    assert res.exit_code == 1, res.output
    # the cause, with the server's own message, said once per distinct cause (not per retry)
    said = [ln for ln in res.output.splitlines() if "HTTP 503" in ln and "retry" in ln]
    assert said and all("overloaded, try later" in ln for ln in said)
    assert len(said) == len({re.sub(r"case \d+ sample \d+: |retry \d/\d in [\d.]+s", "", ln) for ln in said})
    assert "2 request(s) failed in transport after 3 attempts (last cause: HTTP 503" in res.output
    # the last progress line counts the failed requests as the summary does
    fails = re.findall(r"fail=(\d+)", res.output)
    assert fails and fails[-1] == "2"
    assert read_manifest(tmp_path / "http").history[-1].transport_failures == 2


def test_refused_is_unreachable_only_until_something_answered():
    """At the transport: the same refused connection is final before any answer, retried after."""
    import openai

    from casebench.backends.base import TransientError, Unreachable
    from casebench.backends.http import Secret
    from casebench.backends.sdk_errors import Reach, SDKTransport

    url = f"http://127.0.0.1:{closed_port()}/v1"

    async def ask(reach: Reach) -> Exception:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=5)
        t = SDKTransport(openai, url, "m", Secret("x"), 5.0, reach)
        try:
            await t.call(client.models.list())
        except Exception as e:  # noqa: BLE001 - the error is what is tested
            return e
        finally:
            await client.close()
        raise AssertionError("a closed port answered")

    first = asyncio.run(ask(Reach()))
    assert isinstance(first, Unreachable) and "connection refused" in str(first)
    later = asyncio.run(ask(Reach(answered=True)))
    assert isinstance(later, TransientError) and "connection refused" in str(later)
