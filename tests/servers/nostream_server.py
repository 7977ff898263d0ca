"""A scripted OpenAI-compatible server that never streams: every chat completion, streamed or not,
is answered with one whole JSON body (``Content-Type: application/json``), as some gateways and
simple servers do.

It is the plain ``FaultServer`` (same answers, faults and records; see ``fault_server.py``) with
a count of the requests per prompt, so a test can check that each case was asked exactly once::

    with NoStreamServer(answer_fn=judge) as srv:
        ... run against srv.base_url ...
    assert srv.streamed_requests() > 0          # the client did ask for a stream at first
    assert set(srv.asked_per_prompt().values()) == {1}

``asked_per_prompt()``: last user message -> number of chat-completion requests that carried it.
``streamed_requests()``: how many requests asked for ``stream: true`` (and got JSON anyway).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from servers.fault_server import PlainFaultServer


def _prompt(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    users = [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else None


class NoStreamServer(PlainFaultServer):
    """The plain scripted server (it answers ``stream: true`` with a whole JSON completion), with
    per-prompt request counts."""

    def chat_requests(self) -> list[Any]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?", 1)[0].rstrip("/") == "/v1/chat/completions"]

    def asked_per_prompt(self) -> dict[str, int]:
        """The number of chat-completion requests per prompt (last user message)."""
        return dict(Counter(p for p in (_prompt(r.body) for r in self.chat_requests()) if p is not None))

    def streamed_requests(self) -> int:
        """How many chat-completion requests asked for a stream."""
        return sum(1 for r in self.chat_requests() if isinstance(r.body, dict) and r.body.get("stream"))


__all__ = ["NoStreamServer"]
