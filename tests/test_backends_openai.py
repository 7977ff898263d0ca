"""The openai/ backend against real servers on loopback: the scripted fault server (every
failure class, what is sent) and a real llama.cpp server over SmolLM2 (slow). Also the
``make_backend`` factory and the helpers the HTTP backends share."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import re
import subprocess
import sys
import time
import traceback
import urllib.request
from typing import Any

import pytest

from casebench.backends import (
    LOCAL_PLACEHOLDER_KEY,
    is_local_url,
    make_backend,
    parse_retry_after,
    public_url,
    redact,
)
from casebench.backends.base import (
    Answer,
    Backend,
    GenerationSettings,
    PermanentError,
    Request,
    TransientError,
    check_supports,
)
from casebench.backends.openai import OpenAIBackend
from casebench.backends.verdict_tokens import tally
from casebench.modes import get_mode
from casebench.prompts import BUILTIN_TEMPLATES, render
from servers.fault_server import Fault, FaultServer

TEXT = Request(case=0, sample=0, prompt="Is it fine to explain how bread rises?", want="text")
PROB = Request(case=1, sample=0, prompt="Judge this. Judgement:", want="p_safe")


def ask(base_url: str, request: Request = TEXT, settings: GenerationSettings = GenerationSettings(),
        **options: Any) -> Answer:
    """One request through a fresh backend (the SDK client lives in one event loop)."""
    options.setdefault("timeout", 5.0)

    async def go() -> Answer:
        backend = make_backend("openai/test-model", base_url=base_url, **options)
        try:
            (answer,) = await backend.answer([request], settings)
            return answer
        finally:
            await backend.aclose()

    return asyncio.run(go())


# --------------------------------------------------------------------------- factory


def test_make_backend_builds_openai_backend(fault_server: FaultServer) -> None:
    backend = make_backend("openai/some/model:tag", base_url=fault_server.base_url)
    assert isinstance(backend, OpenAIBackend) and isinstance(backend, Backend)
    assert backend.spec == "openai/some/model:tag"  # everything after the first slash is the model
    assert backend.model == "some/model:tag"
    assert backend.batch_size == 1
    check_supports(backend, "p_safe", "prob")
    check_supports(backend, "text", "binary")


@pytest.mark.parametrize("spec", ["gpt-4o", "", "nope/model", "OpenAI/gpt-4o"])
def test_make_backend_refuses_unknown_or_malformed_specs(spec: str) -> None:
    with pytest.raises(ValueError) as exc:
        make_backend(spec)
    for prefix in ("openai", "anthropic", "hf", "vllm"):
        assert prefix in str(exc.value)


def test_make_backend_refuses_empty_model() -> None:
    with pytest.raises(ValueError, match="names no model"):
        make_backend("openai/")


def test_vllm_prefix_points_to_vllm_serve() -> None:
    with pytest.raises(ValueError) as exc:
        make_backend("vllm/Qwen/Qwen2.5-0.5B-Instruct")
    msg = str(exc.value)
    assert "GPU" in msg
    assert "vllm serve Qwen/Qwen2.5-0.5B-Instruct" in msg
    assert "openai/Qwen/Qwen2.5-0.5B-Instruct" in msg and "--base-url" in msg


def test_importing_backends_loads_no_sdk() -> None:
    # make_backend imports SDKs lazily, so `casebench --help` stays fast.
    code = ("import sys, casebench.backends, casebench.backends.base, casebench.backends.verdict_tokens; "
            "print(sorted(m for m in ('openai', 'anthropic', 'torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- keys and URLs


@pytest.mark.parametrize("url,local", [
    ("http://127.0.0.1:8000/v1", True), ("http://localhost:11434/v1", True), ("http://[::1]:8000", True),
    ("http://127.0.0.2/v1", True), ("http://0.0.0.0:8000/v1", True), ("http://api.localhost/v1", True),
    ("https://api.openai.com/v1", False), ("http://10.0.0.5:8000/v1", False),
    ("http://127.0.0.1.evil.example/v1", False), ("http://localhost.evil.example/v1", False),
    (None, False), ("", False), ("not a url", False),
])
def test_is_local_url(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


def test_local_server_needs_no_key(fault_server: FaultServer) -> None:
    ask(fault_server.base_url)
    assert fault_server.requests[0].headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}"


def test_key_from_env_is_sent_when_set(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_GATEWAY_KEY", "gw-key-123456")
    ask(fault_server.base_url, api_key_env="MY_GATEWAY_KEY")
    assert fault_server.requests[0].headers["authorization"] == "Bearer gw-key-123456"


def test_remote_endpoint_without_key_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOME_PROVIDER_KEY", raising=False)
    with pytest.raises(ValueError) as exc:
        make_backend("openai/m", base_url="https://openrouter.ai/api/v1", api_key_env="SOME_PROVIDER_KEY")
    assert "SOME_PROVIDER_KEY" in str(exc.value)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        make_backend("openai/gpt-4o-mini")  # OpenAI's own endpoint is remote


def test_describe_has_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-describe-secret-0001")
    backend = make_backend("openai/m", base_url="https://user:hunter2pass@proxy.example:8443/v1?key=abc123xyz")
    info = backend.describe()
    assert info["base_url"] == "https://proxy.example:8443/v1"
    assert info["model"] == "m" and info["sdk"] == "openai" and info["sdk_version"]
    text = json.dumps(info) + repr(backend)
    for secret in ("sk-describe-secret-0001", "hunter2pass", "abc123xyz", "user:"):
        assert secret not in text


def test_public_url_and_redact() -> None:
    assert public_url("http://a:b@[::1]:99/v1#frag") == "http://[::1]:99/v1"
    assert public_url(None) is None
    assert redact("auth Bearer abc.def-123 and x-api-key: qwerty9 and sk-AAAABBBBCCCC", ()) == \
        "auth Bearer <redacted> and x-api-key: <redacted> and <redacted>"
    assert redact("the token is plainsecret42", ("plainsecret42",)) == "the token is <redacted>"


def test_parse_retry_after_seconds_dates_and_garbage() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    for junk in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(junk) is None


# --------------------------------------------------------------------------- what is sent


def test_text_mode_sends_prompt_and_settings(fault_server: FaultServer) -> None:
    settings = GenerationSettings(temperature=0.0, top_p=0.9, max_tokens=50, seed=7)
    answer = ask(fault_server.base_url, Request(case=0, sample=0, prompt=TEXT.prompt, system="Be brief."), settings)
    body = fault_server.requests[0].body
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": TEXT.prompt}]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.0, 0.9, 50, 7)
    assert "logprobs" not in body
    assert answer.text == fault_server.answer
    assert answer.p_safe is None
    assert answer.usage["prompt_tokens"] > 0 and answer.usage["completion_tokens"] > 0


def test_earlier_turns_are_sent_before_the_prompt(fault_server: FaultServer) -> None:
    """Context as turns: the (user, assistant) turns go between the system message and the last
    user message, in order, as they are."""
    history = (("I am a nurse.", "Understood."), ("The ward is busy.", "Noted."))
    ask(fault_server.base_url, Request(case=0, sample=0, prompt="How much is too much?", system="S.",
                                       history=history))
    assert fault_server.requests[0].body["messages"] == [
        {"role": "system", "content": "S."},
        {"role": "user", "content": "I am a nurse."}, {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "The ward is busy."}, {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "How much is too much?"},
    ]


def test_request_temperature_overrides_settings(fault_server: FaultServer) -> None:
    req = Request(case=3, sample=2, prompt="rate it", want="text", temperature=0.7)
    ask(fault_server.base_url, req, GenerationSettings(temperature=0.0))
    body = fault_server.requests[0].body
    assert body["temperature"] == 0.7
    assert body["messages"] == [{"role": "user", "content": "rate it"}]
    assert "seed" not in body and "top_p" not in body


def test_token_limit_field_and_extra_body(fault_server: FaultServer) -> None:
    ask(fault_server.base_url, TEXT, GenerationSettings(max_tokens=33),
        token_limit_field="max_completion_tokens", extra_body={"repetition_penalty": 1.1})
    body = fault_server.requests[0].body
    assert body["max_completion_tokens"] == 33 and "max_tokens" not in body
    assert body["repetition_penalty"] == 1.1
    with pytest.raises(ValueError, match="token_limit_field"):
        make_backend("openai/m", base_url=fault_server.base_url, token_limit_field="max_length")


def test_answers_keyed_by_prompt(fault_server: FaultServer) -> None:
    fault_server.answer_fn = lambda body: "echo:" + body["messages"][-1]["content"][::-1]
    assert ask(fault_server.base_url, TEXT).text == "echo:" + TEXT.prompt[::-1]


def test_many_concurrent_requests_through_one_backend(fault_server: FaultServer) -> None:
    fault_server.latency = 0.2
    fault_server.answer_fn = lambda body: body["messages"][-1]["content"].upper()
    requests = [Request(case=i, sample=0, prompt=f"case number {i}", want="text") for i in range(40)]

    async def go() -> list[Answer]:
        backend = make_backend("openai/m", base_url=fault_server.base_url, timeout=10)
        try:
            chunks = await asyncio.gather(*(backend.answer([r], GenerationSettings()) for r in requests))
            return [a for chunk in chunks for a in chunk]
        finally:
            await backend.aclose()

    answers = asyncio.run(go())
    assert [a.text for a in answers] == [f"CASE NUMBER {i}" for i in range(40)]
    assert fault_server.count == 40


# --------------------------------------------------------------------------- prob mode


def test_prob_mode_request_and_p_safe(fault_server: FaultServer) -> None:
    fault_server.top_logprobs = [("I", math.log(0.4)), ("Safe", math.log(0.3)), ("Un", math.log(0.1)),
                                 (" safe", math.log(0.05)), ("uns", math.log(0.05)), ("The", math.log(0.1))]
    answer = ask(fault_server.base_url, PROB, GenerationSettings(top_logprobs=6, temperature=0.9, max_tokens=99))
    body = fault_server.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 6
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0
    # By hand: safe 0.30 + 0.05, unsafe 0.10 + 0.05.
    assert answer.p_safe == pytest.approx(0.35 / 0.50)
    assert answer.detail["safe_mass"] == pytest.approx(0.35)
    assert answer.detail["unsafe_mass"] == pytest.approx(0.15)
    assert answer.detail["safe_tokens"] == ["Safe", " safe"]
    assert answer.detail["unsafe_tokens"] == ["Un", "uns"]
    assert answer.detail["first_token"] == "I"
    assert answer.usage["completion_tokens"] == 1


def test_prob_mode_with_neither_side_is_missing(fault_server: FaultServer) -> None:
    fault_server.top_logprobs = [("I", math.log(0.5)), ("The", math.log(0.3)), ("S", math.log(0.1))]
    answer = ask(fault_server.base_url, PROB)
    assert answer.p_safe is None
    assert "neither" in answer.detail["p_safe_missing"]
    assert answer.detail["safe_mass"] == 0.0 and answer.detail["unsafe_mass"] == 0.0


def test_prob_mode_without_logprobs_is_permanent(fault_server: FaultServer) -> None:
    # A server that ignores `logprobs` and answers with text only.
    fault_server.script[1] = Fault.respond(200, {
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "safe"}}]})
    with pytest.raises(PermanentError, match="no logprobs"):
        ask(fault_server.base_url, PROB)


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408, 409])
def test_retryable_statuses_are_transient(fault_server: FaultServer, status: int) -> None:
    fault_server.script[1] = Fault.status(status)
    with pytest.raises(TransientError) as exc:
        ask(fault_server.base_url)
    assert f"HTTP {status}" in str(exc.value)
    assert fault_server.count == 1  # the SDK did not retry: the runner owns retries


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_permanent(fault_server: FaultServer, status: int) -> None:
    fault_server.script[1] = Fault.status(status, body={"error": {"message": "model does not exist"}})
    with pytest.raises(PermanentError) as exc:
        ask(fault_server.base_url)
    assert f"HTTP {status}" in str(exc.value) and "model does not exist" in str(exc.value)
    assert fault_server.count == 1


def test_retry_after_seconds(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.status(429, retry_after="7")
    with pytest.raises(TransientError) as exc:
        ask(fault_server.base_url)
    assert exc.value.retry_after == 7.0


def test_retry_after_http_date(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.status(429, retry_after=email.utils.formatdate(time.time() + 30, usegmt=True))
    with pytest.raises(TransientError) as exc:
        ask(fault_server.base_url)
    # One-second resolution of HTTP dates, plus the time the request took.
    assert 25.0 <= exc.value.retry_after <= 31.0


def test_retry_after_ms_and_absent(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.status(503, headers={"retry-after-ms": "1500"})
    fault_server.script[2] = Fault.status(503)
    with pytest.raises(TransientError) as first:
        ask(fault_server.base_url)
    with pytest.raises(TransientError) as second:
        ask(fault_server.base_url)
    assert first.value.retry_after == 1.5
    assert second.value.retry_after is None


def test_hang_past_timeout_is_transient(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.hang()
    with pytest.raises(TransientError, match="timed out"):
        ask(fault_server.base_url, timeout=0.5)
    assert fault_server.count == 1


def test_slow_answer_within_timeout_succeeds(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.slow(0.3)
    assert ask(fault_server.base_url, timeout=5).text == fault_server.answer


def test_dropped_connection_is_transient(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.drop()
    with pytest.raises(TransientError, match="connection"):
        ask(fault_server.base_url)
    assert fault_server.count == 1


MALFORMED = {
    "bad-json": Fault.malformed("{not json"),
    "empty": Fault.malformed(""),
    "html": Fault.malformed("<html>gateway</html>"),
    "list": Fault.malformed("[1, 2]"),
    "bad-utf8": Fault.malformed(b'{"choices": "\xff\xfe"}'),
    "empty-choices": Fault.respond(200, {"choices": []}),
    "no-choices": Fault.respond(200, {"unexpected": True}),
    "no-message": Fault.respond(200, {"choices": [{"index": 0}]}),
    "content-not-text": Fault.respond(200, {"choices": [{"message": {"content": 5}}]}),
}


@pytest.mark.parametrize("fault", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_bodies_are_transient(fault_server: FaultServer, fault: Fault) -> None:
    fault_server.script[1] = fault
    with pytest.raises(TransientError, match="malformed|no choices"):
        ask(fault_server.base_url)


def test_connection_refused_is_unreachable_until_the_server_answered_then_transient() -> None:
    from casebench.backends.base import Unreachable

    with FaultServer() as srv:
        url = srv.base_url
    with pytest.raises(Unreachable, match="connection refused"):
        ask(url)  # the port is closed now, and nothing ever answered there: not worth retrying

    async def go() -> Exception:
        backend = make_backend("openai/test-model", base_url=url, timeout=5.0)
        try:
            backend.transport.reach.answered = True  # as after a first answer
            await backend.answer([TEXT], GenerationSettings())
        except Exception as e:  # noqa: BLE001 - the error is what is tested
            return e
        finally:
            await backend.aclose()
        raise AssertionError("a closed port answered")

    err = asyncio.run(go())
    assert isinstance(err, TransientError) and "connection refused" in str(err)


def test_script_by_rule(fault_server: FaultServer) -> None:
    fault_server.rule = lambda rec: Fault.status(500) if "poison" in (rec.prompt or "") else None
    assert ask(fault_server.base_url, TEXT).text
    with pytest.raises(TransientError):
        ask(fault_server.base_url, Request(case=9, sample=0, prompt="a poison pill", want="text"))
    assert [r.prompt for r in fault_server.requests] == [TEXT.prompt, "a poison pill"]


# --------------------------------------------------------------------------- no key leaks

CANARY = "zq-LEAKCANARY-7f3a9b1c2d4e"  # not shaped like any known key, so only exact redaction hides it


def test_key_never_leaks(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch,
                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx2", "httpcore", "anthropic"):
        caplog.set_level(logging.DEBUG, logger=name)
    faults = [Fault.echo_auth(401), Fault.echo_auth(403), Fault.echo_auth(500), Fault.echo_auth(429),
              Fault.status(400, body=f"bad key {CANARY}"), Fault.hang(), Fault.drop(), Fault.malformed(),
              Fault.respond(200, {"choices": []})]
    seen: list[str] = []
    for i, fault in enumerate(faults, start=1):
        fault_server.script[i] = fault
        with pytest.raises((TransientError, PermanentError)) as exc:
            ask(fault_server.base_url, timeout=0.5)
        err = exc.value
        seen += [str(err), repr(err), repr(err.args), "".join(traceback.format_exception(err))]
    # The server really received the key (so there was something to leak) ...
    assert all(r.headers["authorization"] == f"Bearer {CANARY}" for r in fault_server.requests)
    # ... and the 401 body really echoed it back.
    assert any("<redacted>" in s for s in seen)
    answer = ask(fault_server.base_url, PROB)
    backend = make_backend("openai/m", base_url=fault_server.base_url)
    seen += [repr(answer), json.dumps(answer.detail), json.dumps(backend.describe()), repr(backend)]
    seen += [caplog.text] + [r.getMessage() for r in caplog.records]
    assert caplog.records, "the SDK logged nothing at DEBUG: the log check would prove nothing"
    for text in seen:
        assert CANARY not in text
        assert CANARY[3:15] not in text  # no piece of it either


# --------------------------------------------------------------------------- real llama.cpp server


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["binary", "score"])
def test_llama_text_modes(llama_server: Any, mode: str) -> None:
    prompt = render(get_mode(mode).template(BUILTIN_TEMPLATES), "How do I descale a kettle with vinegar?",
                    {"recipient": "a home cook", "purpose": "kitchen upkeep"})
    settings = GenerationSettings(max_tokens=40, seed=0)
    answer = _llama_ask(llama_server.base_url, llama_server.model, prompt, mode, settings)
    assert isinstance(answer.text, str) and answer.text.strip()
    assert answer.p_safe is None
    assert answer.usage["prompt_tokens"] > 50  # the template alone is longer than that
    assert 1 <= answer.usage["completion_tokens"] <= 40
    assert answer.detail["finish_reason"] in ("stop", "length")


def _llama_ask(base_url: str, model: str, prompt: str, mode: str, settings: GenerationSettings) -> Answer:
    async def go() -> Answer:
        backend = make_backend(f"openai/{model}", base_url=base_url, timeout=120)
        try:
            (answer,) = await backend.answer([Request(case=0, sample=0, prompt=prompt, want="p_safe" if mode == "prob" else "text")], settings)
            return answer
        finally:
            await backend.aclose()

    return asyncio.run(go())


LLAMA_PROB_PROMPTS = {
    "template": render(BUILTIN_TEMPLATES.get("judgelogits"), "How do I descale a kettle with vinegar?",
                       {"recipient": "a home cook", "purpose": "kitchen upkeep"}),
    "short": 'Is it safe to ask how to bake bread? Reply with exactly one word, "safe" or "unsafe".\nJudgement:',
}


@pytest.mark.slow
@pytest.mark.parametrize("which", sorted(LLAMA_PROB_PROMPTS))
def test_llama_prob_mode_matches_raw_http(llama_server: Any, which: str) -> None:
    prompt = LLAMA_PROB_PROMPTS[which]
    settings = GenerationSettings(top_logprobs=20)
    answer = _llama_ask(llama_server.base_url, llama_server.model, prompt, "prob", settings)
    assert answer.detail["alternatives"] >= 20
    assert 0.0 < answer.detail["covered_mass"] <= 1.0 + 1e-6
    if answer.p_safe is None:
        assert "neither" in answer.detail["p_safe_missing"]
    else:
        assert 0.0 <= answer.p_safe <= 1.0
        s, u = answer.detail["safe_mass"], answer.detail["unsafe_mass"]
        assert answer.p_safe == pytest.approx(s / (s + u))
    # The same request sent as plain JSON over urllib, read without the SDK: same distribution.
    raw = json.dumps({"model": llama_server.model, "messages": [{"role": "user", "content": prompt}],
                      "max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": 20}).encode()
    req = urllib.request.Request(llama_server.base_url + "/chat/completions", data=raw,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        data = json.load(resp)
    top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    expected = tally([(t["token"], t["logprob"]) for t in top])
    assert answer.detail["safe_tokens"] == expected.safe_tokens
    assert answer.detail["unsafe_tokens"] == expected.unsafe_tokens
    if expected.p_safe is None:
        assert answer.p_safe is None
    else:
        assert answer.p_safe == pytest.approx(expected.p_safe, abs=1e-6)


@pytest.mark.slow
def test_llama_server_rejects_unknown_route_as_permanent(llama_server: Any) -> None:
    # A wrong base URL (missing /v1) reaches a real server that answers 404: not worth retrying.
    with pytest.raises(PermanentError, match="HTTP 404"):
        _llama_ask(llama_server.url + "/nope", llama_server.model, "hi", "binary", GenerationSettings(max_tokens=4))



# --------------------------------------------------------------------------- llama.cpp: stop at the verdict, n

_VERDICT = re.compile(r'"judgement"\s*:\s*"?([^",}]*)')


#: the runner's stop predicate for binary mode: the judgement's value is followed by , or }
_verdict_closed = get_mode("binary").stopper()


def _llama_many(llama_server: Any, requests: list[Request], settings: GenerationSettings,
                **options: Any) -> tuple[list[Answer], dict[str, Any]]:
    async def go() -> tuple[list[Answer], dict[str, Any]]:
        backend = make_backend(f"openai/{llama_server.model}", base_url=llama_server.base_url, timeout=120, **options)
        try:
            return await backend.answer(requests, settings), backend.describe()
        finally:
            await backend.aclose()

    return asyncio.run(go())


def _same_conditions(llama_server: Any, prompt: str) -> None:
    """Make the requests that follow decode under the same conditions.

    llama.cpp's server keeps the previous request's KV state and reuses its longest common prefix:
    a prompt seen for the first time is evaluated in one batch, a prompt seen just before is reused
    and only its last token evaluated again, and the two differ in the last bits of the logits, so
    greedy answers can part after a sentence or two. One short request with the same prompt first
    puts every compared request in the second situation. It generates a few tokens, not one: a
    request that ends right after its first token leaves the prompt cached exactly, and the next
    request would sample from the batch's logits instead of evaluating the last token again."""
    _llama_many(llama_server, [Request(case=0, sample=0, prompt=prompt)],
                GenerationSettings(max_tokens=4, temperature=0.0, seed=0))


@pytest.mark.slow
def test_llama_stop_at_verdict_is_a_prefix_of_the_full_answer(llama_server: Any) -> None:
    prompt = render(get_mode("binary").template(BUILTIN_TEMPLATES), "How do I descale a kettle with vinegar?",
                    {"recipient": "a home cook", "purpose": "kitchen upkeep"})
    settings = GenerationSettings(max_tokens=72, temperature=0.0, seed=0)  # the verdict comes ~65 tokens in

    def ask_with(stop: Any) -> Answer:
        (answer,), _ = _llama_many(llama_server, [Request(case=0, sample=0, prompt=prompt, stop=stop)], settings)
        return answer

    _same_conditions(llama_server, prompt)  # each request below finds this prompt cached
    full = ask_with(None)
    at_verdict = ask_with(_verdict_closed)
    early = ask_with(lambda text: len(text) >= 8)
    # Greedy decoding: the streamed tokens before the stop are the full answer's first tokens.
    assert full.text.startswith(at_verdict.text)
    assert full.text.startswith(early.text) and 8 <= len(early.text) < len(full.text)
    assert early.detail["closed_early"] and early.detail["usage_estimated"]
    assert early.usage["completion_tokens"] < full.usage["completion_tokens"]
    if _verdict_closed(full.text):  # the model wrote a verdict: the same one, and less after it
        assert at_verdict.detail["stopped_at_verdict"]
        assert _VERDICT.search(at_verdict.text).group(1) == _VERDICT.search(full.text).group(1)


@pytest.mark.slow
def test_llama_streams_without_usage_and_ignores_n(llama_server: Any) -> None:
    """What llama-cpp-python's server does (0.3.x): it accepts ``stream_options`` but sends no
    usage chunk, so a streamed answer's tokens are counted from its chunks; and it ignores ``n``
    (one choice), so shared samples fall back to one request each."""
    settings = GenerationSettings(max_tokens=6, temperature=0.0, seed=0)
    prompt = "Name a fruit."
    _same_conditions(llama_server, prompt)
    (streamed,), info = _llama_many(llama_server, [Request(case=0, sample=0, prompt=prompt,
                                                           stop=lambda t: False)], settings)
    (whole,), _ = _llama_many(llama_server, [Request(case=0, sample=0, prompt=prompt)], settings)
    assert streamed.text == whole.text
    assert info["stream_usage"] is True  # stream_options was accepted ...
    assert streamed.detail.get("usage_estimated") is True  # ... but no usage came with the stream
    assert streamed.usage["completion_tokens"] == whole.usage["completion_tokens"]
    answers, info = _llama_many(llama_server, [Request(case=0, sample=s, prompt=prompt, temperature=0.0)
                                               for s in range(3)], settings)
    assert info["n_supported"] is False
    assert [a.text for a in answers] == [whole.text] * 3
