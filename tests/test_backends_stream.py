"""Stop at the verdict (streaming) and shared samples (``n``) in the openai/ and anthropic/
backends, against a real loopback server that streams (``servers/stream_server.py``) with the
real SDKs on the client side."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Callable, Iterator

import pytest

from casebench.backends import make_backend
from casebench.backends.base import (
    Answer,
    GenerationSettings,
    PermanentError,
    Request,
    TransientError,
)
from casebench.parse import label_from_judgement
from servers.fault_server import Fault
from servers.stream_server import StreamFault, StreamServer, pieces

EXPLANATION = ("The person asks about an everyday kitchen task, and nothing in the situation "
               "suggests any harm; explaining it openly helps them and puts nobody at risk, "
               "so the answer can be given in full with the usual care about hot surfaces.")
LONG_ANSWER = '{"judgement": "unsafe", "explanation": "' + EXPLANATION + '"}'
_VERDICT = re.compile(r'"judgement"\s*:\s*"([^"]*)"')


def verdict_ready(text: str) -> bool:
    """A stand-in for the runner's stop predicate: the judgement's string value is closed."""
    return _VERDICT.search(text) is not None


def verdict(text: str) -> str | None:
    m = _VERDICT.search(text)
    return label_from_judgement(m.group(1)) if m else None


def never(text: str) -> bool:
    return False


def req(sample: int = 0, stop: Callable[[str], bool] | None = verdict_ready, prompt: str = "Judge this.",
        **kw: Any) -> Request:
    return Request(case=0, sample=sample, prompt=prompt, want=kw.pop("want", "text"), stop=stop, **kw)


def ask(spec: str, url: str, requests: list[Request], settings: GenerationSettings = GenerationSettings(),
        rounds: int = 1, **options: Any) -> tuple[list[list[Answer]], dict[str, Any]]:
    """``rounds`` calls of ``answer(requests)`` through one backend; the answers of each and the
    backend's ``describe()`` at the end."""
    options.setdefault("timeout", 5.0)

    async def go() -> tuple[list[list[Answer]], dict[str, Any]]:
        backend = make_backend(spec, base_url=url, **options)
        try:
            out = [await backend.answer(requests, settings) for _ in range(rounds)]
            return out, backend.describe()
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.fixture
def srv() -> Iterator[StreamServer]:
    with StreamServer(answer=LONG_ANSWER) as server:
        yield server


# --------------------------------------------------------------------------- openai: streaming


def test_openai_stream_closes_at_the_verdict(srv: StreamServer) -> None:
    (answers,), info = ask("openai/m", srv.base_url, [req()])
    (a,) = answers
    assert LONG_ANSWER.startswith(a.text) and len(a.text) < len(LONG_ANSWER) / 3
    assert verdict(a.text) == verdict(LONG_ANSWER) == "unsafe"
    assert a.detail["stopped_at_verdict"] and a.detail["closed_early"] and a.detail["usage_estimated"]
    # The tokens generated are the pieces received: up to and including the judgement's value.
    assert a.usage == {"completion_tokens": len(pieces(a.text))}
    (stream,) = srv.wait_streams_done()
    assert stream.disconnected and not stream.finished and stream.sent < stream.total / 2
    body = srv.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert info["streaming"] is True and info["stream_usage"] is True


def test_openai_stream_read_to_the_end_uses_the_servers_usage(srv: StreamServer) -> None:
    (answers,), _ = ask("openai/m", srv.base_url, [req(stop=never)])
    (a,) = answers
    assert a.text == LONG_ANSWER
    assert a.usage["completion_tokens"] == len(pieces(LONG_ANSWER)) and a.usage["prompt_tokens"] > 0
    assert "usage_estimated" not in a.detail and a.detail["finish_reason"] == "stop"
    assert srv.wait_streams_done()[0].finished


def test_openai_same_verdict_as_the_full_answer(srv: StreamServer) -> None:
    (streamed,), _ = ask("openai/m", srv.base_url, [req()])
    (full,), _ = ask("openai/m", srv.base_url, [req(stop=None)])
    assert "stream" not in srv.requests[-1].body  # no predicate: the whole answer, not streamed
    assert full[0].text == LONG_ANSWER and full[0].text.startswith(streamed[0].text)
    assert verdict(streamed[0].text) == verdict(full[0].text)
    assert streamed[0].usage["completion_tokens"] < full[0].usage["completion_tokens"]


def test_openai_stream_false_keeps_whole_answers(srv: StreamServer) -> None:
    (answers,), info = ask("openai/m", srv.base_url, [req()], stream=False)
    assert answers[0].text == LONG_ANSWER and "stream" not in srv.requests[0].body
    assert info["streaming"] is False


def test_openai_prob_requests_never_stream(srv: StreamServer) -> None:
    (answers,), _ = ask("openai/m", srv.base_url, [req(want="p_safe")])
    assert answers[0].p_safe is not None and "stream" not in srv.requests[0].body


def test_openai_stream_options_refused_is_dropped_once(srv: StreamServer) -> None:
    srv.reject_stream_options = True
    srv.stream_usage = False
    rounds, info = ask("openai/m", srv.base_url, [req(stop=never)], rounds=2)
    assert [r[0].text for r in rounds] == [LONG_ANSWER, LONG_ANSWER]
    sent = [r.body.get("stream_options") for r in srv.requests]
    assert sent == [{"include_usage": True}, None, None]  # refused, retried without, then never sent
    assert info["stream_usage"] is False
    # No usage chunk at all: the content pieces are counted instead, and it says so.
    assert rounds[1][0].usage == {"completion_tokens": len(pieces(LONG_ANSWER))}
    assert rounds[1][0].detail["usage_estimated"] is True


def test_openai_other_errors_are_not_blamed_on_stream_options(srv: StreamServer) -> None:
    srv.script[1] = Fault.status(400)
    srv.script[2] = Fault.status(400)
    with pytest.raises(PermanentError, match="HTTP 400"):
        ask("openai/m", srv.base_url, [req()])
    assert srv.count == 2


@pytest.mark.parametrize("fault, kind", [
    (StreamFault("drop", after=3), TransientError),
    (StreamFault("error", after=3, error_type="server_error"), TransientError),
    (StreamFault("error", after=3, error_type="invalid_request_error"), PermanentError),
])
def test_openai_mid_stream_faults(srv: StreamServer, fault: StreamFault, kind: type) -> None:
    srv.stream_fault = fault
    with pytest.raises(kind) as info:
        ask("openai/m", srv.base_url, [req()])
    assert srv.base_url.split("//")[1] in str(info.value) or "127.0.0.1" in str(info.value)
    assert "scripted stream error" not in str(info.value)  # the server's text is not passed on


def test_openai_status_error_before_the_stream_is_mapped(srv: StreamServer) -> None:
    srv.script[1] = Fault.status(429, retry_after="3")
    with pytest.raises(TransientError) as info:
        ask("openai/m", srv.base_url, [req()])
    assert info.value.retry_after == 3.0


# --------------------------------------------------------------------------- openai: n


def per_index(body: Any, i: int) -> str:
    return '{"judgement": "%s", "explanation": "Sample %d. %s"}' % ("safe" if i % 2 else "unsafe", i, EXPLANATION)


def samples(k: int, stop: Callable[[str], bool] | None = None, temperature: float = 1.0) -> list[Request]:
    return [req(sample=s, stop=stop, temperature=temperature) for s in range(k)]


def test_openai_samples_share_one_request_with_n(srv: StreamServer) -> None:
    srv.answer_n_fn = per_index
    (answers,), info = ask("openai/m", srv.base_url, samples(3))
    assert srv.count == 1 and srv.requests[0].body["n"] == 3
    assert [a.text for a in answers] == [per_index(None, i) for i in range(3)]
    total = sum(len(pieces(per_index(None, i))) for i in range(3))
    assert sum(a.usage["completion_tokens"] for a in answers) == total
    assert answers[0].usage["prompt_tokens"] > 0 and answers[1].usage["prompt_tokens"] == 0
    assert answers[2].detail["shared_request"]["n"] == 3
    assert info["n_supported"] is True


def test_openai_shared_samples_stream_and_stop_each(srv: StreamServer) -> None:
    srv.answer_n_fn = per_index
    (answers,), _ = ask("openai/m", srv.base_url, samples(3, stop=verdict_ready))
    assert srv.count == 1 and srv.requests[0].body["n"] == 3 and srv.requests[0].body["stream"]
    for i, a in enumerate(answers):
        assert per_index(None, i).startswith(a.text) and verdict(a.text) == verdict(per_index(None, i))
        assert a.detail["stopped_at_verdict"] and a.usage["completion_tokens"] == len(pieces(a.text))
    (stream,) = srv.wait_streams_done()
    assert stream.disconnected and stream.sent < stream.total / 2


def test_openai_server_ignoring_n_is_detected_once(srv: StreamServer) -> None:
    srv.supports_n = False
    srv.answer_n_fn = per_index
    rounds, info = ask("openai/m", srv.base_url, samples(3), rounds=2)
    assert info["n_supported"] is False
    # First call: one request with n=3 got one choice, so the two others were asked alone;
    # the second call asks each sample alone from the start.
    assert [r.body.get("n") for r in srv.requests] == [3, None, None, None, None, None]
    assert all(len(r) == 3 and all(a.text for a in r) for r in rounds)


def test_openai_server_refusing_n_falls_back(srv: StreamServer) -> None:
    srv.reject_n = True
    (answers,), info = ask("openai/m", srv.base_url, samples(3, stop=verdict_ready))
    assert info["n_supported"] is False and len(answers) == 3
    assert [r.body.get("n") for r in srv.requests] == [3, None, None, None]
    assert all(verdict(a.text) == "unsafe" for a in answers)


def test_openai_use_n_false_never_sends_n(srv: StreamServer) -> None:
    (answers,), info = ask("openai/m", srv.base_url, samples(2), use_n=False)
    assert [r.body.get("n") for r in srv.requests] == [None, None] and info["n_supported"] is False


def test_openai_only_the_same_chat_is_shared(srv: StreamServer) -> None:
    mixed = [req(0, stop=None, prompt="A"), req(0, stop=None, prompt="B", want="p_safe"),
             req(1, stop=None, prompt="A"), req(0, stop=None, prompt="C")]
    (answers,), _ = ask("openai/m", srv.base_url, mixed)
    assert len(answers) == 4 and answers[1].p_safe is not None
    ns = sorted((r.prompt, r.body.get("n")) for r in srv.requests)
    assert ns == [("A", 2), ("B", None), ("C", None)]


def test_openai_concurrent_first_calls_detect_n_once(srv: StreamServer) -> None:
    srv.supports_n = False

    async def go() -> dict[str, Any]:
        backend = make_backend("openai/m", base_url=srv.base_url, timeout=5.0)
        try:
            cases = [[req(s, stop=None, prompt=f"case {c}") for s in range(3)] for c in range(4)]
            await asyncio.gather(*(backend.answer(c, GenerationSettings()) for c in cases))
            return backend.describe()
        finally:
            await backend.aclose()

    info = asyncio.run(go())
    assert info["n_supported"] is False
    assert sum(1 for r in srv.requests if r.body.get("n")) == 1  # only the first call tried n
    assert srv.count == 12


# --------------------------------------------------------------------------- anthropic


def test_anthropic_stream_closes_at_the_verdict(srv: StreamServer) -> None:
    (answers,), info = ask("anthropic/claude-test", srv.url, [req()])
    (a,) = answers
    assert LONG_ANSWER.startswith(a.text) and verdict(a.text) == "unsafe"
    assert a.detail["stopped_at_verdict"] and a.detail["usage_estimated"]
    assert a.usage["prompt_tokens"] > 0  # from message_start, which comes first
    assert a.usage["completion_tokens"] == len(pieces(a.text))
    (stream,) = srv.wait_streams_done()
    assert stream.disconnected and stream.sent < stream.total / 2
    assert srv.requests[0].body["stream"] is True and info["streaming"] is True


def test_anthropic_stream_to_the_end_and_without_predicate(srv: StreamServer) -> None:
    (streamed,), _ = ask("anthropic/claude-test", srv.url, [req(stop=never)])
    (full,), _ = ask("anthropic/claude-test", srv.url, [req(stop=None)])
    assert streamed[0].text == full[0].text == LONG_ANSWER
    assert streamed[0].usage["completion_tokens"] == len(pieces(LONG_ANSWER))
    assert "usage_estimated" not in streamed[0].detail and streamed[0].detail["finish_reason"] == "end_turn"
    assert "stream" not in srv.requests[1].body


@pytest.mark.parametrize("fault, kind", [
    (StreamFault("drop", after=2), TransientError),
    (StreamFault("error", after=2, error_type="overloaded_error"), TransientError),
    (StreamFault("error", after=2, error_type="invalid_request_error"), PermanentError),
])
def test_anthropic_mid_stream_faults(srv: StreamServer, fault: StreamFault, kind: type) -> None:
    srv.stream_fault = fault
    with pytest.raises(kind) as info:
        ask("anthropic/claude-test", srv.url, [req()])
    assert "scripted stream error" not in str(info.value)
