"""What every backend is: something that answers prompts, and says what it can do.

A backend knows nothing of datasets, metrics or run files. The runner hands it a batch of
``Request`` objects and gets one ``Answer`` per request back, in order. API backends are
called with one request per call (the runner gives them concurrency); local backends declare
``batch_size > 1`` and get sorted batches.

A local backend may deliver answers one by one (``Capabilities.per_answer``): ``answer`` then
also takes ``on_answer`` (called with a request's position and its answer as soon as that answer
is ready, on the event loop's thread) and ``on_tokens`` (called with how many tokens were just
processed, for progress), and cancelling the call stops the work at its next step: what was
delivered stays delivered, what was half done is dropped.

Transport failures that are worth retrying raise ``TransientError`` (with ``retry_after`` when
the server said so); failures that are not (bad request, auth) raise ``PermanentError``. A
backend never retries by itself: the runner owns retries, backoff and what gets recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence, runtime_checkable

#: What a request wants back: free text, or P(safe) from the first answer token's distribution.
Want = Literal["text", "p_safe"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can serve: free text (``want="text"``) and token probabilities of the
    first answer token (``want="p_safe"``). Modes say which they need; backends never see a
    mode's name."""

    generate: bool = True
    token_probs: bool = False
    shared_samples: bool = False  # answer() takes several samples of one prompt as one request (n)
    #: the provider has a batch API (``backends.batch``): ``casebench run --batch``
    batch: bool = False
    #: answer() takes ``on_answer`` / ``on_tokens`` and calls them as each answer is ready (local
    #: batches), and a cancelled call stops within a decoding step
    per_answer: bool = False

    def supports(self, want: str) -> bool:
        return self.token_probs if want == "p_safe" else self.generate


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling settings for text modes; recorded whole in the run manifest."""

    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 256
    seed: int | None = None
    system: str | None = None
    top_logprobs: int = 20  # prob mode through APIs: how many alternatives to ask for

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Request:
    """One question to a model: which case and sample it answers, the chat to send, and what it
    is about (the mode, the case's query and context).

    ``prompt`` is the (last) user message; ``system`` the system message (None: none at all; the
    runner has already combined ``--system`` with a context placed in the system prompt);
    ``history`` the (user, assistant) turns before ``prompt`` (the context placed as the
    conversation before the query), which every backend sends as they are. ``stop``, when
    given, is called with the text generated so far; once it returns True the backend may stop
    generating (the mode's parser already has the verdict), which never changes the verdict
    because the tokens before the stop are the same.
    """

    case: int
    sample: int
    prompt: str
    want: Want = "text"
    system: str | None = None
    temperature: float | None = None  # per-request override (score mode samples)
    max_tokens: int | None = None  # per-request override
    stop: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)
    history: tuple[tuple[str, str], ...] = ()
    #: the mode asking (``binary``, ``score``, ``prob``, ``respond`` or a plugin's), by name:
    #: what the answer is for (None: not a casebench mode, e.g. an LLM refusal classifier)
    mode: str | None = None
    #: the case's query as asked (the dataset's wording, or under a query mutation its
    #: rewording) and its context as asked (after any ablation):
    #: a backend that needs them reads them here, never from the prompt text, whose wording and
    #: layout depend on the template and the placement
    query: str | None = None
    context: Mapping[str, Any] | None = field(default=None, compare=False)

    def messages(self) -> list[dict[str, str]]:
        """The chat without its system message: the earlier turns, then ``prompt`` as the last
        user message (role/content dicts, as chat APIs and chat templates take them)."""
        out: list[dict[str, str]] = []
        for user, assistant in self.history:
            out += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        return out + [{"role": "user", "content": self.prompt}]


@dataclass
class Answer:
    """A model's reply: the text (text modes) or P(safe) (prob mode), plus bookkeeping.

    ``p_safe`` is None in prob mode when neither a safe nor an unsafe variant was among the
    returned alternatives: that is a missing value, never 0. ``detail`` carries mode-specific
    evidence (e.g. the probability mass found for each variant).
    """

    text: str | None = None
    p_safe: float | None = None
    usage: dict[str, int] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: seconds this answer took, when the backend measured it on its own (a local batch: from the
    #: start of its batch to the step it ended); None: the runner times the call
    latency_s: float | None = None


#: ``on_answer(position of the request in the call, its answer)``
OnAnswer = Callable[[int, Answer], None]
#: ``on_tokens(tokens just processed)``: prompt tokens read or new tokens generated
OnTokens = Callable[[int], None]


class BackendError(Exception):
    """Base class of transport failures. Messages never contain keys or headers."""


class TransientError(BackendError):
    """Worth retrying (429, 5xx, timeouts, dropped connections, malformed bodies)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(BackendError):
    """Not worth retrying (400, 401, 403, 404, unsupported feature)."""


class Unreachable(PermanentError):
    """Nothing has ever answered at the server's address (every connection refused, or its name
    does not resolve): retrying for half a minute would only hide the cause, so the run stops at
    once and says it. A server that answered once and then drops is ``TransientError``."""


class UnsupportedModeError(ValueError):
    """A mode was asked of a backend that cannot serve it; raised before any request."""


@runtime_checkable
class Backend(Protocol):
    spec: str
    capabilities: Capabilities
    batch_size: int

    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        """Answer each request, in order. Raises ``BackendError`` for transport failures."""
        ...

    def describe(self) -> dict[str, Any]:
        """What goes in the manifest about this backend (model, endpoint, library versions);
        never a key."""
        ...

    async def aclose(self) -> None:
        ...


def check_supports(backend: Backend, want: str, mode_name: str) -> None:
    """Refuse a mode the backend cannot serve, with a message that says what to do."""
    if not backend.capabilities.supports(want):
        what = "token probabilities" if want == "p_safe" else "free text"
        raise UnsupportedModeError(
            f"backend {backend.spec!r} cannot serve mode {mode_name!r}: it gives no {what}. "
            f"Choose a mode it supports (prob needs token probabilities; the other modes need text)."
        )
