"""The ``openai/`` backend: any OpenAI-compatible chat completions server.

One code path serves OpenAI, ``vllm serve``, llama.cpp's server, Ollama and OpenRouter: they all
speak ``POST /v1/chat/completions``. Text modes send the prompt as the user message; prob mode
asks for the first token's ``top_logprobs`` and reads P(safe) from them (see ``variants``).

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

import os
from typing import Any, Sequence

import openai

from casebench.backends import Secret, public_url, resolve_api_key, sdk_errors
from casebench.backends.base import (
    Answer,
    Capabilities,
    GenerationSettings,
    PermanentError,
    Request,
    TransientError,
)
from casebench.backends.verdict_tokens import DEFAULT_MIN_PREFIX, tally

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIBackend:
    """Chat completions through the ``openai`` SDK, one request per call.

    Options: ``base_url`` (default ``$OPENAI_BASE_URL`` or OpenAI's), ``api_key_env`` (the
    *name* of the variable holding the key; a local server needs none), ``timeout`` (seconds
    per request), ``token_limit_field`` (``"max_tokens"``, or ``"max_completion_tokens"`` for
    OpenAI's reasoning models), ``extra_body`` (server-specific parameters sent as-is),
    ``min_prefix`` (how short a prefix of "safe"/"unsafe" still counts, see ``variants``).
    """

    capabilities = Capabilities(generate=True, token_probs=True)
    batch_size = 1

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
    ):
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"token_limit_field must be 'max_tokens' or 'max_completion_tokens', not {token_limit_field!r}"
            )
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.model = model
        self.spec = f"openai/{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.token_limit_field = token_limit_field
        self.extra_body = dict(extra_body or {})
        self.min_prefix = min_prefix
        key = resolve_api_key(api_key_env, self.base_url)
        self._secret = Secret(key)
        self._client = openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0
        )

    # ------------------------------------------------------------------ protocol
    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        return [await self._answer_one(r, settings) for r in requests]

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": public_url(self.base_url),
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout,
            "token_limit_field": self.token_limit_field,
            "extra_body": self.extra_body,
            "min_prefix": self.min_prefix,
            "sdk": "openai",
            "sdk_version": openai.__version__,
        }

    async def aclose(self) -> None:
        await self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model!r}, base_url={public_url(self.base_url)!r})"

    # ------------------------------------------------------------------ one request
    def _params(self, request: Request, settings: GenerationSettings) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": request.prompt})
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
            params[self.token_limit_field] = settings.max_tokens
        if settings.seed is not None:
            params["seed"] = settings.seed
        return params

    async def _answer_one(self, request: Request, settings: GenerationSettings) -> Answer:
        params = self._params(request, settings)
        where = self._where()
        response = await sdk_errors.call(
            openai,
            self._client.chat.completions.create(**params, timeout=self.timeout, extra_body=self.extra_body or None),
            where=where, model=self.model, secret=self._secret.get(), timeout=self.timeout,
        )
        return sdk_errors.read_response(lambda: self._to_answer(request, response), where=where)

    def _to_answer(self, request: Request, response: Any) -> Answer:
        if isinstance(response, (str, bytes)):  # a server that answered text/plain
            raise TransientError(f"malformed response body from {self._where()} (not JSON)")
        choices = response.choices
        if not choices:
            raise TransientError(f"response from {self._where()} has no choices")
        choice = choices[0]
        usage = _usage(getattr(response, "usage", None))
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
        if first.token not in {t for t, _ in alternatives}:
            alternatives.append((first.token, first.logprob))
        counts = tally(alternatives, min_prefix=self.min_prefix)
        detail.update(counts.to_detail())
        detail["first_token"] = first.token
        detail["alternatives"] = len(alternatives)
        p_safe = counts.p_safe
        if p_safe is None:
            detail["p_safe_missing"] = (
                f"neither a 'safe' nor an 'unsafe' variant among the {len(alternatives)} first-token "
                f"alternatives"
            )
        text = choice.message.content if choice.message is not None else None
        text = text if isinstance(text, str) else first.token
        return Answer(text=text, p_safe=p_safe, usage=usage, detail=detail)

    # ------------------------------------------------------------------ errors
    def _where(self) -> str:
        return str(public_url(self.base_url))


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
