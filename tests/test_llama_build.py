"""The llama.cpp build the tests serve from holds only portable instructions (issue 33).

A native build on a machine that advertises AMX it cannot run dies with SIGILL on the first
completion; ``servers/isa_check.py`` reads the disassembly so an AMD machine (which runs AVX-512)
still catches a build with the wrong flags. The checker is tested on objects assembled here, one
with an AMX instruction, one with AVX-512, one with only AVX2, then on the installed library.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).resolve().parent / "servers" / "isa_check.py"

needs_binutils = pytest.mark.skipif(
    shutil.which("as") is None or shutil.which("objdump") is None, reason="binutils (as, objdump) not installed"
)


def _assemble(tmp_path: Path, name: str, body: str) -> Path:
    src = tmp_path / f"{name}.s"
    src.write_text(f".text\n.globl f\nf:\n{body}\n    ret\n")
    obj = tmp_path / f"{name}.o"
    subprocess.run(["as", "-o", str(obj), str(src)], check=True)
    return obj


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True)


@needs_binutils
@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        ("    tilezero %tmm4", 1),
        ("    vpaddd %zmm1, %zmm2, %zmm3", 1),
        ("    kmovw %k1, %eax", 1),
        ("    vpaddd %ymm1, %ymm2, %ymm3\n    vfmadd231ps %ymm1, %ymm2, %ymm3\n    vcvtph2ps %xmm1, %ymm2", 0),
    ],
    ids=["amx", "avx512", "avx512-mask", "avx2-fma-f16c"],
)
def test_checker_finds_what_a_portable_build_must_not_hold(tmp_path: Path, body: str, verdict: int) -> None:
    obj = _assemble(tmp_path, "probe", body)
    proc = _run(str(obj))
    assert proc.returncode == verdict, proc.stderr
    if verdict:
        assert "outside the portable set" in proc.stderr and str(obj) in proc.stderr


@needs_binutils
def test_installed_llama_cpp_is_portable() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test-deps)")
    proc = _run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hold no AVX-512 or AMX instruction" in proc.stdout
