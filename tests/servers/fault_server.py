"""A scripted OpenAI- and Anthropic-compatible HTTP server on loopback, for fault tests.

Real sockets, real HTTP, real SDK clients: only the model is scripted. It answers

- ``POST /v1/chat/completions`` (OpenAI chat completions; with ``logprobs`` when asked),
- ``POST /v1/messages`` (Anthropic Messages API, enough for a text reply),
- ``GET /v1/models``,

and injects faults by request number or by rule. Every request is recorded.

Usage as a context manager::

    from servers.fault_server import Fault, FaultServer

    with FaultServer(answer='{"judgement": "safe", "explanation": "ok"}') as srv:
        client = AsyncOpenAI(base_url=srv.base_url, api_key="x")   # srv.base_url ends in /v1
        srv.script[1] = Fault.status(429, retry_after="2")           # 1st request: 429
        srv.script[2] = Fault.drop()                                 # 2nd: connection dropped
        ...
        assert srv.count == 3                                        # requests that reached it
        srv.requests[0].body["messages"]                             # what was sent

and as the pytest fixture ``fault_server`` (``tests/conftest_servers.py``: a fresh, started
server per test; set its attributes inside the test).

Constructor arguments (all can also be changed later as attributes):

- ``answer``: reply text for text requests. ``answer_fn(body) -> str`` overrides it per request
  (e.g. key the answer on the prompt so a runner test knows which case got which answer).
- ``top_logprobs``: ``[(token, logprob), ...]`` returned as the first token's alternatives when a
  request asks for ``logprobs``; ``logprobs_fn(body) -> list`` overrides it per request. The list is
  cut to the request's ``top_logprobs`` count, and its first entry is the generated token.
- ``latency``: seconds to wait before every response (the server is threaded, so many slow
  requests overlap; use it to check a client's concurrency).
- ``script``: ``{request_number: Fault}``, numbers counted from 1 over all requests the server
  got (every route). ``rule(recorded_request) -> Fault | None`` is asked when the script has no
  entry (e.g. "fail every request whose prompt mentions X").
- ``hang_seconds``: how long a ``Fault.hang()`` holds a request open at most (``stop()`` releases
  hanging requests at once).

Faults (``Fault.*`` constructors):

- ``Fault.status(code, body=None, retry_after=None, headers=None)``: an HTTP error with a JSON
  error body (OpenAI or Anthropic shape by route) or ``body`` verbatim.
- ``Fault.echo_auth(code=401)``: an error whose body repeats the request's credential headers,
  whole and as bare tokens, as a careless proxy would (for key-leak tests).
- ``Fault.hang(seconds=None)``: accept the request and never answer (until ``hang_seconds``).
- ``Fault.malformed(body="{not json", status=200)``: a body that is not valid JSON, or
  ``Fault.respond(status, json_obj)`` for valid JSON of the wrong shape (e.g. empty choices).
- ``Fault.drop()``: close the connection without any response.
- ``Fault.slow(seconds)``: answer normally after a delay.

Recorded per request (``srv.requests``, a list of ``RecordedRequest``): ``number``, ``method``,
``path``, ``headers`` (dict, lower-case names), ``body`` (decoded JSON or None), ``raw``
(bytes), ``time``. ``srv.count`` is ``len(srv.requests)``; ``srv.reset()`` clears requests
and the script.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DEFAULT_ANSWER = '{"judgement": "safe", "explanation": "The request is harmless in this situation."}'
DEFAULT_TOP_LOGPROBS: list[tuple[str, float]] = [("safe", -0.2), ("unsafe", -1.8), ("Safe", -3.0)]


@dataclass(frozen=True)
class Fault:
    """What the server does instead of (or before) a normal answer."""

    kind: str  # status | echo_auth | hang | malformed | respond | drop | slow
    code: int = 200  # HTTP status of the response
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None

    @staticmethod
    def status(code: int, body: Any = None, retry_after: str | float | None = None,
                headers: dict[str, str] | None = None) -> "Fault":
        hdrs = dict(headers or {})
        if retry_after is not None:
            hdrs["Retry-After"] = str(retry_after)
        return Fault("status", code=code, body=body, headers=hdrs)

    @staticmethod
    def echo_auth(code: int = 401) -> "Fault":
        return Fault("echo_auth", code=code)

    @staticmethod
    def hang(seconds: float | None = None) -> "Fault":
        return Fault("hang", seconds=seconds)

    @staticmethod
    def malformed(body: str | bytes = "{not json", status: int = 200) -> "Fault":
        return Fault("malformed", code=status, body=body)

    @staticmethod
    def respond(status: int, obj: Any) -> "Fault":
        return Fault("respond", code=status, body=obj)

    @staticmethod
    def drop() -> "Fault":
        return Fault("drop")

    @staticmethod
    def slow(seconds: float) -> "Fault":
        return Fault("slow", seconds=seconds)


@dataclass
class RecordedRequest:
    number: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    time: float

    @property
    def prompt(self) -> str | None:
        """The last user message's text, for either API shape."""
        if not isinstance(self.body, dict):
            return None
        for msg in reversed(self.body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return None


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: tests read srv.requests instead

    # ------------------------------------------------------------------ plumbing
    def _send(self, status: int, payload: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), headers=headers)

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return self.server.owner._record(self.command, self.path, dict(self.headers.items()), body, raw)

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        rec = self._record()
        if self._apply_fault(rec):
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": "fault-model", "object": "model", "created": 0, "owned_by": "casebench-tests"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        rec = self._record()
        if self._apply_fault(rec):
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        if path == "/v1/chat/completions":
            self._send_json(200, owner._chat_completion(rec))
        elif path == "/v1/messages":
            self._send_json(200, owner._anthropic_message(rec))
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    # ------------------------------------------------------------------ faults
    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        if self.path.startswith("/v1/messages"):
            return {"type": "error", "error": {"type": "api_error", "message": message}}
        return {"error": {"message": message, "type": "server_error", "code": status}}

    def _apply_fault(self, rec: RecordedRequest) -> bool:
        """Do the scripted fault for this request; True when the response is already handled."""
        owner = self.server.owner
        if owner.latency > 0:
            owner._stopping.wait(owner.latency)
        fault = owner._fault_for(rec)
        if fault is None:
            return False
        kind = fault.kind
        if kind == "slow":
            owner._stopping.wait(fault.seconds or 0.0)
            return False
        if kind == "status":
            if fault.body is None:
                payload = json.dumps(self._error_body(fault.code, f"scripted error {fault.code}")).encode()
            elif isinstance(fault.body, (bytes, str)):
                payload = fault.body.encode() if isinstance(fault.body, str) else fault.body
            else:
                payload = json.dumps(fault.body).encode()
            self._send(fault.code, payload, headers=fault.headers)
        elif kind == "echo_auth":
            echoed = {k: v for k, v in rec.headers.items()
                      if k.lower() in ("authorization", "x-api-key", "api-key")}
            bare = [v.split(" ", 1)[-1] for v in echoed.values()]  # the token without "Bearer "
            message = f"invalid credentials: got {echoed}; tokens {bare}"
            self._send_json(fault.code, self._error_body(fault.code, message))
        elif kind == "hang":
            limit = fault.seconds if fault.seconds is not None else owner.hang_seconds
            owner._stopping.wait(limit)
            self.close_connection = True
        elif kind == "malformed":
            payload = fault.body.encode() if isinstance(fault.body, str) else bytes(fault.body)
            self._send(fault.code, payload)
        elif kind == "respond":
            self._send_json(fault.code, fault.body)
        elif kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        else:  # pragma: no cover - a typo in a test
            raise ValueError(f"unknown fault kind {kind!r}")
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    allow_reuse_address = True
    owner: "PlainFaultServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dropped connections are on purpose here


class PlainFaultServer:
    """A threaded loopback server with scripted answers and faults (see the module docstring)."""

    def __init__(
        self,
        answer: str = DEFAULT_ANSWER,
        answer_fn: Callable[[Any], str] | None = None,
        top_logprobs: list[tuple[str, float]] | None = None,
        logprobs_fn: Callable[[Any], list[tuple[str, float]]] | None = None,
        latency: float = 0.0,
        script: dict[int, Fault] | None = None,
        rule: Callable[[RecordedRequest], Fault | None] | None = None,
        hang_seconds: float = 30.0,
        model: str = "fault-model",
    ):
        self.answer = answer
        self.answer_fn = answer_fn
        self.top_logprobs = list(DEFAULT_TOP_LOGPROBS if top_logprobs is None else top_logprobs)
        self.logprobs_fn = logprobs_fn
        self.latency = latency
        self.script: dict[int, Fault] = dict(script or {})
        self.rule = rule
        self.hang_seconds = hang_seconds
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "PlainFaultServer":
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fault-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging and slow requests
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "PlainFaultServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("fault server is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic SDK's base URL)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI SDK's base URL)."""
        return self.url + "/v1"

    # ------------------------------------------------------------------ records
    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.script.clear()

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any, raw: bytes) -> RecordedRequest:
        with self._lock:
            rec = RecordedRequest(len(self.requests) + 1, method, path,
                                  {k.lower(): v for k, v in headers.items()}, body, raw, time.time())
            self.requests.append(rec)
            return rec

    def _fault_for(self, rec: RecordedRequest) -> Fault | None:
        fault = self.script.get(rec.number)
        if fault is None and self.rule is not None:
            fault = self.rule(rec)
        return fault

    # ------------------------------------------------------------------ answers
    def _text_for(self, rec: RecordedRequest) -> str:
        return self.answer_fn(rec.body) if self.answer_fn is not None else self.answer

    def _chat_completion(self, rec: RecordedRequest) -> dict[str, Any]:
        body = rec.body if isinstance(rec.body, dict) else {}
        prompt_tokens = _count_tokens(json.dumps(body.get("messages", "")))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        if body.get("logprobs"):
            alts = list(self.logprobs_fn(body) if self.logprobs_fn is not None else self.top_logprobs)
            k = body.get("top_logprobs")
            if isinstance(k, int) and k >= 0:
                alts = alts[: max(k, 1)]
            top = [{"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in alts]
            first = top[0] if top else {"token": "", "logprob": 0.0, "bytes": []}
            choice["message"] = {"role": "assistant", "content": first["token"]}
            choice["logprobs"] = {"content": [{**first, "top_logprobs": top}], "refusal": None}
            choice["finish_reason"] = "length"
            completion_tokens = 1
        else:
            text = self._text_for(rec)
            choice["message"] = {"role": "assistant", "content": text}
            choice["logprobs"] = None
            completion_tokens = _count_tokens(text)
        return {
            "id": f"chatcmpl-fault-{rec.number}",
            "object": "chat.completion",
            "created": int(rec.time),
            "model": body.get("model", self.model),
            "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _anthropic_message(self, rec: RecordedRequest) -> dict[str, Any]:
        body = rec.body if isinstance(rec.body, dict) else {}
        text = self._text_for(rec)
        return {
            "id": f"msg_fault_{rec.number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", self.model),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": _count_tokens(json.dumps(body.get("messages", ""))),
                      "output_tokens": _count_tokens(text)},
        }


def __getattr__(name: str) -> Any:
    """``FaultServer`` is the plain server plus streaming (SSE), defined in ``stream_server``:
    clients stream whenever they stop at the verdict, so every scripted test needs it. It is
    looked up lazily because ``stream_server`` builds on this module."""
    if name == "FaultServer":
        from servers.stream_server import StreamingFaultServer

        return StreamingFaultServer
    raise AttributeError(name)
