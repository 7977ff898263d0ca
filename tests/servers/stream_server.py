"""The scripted fault server, plus streaming (SSE) and ``n`` choices, for stop-at-verdict tests.

``StreamServer`` is a ``FaultServer`` (same answers, faults, records; see ``fault_server.py``)
that also answers ``stream: true`` requests the way the real APIs do:

- ``POST /v1/chat/completions`` with ``stream``: ``chat.completion.chunk`` events, one content
  piece (a word or a punctuation mark with its leading space: the server's "token") per event,
  a finish chunk per choice, a usage chunk when ``stream_options.include_usage`` is set, then
  ``data: [DONE]``;
- ``POST /v1/messages`` with ``stream``: Anthropic's ``message_start`` (with input tokens),
  ``content_block_*``, ``message_delta`` (with output tokens) and ``message_stop`` events.

Pieces are sent ``chunk_delay`` seconds apart, and the server notes when the client goes away, so
a test can tell that a client closed the stream early (``srv.streams[k].sent < .total``).

``n``: with ``supports_n`` (default True) a request with ``n`` gets that many choices (streamed
choices interleave, as OpenAI's do); ``supports_n=False`` ignores ``n`` (one choice, like servers
that do not implement it), ``reject_n=True`` answers 400. ``answer_n_fn(body, index) -> str``
gives each choice its own text. ``reject_stream_options=True`` answers 400 to any request that
carries ``stream_options``; ``stream_usage=False`` never sends the usage chunk.

Mid-stream faults (``stream_fault``): ``StreamFault("drop", after=k)`` closes the connection
after k content pieces; ``StreamFault("error", after=k, error_type="overloaded_error")`` sends
an error event instead.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from servers.fault_server import PlainFaultServer, RecordedRequest, _Handler, _Server


def pieces(text: str) -> list[str]:
    """The text cut into "tokens": words and punctuation marks, each with its leading spaces."""
    out = re.findall(r"\s*(?:\w+|[^\w\s])|\s+$", text)
    assert "".join(out) == text
    return out


@dataclass(frozen=True)
class StreamFault:
    kind: str  # drop | error
    after: int = 0  # content pieces sent before the fault
    error_type: str = "overloaded_error"


@dataclass
class StreamRecord:
    """One streamed response: how many content pieces it had and how many went out."""

    number: int
    total: int
    sent: int = 0
    disconnected: bool = False
    finished: bool = False


class _StreamHandler(_Handler):
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        rec = self._record()
        if self._apply_fault(rec):
            return
        owner: StreamServer = self.server.owner  # type: ignore[assignment]
        path = self.path.split("?", 1)[0].rstrip("/")
        body = rec.body if isinstance(rec.body, dict) else {}
        if path == "/v1/chat/completions":
            n = body.get("n")
            if owner.reject_n and isinstance(n, int) and n > 1:
                self._send_json(400, {"error": {"message": "n > 1 is not supported", "type": "invalid_request_error"}})
            elif owner.reject_stream_options and "stream_options" in body:
                self._send_json(400, {"error": {"message": "unknown field stream_options",
                                                "type": "invalid_request_error"}})
            elif body.get("stream"):
                self._sse_openai(rec, body)
            else:
                self._send_json(200, owner._chat_completion(rec))
        elif path == "/v1/messages":
            if body.get("stream"):
                self._sse_anthropic(rec, body)
            else:
                self._send_json(200, owner._anthropic_message(rec))
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    # ------------------------------------------------------------------ SSE plumbing
    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, event: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {event}\n" if event else ""
        self.wfile.write(f"{head}data: {payload}\n\n".encode("utf-8"))
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stream(self, rec: RecordedRequest, texts: list[str],
                head: Callable[[], None], piece_event: Callable[[int, str], None],
                error_event: Callable[[str], None], tail: Callable[[list[int]], None]) -> None:
        owner: StreamServer = self.server.owner  # type: ignore[assignment]
        cut = [pieces(t) for t in texts]
        srec = owner._new_stream(rec.number, sum(len(c) for c in cut))
        fault = owner.stream_fault
        try:
            self._start_sse()
            head()
            longest = max((len(c) for c in cut), default=0)
            for step in range(longest):
                for i, c in enumerate(cut):  # choices interleave, one piece each per step
                    if step >= len(c):
                        continue
                    if fault is not None and srec.sent >= fault.after:
                        if fault.kind == "drop":
                            self._drop()
                        else:
                            error_event(fault.error_type)
                        srec.finished = True  # ended by the scripted fault
                        return
                    piece_event(i, c[step])
                    srec.sent += 1
                    if owner.chunk_delay > 0:
                        owner._stopping.wait(owner.chunk_delay)
            tail([len(c) for c in cut])
            srec.finished = True
        except (BrokenPipeError, ConnectionResetError, OSError):
            srec.disconnected = True
            self.close_connection = True

    # ------------------------------------------------------------------ OpenAI
    def _sse_openai(self, rec: RecordedRequest, body: dict[str, Any]) -> None:
        owner: StreamServer = self.server.owner  # type: ignore[assignment]
        texts = owner._texts(rec, body)
        model = body.get("model", owner.model)
        include_usage = owner.stream_usage and bool((body.get("stream_options") or {}).get("include_usage"))
        prompt_tokens = max(1, len(json.dumps(body.get("messages", "")).split()))
        base = {"id": f"chatcmpl-stream-{rec.number}", "object": "chat.completion.chunk",
                "created": int(rec.time), "model": model}

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> None:
            obj = {**base, "choices": choices, **extra}
            if include_usage and "usage" not in obj:
                obj["usage"] = None
            self._event(obj)

        def head() -> None:
            chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                   for i in range(len(texts))])

        def piece(i: int, text: str) -> None:
            chunk([{"index": i, "delta": {"content": text}, "finish_reason": None}])

        def error(kind: str) -> None:
            self._event({"error": {"message": "scripted stream error", "type": kind}})

        def tail(counts: list[int]) -> None:
            for i in range(len(texts)):
                chunk([{"index": i, "delta": {}, "finish_reason": "stop"}])
            if include_usage:
                done = sum(counts)
                chunk([], usage={"prompt_tokens": prompt_tokens, "completion_tokens": done,
                                 "total_tokens": prompt_tokens + done})
            self._event("[DONE]")

        self._stream(rec, texts, head, piece, error, tail)

    # ------------------------------------------------------------------ Anthropic
    def _sse_anthropic(self, rec: RecordedRequest, body: dict[str, Any]) -> None:
        owner: StreamServer = self.server.owner  # type: ignore[assignment]
        (text,) = owner._texts(rec, {**body, "n": 1})
        input_tokens = max(1, len(json.dumps(body.get("messages", "")).split()))

        def head() -> None:
            self._event({"type": "message_start", "message": {
                "id": f"msg_stream_{rec.number}", "type": "message", "role": "assistant",
                "model": body.get("model", owner.model), "content": [], "stop_reason": None,
                "stop_sequence": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}},
                "message_start")
            self._event({"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}}, "content_block_start")
            self._event({"type": "ping"}, "ping")

        def piece(i: int, t: str) -> None:
            self._event({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": t}}, "content_block_delta")

        def error(kind: str) -> None:
            self._event({"type": "error", "error": {"type": kind, "message": "scripted stream error"}}, "error")

        def tail(counts: list[int]) -> None:
            self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
            self._event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"output_tokens": counts[0]}}, "message_delta")
            self._event({"type": "message_stop"}, "message_stop")

        self._stream(rec, [text], head, piece, error, tail)


class StreamServer(PlainFaultServer):
    """A ``FaultServer`` that also streams and honours ``n`` (see the module docstring)."""

    def __init__(self, *args: Any, chunk_delay: float = 0.005, supports_n: bool = True,
                 reject_n: bool = False, reject_stream_options: bool = False, stream_usage: bool = True,
                 stream_fault: StreamFault | None = None,
                 answer_n_fn: Callable[[Any, int], str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.chunk_delay = chunk_delay
        self.supports_n = supports_n
        self.reject_n = reject_n
        self.reject_stream_options = reject_stream_options
        self.stream_usage = stream_usage
        self.stream_fault = stream_fault
        self.answer_n_fn = answer_n_fn
        self.streams: list[StreamRecord] = []

    def start(self) -> "StreamServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _StreamHandler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="stream-server", daemon=True)
        self._thread.start()
        return self

    def wait_streams_done(self, timeout: float = 5.0) -> list[StreamRecord]:
        """Wait until every stream has finished or seen its client go (a closed stream is
        noticed on the server's next write)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(s.finished or s.disconnected for s in self.streams):
                    return list(self.streams)
            time.sleep(0.01)
        with self._lock:
            return list(self.streams)

    def _new_stream(self, number: int, total: int) -> StreamRecord:
        with self._lock:
            srec = StreamRecord(number, total)
            self.streams.append(srec)
            return srec

    def _texts(self, rec: RecordedRequest, body: dict[str, Any]) -> list[str]:
        n = body.get("n")
        n = n if isinstance(n, int) and n > 1 and self.supports_n else 1
        if self.answer_n_fn is not None:
            return [self.answer_n_fn(body, i) for i in range(n)]
        return [self._text_for(rec)] * n

    def _chat_completion(self, rec: RecordedRequest) -> dict[str, Any]:
        out = super()._chat_completion(rec)
        body = rec.body if isinstance(rec.body, dict) else {}
        if body.get("logprobs"):
            return out
        n = body.get("n")
        if self.answer_n_fn is None and not (isinstance(n, int) and n > 1 and self.supports_n):
            texts = [out["choices"][0]["message"]["content"]]  # the answer the plain server gave (asked once)
        else:
            texts = self._texts(rec, body)
        out["choices"] = [{"index": i, "finish_reason": "stop", "logprobs": None,
                           "message": {"role": "assistant", "content": t}} for i, t in enumerate(texts)]
        done = sum(len(pieces(t)) for t in texts)
        out["usage"]["completion_tokens"] = done
        out["usage"]["total_tokens"] = out["usage"]["prompt_tokens"] + done
        return out


class StreamingFaultServer(StreamServer):
    """What tests get as ``servers.fault_server.FaultServer``: the scripted server, streaming when
    asked, and (like most servers) without ``n`` unless a test turns it on."""

    def __init__(self, *args: Any, supports_n: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, supports_n=supports_n, **kwargs)
