"""The wall-clock figures the tests used to assert, measured here as ratios side by side.

Tests check behaviour deterministically; how long things take on the clock depends on the
machine and its load, so it is measured here, each figure against a baseline taken in the same
run on the same machine:

1. **Rules refusal classifier vs generation**: microseconds per answer of the offline classifier
   (best of 5 passes; short answers and ~6,000-character ones) against the time the tiny test
   model (2-layer Llama, SmolLM2's tokenizer, built at run time) takes to generate one 16-token
   answer. The issue's budget: classifying costs under 5% of a respond run.
2. **Retry-After**: a scripted server answers one request with 429 and ``Retry-After: 0.4``;
   the time between that request and its repeat, through the real runner and OpenAI backend,
   against the 0.4 s the server asked for (a ratio >= 1 means it was honoured).
3. **Event loop while the hf backend generates**: how many times a 1 ms ticker coroutine runs
   during a generation call, against how many it runs during an ``asyncio.sleep`` of the same
   length (a ratio near 1: the loop is as free as when idle; near 0: the model blocks it).

    .venv/bin/python bench/bench_timing.py [--skip-hf]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

TINY_BUILDER = REPO / "tests" / "fixtures" / "tiny_model" / "build.py"
OWN_ANSWERS = REPO / "tests" / "fixtures" / "refusal_styles.csv"


def _tiny_backend(folder: Path):  # -> HFBackend
    from casebench.backends.hf import HFBackend

    spec = importlib.util.spec_from_file_location("tiny_model_build", TINY_BUILDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return HFBackend(str(module.build_tiny_model(folder)), device="cpu", batch_size=1)


def _requests(n: int, mode: str = "binary"):
    from casebench.backends.base import Request

    prompts = ["Is it fine to water tomatoes at noon?", "Describe how a library lends books between branches. " * 3]
    return [Request(case=i, sample=0, prompt=prompts[i % 2], want="text") for i in range(n)]


def classify_vs_generate(backend) -> None:
    from casebench.backends.base import GenerationSettings
    from casebench.classify import make_classifier
    from casebench.classify.evaluate import load_labelled_csv

    rows = load_labelled_csv(OWN_ANSWERS)
    answers = [r.completion for r in rows]
    long_answer = "\n".join(answers)[:6000]
    clf = make_classifier("rules")

    def per_answer(texts: list[str]) -> float:
        for a in texts:  # warm-up
            clf.classify("q", a)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for a in texts:
                clf.classify("q", a)
            best = min(best, (time.perf_counter() - t0) / len(texts))
        return best

    short_s = per_answer(answers)
    long_s = per_answer([long_answer] * 20)
    settings = GenerationSettings(max_tokens=16, temperature=0.0)
    asyncio.run(backend.answer(_requests(1), settings))  # warm-up
    gens = []
    for _ in range(5):
        t0 = time.perf_counter()
        out = asyncio.run(backend.answer(_requests(4), settings))
        gens.append((time.perf_counter() - t0) / len(out))
    gen_s = min(gens)
    print("1. rules classifier vs generating one 16-token answer with the tiny model (best of 5)")
    print(f"   classify: {short_s * 1e6:8.1f} us per answer ({len(answers)} answers, "
          f"mean {statistics.mean(map(len, answers)):.0f} chars); {long_s * 1e6:8.1f} us per "
          f"{len(long_answer)}-char answer")
    print(f"   generate: {gen_s * 1e3:8.1f} ms per answer")
    print(f"   ratio classify/generate: short {short_s / gen_s:.4f}, long {long_s / gen_s:.4f} "
          f"(budget 0.05; a real model generates far slower than this 2-layer one)")


def retry_after_vs_asked() -> None:
    from bench_runner import invented_dataset
    from servers.fault_server import Fault, FaultServer

    from casebench.runs.execute import RetryPolicy, RunConfig, run

    asked = 0.4
    os.environ.pop("OPENAI_API_KEY", None)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp, FaultServer() as srv:
        data = invented_dataset(Path(tmp) / "cases.json", 4)
        for k in range(3):
            n0 = srv.count
            srv.script[n0 + 2] = Fault.status(429, retry_after=str(asked))
            cfg = RunConfig(mode="binary", model="openai/bench-judge", data=data, out=Path(tmp) / f"run{k}",
                            max_connections=1, progress=False,
                            backend_options={"base_url": srv.base_url, "timeout": 30.0},
                            retry=RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.02))
            summary = run(cfg)
            if summary.retries != 1:
                raise SystemExit(f"expected one retry, got {summary.line()}")
            reqs = srv.requests[n0:]
            first = reqs[1]
            again = next(r for r in reqs[2:] if r.prompt == first.prompt)
            ratios.append((again.time - first.time) / asked)
    print("2. Retry-After honoured by the runner (429 with Retry-After: 0.4, 3 runs)")
    print(f"   waited/asked: {', '.join(f'{r:.2f}' for r in ratios)}  (>= 1: honoured; the policy's own "
          "backoff is at most 0.02 s)")


def loop_while_generating(backend) -> None:
    from casebench.backends.base import GenerationSettings

    settings = GenerationSettings(max_tokens=16, temperature=0.0)

    async def ticks_during(make_coro) -> tuple[int, float]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        t0 = time.perf_counter()
        await make_coro()
        elapsed = time.perf_counter() - t0
        task.cancel()
        return ticks, elapsed

    async def main() -> None:
        gen_ticks, gen_s = await ticks_during(lambda: backend.answer(_requests(4), settings))
        idle_ticks, idle_s = await ticks_during(lambda: asyncio.sleep(gen_s))
        print("3. event loop while the hf backend generates (a 1 ms ticker)")
        print(f"   during generation: {gen_ticks} ticks in {gen_s * 1e3:.0f} ms; idle: {idle_ticks} ticks in "
              f"{idle_s * 1e3:.0f} ms; ratio {gen_ticks / max(idle_ticks, 1):.2f} (near 1: the loop stays free)")

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-hf", action="store_true", help="Leave out the measurements that need torch.")
    args = ap.parse_args()
    print(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count()}))
    if args.skip_hf:
        retry_after_vs_asked()
        return
    with tempfile.TemporaryDirectory() as tmp:
        backend = _tiny_backend(Path(tmp) / "tiny_model")
        classify_vs_generate(backend)
        retry_after_vs_asked()
        loop_while_generating(backend)


if __name__ == "__main__":
    main()
