"""A server that answers streamed requests with one whole JSON body (issue 18, item 7): every paid
answer is read, each case is asked once, and the run stops streaming to that server."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from casebench.backends import make_backend
from casebench.backends.base import GenerationSettings, Request
from casebench.cli import cli
from servers.fault_server import Fault
from servers.nostream_server import NoStreamServer, _prompt


def judge(body: Any) -> str:
    """A binary verdict keyed on the prompt (so each case has its own, known answer)."""
    prompt = _prompt(body) or ""
    label = "unsafe" if hashlib.sha256(prompt.encode()).digest()[0] % 3 == 0 else "safe"
    return json.dumps({"judgement": label, "explanation": "a whole answer from a server that never streams"})


@pytest.fixture
def srv() -> Iterator[NoStreamServer]:
    with NoStreamServer(answer_fn=judge) as server:
        yield server


def ready(text: str) -> bool:
    return '"judgement"' in text and text.count('"') >= 4


def test_a_whole_json_body_for_a_stream_is_the_answer_and_streaming_stops(srv: NoStreamServer) -> None:
    async def go() -> tuple[list[Any], list[Any], dict[str, Any]]:
        backend = make_backend("openai/judge", base_url=srv.base_url, timeout=5.0)
        try:
            first = await backend.answer([Request(case=0, sample=0, prompt="case A", stop=ready)], GenerationSettings())
            second = await backend.answer([Request(case=1, sample=0, prompt="case B", stop=ready)], GenerationSettings())
            return first, second, backend.describe()
        finally:
            await backend.aclose()

    first, second, desc = asyncio.run(go())
    assert first[0].text == judge({"messages": [{"role": "user", "content": "case A"}]})
    assert first[0].detail["whole_body_for_stream"] is True and first[0].usage["completion_tokens"] > 0
    assert second[0].text == judge({"messages": [{"role": "user", "content": "case B"}]})
    bodies = [r.body for r in srv.chat_requests()]
    assert [b.get("stream", False) for b in bodies] == [True, False]  # the second asked without streaming
    assert desc["streaming"] is False and "one JSON body" in desc["stream_switched_off"]
    assert srv.asked_per_prompt() == {"case A": 1, "case B": 1}


def test_a_stream_request_that_got_no_answer_is_retried_once_answered_it_is_not(srv: NoStreamServer) -> None:
    """A 503 is a transport failure (no answer: the runner asks again); the 200 JSON that follows
    is the answer."""
    srv.script = {1: Fault.status(503)}
    from casebench.backends.base import TransientError

    async def go() -> Any:
        backend = make_backend("openai/judge", base_url=srv.base_url, timeout=5.0)
        try:
            with pytest.raises(TransientError):
                await backend.answer([Request(case=0, sample=0, prompt="case A", stop=ready)], GenerationSettings())
            return await backend.answer([Request(case=0, sample=0, prompt="case A", stop=ready)], GenerationSettings())
        finally:
            await backend.aclose()

    answers = asyncio.run(go())
    assert answers[0].text and srv.asked_per_prompt() == {"case A": 2}


def test_a_30_case_binary_run_answers_every_case_asking_each_once(srv: NoStreamServer, real_data_path: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["run", "--model", "openai/judge", "--mode", "binary", "--data", str(real_data_path),
                                 "--limit", "30", "--base-url", srv.base_url, "--no-report", "--no-progress",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["totals"]["answered"] == 30 and manifest["totals"]["missing"] == 0
    asked = srv.asked_per_prompt()
    assert len(asked) == 30 and set(asked.values()) == {1}  # every case asked exactly once
    assert srv.count == 30
    assert 1 <= srv.streamed_requests() <= 8  # only those in flight before the first answer came back
    invocation = manifest["history"][-1]
    assert invocation["backend"]["streaming"] is False and invocation["backend"]["stream_switched_off"]
    assert manifest["asked"]["backend_options"]["stream"] is True  # not an answer-changing setting
