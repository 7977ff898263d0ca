"""The ``anthropic/`` backend: Anthropic's Messages API, text modes only.

The Messages API returns no token probabilities, so the backend declares
``token_probs=False`` and the runner refuses prob mode before a single request is sent.
Like the OpenAI backend it never retries (``max_retries=0``; the runner owns retries) and builds
its own error messages from the status code and a short redacted body excerpt.

Stop at the verdict: a text request that carries a ``stop`` predicate is streamed
(``stream=True``); the predicate is asked after every text delta and the stream is closed as soon
as it says yes, so generation ends there. The prompt tokens come with the stream's first event;
the output tokens come with its last, so a stream closed early counts them as the text deltas
received and says so (``detail["usage_estimated"]``).

Sampling settings: ``GenerationSettings.seed`` has no counterpart in the Messages API and is
never sent. The installed SDK (anthropic 2.x) no longer has ``temperature``/``top_p`` parameters
and current Claude models sample at their own settings, so by default neither is sent and
``describe()`` says so (``sampling_params_sent: false``), letting a manifest reader know that the
recorded temperature was not applied. ``send_sampling=True`` sends ``temperature`` (and ``top_p``
when set) in the request body anyway, for older models or compatible proxies that honour them.
"""

from __future__ import annotations

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
from casebench.backends.streaming import Event, read_stream

DEFAULT_BASE_URL = "https://api.anthropic.com"


@backend(
    "anthropic",
    summary="Anthropic's Messages API (text modes only: it returns no token probabilities)",
    options=(
        BASE_URL, API_KEY_ENV, TIMEOUT,
        Option("send_sampling", "Send temperature/top_p (current Claude models sample at their own settings).",
               flag=None, type="bool"),
        Option("stream", "Stream answers that carry a stop predicate (stop at the verdict).", flag=None,
               type="bool"),
    ),
    text=True, p_safe=False, local=False,
    batch_api="casebench.backends.batch:AnthropicBatch",
)
class AnthropicBackend(SDKBackend):
    """Messages through the ``anthropic`` SDK, one request per call.

    Options: ``base_url`` (default ``$ANTHROPIC_BASE_URL`` or Anthropic's; without ``/v1``),
    ``api_key_env`` (default ``ANTHROPIC_API_KEY``), ``timeout`` (seconds per request),
    ``send_sampling`` (send ``temperature``/``top_p``; see the module docstring), ``stream``
    (stream answers that carry a stop predicate, default True).
    """

    prefix = "anthropic"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        timeout: float = 60.0,
        send_sampling: bool = False,
        stream: bool = True,
    ):
        self._endpoint(model, base_url, api_key_env, timeout)
        self.send_sampling = bool(send_sampling)
        self.stream = bool(stream)
        import anthropic  # the SDK, only when a backend is built

        self._connect(anthropic, anthropic.AsyncAnthropic)

    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        return [await self._answer_one(r, settings) for r in requests]

    def describe(self) -> dict[str, Any]:
        return self._describe({"sampling_params_sent": self.send_sampling, "streaming": self.stream})

    def _params(self, request: Request, settings: GenerationSettings) -> dict[str, Any]:
        if request.want == "p_safe":
            # The runner checks capabilities first; this guards direct callers.
            raise PermanentError(f"backend {self.spec!r} gives no token probabilities: prob mode is unsupported")
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or settings.max_tokens,
            "messages": request.messages(),  # the earlier turns, if any, then the user message
        }
        if request.system:
            params["system"] = request.system
        if self.send_sampling:
            sampling: dict[str, Any] = {
                "temperature": request.temperature if request.temperature is not None else settings.temperature
            }
            if settings.top_p is not None:
                sampling["top_p"] = settings.top_p
            params["extra_body"] = sampling
        return params

    async def _answer_one(self, request: Request, settings: GenerationSettings) -> Answer:
        params = self._params(request, settings)
        if self.stream and request.stop is not None:
            return await self._stream(request, params)
        message = await self.transport.call(self.client.messages.create(**params, timeout=self.timeout))
        return sdk_errors.read_response(lambda: self._to_answer(message), where=self.transport.where)

    async def _stream(self, request: Request, params: dict[str, Any]) -> Answer:
        """Stream one message and close it once ``request.stop`` holds (see the module docstring)."""
        stream = await self.transport.call(self.client.messages.create(**params, stream=True, timeout=self.timeout))
        answers = await read_stream(stream, [request], transport=self.transport, events=_StreamEvents(),
                                    cutoff_hint=" (no message_stop)")
        return answers[0]

    def _to_answer(self, message: Any) -> Answer:
        if isinstance(message, (str, bytes)):
            raise TransientError(f"malformed response body from {self._where()} (not JSON)")
        blocks = message.content
        if blocks is None:
            raise TypeError("no content")
        text = "".join(b.text for b in blocks if getattr(b, "type", None) == "text")
        usage: dict[str, int] = {}
        if message.usage is not None:
            if isinstance(message.usage.input_tokens, int):
                usage["prompt_tokens"] = message.usage.input_tokens
            if isinstance(message.usage.output_tokens, int):
                usage["completion_tokens"] = message.usage.output_tokens
        return Answer(text=text, usage=usage, detail={"finish_reason": message.stop_reason})


class _StreamEvents:
    """What one Messages stream event says (``streaming.read_stream``): the stop reason comes with
    ``message_delta``, but the answer is whole only at ``message_stop``."""

    def __init__(self) -> None:
        self.finish: Any = None

    def __call__(self, event: Any) -> list[Event]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            u = getattr(event.message, "usage", None)
            tokens = getattr(u, "input_tokens", None) if u is not None else None
            return [Event(text="", prompt_tokens=tokens if isinstance(tokens, int) else None)]
        if kind == "content_block_delta":
            delta = event.delta
            if getattr(delta, "type", None) == "text_delta" and delta.text:
                return [Event(text=delta.text)]
        elif kind == "message_delta":
            self.finish = getattr(event.delta, "stop_reason", None)
            u = getattr(event, "usage", None)
            tokens = getattr(u, "output_tokens", None) if u is not None else None
            return [Event(completion_tokens=tokens if isinstance(tokens, int) else None)]
        elif kind == "message_stop":
            return [Event(done=True, finish=self.finish)]
        return []


__all__ = ["AnthropicBackend", "DEFAULT_BASE_URL"]
