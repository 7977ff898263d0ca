"""Damaged run directories (``runs.repair``), as a user meets them: ``casebench run`` on the
directory says what it found and how to recover, ``casebench runs repair`` and ``run --salvage``
recover without losing a valid record, and every request ends with exactly one final record.

The runs ask a real loopback OpenAI-compatible server (tests/servers/fault_server.py).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli
from casebench.runs.record import Record, iter_records, read_manifest
from casebench.runs.repair import (
    DAMAGED_MANIFEST, DAMAGED_RECORDS, diagnose, parse_record_line, record_misfit, scan_records,
)
from servers.fault_server import FaultServer
from test_runner import binary_answer
from test_runs import case_of, write_dataset

CASES = 8


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_args(srv: FaultServer, data: Path, out: Path, *more: str, mode: str = "binary") -> list[str]:
    return ["run", "--model", "openai/judge-x", "--mode", mode, "--data", str(data), "--base-url", srv.base_url,
            "-o", str(out), "--no-progress", "--no-report", *more]


def asked_cases(srv: FaultServer, since: int) -> collections.Counter:
    return collections.Counter(case_of(r.prompt) for r in srv.requests[since:] if r.prompt)


def finals(out: Path) -> collections.Counter:
    return collections.Counter((r.case, r.sample) for r in iter_records(out) if r.final)


def complete_run(srv: FaultServer, data: Path, out: Path) -> list[bytes]:
    res = invoke(*run_args(srv, data, out))
    assert res.exit_code == 0, res.output
    lines = (out / "records.jsonl").read_bytes().split(b"\n")[:-1]
    assert len(lines) == CASES
    return lines


def test_a_damaged_middle_line_is_named_then_moved_aside_keeping_every_valid_record(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        lines = complete_run(srv, data, out)
        damaged_case = json.loads(lines[4])["case"]
        bad = lines[4][:37] + b"\xff\x00 cut here"  # a middle line mangled (not a kill: that tears the last)
        (out / "records.jsonl").write_bytes(b"".join(x + b"\n" for x in [*lines[:4], bad, *lines[5:]]))
        manifest_before = (out / "manifest.json").read_bytes()

        # the run refuses, says what it found and how to recover, and changes nothing
        n0 = srv.count
        res = invoke(*run_args(srv, data, out))
        assert res.exit_code == 2
        assert "line(s) 5 damaged" in res.output and f"casebench runs repair {out}" in res.output
        assert "--salvage" in res.output and "Nothing was changed" in res.output
        assert srv.count == n0 and (out / "manifest.json").read_bytes() == manifest_before
        # scoring names the line and the way out too
        res = invoke("score", str(out))
        assert res.exit_code == 2 and "line 5" in res.output and "casebench runs repair" in res.output

        # runs repair: the damaged line goes aside byte for byte, every valid record stays, in order
        res = invoke("runs", "repair", str(out))
        assert res.exit_code == 0, res.output
        assert "moved 1 damaged line(s) (5)" in res.output and "7 valid record(s) kept" in res.output
        assert (out / "records.jsonl").read_bytes() == b"".join(x + b"\n" for x in lines[:4] + lines[5:])
        aside = [json.loads(x) for x in (out / DAMAGED_RECORDS).read_text().splitlines()]
        assert [a["line"] for a in aside] == [5]
        assert aside[0]["raw"].encode("utf-8", "surrogateescape") == bad
        assert (out / "manifest.json").read_bytes() == manifest_before
        # a second repair finds nothing to do and says so
        again = invoke("runs", "repair", str(out))
        assert again.exit_code == 0 and "nothing to repair" in again.output

        # the resume asks exactly the request of the damaged line
        n0 = srv.count
        res = invoke(*run_args(srv, data, out))
        assert res.exit_code == 0, res.output
        assert asked_cases(srv, n0) == {damaged_case: 1}
    assert finals(out) == {(c, 0): 1 for c in range(CASES)}
    assert read_manifest(out).status.value == "complete"


def test_a_deleted_manifest_is_rebuilt_by_salvage_only_from_settings_the_records_fit(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        lines = complete_run(srv, data, out)
        kept = lines[:5]  # as if killed after 5 answers, then the manifest was lost
        bad = b'{"case": 5, "sample": 0, "text": "oops'
        records = b"".join(x + b"\n" for x in [*kept[:2], bad, *kept[2:]])
        (out / "records.jsonl").write_bytes(records)
        (out / "manifest.json").unlink()

        n0 = srv.count
        res = invoke(*run_args(srv, data, out))
        assert res.exit_code == 2
        assert "holds 5 valid record(s)" in res.output and "no manifest.json" in res.output
        assert "--salvage" in res.output and "Nothing was changed" in res.output
        assert not (out / "manifest.json").exists() and (out / "records.jsonl").read_bytes() == records

        # settings the records do not fit: refused, each misfit named, nothing changed
        for more, mode, why in ((["--limit", "3"], "binary", "is not among this command's 3 case(s)"),
                                ([], "score", "was produced by another model or other settings")):
            res = invoke(*run_args(srv, data, out, *more, "--salvage", mode=mode))
            assert res.exit_code == 2, res.output
            assert why in res.output and "Nothing was changed" in res.output
            assert not (out / "manifest.json").exists() and (out / "records.jsonl").read_bytes() == records
        assert srv.count == n0

        # the command's own settings: the manifest is rebuilt, the damaged line moved aside, and
        # the resume asks exactly what has no record
        res = invoke(*run_args(srv, data, out, "--salvage"))
        assert res.exit_code == 0, res.output
        assert "rebuilt from this command's settings" in res.output and "moved 1 damaged line(s) (3)" in res.output
        done = {json.loads(x)["case"] for x in kept}
        assert asked_cases(srv, n0) == {c: 1 for c in range(CASES) if c not in done}
        assert (out / "records.jsonl").read_bytes().startswith(b"".join(x + b"\n" for x in kept))
    assert finals(out) == {(c, 0): 1 for c in range(CASES)}
    m = read_manifest(out)
    assert m.status.value == "complete"
    assert [h.status for h in m.history] == ["salvaged", "complete"]
    assert "rebuilt by --salvage" in (m.history[0].message or "")


def test_an_unreadable_manifest_is_kept_aside_and_rebuilt(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        lines = complete_run(srv, data, out)
        text = (out / "manifest.json").read_text()
        (out / "manifest.json").write_text(text[: len(text) // 2])
        res = invoke(*run_args(srv, data, out))
        assert res.exit_code == 2 and "manifest.json: cannot be read" in res.output
        n0 = srv.count
        res = invoke(*run_args(srv, data, out, "--salvage"))
        assert res.exit_code == 0, res.output
        assert srv.count == n0  # every record was kept: nothing to ask
    assert (out / DAMAGED_MANIFEST).read_text() == text[: len(text) // 2]
    assert (out / "records.jsonl").read_bytes() == b"".join(x + b"\n" for x in lines)
    assert read_manifest(out).status.value == "complete"


def test_salvage_of_a_healthy_run_changes_nothing_and_says_so(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        lines = complete_run(srv, data, out)
        res = invoke(*run_args(srv, data, out, "--salvage"))
    assert res.exit_code == 0 and "nothing to repair (8 valid record(s))" in res.output
    assert (out / "records.jsonl").read_bytes() == b"".join(x + b"\n" for x in lines)
    assert diagnose(out).healthy


def test_a_last_line_without_its_newline_is_completed_not_dropped(tmp_path):
    data = write_dataset(tmp_path / "cases.json", CASES)
    out = tmp_path / "run"
    with FaultServer(answer_fn=binary_answer) as srv:
        lines = complete_run(srv, data, out)
        (out / "records.jsonl").write_bytes(b"".join(x + b"\n" for x in lines)[:-1])  # an editor dropped it
        n0 = srv.count
        res = invoke(*run_args(srv, data, out))
        assert res.exit_code == 0, res.output
        assert srv.count == n0
    assert (out / "records.jsonl").read_bytes() == b"".join(x + b"\n" for x in lines)


def test_scan_sorts_lines_and_misfits_name_their_reason(tmp_path):
    from test_runs import manifest_for
    from casebench.data import load_dataset

    asked = manifest_for(load_dataset(write_dataset(tmp_path / "d.json", 4)), "binary", [0, 1, 2]).asked
    fp = asked.fingerprint()
    good = Record(case=1, sample=0, label="safe", detail={"temperature": 0.0}, producer=fp).to_json().encode()
    (tmp_path / "records.jsonl").write_bytes(good + b"\n[1, 2]\n{\"case\": \"x\", \"sample\": 0}\n" + good[:9])
    scanned = scan_records(tmp_path)
    assert [n for n, _, _ in scanned.valid] == [1]
    assert [(d.line, d.reason) for d in scanned.damaged] == [(2, "not a JSON object"),
                                                            (3, "'case' missing or not an integer")]
    assert scanned.torn == good[:9]
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_record_line(b"{")

    assert record_misfit(parse_record_line(good), asked) is None
    assert "sample 1 is outside" in record_misfit(Record(case=1, sample=1, label="safe", producer=fp), asked)
    assert "temperature 1.0" in record_misfit(
        Record(case=1, sample=0, label="safe", detail={"temperature": 1.0}, producer=fp), asked)
    assert "more than --max-tokens 256" in record_misfit(
        Record(case=1, sample=0, label="safe", usage={"completion_tokens": 300}, producer=fp), asked)
    assert "not a binary verdict" in record_misfit(Record(case=2, sample=0, p_safe=0.4, label="safe", producer=fp),
                                                   asked)
    # a missing value (final, with its error) fits any mode: nothing in it says otherwise
    assert record_misfit(Record(case=2, sample=0, error="unparseable", producer=fp), asked) is None
    # a record proves nothing without its producer, and another producer's is another run's
    assert "names no producer" in record_misfit(Record(case=1, sample=0, label="safe"), asked)
    assert "another model or other settings" in record_misfit(
        Record(case=1, sample=0, label="safe", producer="fp1:0000000000000000"), asked)
