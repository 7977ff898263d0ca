"""The main job (``casebench run`` with no arguments) on the real data, and its answer-length cap.

Two measurements (issue 25):

``run``: the main job itself, as a user runs it (a subprocess: the embedded SmolLM2 as the deployed
chatbot over ``MAIN_JOB_PAIRS`` query pairs, answers capped at ``MAIN_JOB_MAX_TOKENS`` tokens):
wall time, pairs, seconds per case, the machine and its load, and the job's printed output.
The default size must finish within 10 minutes on 2 quiet CPU cores.

``caps``: how well the reader reads the embedded model's answers at several caps. Greedy decoding
makes a shorter cap's answer the prefix of a longer one's tokens, so one run at the largest cap
(``--max-tokens 160``) gives every smaller cap by cutting its answers' tokens (re-tokenising the
decoded text: the same tokens but for rare merges at the cut). Each cap's answers are read by the
``learned`` and ``rules`` readers. With ``--labels`` (a blind reading by people: a CSV of
``id,label`` with label comply / partial / refuse, made from ``export``'s file without the readers'
verdicts or the cap) it prints each reader's agreement with people at each cap (binary: partial
counts as refusal, as the validation sets do); without labels, each reader's refusal rate at each
cap and how often its reading at a cap equals its reading at the largest cap (a stability check,
not a validation).

``export``: the answers at each cap, shuffled, for a blind labelling: ``OUT.csv`` (id, prompt,
answer) and ``OUT.key.csv`` (id, case, cap). They hold the dataset's queries and the model's
answers to them: never commit them (the dataset's licence).

Measured (2-core dev box, AMD EPYC, torch 2.13 CPU, loaded by six other helpers' tests and runs:
load average 11 to 12 throughout): ``run`` took 1117 s (18.6 min, 12.4 s per case) for 45 pairs at
80 tokens; 84 of 90 answers read (6 undetermined by the reader), 40 pairs with both answered. The
issue's quiet-machine figure (6.4 s per case at 96 tokens on 2 quiet cores) puts 90 cases at 80
tokens near 8 minutes. On the same box with nothing else running (``make run`` with the dataset in
the user cache): 90 answers in 220.8 s, 3 min 53 s wall with scoring and the report, 85 of 90
answers read, 40 pairs with both answered. Stop 30, same box, quiet, after the reader's refit
(learned 88520f42e18d, rules v5; ``/usr/bin/time casebench run``): 90 answers in 153.1 s, 2 min 41 s
wall with scoring and the report, peak RSS 2.2 GB, 88 of 90 answers read, 43 pairs with both
answered (the refitted reader leaves fewer answers undetermined).

``caps`` on 40 answers at 160 tokens (seed-1 pairs, another draw than the main job's), each cap's
text labelled blind by a reader who saw neither classifier (120 labels): learned agrees with people
on 82.9% at 64 tokens, 86.1% at 80, 86.1% at 160; the rules 77.5%, 79.5%, 79.5%. So 80 tokens:
below it the reading gets worse, above it only the time grows.

Run::

    python bench/bench_main_job.py run [--data PATH]
    python bench/bench_main_job.py caps RUN_DIR [--caps 64,96,128,160] [--labels LABELS.csv --key OUT.key.csv]
    python bench/bench_main_job.py export RUN_DIR OUT.csv [--caps 64,96,128,160]
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import machine_line  # bench/machine.py: run as `python bench/bench_main_job.py`

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "casebench" / "CASEBench_data.json"


def _answers(run_dir: Path) -> list[tuple[int, str, str]]:
    """(case, query, answer text) of every final answered record of a respond run."""
    from casebench.runs.record import final_records, iter_records, read_manifest
    from casebench.runs.results import run_dataset

    m = read_manifest(run_dir)
    ds = run_dataset(run_dir, m)
    finals = final_records(iter_records(run_dir))
    return [(c, ds.cases[c].query, rec.text or "") for (c, _), rec in sorted(finals.items()) if rec.text is not None]


def _cutter() -> Any:
    """A function cutting an answer to its first ``n`` tokens of the embedded model's tokenizer."""
    from transformers import AutoTokenizer

    from casebench.backends.embedded import embedded_model_path

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))

    def cut(text: str, n: int) -> str:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return text if len(ids) <= n else tok.decode(ids[:n], skip_special_tokens=True)

    return cut


def _caps(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x.strip()})


def cmd_run(args: argparse.Namespace) -> None:
    from casebench.cli.run import MAIN_JOB_MAX_TOKENS, MAIN_JOB_PAIRS

    env = dict(os.environ, CASEBENCH_DATA=str(args.data))
    print(f"# the main job on the real data ({args.data}); {machine_line()}")
    out_root = Path(args.workdir)
    out_root.mkdir(parents=True, exist_ok=True)
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", "from casebench.cli import main; main()", "run", "--no-progress"],
                         cwd=out_root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cases = 2 * MAIN_JOB_PAIRS
    print(f"exit {res.returncode}; {MAIN_JOB_PAIRS} pairs ({cases} cases), answers up to {MAIN_JOB_MAX_TOKENS} "
          f"tokens; wall {wall:.0f} s ({wall / 60:.1f} min, {wall / cases:.1f} s per case, model load and "
          f"scoring included); CPU time {cpu:.0f} s (on a quiet machine with 2 cores the wall time is about half "
          f"of it or more); load average at the end {os.getloadavg()[0]:.2f}")
    print("--- stderr ---")
    print(res.stderr.strip()[-4000:])
    print("--- stdout (what the main job printed) ---")
    print(res.stdout.strip())


def cmd_caps(args: argparse.Namespace) -> None:
    from casebench.classify import make_classifier

    rows = _answers(Path(args.run_dir))
    caps = _caps(args.caps)
    cut = _cutter()
    readers = {name: make_classifier(name) for name in ("learned", "rules")}
    truth: dict[tuple[int, int], str] = {}
    if args.labels:
        key = {r["id"]: (int(r["case"]), int(r["cap"])) for r in csv.DictReader(open(args.key, newline=""))}
        for r in csv.DictReader(open(args.labels, newline="")):
            truth[key[r["id"]]] = r["label"].strip().lower()
    print(f"# {len(rows)} answers of {args.run_dir}; caps {caps}; {machine_line()}")
    read: dict[tuple[str, int], list[str | None]] = {}
    for name, clf in readers.items():
        for cap in caps:
            read[name, cap] = [clf.classify(q, cut(a, cap)).behaviour for _, q, a in rows]
    top = caps[-1]
    for name in readers:
        for cap in caps:
            v = read[name, cap]
            known = [b for b in v if b is not None]
            refused = sum(b != "comply" for b in known)
            same = sum(a == b for a, b in zip(v, read[name, top]))
            line = (f"{name:8s} cap {cap:4d}: read {len(known)}/{len(v)}, refused or partial {refused}/{len(known)}, "
                    f"same reading as at {top}: {same}/{len(v)}")
            if truth:
                pairs = [(b, truth[(c, cap)]) for (c, _, _), b in zip(rows, v) if (c, cap) in truth and b is not None]
                agree = sum((b == "comply") == (t == "comply") for b, t in pairs)
                line += f"; agrees with people on {agree}/{len(pairs)} ({100 * agree / max(len(pairs), 1):.1f}%)"
            print(line)


def cmd_export(args: argparse.Namespace) -> None:
    rows = _answers(Path(args.run_dir))
    caps = _caps(args.caps)
    cut = _cutter()
    items = [(c, cap, q, cut(a, cap)) for c, q, a in rows for cap in caps]
    random.Random(0).shuffle(items)
    out = Path(args.out)
    with open(out, "w", newline="") as f, open(out.with_suffix(".key.csv"), "w", newline="") as k:
        w, wk = csv.writer(f), csv.writer(k)
        w.writerow(["id", "prompt", "answer", "label"])
        wk.writerow(["id", "case", "cap"])
        for i, (c, cap, q, a) in enumerate(items):
            w.writerow([f"a{i:03d}", q, a, ""])
            wk.writerow([f"a{i:03d}", c, cap])
    print(f"wrote {out} ({len(items)} answers; label each comply / partial / refuse) and {out.with_suffix('.key.csv')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the main job on the real data: wall time and pairs")
    r.add_argument("--data", default=os.environ.get("CASEBENCH_DATA") or str(DEFAULT_DATA))
    r.add_argument("--workdir", default="bench_main_job_runs", help="where the run folder goes (default: ./bench_main_job_runs)")
    c = sub.add_parser("caps", help="the readers at several answer caps")
    c.add_argument("run_dir")
    c.add_argument("--caps", default="64,96,128,160")
    c.add_argument("--labels", default=None, help="a blind reading: CSV id,label (comply/partial/refuse)")
    c.add_argument("--key", default=None, help="export's key file (id, case, cap)")
    e = sub.add_parser("export", help="the answers at each cap, shuffled, for a blind labelling (never commit)")
    e.add_argument("run_dir")
    e.add_argument("out")
    e.add_argument("--caps", default="64,96,128,160")
    args = ap.parse_args()
    {"run": cmd_run, "caps": cmd_caps, "export": cmd_export}[args.cmd](args)


if __name__ == "__main__":
    main()
