"""How the HF backend watches its torch work: one call's link to the event loop (cancel flag,
answer and token callbacks), cancel points between decoder layers, and the per-row stopping
criterion of a batched ``generate``.

Apart from ``hf.py`` so the backend reads as what it computes; transformers and torch are imported
only inside the functions that need them (``import casebench.backends.hf_watch`` stays light).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Sequence

from .base import Answer, OnAnswer, OnTokens

#: how often token counts are passed on to the progress line (seconds)
TOKENS_EVERY_S = 0.25


class Cancelled(Exception):
    """Raised on the torch thread between steps once the call was cancelled."""


class CallHooks:
    """One ``answer`` call's link to the event loop: its cancel flag, and the callbacks that
    deliver answers and token counts (made thread-safe by ``answer``)."""

    def __init__(self, cancel: threading.Event | None = None, on_answer: OnAnswer | None = None,
                 on_tokens: OnTokens | None = None) -> None:
        self.cancel = cancel or threading.Event()
        self.on_answer = on_answer
        self.on_tokens = on_tokens
        self._tokens = 0
        self._said = time.monotonic()

    def check(self) -> None:
        """Raise ``Cancelled`` when the call was cancelled (between steps)."""
        if self.cancel.is_set():
            raise Cancelled()

    def answer(self, index: int, answer: Answer) -> None:
        if self.on_answer is not None:
            self.on_answer(index, answer)

    def tokens(self, n: int, flush: bool = False) -> None:
        """Count ``n`` tokens processed; pass them on at most every ``TOKENS_EVERY_S``."""
        self._tokens += n
        now = time.monotonic()
        if self.on_tokens is not None and self._tokens and (flush or now - self._said >= TOKENS_EVERY_S):
            self.on_tokens(self._tokens)
            self._tokens, self._said = 0, now


def threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[..., None] | None) -> Callable[..., None] | None:
    """``fn`` called on ``loop``'s thread from any thread (dropped once the loop is closed)."""
    if fn is None:
        return None

    def call(*args: Any) -> None:
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass

    return call


def watch_layers(model: Any, hook: Callable[[Any, Any], None]) -> int:
    """Register ``hook`` as a forward pre-hook on each layer of the model's stack of decoder
    layers (its first ``ModuleList`` of more than one module); returns how many."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 1:
            for layer in module:
                layer.register_forward_pre_hook(hook)
            return len(module)
    return 0


def cut_row(tokens: Sequence[int], eos_ids: set[int], stopped_at: int | None) -> tuple[list[int], str]:
    """The tokens a row really generated, and why it ended ("stop", "eos" or "length").

    A row ends at its first end token (kept, as generated), or where its stop predicate fired;
    whatever follows in the batch's output is padding.
    """
    limit = len(tokens) if stopped_at is None else min(stopped_at, len(tokens))
    for n, t in enumerate(tokens[:limit]):
        if t in eos_ids:
            return list(tokens[: n + 1]), "eos"
    if stopped_at is not None and stopped_at <= len(tokens):
        return list(tokens[:limit]), "stop"
    return list(tokens), "length"


def _row_watch_class() -> Any:
    """Built lazily: transformers is imported only when a model is loaded."""
    from transformers import StoppingCriteria

    class RowWatch(StoppingCriteria):
        """Watches every row of a ``generate`` call, step by step.

        Called by ``generate`` after every step with all rows. A row ends at its first end token
        (kept, as generated), at the step its ``stop`` predicate first holds for the text so far
        (the answer is cut exactly there), or when it has ``max_new`` tokens; ``on_end(row, kept
        tokens, finish)`` is called at that step, while the other rows go on. Reports the new
        tokens of the step to the call's hooks, and once the call is cancelled, stops every row
        (the caller drops those that had not ended).
        """

        def __init__(self, stops: Sequence[Any], tokenizer: Any, eos_ids: set[int], max_new: int, hooks: CallHooks,
                     on_end: Callable[[int, list[int], str], None]) -> None:
            self.stops = list(stops)
            self.tokenizer = tokenizer
            self.eos_ids = eos_ids
            self.max_new = max_new
            self.hooks = hooks
            self.on_end = on_end
            self.tokens: list[list[int]] = [[] for _ in self.stops]
            self.stopped_at: list[int | None] = [None] * len(self.stops)
            self.ended = [False] * len(self.stops)

        def _end(self, r: int, kept: list[int], finish: str) -> None:
            self.ended[r] = True
            self.on_end(r, kept, finish)

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            import torch

            last = input_ids[:, -1].tolist()
            live = 0
            for r, t in enumerate(last):
                if self.ended[r]:
                    continue
                live += 1
                if t in self.eos_ids:
                    self._end(r, self.tokens[r] + [t], "eos")
                    continue
                self.tokens[r].append(t)
                stop = self.stops[r]
                if stop is not None and stop(self.tokenizer.decode(self.tokens[r], skip_special_tokens=True)):
                    self.stopped_at[r] = len(self.tokens[r])
                    self._end(r, list(self.tokens[r]), "stop")
                elif len(self.tokens[r]) >= self.max_new:
                    self._end(r, list(self.tokens[r]), "length")
            self.hooks.tokens(live)
            if self.hooks.cancel.is_set():
                return torch.ones(len(last), dtype=torch.bool, device=input_ids.device)
            # rows that met their end token are finished by generate itself (and then padded)
            return torch.tensor([a is not None for a in self.stopped_at], dtype=torch.bool, device=input_ids.device)

    return RowWatch


def RowWatch(stops: Sequence[Any], tokenizer: Any, eos_ids: set[int], max_new: int, hooks: CallHooks,
              on_end: Callable[[int, list[int], str], None]) -> Any:
    global _WATCH_CLASS
    if _WATCH_CLASS is None:
        _WATCH_CLASS = _row_watch_class()
    return _WATCH_CLASS(stops, tokenizer, eos_ids, max_new, hooks, on_end)


_WATCH_CLASS: Any = None
