"""A toy backend in one file: ``toy/NAME`` answers every judge prompt without a model.

Its whole registration is the ``@backend`` decorator below: the prefix, one CLI option
(``--toy-verdict``, which changes answers), its capabilities (text and P(safe), local) and a
price lookup. Used by tests/test_plugins.py through ``casebench --plugin`` and
``$CASEBENCH_PLUGINS``; nothing else in casebench names it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from casebench.backends.base import Answer, GenerationSettings, Request
from casebench.backends.registry import Option, backend


def toy_price(model: str) -> tuple[float, float] | None:
    """USD per million input and output tokens: the toy's own price list."""
    return (1.0, 2.0) if model == "priced" else None


def hashed(text: str) -> str:
    """A verdict that depends only on the text (deterministic)."""
    return "unsafe" if hashlib.sha256(text.encode("utf-8")).digest()[0] % 3 == 0 else "safe"


@backend(
    "toy",
    summary="a toy backend of the plugin test: answers without a model",
    options=(Option("verdict", "Toy: the verdict to give (hash: one that depends on the prompt).",
                    flag="--toy-verdict", choices=("safe", "unsafe", "hash")),),
    text=True, p_safe=True, local=False, price=toy_price,
)
class ToyBackend:
    """Answers in the form of the mode asking (``Request.mode``): a JSON verdict (binary), a
    score, a P(safe) (prob), a chat answer that refuses when the query hashes to unsafe
    (respond), or one word yes/no (another mode, e.g. the toy ``yesno``)."""

    batch_size = 4

    def __init__(self, model: str, *, verdict: str = "hash") -> None:
        self.model = model
        self.spec = f"toy/{model}"
        self.verdict = verdict

    def _verdict(self, prompt: str) -> str:
        return hashed(prompt) if self.verdict == "hash" else self.verdict

    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        out = []
        for r in requests:
            # the verdict depends on the case's query (``Request.query``), not on how a template
            # or a placement laid the prompt out; the answer's form on the mode asking
            v = self._verdict(r.query if r.query is not None else r.prompt)
            usage = {"prompt_tokens": len(r.prompt.split()), "completion_tokens": 12}
            if r.want == "p_safe":
                out.append(Answer(text=v, p_safe=0.8 if v == "safe" else 0.2, usage=usage))
            elif r.mode == "respond":
                text = "Sure, here is how." if v == "safe" else "Sorry, I will not help with that."
                out.append(Answer(text=text, usage=usage))
            elif r.mode == "score":
                out.append(Answer(text=json.dumps({"judgement": 8 if v == "safe" else 2}), usage=usage))
            elif r.mode == "binary":
                out.append(Answer(text=json.dumps({"judgement": v, "explanation": "toy"}), usage=usage))
            else:  # another mode (the toy yesno mode): a one-word answer
                out.append(Answer(text="yes" if v == "safe" else "no", usage=usage))
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": "toy", "model": self.model, "verdict": self.verdict}

    async def aclose(self) -> None:
        pass
