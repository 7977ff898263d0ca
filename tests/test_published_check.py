"""A published file is checked against the dataset whenever the dataset is known (issue 27,
item 4): ``--data``, ``$CASEBENCH_DATA`` or the user cache. A file one row short is refused,
naming the file and both counts; an unreadable prediction (a JSON null, "maybe") is named with
its record index and value. On the published data and outputs (../shared), copied to a folder
that is not beside the dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from casebench.cli import cli


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.delenv("CASEBENCH_DATA", raising=False)
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path / "empty-cache"))


def score(*args: str):
    return CliRunner().invoke(cli, ["score", "--bootstrap", "0", "--no-reference", *args], catch_exceptions=False)


def short_file(exp_dir: Path, tmp_path: Path) -> Path:
    rows = json.loads((exp_dir / "safety_gpt-4o" / "output_binary.json").read_text())
    path = tmp_path / "mine" / "output_binary.json"
    path.parent.mkdir()
    path.write_text(json.dumps(rows[:-1]))
    return path


def test_a_short_file_is_refused_against_casebench_data(tmp_path, exp_dir, real_data_path, monkeypatch):
    path = short_file(exp_dir, tmp_path)
    res = score(str(path))  # no dataset known: nothing to check against
    assert res.exit_code == 0, res.output
    monkeypatch.setenv("CASEBENCH_DATA", str(real_data_path))
    res = score(str(path))
    assert res.exit_code == 2, res.output
    assert str(path) in res.output and "the file has 899 records" in res.output and "has 900" in res.output
    assert "from $CASEBENCH_DATA" in res.output


def test_a_short_file_is_refused_against_the_cached_dataset(tmp_path, exp_dir, real_data_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "data").mkdir(parents=True)
    shutil.copy(real_data_path, cache / "data" / "CASEBench_data.json")
    monkeypatch.setenv("CASEBENCH_CACHE", str(cache))
    path = short_file(exp_dir, tmp_path)
    res = score(str(path))
    assert res.exit_code == 2 and "the file has 899 records" in res.output and "from the user cache" in res.output
    res = score(str(path), "--data", str(real_data_path))  # named explicitly: the same refusal
    assert res.exit_code == 2 and "the file has 899 records" in res.output


def test_unreadable_predictions_are_named_with_record_and_value(tmp_path, exp_dir, real_data_path, monkeypatch):
    monkeypatch.setenv("CASEBENCH_DATA", str(real_data_path))
    rows = json.loads((exp_dir / "safety_gpt-4o" / "output_binary.json").read_text())
    rows[3]["gpt-4o"] = None
    rows[7]["gpt-4o"] = "maybe"
    path = tmp_path / "output_binary.json"
    path.write_text(json.dumps(rows))
    res = score(str(path))
    assert res.exit_code == 0, res.output
    assert "2 prediction(s) of 'gpt-4o' cannot be read and count as missing" in res.output
    assert 'record 3 holds null' in res.output and 'record 7 holds "maybe"' in res.output


def test_compare_names_unreadable_predictions_too(tmp_path, exp_dir):
    rows = json.loads((exp_dir / "safety_gpt-4o" / "output_binary.json").read_text())
    rows[5]["gpt-4o"] = None
    path = tmp_path / "output_binary.json"
    path.write_text(json.dumps(rows))
    res = CliRunner().invoke(cli, ["compare", "--bootstrap", "0", str(path),
                                   str(exp_dir / "safety_gpt-4o-mini-2024-07-18" / "output_binary.json")],
                             catch_exceptions=False)
    assert "record 5 holds null" in res.output, res.output
