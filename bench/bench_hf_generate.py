"""Text generation with the embedded SmolLM2-135M-Instruct: what batching, stopping at the verdict
and sharing a prefill between samples buy, each measured side by side in one run.

Three parts (``--parts``, default all), on real prompts from the dataset
(``../shared/casebench/CASEBench_data.json``; the 45-case subset is
``stratified_indices(dataset, 45)``, one case per category):

  throughput  generated tokens per second at batch sizes 1, 4, 8, 16 (``--batch-sizes``), greedy,
              ``--max-tokens`` (default 128) new tokens without a stop, on the cases' queries
              asked as a chatbot would be (long answers, so the decode steps dominate). Checks
              that every batch size gives the same greedy text as batch 1.
  stop        binary and score mode prompts over the 45 cases, greedy, up to 256 tokens: full
              answers against stopping at the verdict. Generated tokens and seconds per case,
              and whether the verdicts are identical.
  samples     score mode, 3 samples per case at temperature 1, stopping at the verdict: one
              prefill per case (the cache repeated per sample) against one prefill per sample.

Batch sizes of the stop/samples parts: ``--batch-size`` (default: the backend's generation
default). Methods are interleaved block by block, so load from other processes hits them alike;
the load average is printed with the figures. Usage:

    python bench/bench_hf_generate.py [--parts throughput,stop,samples] [--cases 45] [--prompts 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from machine import machine_line  # bench/machine.py: run as `python bench/<name>.py`
from typing import Any, Callable

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "CASEBench_data.json"
SYSTEM = "You are a helpful assistant."


def load_cases(n: int) -> list[Any]:
    if not DATA.is_file():
        raise SystemExit(f"this bench needs the real dataset at {DATA}")
    from casebench.data import load_dataset

    ds = load_dataset(DATA)
    from casebench.runs.select import stratified_indices
    cases = list(ds)
    return [cases[i] for i in stratified_indices(ds, n)]


def verdict_tools(mode: str) -> tuple[Callable[[str], Any], Callable[[str], bool]]:
    """(verdict of an answer, stop predicate) for a text mode, from the modes' own parsers."""
    from casebench.parse import parse_binary, parse_score

    from casebench.modes import MODES

    m = MODES[mode]
    stop = m.stopper()
    prefix = m.parse_prefix

    parse = parse_binary if mode == "binary" else parse_score

    def verdict(text: str) -> Any:
        p = parse(text)
        if not p.ok:
            p = prefix(text)
        if p is None or not p.ok:
            return None
        return p.label if mode == "binary" else p.score

    return verdict, stop


def run(backend: Any, requests: list[Any], settings: Any) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    answers = asyncio.run(backend.answer(requests, settings))
    return time.perf_counter() - started, answers


def part_throughput(backend: Any, cases: list[Any], sizes: list[int], max_tokens: int, n_prompts: int) -> None:
    from casebench.backends.base import GenerationSettings, Request

    prompts = [c.query for c in cases[:n_prompts]]
    settings = GenerationSettings(temperature=0.0, max_tokens=max_tokens)
    reqs = [Request(case=i, sample=0, prompt=p, system=SYSTEM) for i, p in enumerate(prompts)]
    block = max(sizes)
    totals = {bs: [0.0, 0, []] for bs in sizes}
    for round_, lo in enumerate(range(0, len(reqs), block)):
        chunk = reqs[lo : lo + block]
        order = sizes[round_ % len(sizes):] + sizes[: round_ % len(sizes)]
        for bs in order:
            backend.generation_batch_size = bs
            secs, answers = run(backend, chunk, settings)
            totals[bs][0] += secs
            totals[bs][1] += sum(a.usage["completion_tokens"] for a in answers)
            totals[bs][2].extend(a.text for a in answers)
        print(f"  throughput: {lo + len(chunk)}/{len(reqs)} prompts, load {os.getloadavg()[0]:.1f}", flush=True)
    base_tps = totals[sizes[0]][1] / totals[sizes[0]][0]
    print(f"\nthroughput: {len(reqs)} real queries answered as a chatbot, greedy, up to {max_tokens} new tokens")
    print(f"{'batch':>5s} {'seconds':>8s} {'tokens':>7s} {'tokens/s':>9s} {'vs batch ' + str(sizes[0]):>11s} {'same text as batch ' + str(sizes[0]):>22s}")
    ref = totals[sizes[0]][2]
    for bs in sizes:
        secs, toks, texts = totals[bs]
        same = sum(a == b for a, b in zip(texts, ref))
        print(f"{bs:5d} {secs:8.1f} {toks:7d} {toks / secs:9.1f} {toks / secs / base_tps:10.2f}x {same:>15d}/{len(ref)}")


def part_stop(backend: Any, cases: list[Any], batch_size: int) -> None:
    from casebench.backends.base import GenerationSettings, Request
    from casebench.modes import render_prompt

    backend.generation_batch_size = batch_size
    settings = GenerationSettings(temperature=0.0, max_tokens=256)
    for mode in ("binary", "score"):
        verdict, stop = verdict_tools(mode)
        prompts = [render_prompt(c, mode) for c in cases]
        block = batch_size
        res = {"full": [0.0, [], []], "stop": [0.0, [], []]}
        for round_, lo in enumerate(range(0, len(prompts), block)):
            idx = range(lo, min(lo + block, len(prompts)))
            for how in (("full", "stop") if round_ % 2 == 0 else ("stop", "full")):
                reqs = [Request(case=i, sample=0, prompt=prompts[i], system=SYSTEM,
                                stop=stop if how == "stop" else None) for i in idx]
                secs, answers = run(backend, reqs, settings)
                res[how][0] += secs
                res[how][1].extend(a.usage["completion_tokens"] for a in answers)
                res[how][2].extend(verdict(a.text) for a in answers)
            print(f"  stop/{mode}: {idx[-1] + 1}/{len(prompts)} cases, load {os.getloadavg()[0]:.1f}", flush=True)
        n = len(prompts)
        full, cut = res["full"], res["stop"]
        same = sum(a == b for a, b in zip(full[2], cut[2]))
        readable = sum(v is not None for v in full[2])
        print(f"\nstop at the verdict, {mode} mode, {n} cases, greedy, batch {batch_size}, max 256 tokens")
        print(f"{'':18s} {'tokens/case':>11s} {'s/case':>8s}")
        print(f"{'full answers':18s} {statistics.mean(full[1]):11.1f} {full[0] / n:8.2f}")
        print(f"{'stop at verdict':18s} {statistics.mean(cut[1]):11.1f} {cut[0] / n:8.2f}")
        print(f"ratio: {statistics.mean(full[1]) / statistics.mean(cut[1]):.2f}x fewer tokens, "
              f"{full[0] / cut[0]:.2f}x less time; identical verdicts {same}/{n} "
              f"({readable} full answers had a readable verdict)")


def part_samples(backend: Any, cases: list[Any], batch_size: int, samples: int = 3) -> None:
    from casebench.backends.base import GenerationSettings, Request
    from casebench.modes import render_prompt

    backend.generation_batch_size = batch_size
    verdict, stop = verdict_tools("score")
    settings = GenerationSettings(temperature=0.0, max_tokens=256, seed=0)
    prompts = [render_prompt(c, "score") for c in cases]
    per_block = max(1, batch_size // samples)
    res = {"one prefill": [0.0, 0, 0], "a prefill per sample": [0.0, 0, 0]}
    for round_, lo in enumerate(range(0, len(prompts), per_block)):
        idx = range(lo, min(lo + per_block, len(prompts)))
        reqs = [Request(case=i, sample=s, prompt=prompts[i], system=SYSTEM, temperature=1.0, stop=stop)
                for i in idx for s in range(samples)]
        names = list(res) if round_ % 2 == 0 else list(reversed(res))
        for name in names:
            backend.share_prefill = name == "one prefill"
            secs, answers = run(backend, reqs, settings)
            res[name][0] += secs
            res[name][1] += sum(a.usage["completion_tokens"] for a in answers)
            res[name][2] += sum(verdict(a.text) is not None for a in answers)
        print(f"  samples: {idx[-1] + 1}/{len(prompts)} cases, load {os.getloadavg()[0]:.1f}", flush=True)
    backend.share_prefill = True
    n = len(prompts)
    print(f"\nscore mode, {samples} samples per case at temperature 1, stop at the verdict, {n} cases, "
          f"batch {batch_size} sequences")
    print(f"{'':22s} {'s/case':>8s} {'tokens/case':>11s} {'readable':>9s}")
    for name, (secs, toks, ok) in res.items():
        print(f"{name:22s} {secs / n:8.2f} {toks / n:11.1f} {ok:>5d}/{n * samples}")
    a, b = res["a prefill per sample"][0], res["one prefill"][0]
    print(f"ratio: one prefill is {a / b:.2f}x faster per case")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="throughput,stop,samples")
    ap.add_argument("--cases", type=int, default=45, help="stratified cases for the stop and samples parts")
    ap.add_argument("--prompts", type=int, default=16, help="prompts for the throughput part")
    ap.add_argument("--batch-sizes", default="1,4,8,16", help="throughput part")
    ap.add_argument("--batch-size", type=int, default=None, help="stop and samples parts")
    ap.add_argument("--max-tokens", type=int, default=128, help="throughput part")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from casebench.backends.hf import HFBackend

    backend = HFBackend("smollm2-135m-instruct", device=args.device, system=SYSTEM)
    bs = args.batch_size or backend.generation_batch_size
    print(machine_line(), flush=True)
    parts = args.parts.split(",")
    cases = load_cases(max(args.cases, args.prompts))
    if "throughput" in parts:
        sizes = [int(s) for s in args.batch_sizes.split(",")]
        part_throughput(backend, cases, sizes, args.max_tokens, args.prompts)
    if "stop" in parts:
        part_stop(backend, cases[: args.cases], bs)
    if "samples" in parts:
        part_samples(backend, cases[: args.cases], bs)
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
