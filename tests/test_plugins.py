"""Extending casebench (issue 16): a toy backend, a toy refusal classifier and a toy metric, each
one new file under tests/plugins/ with its registration, used through the CLI (``run``,
``refusal-eval``, ``score``) with nothing else edited; and the documentation's registry tables in sync.

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
    # every verdict unsafe: every resample gives 0, and a figure that is not a bounded mean gets no
    # point interval but the reason (issue 36)
    assert scored["toy_predicted_safe"] == 0.0 and "toy_predicted_safe" in scored["ci_notes"]
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


def test_documentation_registry_tables_are_in_sync() -> None:
    """The documentation's tables of backends, classifiers and metrics (README.md and docs/) are the
    registries' (run ``python -m casebench.cli.registry_tables --readme README.md docs/*.md`` after
    adding a built-in one), and each kind has its table somewhere."""
    from casebench.cli import registry_tables

    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    texts = {p: p.read_text(encoding="utf-8") for p in pages}
    for kind in ("backends", "classifiers", "metrics"):
        assert any(f"<!-- registry:{kind} -->" in t for t in texts.values()), f"no <!-- registry:{kind} --> table"
    for path, text in texts.items():
        assert registry_tables.render_readme(text) == text, f"{path.name}'s registry tables are out of date: run " \
            "python -m casebench.cli.registry_tables --readme README.md docs/*.md"


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


def _declared_capabilities(module: str) -> dict[str, dict[str, bool]]:
    """What each ``@backend`` class of a module declares, read from its source (not from the
    registry): the class body's ``capabilities = Capabilities(...)`` overridden by the
    decorator's ``text`` / ``p_safe`` / ``shared_samples``, with ``batch`` set by ``batch_api``."""
    import ast
    import importlib.util
    from dataclasses import asdict

    from casebench.backends.base import Capabilities

    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        deco = next((d for d in node.decorator_list if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "backend"),
                    None)
        if deco is None:
            continue
        caps = asdict(Capabilities())
        for stmt in node.body:
            if (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Call)
                    and getattr(stmt.value.func, "id", "") == "Capabilities"):
                caps.update({k.arg: ast.literal_eval(k.value) for k in stmt.value.keywords})
        kw = {k.arg: k.value for k in deco.keywords}
        for arg, field_ in (("text", "generate"), ("p_safe", "token_probs"), ("shared_samples", "shared_samples")):
            if arg in kw and ast.literal_eval(kw[arg]) is not None:
                caps[field_] = bool(ast.literal_eval(kw[arg]))
        caps["batch"] = "batch_api" in kw and not (isinstance(kw["batch_api"], ast.Constant) and kw["batch_api"].value is None)
        out[node.name] = caps
    return out


def test_every_capability_a_built_in_backend_declares_survives_registration() -> None:
    """Issue 24: the decorator rebuilt ``Capabilities`` from four fields and dropped
    ``per_answer``, so the runner never took the local backend's per-answer path."""
    from dataclasses import asdict

    from casebench.backends.registry import BUILTIN_MODULES, backends

    registered = {b.cls.__name__: b for b in backends() if b.cls is not None}
    checked = 0
    for module in BUILTIN_MODULES:
        for name, declared in _declared_capabilities(module).items():
            info = registered[name]
            assert asdict(info.capabilities) == declared, name
            assert asdict(info.cls.capabilities) == declared, name  # the class attribute too
            checked += 1
    assert checked == len(BUILTIN_MODULES)
    assert registered["HFBackend"].capabilities.per_answer  # the one that was lost


def test_a_plugin_class_keeps_every_declared_capability() -> None:
    """Every field of ``Capabilities``, including ones added later, passes through ``@backend``
    (run in a subprocess: a registration lasts as long as its process)."""
    code = (
        "from dataclasses import fields, replace\n"
        "from casebench.backends.base import Capabilities\n"
        "from casebench.backends.registry import backend, info_for\n"
        "flipped = replace(Capabilities(), **{f.name: not getattr(Capabilities(), f.name) for f in fields(Capabilities)"
        " if f.name != 'batch'})\n"
        "@backend('flip', summary='x', batch_api='m:C')\n"
        "class Flip:\n"
        "    capabilities = flipped\n"
        "    def __init__(self, model): pass\n"
        "got = info_for('flip/m').capabilities\n"
        "assert got == replace(flipped, batch=True), got\n"
        "assert Flip.capabilities == got\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_the_python_api_sees_plugins_named_in_the_environment(exp_dir: Path) -> None:
    """``import casebench`` then scoring, with no registry read first, sees a metric and a mode
    named in ``$CASEBENCH_PLUGINS`` (the registries load plugins when they are first read, whoever reads
    them), and the score table drawn afterwards shows it."""
    code = (
        "import casebench\n"
        f"p = casebench.load_published({str(exp_dir / 'safety_gpt-4o' / 'output_binary.json')!r})\n"
        "s = casebench.score_predictions(p, casebench.ScoringOptions(n_boot=0))\n"
        "print(round(s.values['toy_predicted_safe'], 6))\n"
        "from casebench.present.score_text import text_table\n"
        "print('toy: predicted safe' in text_table([s]))\n"
        "print(casebench.get_mode('yesno').file_name)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")]),
           "CASEBENCH_PLUGINS": f"{PLUGINS / 'toy_metric.py'},{PLUGINS / 'toy_mode.py'}"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    share, shown, mode_file = r.stdout.split()
    assert 0.0 < float(share) < 1.0 and shown == "True" and mode_file == "yesno"


def test_a_mode_plugin_goes_through_run_score_compare_report_and_the_inspect_task(tmp_path: Path) -> None:
    """Adding a mode is one file and its ``@mode`` (tests/plugins/toy_mode.py, ``yesno``): run
    (the toy backend answers it from ``Request.mode`` and ``Request.query``), score, compare with
    a built-in mode's run, report, and the inspect task's prompt, scorer and metric take it."""
    plugins = ["--plugin", str(PLUGINS / "toy_backend.py"), "--plugin", str(PLUGINS / "toy_mode.py")]
    data = str(FIXTURES / "small_cases.json")
    runs = {}
    for mode in ("yesno", "binary"):
        runs[mode] = tmp_path / mode
        r = casebench(*plugins, "run", "--model", "toy/judge", "--mode", mode, "--data", data, "--no-report",
                      "--no-progress", "-o", str(runs[mode]))
        assert r.returncode == 0, r.stderr
    manifest = json.loads((runs["yesno"] / "manifest.json").read_text())
    assert manifest["asked"]["mode"] == "yesno" and manifest["totals"]["answered"] == 8
    assert manifest["templates_source"] == "mode yesno" and manifest["asked"]["template_sha256"]  # its own template
    recs = [json.loads(x) for x in (runs["yesno"] / "records.jsonl").read_text().splitlines()]
    assert {r["text"] for r in recs} <= {"yes", "no"} and all(r["label"] in ("safe", "unsafe") for r in recs)
    # the toy backend's verdict hashes the query: the same labels as the binary run, case by case
    binary = {json.loads(x)["case"]: json.loads(x)["label"] for x in (runs["binary"] / "records.jsonl").read_text().splitlines()}
    assert {r["case"]: r["label"] for r in recs} == binary

    scored = casebench(*plugins, "score", str(runs["yesno"]), "--json", "--bootstrap", "0")
    assert scored.returncode == 0, scored.stderr
    s = json.loads(scored.stdout.splitlines()[0])
    assert s["mode"] == "yesno" and 0.0 <= s["accuracy"] <= 1.0

    compared = casebench(*plugins, "compare", str(runs["yesno"]), str(runs["binary"]), "--bootstrap", "50")
    assert compared.returncode == 0, compared.stderr
    assert "accuracy" in compared.stdout

    report = tmp_path / "report.html"
    r = casebench(*plugins, "report", str(runs["yesno"]), str(runs["binary"]), "-o", str(report))
    assert r.returncode == 0, r.stderr
    assert "yesno" in report.read_text(encoding="utf-8")

    # the inspect task (in a process of its own: the mode is registered by the plugin there)
    pytest.importorskip("inspect_ai")
    code = (
        "import asyncio, sys\n"
        "from casebench.plugins import load_plugins\n"
        f"load_plugins([{str(PLUGINS / 'toy_mode.py')!r}])\n"
        "from casebench.integrations.inspect_task import case_bench, case_bench_metrics, inspect_modes, judge_prompt, verdict\n"
        "from inspect_ai.model import ModelName, ModelOutput\n"
        "from inspect_ai.scorer import SampleScore, Target\n"
        "from inspect_ai.solver import TaskState\n"
        "assert 'yesno' in inspect_modes()\n"
        f"t = case_bench(data={data!r}, mode='yesno')\n"
        "solve, score = judge_prompt(mode='yesno'), verdict(mode='yesno')\n"
        "got = []\n"
        "for i, s in enumerate(t.dataset):\n"
        "    st = TaskState(ModelName('casebench/none'), s.id, 1, s.input, [], target=Target(s.target),\n"
        "                   metadata=dict(s.metadata))\n"
        "    st = asyncio.run(solve(st, None))\n"
        "    assert 'Should the chatbot respond?' in st.messages[-1].text\n"
        "    st.output = ModelOutput.from_content('casebench/none', 'yes' if i % 2 else 'No.')\n"
        "    sc = asyncio.run(score(st, Target(s.target)))\n"
        "    assert sc.metadata['mode'] == 'yesno'\n"
        "    got.append(SampleScore(score=sc, sample_id=s.id, sample_metadata=s.metadata))\n"
        "m = case_bench_metrics()(got)\n"
        "print(m['accuracy'])\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}
    env.pop("CASEBENCH_PLUGINS", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 0.0 <= float(r.stdout.split()[-1]) <= 1.0
