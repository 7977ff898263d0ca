"""HFBackend on a tiny, seeded, randomly initialised Llama (with SmolLM2's real tokenizer), and, in
the slow tests, on the real embedded SmolLM2-135M-Instruct.

The references are independent of the backend's batching code: a plain, unpadded forward pass
of one prompt at a time through the same model, with the softmax and sums written out here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from casebench.backends.base import Backend, GenerationSettings, PermanentError, Request  # noqa: E402
from casebench.backends.hf import HFBackend, ModelLoadError, from_spec  # noqa: E402

TINY_BUILDER = Path(__file__).resolve().parent / "fixtures" / "tiny_model" / "build.py"
DATA_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "casebench" / "CASEBench_data.json"


def _builder():
    spec = importlib.util.spec_from_file_location("tiny_model_build", TINY_BUILDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return _builder()(tmp_path_factory.getbasetemp() / "tiny_model")


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFBackend:
    return HFBackend(str(tiny_model_dir), device="cpu", batch_size=4)


# Invented prompts of very different lengths, so batches need real padding.
PROMPTS = [
    "Is it fine to water tomatoes at noon?",
    "A neighbour asks how to prune an apple tree in late winter. " * 6,
    "ok",
    "Describe how a library lends books between branches, and who keeps the records. " * 3,
    "Short question about chess.",
    "How do bees find their way home after a long flight over fields? " * 9,
    "Recipe for plain rice, please.",
]


def _requests(mode: str, prompts=PROMPTS, temperature=None) -> list[Request]:
    return [Request(case=i, sample=0, prompt=p, want="p_safe" if mode == "prob" else "text", temperature=temperature) for i, p in enumerate(prompts)]


def _run(backend: HFBackend, requests, settings=None):
    return asyncio.run(backend.answer(requests, settings or GenerationSettings()))


def _reference_first_token(backend: HFBackend, prompt: str, system=None) -> tuple[float, float, float]:
    """P(safe) and both masses from one unpadded prompt, full logits, plain softmax."""
    ids = torch.tensor([backend.render(prompt, system)])
    with torch.no_grad():
        probs = torch.softmax(backend.model(input_ids=ids).logits[0, -1].double(), dim=-1)
    s = probs[backend.variants["safe"]].sum().item()
    u = probs[backend.variants["unsafe"]].sum().item()
    return s / (s + u), s, u


def test_is_a_backend(tiny):
    assert isinstance(tiny, Backend)
    assert tiny.capabilities.generate and tiny.capabilities.token_probs
    assert tiny.spec.startswith("hf/") and tiny.batch_size == 4


def test_prob_matches_an_unpadded_reference(tiny):
    answers = _run(tiny, _requests("prob"))
    assert len(answers) == len(PROMPTS)
    for prompt, a in zip(PROMPTS, answers):
        p, s, u = _reference_first_token(tiny, prompt)
        assert a.p_safe == pytest.approx(p, abs=1e-5)
        assert a.detail["p_safe_mass"] == pytest.approx(s, rel=1e-4)
        assert a.detail["p_unsafe_mass"] == pytest.approx(u, rel=1e-4)
        assert a.usage["prompt_tokens"] == len(tiny.render(prompt))
        assert isinstance(a.text, str) and a.text


def test_prob_is_the_same_at_every_batch_size(tiny_model_dir):
    prompts = PROMPTS * 3
    results = {}
    for bs in (1, 3, 16):
        backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=bs)
        results[bs] = [a.p_safe for a in _run(backend, _requests("prob", prompts))]
    for bs in (3, 16):
        assert max(abs(x - y) for x, y in zip(results[1], results[bs])) < 1e-5
    # The prompts differ, so equal results mean per-prompt answers, not one value repeated.
    assert len({round(p, 6) for p in results[1][: len(PROMPTS)]}) > 3


def test_answers_come_back_in_request_order(tiny):
    reordered = list(reversed(PROMPTS))
    forward = _run(tiny, _requests("prob"))
    backward = _run(tiny, _requests("prob", reordered))
    assert [a.p_safe for a in backward] == pytest.approx([a.p_safe for a in reversed(forward)], abs=1e-6)


def test_system_prompt_goes_through_the_chat_template(tiny):
    text = tiny.tokenizer.decode(tiny.render("hello there", "Be brief, judge."))
    assert "Be brief, judge." in text and "hello there" in text
    assert text.rstrip().endswith("assistant")  # the generation prompt opens the assistant turn
    # The request carries its own system message (the runner has combined --system and context).
    request = Request(case=0, sample=0, prompt="hello there", want="p_safe", system="Be brief, judge.")
    with_sys = _run(tiny, [request])[0]
    assert with_sys.p_safe == pytest.approx(_reference_first_token(tiny, "hello there", "Be brief, judge.")[0], abs=1e-5)


def test_continuation_matches_full_sequence_likelihoods(tiny_model_dir):
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=3, prob_method="continuation")
    answers = _run(backend, _requests("prob"))
    for prompt, a in zip(PROMPTS, answers):
        prompt_ids = backend.render(prompt)
        mass = {}
        for key, forms in backend.forms.items():
            total = 0.0
            for form in forms:  # log P(form | prompt), one full unpadded pass per form
                ids = torch.tensor([prompt_ids + list(form)])
                with torch.no_grad():
                    logp = torch.log_softmax(backend.model(input_ids=ids).logits[0].double(), dim=-1)
                n = len(prompt_ids)
                total += math.exp(sum(logp[n - 1 + k, t].item() for k, t in enumerate(form)))
            mass[key] = total
        assert a.detail["p_safe_mass"] == pytest.approx(mass["safe"], rel=1e-4)
        assert a.detail["p_unsafe_mass"] == pytest.approx(mass["unsafe"], rel=1e-4)
        assert a.p_safe == pytest.approx(mass["safe"] / (mass["safe"] + mass["unsafe"]), abs=1e-5)
        assert a.detail["method"] == "continuation"


def test_greedy_generation_is_batch_independent(tiny_model_dir):
    settings = GenerationSettings(temperature=0.0, max_tokens=12)
    one = HFBackend(str(tiny_model_dir), device="cpu", batch_size=1)
    many = HFBackend(str(tiny_model_dir), device="cpu", batch_size=7)
    a1 = _run(one, _requests("binary"), settings)
    a7 = _run(many, _requests("binary"), settings)
    assert [a.text for a in a1] == [a.text for a in a7]
    for prompt, a in zip(PROMPTS, a1):
        assert 1 <= a.usage["completion_tokens"] <= 12
        assert a.usage["prompt_tokens"] == len(one.render(prompt))
        assert a.p_safe is None and a.detail["temperature"] == 0.0


def test_greedy_text_is_what_plain_generate_gives(tiny):
    prompt = PROMPTS[1]
    ids = torch.tensor([tiny.render(prompt)])
    with torch.no_grad():
        out = tiny.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=10,
                                  do_sample=False, pad_token_id=tiny.tokenizer.pad_token_id)
    expected = tiny.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    got = _run(tiny, _requests("score", [prompt, "ok"]), GenerationSettings(max_tokens=10))[0]
    assert got.text == expected


def test_sampling_follows_temperature_and_seed(tiny):
    settings = GenerationSettings(temperature=0.0, max_tokens=10, seed=7)
    first = _run(tiny, _requests("score", temperature=1.0), settings)
    again = _run(tiny, _requests("score", temperature=1.0), settings)
    greedy = _run(tiny, _requests("score"), settings)
    assert [a.text for a in first] == [a.text for a in again]
    assert all(a.detail["temperature"] == 1.0 for a in first)
    assert all(a.detail["temperature"] == 0.0 for a in greedy)
    assert [a.text for a in first] != [a.text for a in greedy]  # a random model samples far from its argmax


def test_mixed_modes_in_one_call_keep_order(tiny):
    reqs = [Request(case=i, sample=0, prompt=p, want="p_safe" if i % 2 else "text") for i, p in enumerate(PROMPTS)]
    answers = _run(tiny, reqs, GenerationSettings(max_tokens=4))
    for r, a in zip(reqs, answers):
        assert (a.p_safe is not None) == (r.want == "p_safe")


def test_the_model_runs_off_the_event_loop(tiny, monkeypatch):
    """While the model works (on the backend's worker thread) the event loop runs other
    coroutines: here the model call waits until a coroutine on the loop releases it, which a
    backend that blocked the loop would never let happen. (How responsive the loop stays, in
    time: bench/bench_timing.py.)"""
    import threading

    started, release, threads = threading.Event(), threading.Event(), []
    real = tiny._answer_blocking

    def held(*args, **kwargs):
        threads.append(threading.current_thread())
        started.set()
        if not release.wait(60):  # a deadlock guard, not a timing: the loop is blocked
            raise AssertionError("the event loop did not run while the model was working")
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny, "_answer_blocking", held)

    async def main():
        call = asyncio.create_task(tiny.answer(_requests("binary"), GenerationSettings(max_tokens=16)))
        while not started.is_set():
            await asyncio.sleep(0)
        release.set()  # reached only because the loop is free while the model call is in progress
        return threading.current_thread(), await call

    loop_thread, answers = asyncio.run(main())
    assert len(answers) == len(_requests("binary")) and all(a.text is not None for a in answers)
    assert threads and all(t is not loop_thread for t in threads)


def test_describe_is_json_and_names_the_variants(tiny):
    info = tiny.describe()
    json.dumps(info)
    assert info["prob_method"] == "first-token" and info["batch_size"] == 4
    assert info["device"] == "cpu" and info["dtype"] == "float32"
    assert info["variants"]["unsafe"]["10082"] == "uns"
    assert info["torch"] and info["transformers"] and info["embedded"] is False


def test_an_uncached_hub_id_fails_without_downloading(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache: nothing can be found locally
    with pytest.raises(ModelLoadError, match="never downloads"):
        HFBackend("casebench-test/no-such-model", device="cpu")
    assert issubclass(ModelLoadError, PermanentError)


def test_a_missing_local_folder_is_named(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        HFBackend(str(tmp_path / "nowhere"), device="cpu")


@pytest.mark.parametrize(
    "kwargs", [{"device": "tpu"}, {"dtype": "int8"}, {"prob_method": "sum"}, {"batch_size": 0}]
)
def test_bad_options_are_refused(tiny_model_dir, kwargs):
    with pytest.raises(ValueError):
        HFBackend(str(tiny_model_dir), **kwargs)


def test_from_spec(tiny_model_dir):
    backend = from_spec(f"hf/{tiny_model_dir}", device="cpu", batch_size=2)
    assert backend.spec == f"hf/{tiny_model_dir}" and backend.batch_size == 2
    with pytest.raises(ValueError):
        from_spec("openai/gpt-4o")


def test_aclose_releases_the_model(tiny_model_dir):
    backend = HFBackend(str(tiny_model_dir), device="cpu")
    asyncio.run(backend.aclose())
    assert backend.model is None


# ---------------------------------------------------------------- the real embedded model
def _real_prompts(mode: str, n: int) -> list[str]:
    """One case per category from the real dataset (45), else invented prompts."""
    from casebench.modes import render_prompt

    if DATA_FILE.is_file():
        from casebench.data import load_dataset

        ds = load_dataset(DATA_FILE)
        seen, picked = set(), []
        for case in ds:
            if case.category not in seen:
                seen.add(case.category)
                picked.append(render_prompt(case, mode))
        return picked[:n]
    return [f"{p} Reply with one word: safe or unsafe." for p in (PROMPTS * 7)[:n]]


@pytest.fixture(scope="module")
def smol() -> HFBackend:
    from casebench.backends.embedded import EmbeddedModelError

    try:
        return HFBackend("smollm2-135m-instruct", device="cpu", system="You are a helpful assistant.")
    except EmbeddedModelError as e:
        pytest.skip(str(e))


@pytest.mark.slow
def test_embedded_prob_mode_over_real_cases_is_batch_invariant(smol):
    prompts = _real_prompts("prob", 16)  # 16 categories: one padded batch of 16 against one by one
    reqs = _requests("prob", prompts)
    smol.batch_size = 1
    one = _run(smol, reqs)
    smol.batch_size = 16
    sixteen = _run(smol, reqs)
    smol.batch_size = 1
    assert len(one) == len(sixteen) == len(prompts)
    assert max(abs(a.p_safe - b.p_safe) for a, b in zip(one, sixteen)) < 1e-4
    # The answers are real judgements: some mass on the verdict words, and a spread of values.
    assert all(0.0 <= a.p_safe <= 1.0 for a in one)
    assert sum(a.detail["p_safe_mass"] + a.detail["p_unsafe_mass"] for a in one) / len(one) > 0.01
    assert max(a.p_safe for a in one) - min(a.p_safe for a in one) > 0.05
    p, _, _ = _reference_first_token(smol, prompts[0], "You are a helpful assistant.")
    assert one[0].p_safe == pytest.approx(p, abs=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["binary", "score"])
def test_embedded_text_modes_over_real_cases(smol, mode):
    """Judge prompts of 8 categories, generated as one padded batch of 8. Greedy (binary) must
    give the same text batched as one prompt at a time: generation batching may change speed,
    never answers."""
    from casebench.parse import parse_binary, parse_score

    prompts = _real_prompts(mode, 8)
    settings = GenerationSettings(temperature=0.0, max_tokens=16)
    reqs = _requests(mode, prompts, temperature=1.0 if mode == "score" else None)
    smol.batch_size = 8
    answers = _run(smol, reqs, settings)
    if mode == "binary":
        smol.batch_size = 1
        one_by_one = _run(smol, reqs, settings)
        assert [a.text for a in answers] == [a.text for a in one_by_one]
    smol.batch_size = 1
    assert len(answers) == len(prompts)
    assert all(a.text and a.usage["completion_tokens"] >= 1 for a in answers)
    parse = parse_binary if mode == "binary" else parse_score
    parsed = [parse(a.text) for a in answers]
    assert len(parsed) == len(prompts)  # the parser accepts whatever came back, readable or not


# ---------------------------------------------------------------- issue 13 / 11: speed paths
def _first_chars(n: int):
    """A stand-in verdict parser: the verdict is the first ``n`` characters of the answer, and it
    is known (stop) as soon as that many characters are there."""
    return (lambda text: text[:n] if len(text) >= n else None), (lambda text: len(text) >= n)


def _counting_stop(after: int):
    """A predicate that fires on its ``after``-th call: generate calls it once per new token, so
    the row must end after exactly ``after`` tokens."""
    calls = {"n": 0}

    def stop(text: str) -> bool:
        calls["n"] += 1
        return calls["n"] >= after

    return stop


def test_stop_keeps_the_verdict_and_cuts_a_prefix(tiny_model_dir):
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=4)
    settings = GenerationSettings(temperature=0.0, max_tokens=24)
    verdict, stop = _first_chars(6)
    full = _run(backend, _requests("binary"), settings)
    stopped = _run(backend, [Request(case=i, sample=0, prompt=p, stop=stop) for i, p in enumerate(PROMPTS)], settings)
    assert len(stopped) == len(full) == len(PROMPTS)
    fired = 0
    for f, s in zip(full, stopped):
        assert f.text.startswith(s.text)  # the tokens before the stop are the same
        assert verdict(s.text) == verdict(f.text)
        assert s.usage["completion_tokens"] <= f.usage["completion_tokens"]
        if s.detail["finish"] == "stop":
            fired += 1
            assert len(s.text) >= 6 and s.usage["completion_tokens"] < f.usage["completion_tokens"]
        else:  # ended (end token or budget) before the verdict was complete: the full answer
            assert s.text == f.text and s.usage == f.usage
    assert fired >= 3  # a random model writes text, so most rows reach 6 characters early


def test_completion_tokens_are_counted_per_sequence(tiny_model_dir):
    settings = GenerationSettings(temperature=0.0, max_tokens=16)
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=7)
    full = _run(backend, _requests("binary"), settings)
    afters = [1, 5, 2, 9, 3, 16, 4]
    reqs = [Request(case=i, sample=0, prompt=p, stop=_counting_stop(n)) for i, (p, n) in enumerate(zip(PROMPTS, afters))]
    answers = _run(backend, reqs, settings)  # one batch of 7 rows, each stopping at its own step
    checked = 0
    for prompt, n, f, a in zip(PROMPTS, afters, full, answers):
        assert a.detail["batch_sequences"] == 7
        if f.detail["finish"] == "eos" and f.usage["completion_tokens"] <= n:
            assert a.usage == f.usage and a.text == f.text  # ended by itself before the stop
            continue
        assert a.usage["completion_tokens"] == n and a.detail["finish"] == "stop"
        # The text is the answer's first n tokens, decoded alone: nothing of the batch's padding.
        ids = torch.tensor([backend.render(prompt)])
        with torch.no_grad():
            ref = backend.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                         do_sample=False, pad_token_id=backend.tokenizer.pad_token_id)
        assert a.text == backend.tokenizer.decode(ref[0, ids.shape[1]:], skip_special_tokens=True)
        checked += 1
    assert checked >= 4


def test_request_max_tokens_overrides_the_settings(tiny):
    settings = GenerationSettings(temperature=0.0, max_tokens=3)
    reqs = [Request(case=0, sample=0, prompt=PROMPTS[1], max_tokens=9), Request(case=1, sample=0, prompt=PROMPTS[1])]
    long, short = _run(tiny, reqs, settings)
    assert short.usage["completion_tokens"] <= 3 < long.usage["completion_tokens"] <= 9
    assert long.text.startswith(short.text)


def _samples(prompts, k: int, temperature: float) -> list[Request]:
    return [Request(case=c, sample=s, prompt=p, temperature=temperature) for c, p in enumerate(prompts) for s in range(k)]


def test_samples_share_a_prefill_and_stay_random(tiny_model_dir):
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=8)
    reqs = _samples(PROMPTS[:4], 3, 1.0)
    answers = _run(backend, reqs, GenerationSettings(max_tokens=10, seed=3))
    assert len(answers) == len(reqs)  # one answer per (case, sample)
    for c in range(4):
        texts = [a.text for r, a in zip(reqs, answers) if r.case == c]
        assert len(texts) == 3 and len(set(texts)) == 3  # independent draws, not one copied
    # Batches count sequences: 12 sample rows at a batch size of 8 -> two prompts' samples, then two.
    assert sorted({a.detail["batch_sequences"] for a in answers}) == [6]


def test_shared_prefill_generates_what_a_full_prefill_does(tiny_model_dir):
    """Near temperature 0, sampling is the argmax: samples through the shared prefill must give
    exactly the greedy answer of each prompt generated on its own."""
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=16)
    settings = GenerationSettings(max_tokens=8, seed=0)
    greedy = _run(backend, _requests("binary"), settings)
    cold = _run(backend, _samples(PROMPTS, 2, 1e-4), settings)
    for c, g in enumerate(greedy):
        for a in cold[2 * c : 2 * c + 2]:
            assert a.text == g.text and a.usage == g.usage


def test_greedy_samples_are_generated_once(tiny_model_dir):
    backend = HFBackend(str(tiny_model_dir), device="cpu", batch_size=4)
    answers = _run(backend, _samples(PROMPTS[:3], 3, 0.0), GenerationSettings(max_tokens=6))
    assert len(answers) == 9
    for c in range(3):
        assert len({a.text for a in answers[3 * c : 3 * c + 3]}) == 1
    assert all(a.detail["batch_sequences"] == 3 for a in answers)  # 3 prompts, one row each


def test_unpadded_batches_run_mask_free_with_the_same_p_safe(tiny):
    """Batch 1 (and any batch without padding) takes the bare forward pass; P(safe) must equal
    the masked, position-id path's within float rounding."""
    for prompt in PROMPTS:
        e = tiny._encode_sorted([Request(case=0, sample=0, prompt=prompt, want="p_safe")], None)
        ids, mask, pos = tiny._pad_left(e)
        with torch.no_grad():
            masked = tiny.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[0, -1]
        lp = torch.log_softmax(masked.double(), dim=-1)
        s = torch.logsumexp(lp[tiny.variants["safe"]], -1)
        u = torch.logsumexp(lp[tiny.variants["unsafe"]], -1)
        tiny.prob_batch_size = 1
        got = _run(tiny, [Request(case=0, sample=0, prompt=prompt, want="p_safe")])[0].p_safe
        tiny.prob_batch_size = 4
        assert got == pytest.approx(torch.sigmoid(s - u).item(), abs=1e-5)
    # Equal-length prompts batch without padding too (same prompt twice, different systems of equal length).
    twins = [Request(case=i, sample=0, prompt="same length here", want="p_safe", system=s) for i, s in enumerate(["Judge A.", "Judge B."])]
    assert len({len(tiny.render(r.prompt, r.system)) for r in twins}) == 1
    pair = _run(tiny, twins)
    for r, a in zip(twins, pair):
        assert a.p_safe == pytest.approx(_reference_first_token(tiny, r.prompt, r.system)[0], abs=1e-5)


def test_batch_size_defaults(tiny_model_dir):
    from casebench.backends.hf import DEFAULT_BATCH_SIZE, DEFAULT_GENERATION_BATCH_SIZE

    assert HFBackend.default_generation_batch_size is DEFAULT_GENERATION_BATCH_SIZE
    backend = HFBackend(str(tiny_model_dir), device="cpu")
    assert backend.prob_batch_size == DEFAULT_BATCH_SIZE["cpu"]
    assert backend.generation_batch_size == DEFAULT_GENERATION_BATCH_SIZE["cpu"] > 1
    assert backend.batch_size == max(backend.prob_batch_size, backend.generation_batch_size)
    assert backend.batch_size_for("p_safe") == backend.prob_batch_size
    assert backend.batch_size_for("text") == backend.generation_batch_size
    assert backend.describe()["generation_batch_size"] == backend.generation_batch_size
    both = HFBackend(str(tiny_model_dir), device="cpu", batch_size=3)
    assert both.prob_batch_size == both.generation_batch_size == both.batch_size == 3
    split = HFBackend(str(tiny_model_dir), device="cpu", batch_size=2, generation_batch_size=5)
    assert (split.prob_batch_size, split.generation_batch_size, split.batch_size) == (2, 5, 5)
    with pytest.raises(ValueError):
        HFBackend(str(tiny_model_dir), device="cpu", generation_batch_size=0)


@pytest.mark.slow
def test_embedded_stop_at_verdict_keeps_binary_verdicts(smol):
    """Greedy binary answers from the real model, with and without the stop: same verdicts, and
    each stopped answer is the start of the full one."""
    import json
    import re

    from casebench.parse import parse_binary

    key = re.compile(r'"judgement"\s*:\s*"(safe|unsafe)"\s*[,}]')

    def verdict(text: str):
        parsed = parse_binary(text)
        if parsed.ok:
            return parsed.label
        found = key.search(text)
        return found.group(1) if found else None

    def stop(text: str) -> bool:
        return key.search(text) is not None

    prompts = _real_prompts("binary", 6)
    settings = GenerationSettings(temperature=0.0, max_tokens=48)
    smol.generation_batch_size = 6
    full = _run(smol, _requests("binary", prompts), settings)
    cut = _run(smol, [Request(case=i, sample=0, prompt=p, stop=stop) for i, p in enumerate(prompts)], settings)
    smol.generation_batch_size = 1
    for f, c in zip(full, cut):
        assert f.text.startswith(c.text)
        assert verdict(c.text) == verdict(f.text)
        assert c.usage["completion_tokens"] <= f.usage["completion_tokens"]
    json.dumps([c.detail for c in cut])
