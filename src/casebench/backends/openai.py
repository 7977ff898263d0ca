"""The ``openai/`` backend: any OpenAI-compatible chat completions server.

One code path serves OpenAI, ``vllm serve``, llama.cpp's server, Ollama and OpenRouter: they all
speak ``POST /v1/chat/completions``. Text modes send the prompt as the user message; prob mode
asks for the first token's ``top_logprobs`` and reads P(safe) from them (see ``variants``).

Stop at the verdict: when a text request carries a ``stop`` predicate (the runner sets it from the
mode's parser unless ``--full-answers``), the answer is streamed (``stream=True``, with
``stream_options={"include_usage": true}`` where the server accepts it; detected once), the
predicate is asked after every content delta, and the stream is closed as soon as it says yes.
Closing the connection ends generation on OpenAI, vLLM and llama.cpp. The text is the prefix of
what a full answer would have been, so the parsed verdict is the same. A stream closed early
carries no usage chunk: the completion tokens are then counted as the content chunks received
(one token each on llama.cpp and vLLM) and ``detail["usage_estimated"]`` says so; the prompt
tokens are then unknown and left out of ``usage``.

A server that answers a streamed request with one whole JSON body (``application/json``; some
gateways and simple servers do) has given the complete answer: it is read as the answer, never
asked again, and the backend stops streaming to that server for the rest of the run
(``describe()["stream_switched_off"]``, recorded in the invocation, not in the answer-changing
settings). Only a request that got no complete answer is a transport failure worth a retry.

Shared samples: ``answer`` given several requests for the same chat (score mode's samples of one
case) sends one request with ``n`` so the prompt is processed once. Whether the server honours
``n`` is detected on the first such call (fewer choices than asked, or an error naming the
request, means no) and remembered; ``describe()["n_supported"]`` records the finding, and the
samples then go as separate requests.

The SDK client is built with ``max_retries=0`` because the runner owns retries (and records
them); this backend only turns each failure into ``TransientError`` or ``PermanentError``, with
a message it builds itself from the status code and a short redacted body excerpt. The SDK's own
exception text is never passed on: it may carry request details.

Logging: the SDK (and httpx2 under it) log at DEBUG/INFO the method, URL, status and retry
decisions; the SDK's ``SensitiveHeadersFilter`` replaces the Authorization header with
``<redacted>`` in anything it logs. The key-leak tests capture every logger at DEBUG, trigger each
error path, and check that the key appears nowhere.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence

from casebench.backends import sdk_errors
from casebench.backends.base import (
    Answer,
    GenerationSettings,
    PermanentError,
    Request,
    TransientError,
)
from casebench.backends.http import API_KEY_ENV, BASE_URL, TIMEOUT
from casebench.backends.registry import Option, backend
from casebench.backends.sdk_backend import SDKBackend
from casebench.backends.streaming import Event, read_stream, share_usage
from casebench.backends.verdict_tokens import DEFAULT_MIN_PREFIX, first_token_tally

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@backend(
    "openai",
    summary="any OpenAI-compatible chat completions server (OpenAI, vllm serve, llama.cpp, Ollama, OpenRouter)",
    options=(
        BASE_URL, API_KEY_ENV, TIMEOUT,
        Option("extra_body", "Server-specific request fields for openai/ models, e.g. a JSON schema for llama.cpp "
               "or vLLM.", type="json", metavar="JSON"),
        Option("token_limit_field", "'max_tokens', or 'max_completion_tokens' for OpenAI's reasoning models.",
               flag=None, choices=("max_tokens", "max_completion_tokens")),
        Option("min_prefix", "How short a prefix of 'safe'/'unsafe' still counts in prob mode.", flag=None,
               type="int"),
        Option("stream", "Stream text answers that carry a stop predicate (stop at the verdict).", flag=None,
               type="bool"),
        Option("stream_usage", "Send stream_options.include_usage (None: try, drop it if refused).", flag=None,
               type="bool"),
        Option("use_n", "One request with n for samples of the same chat (None: detect).", flag=None, type="bool"),
    ),
    text=True, p_safe=True, shared_samples=True, local=False,
    batch_api="casebench.backends.batch:OpenAIBatch",
)
class OpenAIBackend(SDKBackend):
    """Chat completions through the ``openai`` SDK, one request per call.

    Options: ``base_url`` (default ``$OPENAI_BASE_URL`` or OpenAI's), ``api_key_env`` (the
    *name* of the variable holding the key; a local server needs none), ``timeout`` (seconds
    per request), ``token_limit_field`` (``"max_tokens"``, or ``"max_completion_tokens"`` for
    OpenAI's reasoning models), ``extra_body`` (server-specific parameters sent as-is),
    ``min_prefix`` (how short a prefix of "safe"/"unsafe" still counts, see ``variants``),
    ``stream`` (stream text answers that carry a stop predicate, default True),
    ``stream_usage`` (send ``stream_options.include_usage``: None = try and drop it if the server
    refuses, True/False = always/never), ``use_n`` (one request with ``n`` for samples of the same
    chat: None = detect, True = assume it works, False = never).
    """

    prefix = "openai"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        token_limit_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        min_prefix: int = DEFAULT_MIN_PREFIX,
        stream: bool = True,
        stream_usage: bool | None = None,
        use_n: bool | None = None,
    ):
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_limit_field must be 'max_tokens' or 'max_completion_tokens', not {token_limit_field!r}"
            )
        self._endpoint(model, base_url, api_key_env, timeout)
        self.token_limit_field = token_limit_field
        self.extra_body = dict(extra_body or {})
        self.min_prefix = min_prefix
        self.stream = bool(stream)
        #: Does the server accept ``stream_options``? None until a streamed request finds out.
        self.stream_usage: bool | None = stream_usage
        #: Does the server honour ``n``? None until a shared request finds out.
        self.n_supported: bool | None = use_n
        self._n_lock: asyncio.Lock | None = None
        #: Set when the server answered a streamed request with one whole JSON body: from then on
        #: this backend asks it without streaming (``describe()["stream_switched_off"]``).
        self.stream_switched_off: str | None = None
        import openai  # the SDK, only when a backend is built

        self._connect(openai, openai.AsyncOpenAI)

    # ------------------------------------------------------------------ protocol
    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        """Answer each request, in order. Text requests for the same chat (same system message,
        prompt, temperature and token limit: the samples of one case) share one request with
        ``n`` where the server supports it."""
        out: list[Answer | None] = [None] * len(requests)
        for group in _shared_groups(requests):
            if len(group) > 1 and self.n_supported is not False:
                answers = await self._answer_shared([requests[i] for i in group], settings)
            else:
                answers = [await self._answer_one(requests[i], settings) for i in group]
            for i, answer in zip(group, answers):
                out[i] = answer
        return [a for a in out if a is not None]

    def describe(self) -> dict[str, Any]:
        return self._describe({
            "token_limit_field": self.token_limit_field,
            "extra_body": self.extra_body,
            "min_prefix": self.min_prefix,
            "streaming": self.stream,
            "stream_switched_off": self.stream_switched_off,
            "stream_usage": self.stream_usage,
            "n_supported": self.n_supported,
        })

    # ------------------------------------------------------------------ one request
    def _params(self, request: Request, settings: GenerationSettings) -> dict[str, Any]:
        """The request body (less ``extra_body``), the same online and in a batch file."""
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(request.messages())  # the earlier turns, if any, then the user message
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.want == "p_safe":
            # Greedy, one token: we read the distribution of the first token, not a sample.
            params.update(temperature=0.0, logprobs=True, top_logprobs=settings.top_logprobs)
            params[self.token_limit_field] = 1
        else:
            temperature = request.temperature if request.temperature is not None else settings.temperature
            params["temperature"] = temperature
            if settings.top_p is not None:
                params["top_p"] = settings.top_p
            params[self.token_limit_field] = request.max_tokens or settings.max_tokens
        if settings.seed is not None:
            params["seed"] = settings.seed
        return params

    def _streams(self, request: Request) -> bool:
        return self.stream and request.want == "text" and request.stop is not None

    async def _create(self, params: dict[str, Any]) -> Any:
        return await self.transport.call(
            self.client.chat.completions.create(**params, timeout=self.timeout, extra_body=self.extra_body or None))

    async def _answer_one(self, request: Request, settings: GenerationSettings) -> Answer:
        if self._streams(request):
            return (await self._stream([request], settings))[0]
        params = self._params(request, settings)
        response = await self._create(params)
        return sdk_errors.read_response(lambda: self._to_answer(request, response), where=self._where())

    async def _answer_shared(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        """Several samples of one chat in one request (``n``); falls back to one request each
        when the server turns out not to honour ``n`` (found once, then remembered)."""
        if self.n_supported is None:
            if self._n_lock is None:
                self._n_lock = asyncio.Lock()
            async with self._n_lock:  # the first shared call finds out; the others wait for it
                if self.n_supported is None:
                    return await self._answer_shared_probe(requests, settings)
        if not self.n_supported:
            return [await self._answer_one(r, settings) for r in requests]
        return await self._answer_n(requests, settings)

    async def _answer_shared_probe(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        try:
            answers = await self._answer_n(requests, settings)
        except PermanentError:
            # The server may refuse n > 1 (400/422). Ask the first sample alone: if that works,
            # n was the problem; if not, the request itself is, and its error is the one to raise.
            first = await self._answer_one(requests[0], settings)
            self.n_supported = False
            return [first] + [await self._answer_one(r, settings) for r in requests[1:]]
        self.n_supported = len(answers) >= len(requests)
        return answers + [await self._answer_one(r, settings) for r in requests[len(answers):]]

    async def _answer_n(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        """One request with ``n=len(requests)``; returns one answer per choice received (fewer
        than asked when the server ignores ``n``), in index order."""
        n = len(requests)
        if self._streams(requests[0]):
            return await self._stream(requests, settings)
        params = self._params(requests[0], settings)
        params["n"] = n
        response = await self._create(params)

        def read() -> list[Answer]:
            if isinstance(response, (str, bytes)):
                raise TransientError(f"malformed response body from {self._where()} (not JSON)")
            choices = sorted(response.choices or [], key=lambda c: c.index or 0)[:n]
            if not choices:
                raise TransientError(f"response from {self._where()} has no choices")
            answers = [self._choice_to_answer(requests[k], c, {}) for k, c in enumerate(choices)]
            total = _usage(getattr(response, "usage", None))
            weights = [max(1, len(a.text or "")) for a in answers]
            share_usage(answers, total, weights, basis="text length")
            return answers

        return sdk_errors.read_response(read, where=self._where())

    async def _stream(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        """Stream one request (``n=len(requests)`` when more than one) and close it once every
        choice's stop predicate holds or the server ended it. One answer per choice seen."""
        n = len(requests)
        params = self._params(requests[0], settings)
        if n > 1:
            params["n"] = n
        params["stream"] = True
        if self.stream_usage is not False:
            params["stream_options"] = {"include_usage": True}
        try:
            stream = await self._create(params)
        except PermanentError as e:
            if self.stream_usage is not None or n > 1 or getattr(e, "status", None) not in (400, 422):
                raise  # with n > 1, n is the first suspect: the caller retries without it; 401/403/404 are final
            # Some servers refuse stream_options; try once without. If that works, remember.
            params.pop("stream_options")
            stream = await self._create(params)
            self.stream_usage = False
        else:
            if self.stream_usage is None and "stream_options" in params:
                self.stream_usage = True

        whole = await self._whole_body(stream)
        if whole is not None:
            return self._read_whole(requests, whole)
        return await read_stream(stream, requests, transport=self.transport, events=_stream_events, cutoff_hint=(
            " (no finish_reason); if this is llama-cpp-python's server, start it with --interrupt_requests "
            "False, or it cuts a stream off whenever another request waits"))

    async def _whole_body(self, stream: Any) -> Any:
        """A server that answers a streamed request with one whole JSON body (some gateways and
        simple servers do) has already given the complete answer: returns that body (a dict),
        after switching this backend to non-streaming for the rest of the run; None for a real
        event stream."""
        response = getattr(stream, "response", None)
        headers = getattr(response, "headers", None)
        ctype = str(headers.get("content-type", "") if headers is not None else "").lower()
        if response is None or "event-stream" in ctype or "json" not in ctype:
            return None  # an event stream (or an unlabelled body, read as one, as before)
        with self.transport.translating():
            try:
                raw = await response.aread()
            finally:
                await stream.close()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise TransientError(f"streamed request to {self._where()} got a body that is neither an event stream "
                                 f"nor JSON ({ctype or 'no content type'})") from None
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise TransientError(f"streamed request to {self._where()} got a JSON body that is not a chat "
                                 "completion (no 'choices')")
        if self.stream:
            self.stream = False
            self.stream_switched_off = "the server answered a streamed request with one JSON body"
        return body

    def _read_whole(self, requests: list[Request], body: dict[str, Any]) -> list[Answer]:
        """The answers in a whole chat completion that came back for a streamed request."""
        from openai.types.chat import ChatCompletion

        completion = ChatCompletion.construct(**body)
        n = len(requests)

        def read() -> list[Answer]:
            choices = sorted(completion.choices or [], key=lambda c: c.index or 0)[:n]
            if not choices:
                raise TransientError(f"response from {self._where()} has no choices")
            answers = [self._choice_to_answer(requests[k], c, {}) for k, c in enumerate(choices)]
            total = _usage(getattr(completion, "usage", None))
            if len(answers) == 1:
                answers[0].usage = total
            else:
                share_usage(answers, total, [max(1, len(a.text or "")) for a in answers], basis="text length")
            for a in answers:
                a.detail["whole_body_for_stream"] = True
            return answers

        return sdk_errors.read_response(read, where=self._where())

    def _to_answer(self, request: Request, response: Any) -> Answer:
        """A whole (non-streamed) chat completion as an Answer; the batch path uses it too."""
        if isinstance(response, (str, bytes)):  # a server that answered text/plain
            raise TransientError(f"malformed response body from {self._where()} (not JSON)")
        choices = response.choices
        if not choices:
            raise TransientError(f"response from {self._where()} has no choices")
        return self._choice_to_answer(request, choices[0], _usage(getattr(response, "usage", None)))

    def _choice_to_answer(self, request: Request, choice: Any, usage: dict[str, int]) -> Answer:
        detail: dict[str, Any] = {"finish_reason": getattr(choice, "finish_reason", None)}
        if request.want != "p_safe":
            message = choice.message
            text = message.content
            if text is None:
                refusal = getattr(message, "refusal", None)
                if refusal:
                    detail["refusal"] = True
                text = refusal or ""
            if not isinstance(text, str):
                raise TypeError("message content is not text")
            return Answer(text=text, usage=usage, detail=detail)

        logprobs = getattr(choice, "logprobs", None)
        if logprobs is None:
            raise PermanentError(
                f"server at {self._where()} returned no logprobs for model {self.model!r}; it may not "
                f"support token probabilities (prob mode). Use a text mode, or a server that returns "
                f"'logprobs' with 'top_logprobs'."
            )
        content = logprobs.content or []
        if not content:
            detail.update(p_safe_missing="the response has no first-token logprobs (no token generated)")
            return Answer(text="", p_safe=None, usage=usage, detail=detail)
        first = content[0]
        alternatives = [(alt.token, alt.logprob) for alt in (first.top_logprobs or [])]
        counts = first_token_tally(first.token, first.logprob, alternatives, min_prefix=self.min_prefix)
        detail.update(counts.to_detail())
        detail["first_token"] = first.token
        detail["alternatives"] = len(alternatives) + (first.token not in {t for t, _ in alternatives})
        p_safe = counts.p_safe
        if p_safe is None:
            detail["p_safe_missing"] = (
                f"neither a 'safe' nor an 'unsafe' variant among the {len(alternatives)} first-token "
                f"alternatives"
            )
        text = choice.message.content if choice.message is not None else None
        text = text if isinstance(text, str) else first.token
        return Answer(text=text, p_safe=p_safe, usage=usage, detail=detail)


def _shared_groups(requests: Sequence[Request]) -> list[list[int]]:
    """Indices of the requests, grouped by chat: text requests with the same system message,
    prompt, temperature and token limit form one group (in order of first appearance); every
    other request is a group of its own."""
    groups: dict[Any, list[int]] = {}
    for i, r in enumerate(requests):
        key = ("text", r.system, r.history, r.prompt, r.temperature, r.max_tokens) if r.want == "text" else ("one", i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _stream_events(chunk: Any) -> list[Event]:
    """What one chat-completion chunk says (``streaming.read_stream``)."""
    if isinstance(chunk, (str, bytes)):
        raise TransientError("malformed stream chunk (not JSON)")
    out: list[Event] = []
    usage = getattr(chunk, "usage", None)
    if usage is not None:
        u = _usage(usage)
        out.append(Event(index=-1, prompt_tokens=u.get("prompt_tokens"), completion_tokens=u.get("completion_tokens")))
    for choice in getattr(chunk, "choices", None) or []:
        i = getattr(choice, "index", 0) or 0
        delta = getattr(choice, "delta", None)
        piece = getattr(delta, "content", None) if delta is not None else None
        refusal = False
        if not piece and delta is not None and getattr(delta, "refusal", None):
            piece, refusal = delta.refusal, True
        reason = getattr(choice, "finish_reason", None)
        out.append(Event(index=i, text=piece if isinstance(piece, str) else "", refusal=refusal,
                         done=bool(reason), finish=reason or None))
    return out


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    out: dict[str, int] = {}
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            out[name] = value
    return out


__all__ = ["OpenAIBackend", "DEFAULT_BASE_URL"]
