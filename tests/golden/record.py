"""Record (or check) the text outputs of the scoring commands on the published files.

The goldens next to this file are what ``score``, ``compare``, ``ablate``, ``human`` and
``report`` printed on ``../shared/casebench`` (the 18 published output files, the published
ablation file and the dataset) when they were recorded; ``tests/test_golden_outputs.py`` reruns
every command and compares byte for byte, so a refactoring that changes a figure is caught.

Only figures, category names, model names and file paths are stored: no query or answer text.
The human-vote JSON holds one row per query pair (case indices and vote shares); that list is
stored as its SHA-256 and row count, so the per-case votes of the gated dataset are not
committed. The report is compared as the text of its HTML with its generation time and version
blanked; each embedded PNG is stored as a short SHA-256 of its bytes (deterministic for one matplotlib on one machine; a new matplotlib means recording again).

Record again after a deliberate change of figures (and say why in the commit):

    PYTHONPATH=src python tests/golden/record.py

``--check`` compares instead of writing (what the test does); ``--only NAME`` limits to one.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import struct
import html
import json
import os
import re
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared" / "casebench"
BOOT = ["--bootstrap", "200"]

#: the 18 published output files (every model, every mode), relative to ``SHARED``
MAIN_FILES = sorted(
    str(p.relative_to(SHARED)) for p in (SHARED / "exp").glob("safety_*/output_*.json")
    if p.name in ("output_binary.json", "output_score.json", "output_logits.json")
) if (SHARED / "exp").is_dir() else []
ABLATION = ["exp/safety_gpt-4o-mini-2024-07-18/output_score.json",
            "exp/safety_gpt-4o-mini-2024-07-18/output_score_sender.json"]
DATA = "CASEBench_data.json"


def _by_mode(mode: str) -> list[str]:
    return [f for f in MAIN_FILES if f.endswith(f"output_{mode}.json")]


#: golden name -> the command line (run with ``SHARED`` as the working directory)
CASES: dict[str, list[str]] = {
    "score_table": ["score", *MAIN_FILES, *ABLATION[1:], *BOOT],
    "score_csv": ["score", *MAIN_FILES, *ABLATION[1:], "--format", "csv", *BOOT],
    "score_md": ["score", *MAIN_FILES, *ABLATION[1:], "--format", "md", *BOOT],
    "score_json": ["score", *MAIN_FILES, *ABLATION[1:], "--json", *BOOT],
    "score_paper_compat": ["score", *MAIN_FILES, *ABLATION[1:], "--paper-compat", *BOOT],
    "score_paper_compat_json": ["score", *MAIN_FILES, "--paper-compat", "--json", *BOOT],
    "score_votes": ["score", *MAIN_FILES, "--label-source", "votes", *BOOT],
    "score_by": ["score", *MAIN_FILES, "--by", "category", "--by", "intent", *BOOT],
    "score_by_json": ["score", *_by_mode("score")[:2], "--by", "category", "--by", "intent", "--json", *BOOT],
    "compare_binary": ["compare", *_by_mode("binary"), *BOOT],
    "compare_score": ["compare", *_by_mode("score"), *BOOT],
    "compare_logits_json": ["compare", *_by_mode("logits"), "--json", *BOOT],
    "compare_modes": ["compare", "exp/safety_gpt-4o/output_binary.json", "exp/safety_gpt-4o/output_score.json",
                      "exp/safety_llama370B/output_logits.json", *BOOT],
    "compare_paper_compat": ["compare", *_by_mode("score")[:3], "--paper-compat", *BOOT],
    "compare_votes": ["compare", *_by_mode("logits"), "--label-source", "votes", *BOOT],
    "ablate": ["ablate", *ABLATION, *BOOT],
    "ablate_json": ["ablate", *ABLATION, "--json", *BOOT],
    "ablate_paper_compat": ["ablate", *ABLATION, "--paper-compat", *BOOT],
    "human": ["human", DATA],
    "human_votes": ["human", DATA, "--label-source", "votes", "--draws", "200"],
    "human_json": ["human", DATA, "--json", "--draws", "200"],
    "report": ["report", "exp/safety_gpt-4o/output_binary.json", "exp/safety_gpt-4o/output_score.json",
               "exp/safety_llama370B/output_logits.json", *ABLATION, "--data", DATA, "--hide-text", *BOOT],
}


def _hash_pairs(out: str) -> str:
    """The human JSON with its per-pair rows replaced by their SHA-256 and count."""
    d = json.loads(out)
    rows = d.get("pairs", [])
    blob = json.dumps(rows, sort_keys=True).encode("utf-8")
    d["pairs"] = {"rows": len(rows), "sha256": hashlib.sha256(blob).hexdigest()}
    return json.dumps(d, indent=2, ensure_ascii=False) + "\n"


def _report_text(page: str) -> str:
    """The report page as text: one line per block element, embedded PNGs as hashes, the
    download links' contents decoded, the generation time and version blanked."""

    def decode(m: re.Match[str]) -> str:
        body = base64.b64decode(m.group(2)).decode("utf-8")
        return f"\n[download {m.group(1)}]\n{body}\n[end download]\n"

    def image(m: re.Match[str]) -> str:
        # the size, not a hash: a plot's pixels move with the last bits of a float (numpy builds
        # and CPUs differ there), while the figures it draws are in the tables beside it
        png = base64.b64decode(m.group(1))
        width, height = struct.unpack(">II", png[16:24])
        return f"[image {width}x{height}]"

    page = re.sub(r'<img src="data:image/png;base64,([^"]*)"[^>]*>', image, page)
    page = re.sub(r'<a download="([^"]*)" href="data:[^;]*;charset=utf-8;base64,([^"]*)">[^<]*</a>', decode, page)
    page = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    page = re.sub(r"casebench [^ ]+ · generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "casebench VERSION · generated TIME",
                  page)
    page = re.sub(r"</(h1|h2|h3|p|tr|table|figure|figcaption|li|div|nav)>|<br>", "\n", page)
    page = re.sub(r"</t[dh]>", " | ", page)
    page = re.sub(r"<[^>]+>", "", page)
    lines = [html.unescape(x).strip() for x in page.splitlines()]
    return "\n".join(x for x in lines if x) + "\n"


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_case(name: str) -> str:
    """Run one golden's command in-process (``SHARED`` as the working directory); its text."""
    from click.testing import CliRunner

    from casebench.cli import cli

    args = list(CASES[name])
    post: Callable[[str], str] = lambda s: s
    with tempfile.TemporaryDirectory() as tmp, _cwd(SHARED):
        if name == "report":
            out = Path(tmp) / "report.html"
            args += ["-o", str(out)]
        r = CliRunner().invoke(cli, args, catch_exceptions=False)
        if r.exit_code != 0:
            raise RuntimeError(f"{name}: exit {r.exit_code}\n{r.output}")
        text = r.stdout
        if name == "report":
            text = _report_text(out.read_text(encoding="utf-8"))
        elif name == "human_json":
            post = _hash_pairs
    return post(text)


def golden_path(name: str) -> Path:
    return HERE / f"{name}.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the stored goldens instead of writing")
    ap.add_argument("--only", action="append", default=[], help="one golden by name (repeatable)")
    args = ap.parse_args()
    if not (SHARED / DATA).is_file():
        print(f"no data at {SHARED}", file=sys.stderr)
        return 2
    bad = 0
    for name in args.only or list(CASES):
        text = run_case(name)
        path = golden_path(name)
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            print(f"{name}: {'same' if same else 'DIFFERS'}")
            bad += not same
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{name}: {len(text)} characters -> {path.relative_to(REPO)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
