"""The one streaming loop of the SDK backends: read a streamed answer, stop at the verdict.

Both SDK backends (``openai``, ``anthropic``) stream a text request that carries a ``stop``
predicate: the predicate is asked after every text piece and the stream is closed as soon as it
says yes for every choice still generating, so generation ends there. What differs between the
SDKs is only how an event reads; each backend gives ``read_stream`` a function that turns one
SDK event into ``Event``s (text of a choice, its end, token counts). Everything else is here:
accumulating the text per choice, the stop test, closing early, telling an answer the server
ended from one cut off (a transient failure, asked again), and the token counts (estimated from
the pieces received when the stream carried none, and ``detail["usage_estimated"]`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .base import Answer, Request, TransientError
from .sdk_errors import SDKTransport


@dataclass(frozen=True)
class Event:
    """What one SDK stream event means. ``index``: the choice (0 unless ``n`` > 1). ``text``:
    a piece of the answer (``""``: the choice exists, no text yet); ``refusal``: the piece is the
    model's refusal message (OpenAI). ``done``: the server ended this choice, ``finish`` its
    finish reason. ``prompt_tokens``/``completion_tokens``: the stream's token counts, when it says."""

    index: int = 0
    text: str | None = None
    refusal: bool = False
    done: bool = False
    finish: Any = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


async def read_stream(stream: Any, requests: Sequence[Request], *, transport: SDKTransport,
                      events: Callable[[Any], Iterable[Event]], cutoff_hint: str = "") -> list[Answer]:
    """Read ``stream`` (an SDK async stream of one request with ``n = len(requests)`` choices)
    and return one answer per choice seen, in index order; the stream is always closed.

    Raises ``TransientError`` when the stream carried no choice, or ended before a choice's
    answer did (no finish from the server and not closed by us): that answer is cut off.
    """
    from . import sdk_errors

    n = len(requests)
    where = transport.where
    texts: dict[int, str] = {}
    pieces: dict[int, int] = {}
    finish: dict[int, Any] = {}
    refusal: set[int] = set()
    stopped: set[int] = set()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    closed_early = False  # we closed the stream before the server ended it
    with transport.translating():
        try:
            async for raw in stream:
                for ev in events(raw):
                    if ev.prompt_tokens is not None:
                        prompt_tokens = ev.prompt_tokens
                    if ev.completion_tokens is not None:
                        completion_tokens = ev.completion_tokens
                    i = ev.index
                    if not isinstance(i, int) or i < 0 or i >= n:
                        continue
                    if ev.text:
                        texts[i] = texts.get(i, "") + ev.text
                        pieces[i] = pieces.get(i, 0) + 1
                        if ev.refusal:
                            refusal.add(i)
                        stop = requests[i].stop
                        if i not in stopped and stop is not None and stop(texts[i]):
                            stopped.add(i)
                    elif ev.text is not None and i not in texts:
                        texts[i] = ""
                    if ev.done:
                        texts.setdefault(i, "")
                        finish[i] = ev.finish
                # Close only when nothing more is wanted and something is still generating:
                # a stream that ended by itself is read to its end (and its token counts).
                if stopped - set(finish) and all(i in stopped or i in finish for i in range(n)):
                    closed_early = True
                    break
        finally:
            await stream.close()

    def read() -> list[Answer]:
        seen = sorted(texts)
        if not seen:
            raise TransientError(f"stream from {where} carried no choices")
        if not closed_early and any(i not in finish for i in seen):
            # The connection ended without the server ending the answer: cut off, not done.
            raise TransientError(f"stream from {where} ended before the answer did{cutoff_hint}")
        answers = []
        for i in seen:
            detail: dict[str, Any] = {"finish_reason": finish.get(i), "streamed": True}
            if i in stopped and i not in finish:
                detail["stopped_at_verdict"] = True
            if i in refusal:
                detail["refusal"] = True
            answers.append(Answer(text=texts[i], detail=detail))
        if completion_tokens is None:
            # No token count came (closed early, or a server that sends none): count the text
            # pieces received, one token each on llama.cpp, vLLM and Anthropic's API.
            for i, a in zip(seen, answers):
                a.usage = {"completion_tokens": pieces.get(i, 0)}
                a.detail["usage_estimated"] = True
            if prompt_tokens is not None:
                answers[0].usage["prompt_tokens"] = prompt_tokens
        else:
            total = {"completion_tokens": completion_tokens}
            if prompt_tokens is not None:
                total = {"prompt_tokens": prompt_tokens, **total}
            if len(answers) == 1:
                answers[0].usage = total
            else:
                share_usage(answers, total, [max(1, pieces.get(i, 0)) for i in seen], basis="content chunks")
        if closed_early:
            for a in answers:
                a.detail["closed_early"] = True
        return answers

    return sdk_errors.read_response(read, where=where)


def share_usage(answers: list[Answer], total: dict[str, int], weights: list[int], basis: str) -> None:
    """Split one request's usage over the answers it carried: the prompt was processed once, so
    its tokens go to the first answer; completion tokens are split by ``weights`` (largest
    remainder, so the parts add up to the total). Each answer's detail records the whole."""
    n = len(answers)
    completion = total.get("completion_tokens")
    parts: list[int | None] = [None] * n
    if completion is not None:
        s = sum(weights) or 1
        raw = [completion * w / s for w in weights]
        whole = [int(x) for x in raw]
        for k in sorted(range(n), key=lambda k: raw[k] - int(raw[k]), reverse=True)[: completion - sum(whole)]:
            whole[k] += 1
        parts = list(whole)
    for k, a in enumerate(answers):
        a.usage = {}
        if "prompt_tokens" in total:
            a.usage["prompt_tokens"] = total["prompt_tokens"] if k == 0 else 0
        if parts[k] is not None:
            a.usage["completion_tokens"] = int(parts[k])  # type: ignore[arg-type]
        a.detail["shared_request"] = {"n": n, "index": k, "usage": dict(total), "split_by": basis}


__all__ = ["Event", "read_stream", "share_usage"]
