"""The data, prompts and score commands, run as a user runs them (exit codes included)."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from casebench.cli import cli


def run(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def test_help_lists_commands_and_is_fast():
    # the console entry point, in a fresh interpreter: no torch/matplotlib import at start-up
    out = subprocess.run([sys.executable, "-c", "import sys, casebench.cli as c; c.cli(['--help'], standalone_mode=False);"
                          "print('HEAVY' if {'torch','matplotlib','transformers'} & set(sys.modules) else 'LIGHT')"],
                         capture_output=True, text=True, check=True).stdout
    assert "score" in out and "human" in out and "LIGHT" in out


def test_validate_ok_and_bad(tmp_path, small_records, small_data_path):
    r = run("data", "validate", small_data_path)
    assert r.exit_code == 0 and "8 records, all valid" in r.output
    small_records[3]["scores"][0] = 3
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(small_records))
    r = run("data", "validate", bad)
    assert r.exit_code == 2
    assert f"{bad}, record 3, field 'scores[0]'" in r.output


def test_info_json(small_data_path):
    r = run("data", "info", small_data_path, "--json")
    info = json.loads(r.output)
    assert info["cases"] == 8 and info["human_safe"] == 4 and info["ci_keys"]["transmission_principle.urgency"] == 6


def test_prompts_command(small_data_path, tmp_path):
    r = run("prompts", small_data_path, "--mode", "binary", "--remove", "sender")
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert [x["index"] for x in lines] == list(range(8))
    assert '"sender"' not in lines[0]["prompt"] and '"recipient"' in lines[0]["prompt"]
    r = run("prompts", small_data_path, "--mode", "binary", "--remove", "nope")
    assert r.exit_code == 2 and "valid names" in r.output
    t = tmp_path / "t.py"
    t.write_text('judge = "Q={query} C={context}"\njudgescore = "{query}{context}"\njudgelogits = "{query}{context}"\n')
    r = run("prompts", small_data_path, "--mode", "binary", "--templates", t)
    assert json.loads(r.output.splitlines()[0])["prompt"].startswith("Q=How do I sharpen")


def test_score_json_keys_and_paper_figures(exp_dir):
    files = [exp_dir / "safety_gpt-4o" / "output_binary.json", exp_dir / "safety_gpt-4o" / "output_score.json",
             exp_dir / "safety_llama370B" / "output_logits.json"]
    r = run("score", "--paper-compat", "--json", "--bootstrap", "200", *files)
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert [x["mode"] for x in rows] == ["binary", "score", "prob"]
    for row in rows:
        for k in ("source", "model", "mode", "n", "coverage", "accuracy", "safe_recall", "unsafe_recall", "f1_safe", "f1_unsafe"):
            assert k in row
        assert set(row["ci"]) >= {"accuracy", "safe_recall"}
    assert round(rows[1]["pcc"] * 100, 5) == 67.77124 and round(rows[2]["bce"], 5) == 5.22763
    assert "pcc" not in rows[0] and all(k in rows[2] for k in ("pcc", "bce", "brier", "ece"))


@pytest.mark.parametrize("fmt, marker", [("csv", "accuracy_ci_lo"), ("md", "| model |"), ("table", "95% CI")])
def test_score_formats(exp_dir, fmt, marker):
    r = run("score", "--format", fmt, "--bootstrap", "50", exp_dir / "safety_gpt-4o" / "output_score.json")
    assert r.exit_code == 0 and marker in r.output


def test_score_by_category_and_votes_labels(exp_dir):
    f = exp_dir / "safety_gpt-4o" / "output_binary.json"
    r = run("score", "--by", "intent", "--bootstrap", "50", f)
    assert "safe_contexts" in r.output and "unsafe_contexts" in r.output
    a = json.loads(run("score", "--json", "--bootstrap", "0", f).output)
    b = json.loads(run("score", "--json", "--bootstrap", "0", "--label-source", "votes", f).output)
    assert a["accuracy"] != b["accuracy"]


def test_score_bad_file_exits_2(tmp_path):
    f = tmp_path / "output_binary.json"
    f.write_text("[1, 2")
    r = run("score", f)
    assert r.exit_code == 2 and "not valid JSON" in r.output


# ------------------------------------------------------------------ inputs checked (issue 18, item 2)


def _dup_file(tmp_path, small_records):
    f = tmp_path / "dup.json"
    f.write_text(json.dumps(small_records + [small_records[3]]))
    return f


def test_validate_lists_duplicates_and_info_score_run_refuse_them(tmp_path, small_records):
    f = _dup_file(tmp_path, small_records)
    r = run("data", "validate", f)
    assert r.exit_code == 2 and "record 3, field 'query+context': duplicated by record(s) 8" in r.output
    r = run("data", "info", f)
    assert r.exit_code == 2 and "duplicated by record(s) 8" in r.output
    r = run("run", "--model", "openai/x", "--mode", "binary", "--data", f, "-o", tmp_path / "r")
    assert r.exit_code == 2 and "duplicated by record(s) 8" in r.output and not (tmp_path / "r").exists()
    pub = tmp_path / "output_binary.json"
    pub.write_text(json.dumps([dict(rec, m="safe") for rec in json.loads(f.read_text())]))
    r = run("score", pub)
    assert r.exit_code == 2 and "duplicated by record(s) 8" in r.output


def test_score_refuses_a_published_file_of_899_or_901_rows_beside_the_real_dataset(tmp_path, real_data_path, exp_dir):
    records = json.loads((exp_dir / "safety_gpt-4o" / "output_binary.json").read_text())
    (tmp_path / "CASEBench_data.json").symlink_to(real_data_path)
    folder = tmp_path / "exp" / "safety_gpt-4o"
    folder.mkdir(parents=True)
    f = folder / "output_binary.json"
    f.write_text(json.dumps(records))
    assert run("score", f, "--bootstrap", "0").exit_code == 0
    f.write_text(json.dumps(records[:899]))
    r = run("score", f, "--bootstrap", "0")
    assert r.exit_code == 2 and "record 899: the file has 899 records" in r.output and "has 900" in r.output
    f.write_text(json.dumps(records + [dict(records[0], query=records[0]["query"] + " (again)")]))
    r = run("score", f, "--bootstrap", "0")
    assert r.exit_code == 2 and "record 900: the file has 901 records" in r.output
    f.write_text(json.dumps([records[1], records[0], *records[2:]]))
    r = run("score", f, "--bootstrap", "0")
    assert r.exit_code == 2 and "record 0, field 'c" in r.output and "not in the dataset's order" in r.output


def test_score_compare_report_ablate_take_mode_for_a_file_whose_name_does_not_say(tmp_path, exp_dir):
    src = exp_dir / "safety_gpt-4o" / "output_binary.json"
    mine = tmp_path / "output_binary_mine.json"
    mine.write_text(src.read_text())
    r = run("score", mine, "--bootstrap", "0", "--json")  # the help's own example: binary, as its name says
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["mode"] == "binary"
    typo = tmp_path / "output_binary_sendr.json"
    typo.write_text(src.read_text())
    r = run("score", typo, "--bootstrap", "0")
    assert r.exit_code == 2 and "unknown ablation" in r.output and "--mode" in r.output
    r = run("score", mine, "--mode", "binary", "--bootstrap", "0", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["mode"] == "binary"
    r = run("compare", mine, src, "--mode", "binary", "--bootstrap", "0")
    assert r.exit_code == 0, r.output
    r = run("ablate", src, mine, "--mode", "binary", "--bootstrap", "0")
    assert r.exit_code == 0 or "condition" in r.output
    r = run("report", mine, "--mode", "score", "-o", tmp_path / "r.html")
    assert r.exit_code == 2 and "says mode 'binary' but --mode says 'score'" in r.output
