"""Extending casebench (issue 16): a toy backend, a toy refusal classifier and a toy metric, each
one new file under tests/plugins/ with its registration, used through the CLI (``run``,
``refusal-eval``, ``score``) with nothing else edited; and the README's registry tables in sync.

The CLI runs in a subprocess: a registration lasts as long as its process, and the other tests
of this session must see only the built-in backends, classifiers and metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PLUGINS = REPO / "tests" / "plugins"
FIXTURES = REPO / "tests" / "fixtures"


def casebench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "CASEBENCH_PLUGINS"}
    full["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'casebench'; "
                           "from casebench.cli import main; main()", *args],
                          capture_output=True, text=True, env=full, timeout=300, cwd=REPO)


def test_toy_backend_classifier_and_metric_through_the_cli(tmp_path: Path) -> None:
    backend_file = str(PLUGINS / "toy_backend.py")
    # run: the toy backend's own flag is offered (and listed by --help), and it answers a binary run
    help_ = casebench("--plugin", backend_file, "run", "--help")
    assert help_.returncode == 0 and "--toy-verdict" in help_.stdout and "[toy/]" in help_.stdout
    out = tmp_path / "toy_run"
    r = casebench("--plugin", backend_file, "run", "--model", "toy/judge", "--mode", "binary", "--data",
                  str(FIXTURES / "small_cases.json"), "--toy-verdict", "unsafe", "--no-report", "--no-progress",
                  "-o", str(out))
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["totals"]["answered"] == 8
    assert manifest["asked"]["backend_options"] == {"verdict": "unsafe"}  # answer-changing, as declared
    assert manifest["price"]["status"] == "unknown"  # toy_price knows only toy/priced
    labels = {json.loads(line)["label"] for line in (out / "records.jsonl").read_text().splitlines()}
    assert labels == {"unsafe"}
    # a flag of another backend is refused for the toy, naming the toy's own
    r = casebench("--plugin", backend_file, "run", "--model", "toy/judge", "--device", "cpu", "--data",
                  str(FIXTURES / "small_cases.json"), "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "--device does not apply to model 'toy/judge'" in r.stderr and "--toy-verdict" in r.stderr

    # the backend's price lookup is used (status "backend"), here through $CASEBENCH_PLUGINS
    priced = tmp_path / "priced"
    r = casebench("run", "--model", "toy/priced", "--mode", "prob", "--data", str(FIXTURES / "small_cases.json"),
                  "--no-report", "--no-progress", "-o", str(priced), env={"CASEBENCH_PLUGINS": backend_file})
    assert r.returncode == 0, r.stderr
    m = json.loads((priced / "manifest.json").read_text())
    assert m["price"]["status"] == "backend" and m["price"]["input_per_mtok"] == 1.0
    assert m["totals"]["cost_usd"] > 0

    # refusal-eval: the toy classifier, with its own option
    r = casebench("--plugin", str(PLUGINS / "toy_classifier.py"), "refusal-eval", str(FIXTURES / "refusal_styles.csv"),
                  "--refusal-classifier", "toy-keyword", "--keyword", "sorry", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["classifier"]["name"] == "toy-keyword" and d["classifier"]["keyword"] == "sorry"
    assert d["n_classified"] == d["n"] > 0

    # run in respond mode with the toy backend as the chatbot and the toy classifier reading it
    respond = tmp_path / "respond"
    r = casebench("--plugin", backend_file, "--plugin", str(PLUGINS / "toy_classifier.py"), "run", "--model",
                  "toy/chat", "--mode", "respond", "--data", str(FIXTURES / "small_cases.json"),
                  "--refusal-classifier", "toy-keyword", "--refusal-keyword", "sorry", "--no-report", "--no-progress",
                  "-o", str(respond))
    assert r.returncode == 0, r.stderr
    m = json.loads((respond / "manifest.json").read_text())
    assert m["asked"]["classifier"]["name"] == "toy-keyword" and m["asked"]["classifier"]["keyword"] == "sorry"
    assert m["totals"]["answered"] == 8

    # score: the toy metric is printed beside the built-in ones, with a CI
    r = casebench("--plugin", str(PLUGINS / "toy_metric.py"), "score", str(out), "--json", "--bootstrap", "50")
    assert r.returncode == 0, r.stderr
    scored = json.loads(r.stdout.splitlines()[0])
    assert scored["toy_predicted_safe"] == 0.0 and "toy_predicted_safe" in scored["ci"]
    table = casebench("--plugin", str(PLUGINS / "toy_metric.py"), "score", str(out), "--bootstrap", "0")
    assert table.returncode == 0 and "toy: predicted safe" in table.stdout


def test_an_installed_package_plugs_in_through_its_entry_point(tmp_path: Path) -> None:
    """A package that declares ``[project.entry-points."casebench.plugins"]`` is loaded without
    any flag (here: a dist-info folder on the path, as pip leaves one)."""
    site = tmp_path / "site"
    info = site / "casebench_toy-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: casebench-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[casebench.plugins]\ntoy = toy_backend\n")
    path = os.pathsep.join([str(REPO / "src"), str(REPO / "tests"), str(PLUGINS), str(site)])
    r = casebench("run", "--help", env={"PYTHONPATH": path})
    assert r.returncode == 0, r.stderr
    assert "--toy-verdict" in r.stdout


def test_a_plugin_that_fails_to_import_is_named() -> None:
    r = casebench("--plugin", "no_such_casebench_plugin", "score", "--help")
    assert r.returncode == 2 and "no_such_casebench_plugin" in r.stderr and "--plugin" in r.stderr


def test_readme_registry_tables_are_in_sync() -> None:
    """README.md's tables of backends, classifiers, metrics and modes are the registries' (run
    ``python -m casebench.cli.registry_tables --readme README.md`` after adding a built-in one)."""
    from casebench.cli import registry_tables

    text = (REPO / "README.md").read_text(encoding="utf-8")
    for kind in ("backends", "classifiers", "metrics"):
        assert f"<!-- registry:{kind} -->" in text, f"README.md has no <!-- registry:{kind} --> table"
    assert registry_tables.render_readme(text) == text, "README.md's registry tables are out of date: run " \
                                                "python -m casebench.cli.registry_tables --readme README.md"


def test_registry_describes_the_built_in_backends() -> None:
    from casebench.backends.registry import backends, info_for
    from casebench.runs.pricing import PriceTable

    prefixes = [b.prefix for b in backends() if b.cls is not None and b.cls.__module__.startswith("casebench.")]
    assert prefixes == ["openai", "anthropic", "hf"]
    assert info_for("openai/x").batch_api and info_for("anthropic/x").batch_api and not info_for("hf/x").batch_api
    assert info_for("hf/x").local and not info_for("openai/x").local
    assert {o.name for o in info_for("openai/x").options if not o.answers} == {"base_url", "api_key_env", "timeout"}
    table = PriceTable(builtin=False)
    assert table.lookup("hf/any").status == "local" and table.lookup("vllm/any").status == "local"
    assert table.lookup("local/any").status == "unknown"  # no such prefix


@pytest.mark.parametrize("bad", [
    dict(prefix="openai"),  # taken
    dict(prefix="a/b"),
])
def test_registering_a_taken_or_bad_prefix_is_refused(bad: dict[str, str]) -> None:
    from casebench.backends.registry import BackendInfo, RegistryError, backends, register_backend

    backends()

    class Other:
        def __init__(self, model: str) -> None: ...

    with pytest.raises(RegistryError):
        register_backend(BackendInfo(summary="x", cls=Other, **bad))


def test_a_flag_shared_with_another_backend_must_mean_the_same() -> None:
    """Two backends may share a flag (openai/ and anthropic/ share --base-url) only when it is the
    same option; a plugin reusing --device as a number is refused before it is registered."""
    from casebench.backends.registry import BackendInfo, Option, RegistryError, backends, info_for, register_backend

    backends()

    class Clash:
        def __init__(self, model: str, *, device: int = 0) -> None: ...

    with pytest.raises(RegistryError, match="--device"):
        register_backend(BackendInfo(prefix="clash", summary="x", cls=Clash,
                                     options=(Option("device", "a number", type="int"),)))
    assert info_for("clash/m") is None
    openai, anthropic = info_for("openai/m"), info_for("anthropic/m")
    assert openai.option("base_url") is anthropic.option("base_url")
