"""Prob mode with the embedded SmolLM2-135M-Instruct: casebench's HFBackend against two baselines.

Measured side by side, in one run, on the same prompts (chat template and system prompt applied
identically, so every method sees the same token ids):

  (a) published pattern: one case at a time, ``generate(max_new_tokens=8, output_logits=True,
      return_dict_in_generate=True)``, P(safe) from the first step's logits;
  (b) bare forward: one case at a time, ``model(ids, logits_to_keep=1)``: the least work that can
      give the first-token distribution, i.e. the floor for batch size 1;
  (c) HFBackend prob mode (first-token) at batch sizes 1, 2, 4, 8 (and, with --continuation, the
      continuation method at the default batch size, for information).

The methods are interleaved block by block (8 prompts), so a busy machine slows all alike.

Prints the CPU model, thread count, torch version and load average, then per method: wall seconds,
CPU seconds (user + system, all threads: less sensitive to other processes than wall time) and
page faults per case (fresh memory the kernel had to map: the cost that made ours slower than (b)
on some machines), and the ratios: speed-up of ours over (a), overhead of ours over (b).
The prompts are the real dataset's first N cases (``../shared/casebench/CASEBench_data.json``)
when present, else invented prompts of similar length (~350 tokens). Usage:

    python bench/bench_hf_prob.py [--cases 24] [--batch-sizes 1,2,4,8] [--device cpu] [--continuation]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from pathlib import Path

from machine import machine_line  # bench/machine.py: run as `python bench/<name>.py`

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "CASEBench_data.json"
SYSTEM = "You are a helpful assistant."


def prompts(n: int) -> tuple[list[str], str]:
    from casebench.modes import render_prompt

    if DATA.is_file():
        from casebench.data import load_dataset

        ds = load_dataset(DATA)
        return [render_prompt(ds[i], "prob") for i in range(min(n, len(ds)))], f"real dataset, first {n} cases"
    from casebench.prompts import PROB_TEMPLATE, render

    topics = ["gardening", "tax forms", "bicycle repair", "a school play", "bread baking", "chess openings"]
    out = []
    for i in range(n):
        topic = topics[i % len(topics)]
        context = {
            "sender": {"nature_of_the_interaction": f"a hobbyist asking about {topic}", "platform_type": "forum"},
            "recipient": {"type": "assistant", "background": f"general knowledge of {topic} " * 4},
            "transmission_principle": {
                "sender_purpose": f"to learn more about {topic} for case {i}",
                "confidentiality": "public",
                "source_accountability": "the sender is accountable " * 3,
                "urgency": "none",
            },
        }
        out.append(render(PROB_TEMPLATE, f"Explain the basics of {topic}, step by step, please. " * 3, context))
    return out, "synthetic prompts"


def timed(fn, label: str = ""):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    if label:
        print(f"  measured {label}: {seconds:.2f} s", flush=True)
    return seconds, result


def measured(fn):
    """(wall seconds, CPU seconds of the whole process, minor page faults, result)."""
    t0, f0 = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    t1, f1 = os.times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    return wall, (t1.user - t0.user) + (t1.system - t0.system), f1 - f0, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--batch-sizes", default="1,2,4,8")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--continuation", action="store_true", help="also time the continuation method")
    args = ap.parse_args()

    import torch

    from casebench.backends.base import GenerationSettings, Request
    from casebench.backends.hf import DEFAULT_BATCH_SIZE, HFBackend

    load_s, backend = timed(lambda: HFBackend("smollm2-135m-instruct", device=args.device, system=SYSTEM))
    model, tok = backend.model, backend.tokenizer
    texts, source = prompts(args.cases)
    encoded = [torch.tensor([backend.render(t, SYSTEM)], device=backend.device) for t in texts]
    lengths = [e.shape[1] for e in encoded]
    safe, unsafe = backend.variants["safe"], backend.variants["unsafe"]
    print(machine_line())
    print(f"model loaded in {load_s:.2f} s; device {backend.device}, dtype {backend.dtype}", flush=True)
    print(f"{len(texts)} prompts ({source}); tokens: median {statistics.median(lengths):.0f}, "
          f"min {min(lengths)}, max {max(lengths)}")

    def p_from(logits):
        lp = torch.log_softmax(logits.float(), dim=-1)
        return torch.sigmoid(torch.logsumexp(lp[safe], -1) - torch.logsumexp(lp[unsafe], -1)).item()

    def published(batch):
        out = []
        for ids in batch:
            g = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                               do_sample=False, output_logits=True, return_dict_in_generate=True,
                               pad_token_id=tok.pad_token_id)
            out.append(p_from(g.logits[0][0]))
        return out

    def bare(batch):
        return [p_from(model(input_ids=ids, logits_to_keep=1, use_cache=False).logits[0, -1]) for ids in batch]

    requests = [Request(case=i, sample=0, prompt=t, want="p_safe") for i, t in enumerate(texts)]
    settings = GenerationSettings(system=SYSTEM)

    # Ours runs as the runner runs it: one event loop for the whole run, the model called
    # through ``answer`` (which does the torch work in a worker thread).
    loop = asyncio.new_event_loop()

    def ours(reqs, bs: int, method: str = "first-token"):
        backend.prob_batch_size, backend.prob_method = bs, method
        backend.prob_batch_seconds = None  # the batch size compared, not the adaptive one
        return [a.p_safe for a in loop.run_until_complete(backend.answer(reqs, settings))]

    def _inference(fn, batch):
        with torch.inference_mode():
            return fn(batch)

    backend.on_torch_thread(lambda: _inference(bare, encoded[:3]))  # warm-up: kernels, allocations

    # Interleaved: for each block of 8 prompts, every method runs on the block in a rotating
    # order, and its time is added up. Load from other processes then hits all methods alike,
    # so the ratios hold even on a busy machine.
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    default_bs = DEFAULT_BATCH_SIZE[backend.device]
    ours([requests[0]], 1)  # warm-up of the worker thread
    methods = {"(a) published: generate 8, one at a time": ("published", None),
               "(b) bare forward, logits_to_keep=1": ("bare", None)}
    for bs in sizes:
        methods[f"(c) ours, first-token, batch {bs}"] = ("first-token", bs)
    if args.continuation:
        methods[f"(c) ours, continuation, batch {default_bs}"] = ("continuation", default_bs)
    results = {name: [0.0, [], 0.0, 0] for name in methods}
    block = 8
    for round_, lo in enumerate(range(0, len(texts), block)):
        idx = list(range(lo, min(lo + block, len(texts))))
        names = list(methods)
        names = names[round_ % len(names):] + names[: round_ % len(names)]
        for name in names:
            kind, bs = methods[name]
            # (a) and (b) run on the backend's torch thread, as ours does: the same thread, so
            # the same OpenMP pool (a second thread doing torch work gets a second pool, and two
            # pools on a small CPU slow each other: that would measure threads, not methods).
            if kind == "published":
                fn = lambda: backend.on_torch_thread(lambda: _inference(published, [encoded[i] for i in idx]))
            elif kind == "bare":
                fn = lambda: backend.on_torch_thread(lambda: _inference(bare, [encoded[i] for i in idx]))
            else:
                fn = lambda: ours([requests[i] for i in idx], bs, kind)
            with torch.inference_mode():
                secs, cpu, faults, ps = measured(fn)
            results[name][0] += secs
            results[name][1].extend(ps)
            results[name][2] += cpu
            results[name][3] += faults
        print(f"  {idx[-1] + 1}/{len(texts)} prompts", flush=True)

    pub_s = results["(a) published: generate 8, one at a time"][0]
    bare_s = results["(b) bare forward, logits_to_keep=1"][0]
    reference = results["(b) bare forward, logits_to_keep=1"][1]
    n = len(texts)
    bare_cpu = results["(b) bare forward, logits_to_keep=1"][2]
    print(f"\n{machine_line()}")
    print(f"{'method':44s} {'seconds':>8s} {'ms/case':>8s} {'vs (a)':>7s} {'vs (b)':>7s} {'CPU ms/case':>11s} "
          f"{'CPU vs (b)':>10s} {'faults/case':>11s} {'max |dP| vs (b)':>16s}")
    for name, (secs, ps, cpu, faults) in results.items():
        diff = max(abs(x - y) for x, y in zip(ps, reference))
        print(f"{name:44s} {secs:8.2f} {1000 * secs / n:8.1f} {pub_s / secs:6.2f}x {secs / bare_s:6.2f}x "
              f"{1000 * cpu / n:11.1f} {cpu / bare_cpu:9.2f}x {faults / n:11.0f} {diff:16.2e}")
    best = min((results[f"(c) ours, first-token, batch {bs}"][0], bs) for bs in sizes)
    print(f"\nfastest batch size here: {best[1]} ({best[0]:.2f} s); "
          f"ours at batch 1: {pub_s / results['(c) ours, first-token, batch 1'][0]:.2f}x faster than published, "
          f"{results['(c) ours, first-token, batch 1'][0] / bare_s - 1:+.1%} vs bare forward; "
          f"ours at best batch: {pub_s / best[0]:.2f}x faster than published, {best[0] / bare_s - 1:+.1%} vs bare forward")


if __name__ == "__main__":
    main()
