"""Optional parts: ``import casebench`` stays light, and a missing extra says what to install
(exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("numpy", "scipy", "torch", "transformers", "matplotlib", "openai", "anthropic")

# A child interpreter in which some modules cannot be imported, as on a machine without the extra.
BLOCK = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Block())
    from casebench.cli import main
    sys.argv = ["casebench", *{args!r}]
    main()
""")


def run_without(blocked: set[str], *args: str) -> subprocess.CompletedProcess:
    code = BLOCK.format(blocked=sorted(blocked), args=list(args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_casebench_loads_no_heavy_module():
    code = "import casebench, sys; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    out = subprocess.run([sys.executable, "-c", "import casebench, sys; print('numpy' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_names_resolve_lazily():
    code = ("import casebench, sys; f = casebench.score_predictions; m = casebench.get_mode('prob');"
            "print(callable(f), m.name, 'numpy' in sys.modules, callable(casebench.arun))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "prob", "True", "True"]


def test_hf_model_without_torch_names_the_extra(tmp_path, small_data_path):
    r = run_without({"torch"}, "run", "--model", "hf/some-model", "--mode", "prob", "--data", str(small_data_path),
                    "-o", str(tmp_path / "run"), "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "pip install 'casebench[hf]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_api_model_without_the_sdk_names_the_extra(tmp_path, small_data_path):
    for sdk, spec in (("openai", "openai/gpt-4o-mini"), ("anthropic", "anthropic/claude-x")):
        r = run_without({sdk}, "run", "--model", spec, "--mode", "binary", "--data", str(small_data_path),
                        "-o", str(tmp_path / sdk), "--no-progress")
        assert r.returncode == 2, r.stderr
        assert "pip install 'casebench[api]'" in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / sdk).exists()


def test_report_without_matplotlib_names_the_extra(tmp_path, exp_dir):
    r = run_without({"matplotlib"}, "report", str(exp_dir / "safety_gpt-4o" / "output_binary.json"),
                    "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2, r.stderr
    assert "pip install 'casebench[report]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_device_help_lists_only_accepted_values():
    from click.testing import CliRunner

    from casebench.backends.hf import DEVICES
    from casebench.cli import cli

    r = CliRunner().invoke(cli, ["run", "--help"])
    assert r.exit_code == 0
    line = " ".join(r.output.split())
    assert "[" + "|".join(DEVICES) + "]" in line and "mps" not in line
    r = CliRunner().invoke(cli, ["run", "--device", "mps", "--mode", "prob"])
    assert r.exit_code == 2 and "mps" in r.output
