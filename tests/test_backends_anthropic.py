"""The anthropic/ backend against the fault server's scripted Messages route (POST /v1/messages),
with the real ``anthropic`` SDK on the client side."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from typing import Any

import pytest

from casebench.backends import LOCAL_PLACEHOLDER_KEY, make_backend
from casebench.backends.anthropic import AnthropicBackend
from casebench.backends.base import (
    Answer,
    GenerationSettings,
    PermanentError,
    Request,
    TransientError,
    UnsupportedModeError,
    check_supports,
)
from servers.fault_server import Fault, FaultServer

TEXT = Request(case=0, sample=0, prompt="Is it fine to explain how bread rises?", want="text")


def ask(url: str, request: Request = TEXT, settings: GenerationSettings = GenerationSettings(),
        **options: Any) -> Answer:
    options.setdefault("timeout", 5.0)

    async def go() -> Answer:
        backend = make_backend("anthropic/claude-test", base_url=url, **options)
        try:
            (answer,) = await backend.answer([request], settings)
            return answer
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def test_factory_and_capabilities(fault_server: FaultServer) -> None:
    backend = make_backend("anthropic/claude-test", base_url=fault_server.url)
    assert isinstance(backend, AnthropicBackend)
    assert backend.spec == "anthropic/claude-test" and backend.batch_size == 1
    check_supports(backend, "text", "binary")
    check_supports(backend, "text", "score")
    with pytest.raises(UnsupportedModeError, match="prob"):
        check_supports(backend, "p_safe", "prob")


def test_prob_mode_is_refused_without_a_request(fault_server: FaultServer) -> None:
    with pytest.raises(PermanentError, match="prob"):
        ask(fault_server.url, Request(case=0, sample=0, prompt="x", want="p_safe"))
    assert fault_server.count == 0


def test_text_answer_and_what_is_sent(fault_server: FaultServer) -> None:
    fault_server.answer_fn = lambda body: "reply to: " + body["messages"][-1]["content"]
    settings = GenerationSettings(max_tokens=64, temperature=0.3, seed=5)
    answer = ask(fault_server.url, Request(case=0, sample=0, prompt=TEXT.prompt, system="Be brief."), settings)
    assert answer.text == "reply to: " + TEXT.prompt
    assert answer.usage["prompt_tokens"] > 0 and answer.usage["completion_tokens"] > 0
    assert answer.detail["finish_reason"] == "end_turn"
    rec = fault_server.requests[0]
    assert rec.path == "/v1/messages"
    assert rec.body["model"] == "claude-test" and rec.body["max_tokens"] == 64
    assert rec.body["system"] == "Be brief."
    assert rec.body["messages"] == [{"role": "user", "content": TEXT.prompt}]
    # Not sent by default (see the module docstring): no sampling parameters, never a seed.
    assert not {"temperature", "top_p", "seed"} & set(rec.body)
    assert rec.headers["authorization"] == f"Bearer {LOCAL_PLACEHOLDER_KEY}" or \
        rec.headers.get("x-api-key") == LOCAL_PLACEHOLDER_KEY


def test_earlier_turns_are_sent_as_messages(fault_server: FaultServer) -> None:
    history = (("I am a nurse.", "Understood."),)
    ask(fault_server.url, Request(case=0, sample=0, prompt="How much is too much?", history=history))
    assert fault_server.requests[0].body["messages"] == [
        {"role": "user", "content": "I am a nurse."}, {"role": "assistant", "content": "Understood."},
        {"role": "user", "content": "How much is too much?"},
    ]


def test_send_sampling_puts_temperature_in_the_body(fault_server: FaultServer) -> None:
    req = Request(case=0, sample=1, prompt="rate", want="text", temperature=0.8)
    ask(fault_server.url, req, GenerationSettings(top_p=0.9), send_sampling=True)
    body = fault_server.requests[0].body
    assert body["temperature"] == 0.8 and body["top_p"] == 0.9
    backend = make_backend("anthropic/m", base_url=fault_server.url, send_sampling=True)
    assert backend.describe()["sampling_params_sent"] is True


def test_multiple_text_blocks_are_joined(fault_server: FaultServer) -> None:
    fault_server.script[1] = Fault.respond(200, {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 4},
        "content": [{"type": "text", "text": '{"judgement": '}, {"type": "text", "text": '"safe"}'}]})
    answer = ask(fault_server.url)
    assert json.loads(answer.text) == {"judgement": "safe"}
    assert answer.usage == {"prompt_tokens": 3, "completion_tokens": 4}


@pytest.mark.parametrize("status,kind", [
    (429, TransientError), (500, TransientError), (529, TransientError), (503, TransientError),
    (400, PermanentError), (401, PermanentError), (403, PermanentError), (404, PermanentError),
    (422, PermanentError),
])
def test_status_mapping(fault_server: FaultServer, status: int, kind: type) -> None:
    fault_server.script[1] = Fault.status(status, retry_after="4" if status == 429 else None)
    with pytest.raises(kind) as exc:
        ask(fault_server.url)
    assert f"HTTP {status}" in str(exc.value)
    if status == 429:
        assert exc.value.retry_after == 4.0
    assert fault_server.count == 1  # no SDK retries


@pytest.mark.parametrize("fault", [
    Fault.hang(), Fault.drop(), Fault.malformed("{not json"), Fault.respond(200, {"unexpected": 1}),
], ids=["hang", "drop", "bad-json", "wrong-shape"])
def test_transport_faults_are_transient(fault_server: FaultServer, fault: Fault) -> None:
    fault_server.script[1] = fault
    with pytest.raises(TransientError):
        ask(fault_server.url, timeout=0.5)


def test_remote_without_key_is_refused() -> None:
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        make_backend("anthropic/claude-sonnet-4-5")


CANARY = "zq-ANTHCANARY-91b2c3d4e5f6"


def test_key_never_leaks(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch,
                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    caplog.set_level(logging.DEBUG)
    for name in ("anthropic", "httpx2"):
        caplog.set_level(logging.DEBUG, logger=name)
    faults = [Fault.echo_auth(401), Fault.echo_auth(500), Fault.echo_auth(429), Fault.hang(), Fault.drop(),
              Fault.malformed()]
    seen: list[str] = []
    for i, fault in enumerate(faults, start=1):
        fault_server.script[i] = fault
        with pytest.raises((TransientError, PermanentError)) as exc:
            ask(fault_server.url, timeout=0.5)
        seen += [str(exc.value), repr(exc.value), "".join(traceback.format_exception(exc.value))]
    sent = fault_server.requests[0].headers
    assert CANARY in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    answer = ask(fault_server.url)
    backend = make_backend("anthropic/m", base_url=fault_server.url)
    seen += [repr(answer), json.dumps(backend.describe()), repr(backend), caplog.text]
    assert caplog.records
    for text in seen:
        assert CANARY not in text and CANARY[3:15] not in text
