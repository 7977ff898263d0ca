"""Fails where the installed llama.cpp holds instructions outside the portable x86-64 set.

Why: llama.cpp's default build is native, so it uses every instruction set the build machine
advertises. Some virtual Intel machines of this project's kind advertise AMX (and AVX-512) that a
process there cannot run: the test server then dies with SIGILL on its first completion
(``tilezero %tmm4`` in ``libggml-cpu.so``), 14 tests error, and CI fails on that machine only. The
Makefile builds with ``LLAMA_CMAKE_ARGS`` (AVX2/FMA/F16C, no AVX-512, no AMX); this check reads the
built libraries' disassembly so a change of flags cannot bring the trap back unnoticed on a machine
that would not show it (an AMD one runs AVX-512 fine).

Usage: ``python tests/servers/isa_check.py [VENV_OR_LIBRARY ...]``; with no argument (or a venv
directory) it checks the ``llama_cpp`` package that this Python imports. Exit 0 when clean, 1 with
the offending library, instruction and count, 2 when nothing could be checked.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# AT&T syntax as objdump prints it: AMX tile registers, AVX-512's 512-bit and mask registers, and
# the AMX mnemonics (which may name no tile register, e.g. ``ldtilecfg (%rax)``).
FORBIDDEN = re.compile(
    r"%tmm\d|%zmm\d+|%k[0-7]\b|\b(?:ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|"
    r"tilestored|tdpb\w+|tdpfp16ps)\b"
)


@dataclass(frozen=True)
class Finding:
    """One library with instructions a portable build must not hold."""

    library: Path
    count: int
    first: str


def libraries(paths: list[str]) -> list[Path]:
    """The shared libraries to check: files given, or the ggml/llama libraries of ``llama_cpp``."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
    if found:
        return found
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return []
    pkg = Path(spec.origin).parent
    return sorted(p for p in pkg.rglob("*.so*") if p.is_file() and ("ggml" in p.name or "llama" in p.name))


def check(library: Path) -> Finding | None:
    """Disassemble one library; the first forbidden instruction and how many there are."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(library)],
        capture_output=True, text=True, check=True,
    ).stdout
    hits = [line.strip() for line in out.splitlines() if FORBIDDEN.search(line)]
    return Finding(library, len(hits), hits[0]) if hits else None


def main(argv: list[str]) -> int:
    if shutil.which("objdump") is None:
        print("isa_check: objdump not found (apt-get install binutils)", file=sys.stderr)
        return 2
    libs = libraries(argv)
    if not libs:
        print("isa_check: no llama.cpp library found (is llama-cpp-python installed?)", file=sys.stderr)
        return 2
    findings = [f for f in map(check, libs) if f is not None]
    for f in findings:
        print(f"isa_check: {f.library} holds {f.count} instructions outside the portable set "
              f"(AVX-512 or AMX), e.g. `{f.first}`: it would die with SIGILL on a machine that "
              "advertises them but cannot run them. Rebuild with the Makefile's LLAMA_CMAKE_ARGS "
              "(rm .venv/.llama-*; make test-deps).", file=sys.stderr)
    if not findings:
        print(f"isa_check: {len(libs)} llama.cpp libraries hold no AVX-512 or AMX instruction")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
