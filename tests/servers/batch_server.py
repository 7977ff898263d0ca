"""A loopback server with OpenAI's Files and Batches endpoints and Anthropic's Message Batches,
for batch-mode tests with the real SDKs on the client side.

Routes (all under ``/v1``):

- OpenAI: ``POST /files`` (multipart upload, ``purpose=batch``), ``GET /files/{id}``,
  ``GET /files/{id}/content``, ``POST /batches``, ``GET /batches`` (list),
  ``GET /batches/{id}``, ``POST /batches/{id}/cancel``;
- Anthropic: ``POST /messages/batches``, ``GET /messages/batches`` (list),
  ``GET /messages/batches/{id}``, ``GET /messages/batches/{id}/results`` (JSONL),
  ``POST /messages/batches/{id}/cancel``.

Scripted behaviour (attributes, changeable while it runs):

- ``polls_to_end``: a batch ends on its n-th status poll (OpenAI goes validating ->
  in_progress -> finalizing -> completed; Anthropic in_progress -> ended). ``hold = True``
  keeps every batch in progress until it is set back to False.
- ``fail_ids``: custom_ids whose line fails (OpenAI: a 500 line in the error file; Anthropic:
  an ``errored`` result).
- ``expire_after``: a batch expires with only its first k items answered (OpenAI: status
  ``expired``, the rest in the error file as ``batch_expired``; Anthropic: ``expired`` results).
- ``fail_batch``: an OpenAI batch fails validation as a whole (status ``failed``, ``errors``).
- ``poll_faults``: how many of the next status polls answer 503 (transient trouble).
- ``answer_fn(body) -> str``: the reply text for one request body (default: a canned verdict).
- ``latency``: seconds to wait before every response.

Counters: ``batches_created``, ``files_created``, ``polls``; ``requests`` lists ``(method, path)``
of everything it got; ``batches`` maps id -> the server's record of each batch.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DEFAULT_ANSWER = '{"judgement": "safe", "explanation": "Nothing in this situation points to harm."}'


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"))

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _route(self, method: str) -> None:
        owner = self.server.owner
        raw = self._body()
        path = self.path.split("?", 1)[0].rstrip("/")
        owner._log(method, path)
        if owner.latency > 0:
            time.sleep(owner.latency)
        parts = path.strip("/").split("/")
        try:
            handled = owner._dispatch(self, method, parts, raw)
        except Exception as e:  # a bug in a test's script: say so instead of hanging
            self._json(500, {"error": {"message": f"batch server error: {e!r}", "type": "server_error"}})
            return
        if not handled:
            self._json(404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}})

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: "BatchServer"


class BatchServer:
    """See the module docstring."""

    def __init__(self, answer_fn: Callable[[dict[str, Any]], str] | None = None, polls_to_end: int = 2,
                 latency: float = 0.0):
        self.answer_fn = answer_fn
        self.polls_to_end = polls_to_end
        self.latency = latency
        self.hold = False
        self.fail_ids: set[str] = set()
        self.expire_after: int | None = None
        self.fail_batch = False
        self.poll_faults = 0
        self.batches_created = 0
        self.files_created = 0
        self.polls = 0
        self.requests: list[tuple[str, str]] = []
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "BatchServer":
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="batch-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "BatchServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def _log(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    # ------------------------------------------------------------------ answers
    def _text(self, body: dict[str, Any]) -> str:
        return self.answer_fn(body) if self.answer_fn is not None else DEFAULT_ANSWER

    def _completion(self, cid: str, body: dict[str, Any]) -> dict[str, Any]:
        text = self._text(body)
        p = _tokens(json.dumps(body.get("messages", "")))
        c = _tokens(text)
        return {"id": f"chatcmpl-{cid}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "m"),
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}}

    def _message(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        text = self._text(params)
        return {"id": f"msg_{cid}", "type": "message", "role": "assistant", "model": params.get("model", "m"),
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": _tokens(json.dumps(params.get("messages", ""))),
                          "output_tokens": _tokens(text)}}

    # ------------------------------------------------------------------ routing
    def _dispatch(self, h: _Handler, method: str, parts: list[str], raw: bytes) -> bool:
        if parts[:1] != ["v1"]:
            return False
        rest = parts[1:]
        with self._lock:
            if rest[:2] == ["messages", "batches"]:
                return self._anthropic(h, method, rest[2:], raw)
            if rest[:1] == ["files"]:
                return self._files(h, method, rest[1:], raw)
            if rest[:1] == ["batches"]:
                return self._openai(h, method, rest[1:], raw)
        return False

    # ------------------------------------------------------------------ OpenAI files
    def _files(self, h: _Handler, method: str, rest: list[str], raw: bytes) -> bool:
        if method == "POST" and not rest:
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + h.headers["Content-Type"].encode() + b"\r\n\r\n" + raw)
            fields: dict[str, Any] = {}
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[name] = part.get_payload(decode=True)
            if fields.get("purpose") != b"batch" or not fields.get("file"):
                h._json(400, {"error": {"message": "need purpose=batch and a file", "type": "invalid_request_error"}})
                return True
            self.files_created += 1
            fid = f"file-{self.files_created}"
            self.files[fid] = {"id": fid, "object": "file", "bytes": len(fields["file"]), "created_at": int(time.time()),
                               "filename": "batch.jsonl", "purpose": "batch", "status": "processed",
                               "content": fields["file"]}
            h._json(200, self._file_obj(fid))
            return True
        if method == "GET" and len(rest) == 1 and rest[0] in self.files:
            h._json(200, self._file_obj(rest[0]))
            return True
        if method == "GET" and len(rest) == 2 and rest[1] == "content" and rest[0] in self.files:
            h._send(200, self.files[rest[0]]["content"], "application/octet-stream")
            return True
        return False

    def _file_obj(self, fid: str) -> dict[str, Any]:
        return {k: v for k, v in self.files[fid].items() if k != "content"}

    def _new_file(self, lines: list[dict[str, Any]], purpose: str) -> str | None:
        if not lines:
            return None
        self.files_created += 1
        fid = f"file-{self.files_created}"
        data = ("".join(json.dumps(x) + "\n" for x in lines)).encode()
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                           "filename": f"{purpose}.jsonl", "purpose": purpose, "status": "processed", "content": data}
        return fid

    # ------------------------------------------------------------------ OpenAI batches
    def _openai(self, h: _Handler, method: str, rest: list[str], raw: bytes) -> bool:
        if method == "POST" and not rest:
            body = json.loads(raw or b"{}")
            fid = body.get("input_file_id")
            if fid not in self.files or body.get("endpoint") != "/v1/chat/completions":
                h._json(400, {"error": {"message": "bad input_file_id or endpoint", "type": "invalid_request_error"}})
                return True
            lines = [json.loads(x) for x in self.files[fid]["content"].decode().splitlines() if x.strip()]
            self.batches_created += 1
            bid = f"batch_{self.batches_created}"
            self.batches[bid] = {"provider": "openai", "id": bid, "input_file_id": fid, "lines": lines,
                                 "status": "validating", "polls": 0, "created_at": time.time(),
                                 "metadata": body.get("metadata"), "output_file_id": None,
                                 "error_file_id": None, "errors": None}
            h._json(200, self._batch_obj(bid))
            return True
        if method == "GET" and not rest:
            data = [self._batch_obj(b) for b in reversed(list(self.batches)) if self.batches[b]["provider"] == "openai"]
            h._json(200, {"object": "list", "data": data, "has_more": False,
                          "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})
            return True
        if not rest or rest[0] not in self.batches or self.batches[rest[0]]["provider"] != "openai":
            return False
        bid = rest[0]
        if method == "GET" and len(rest) == 1:
            if self.poll_faults > 0:
                self.poll_faults -= 1
                h._json(503, {"error": {"message": "try later", "type": "server_error"}})
                return True
            self.polls += 1
            self._advance_openai(bid)
            h._json(200, self._batch_obj(bid))
            return True
        if method == "POST" and rest[1:] == ["cancel"]:
            b = self.batches[bid]
            if b["status"] not in ("completed", "failed", "expired", "cancelled"):
                self._finish_openai(bid, "cancelled", answered=0)
            h._json(200, self._batch_obj(bid))
            return True
        return False

    def _advance_openai(self, bid: str) -> None:
        b = self.batches[bid]
        if b["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        b["polls"] += 1
        if self.fail_batch:
            b["status"] = "failed"
            b["errors"] = {"object": "list", "data": [{"code": "invalid_model", "message": "model not found",
                                                        "line": 1, "param": "body.model"}]}
            return
        if self.hold or b["polls"] < self.polls_to_end:
            b["status"] = "in_progress" if b["polls"] < self.polls_to_end - 1 or self.hold else "finalizing"
            return
        if self.expire_after is not None:
            self._finish_openai(bid, "expired", answered=self.expire_after)
        else:
            self._finish_openai(bid, "completed", answered=len(b["lines"]))

    def _finish_openai(self, bid: str, status: str, answered: int) -> None:
        b = self.batches[bid]
        out, err = [], []
        for k, line in enumerate(b["lines"]):
            cid = line["custom_id"]
            if k >= answered:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                err.append({"id": f"batch_req_{k}", "custom_id": cid, "response": None,
                            "error": {"code": code, "message": f"not processed: {status}"}})
            elif cid in self.fail_ids:
                err.append({"id": f"batch_req_{k}", "custom_id": cid, "error": None,
                            "response": {"status_code": 500, "request_id": f"req_{k}",
                                         "body": {"error": {"message": "scripted failure", "type": "server_error"}}}})
            else:
                out.append({"id": f"batch_req_{k}", "custom_id": cid, "error": None,
                            "response": {"status_code": 200, "request_id": f"req_{k}",
                                         "body": self._completion(cid, line["body"])}})
        b["status"] = status
        b["output_file_id"] = self._new_file(out, "batch_output")
        b["error_file_id"] = self._new_file(err, "batch_error")
        b["counts"] = (len(b["lines"]), len(out), len(err))

    def _batch_obj(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        total = len(b["lines"])
        _, done, failed = b.get("counts", (total, 0, 0))
        return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": b["errors"],
                "input_file_id": b["input_file_id"], "completion_window": "24h", "status": b["status"],
                "output_file_id": b["output_file_id"], "error_file_id": b["error_file_id"],
                "created_at": int(b["created_at"]), "metadata": b["metadata"],
                "request_counts": {"total": total, "completed": done, "failed": failed}}

    # ------------------------------------------------------------------ Anthropic
    def _anthropic(self, h: _Handler, method: str, rest: list[str], raw: bytes) -> bool:
        if method == "POST" and not rest:
            body = json.loads(raw or b"{}")
            reqs = body.get("requests")
            if not isinstance(reqs, list) or not reqs:
                h._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "no requests"}})
                return True
            self.batches_created += 1
            bid = f"msgbatch_{self.batches_created}"
            self.batches[bid] = {"provider": "anthropic", "id": bid, "lines": reqs, "status": "in_progress",
                                 "polls": 0, "created_at": time.time(), "ended_at": None, "results": None}
            h._json(200, self._msgbatch_obj(bid))
            return True
        if method == "GET" and not rest:
            data = [self._msgbatch_obj(b) for b in reversed(list(self.batches))
                    if self.batches[b]["provider"] == "anthropic"]
            h._json(200, {"data": data, "has_more": False, "first_id": data[0]["id"] if data else None,
                          "last_id": data[-1]["id"] if data else None})
            return True
        if not rest or rest[0] not in self.batches or self.batches[rest[0]]["provider"] != "anthropic":
            return False
        bid = rest[0]
        b = self.batches[bid]
        if method == "GET" and len(rest) == 1:
            if self.poll_faults > 0:
                self.poll_faults -= 1
                h._json(503, {"type": "error", "error": {"type": "overloaded_error", "message": "try later"}})
                return True
            self.polls += 1
            b["polls"] += 1
            if b["status"] == "in_progress" and not self.hold and b["polls"] >= self.polls_to_end:
                self._finish_anthropic(bid, self.expire_after if self.expire_after is not None else len(b["lines"]),
                                       "expired")
            h._json(200, self._msgbatch_obj(bid))
            return True
        if method == "GET" and rest[1:] == ["results"]:
            if b["results"] is None:
                h._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "not ended"}})
                return True
            data = "".join(json.dumps(x) + "\n" for x in b["results"]).encode()
            h._send(200, data, "application/binary")
            return True
        if method == "POST" and rest[1:] == ["cancel"]:
            if b["status"] == "in_progress":
                self._finish_anthropic(bid, 0, "canceled")
            h._json(200, self._msgbatch_obj(bid))
            return True
        return False

    def _finish_anthropic(self, bid: str, answered: int, rest_kind: str) -> None:
        b = self.batches[bid]
        results = []
        for k, line in enumerate(b["lines"]):
            cid = line["custom_id"]
            if k >= answered:
                results.append({"custom_id": cid, "result": {"type": rest_kind}})
            elif cid in self.fail_ids:
                results.append({"custom_id": cid, "result": {"type": "errored", "error": {
                    "type": "error", "error": {"type": "api_error", "message": "scripted failure"}}}})
            else:
                results.append({"custom_id": cid, "result": {"type": "succeeded",
                                                             "message": self._message(cid, line["params"])}})
        b["results"] = results
        b["status"] = "ended"
        b["ended_at"] = time.time()

    def _msgbatch_obj(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if b["results"] is None:
            counts["processing"] = len(b["lines"])
        else:
            for r in b["results"]:
                counts[r["result"]["type"]] += 1
        created = b["created_at"]
        return {"id": bid, "type": "message_batch", "processing_status": b["status"], "request_counts": counts,
                "created_at": _iso(created), "expires_at": _iso(created + 86400),
                "ended_at": _iso(b["ended_at"]) if b["ended_at"] else None, "archived_at": None,
                "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{bid}/results" if b["results"] is not None else None}
