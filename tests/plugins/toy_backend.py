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


def hashed(prompt: str) -> str:
    """A verdict that depends only on the prompt (deterministic)."""
    return "unsafe" if hashlib.sha256(prompt.encode("utf-8")).digest()[0] % 3 == 0 else "safe"


@backend(
    "toy",
    summary="a toy backend of the plugin test: answers without a model",
    options=(Option("verdict", "Toy: the verdict to give (hash: one that depends on the prompt).",
                    flag="--toy-verdict", choices=("safe", "unsafe", "hash")),),
    text=True, p_safe=True, local=False, price=toy_price,
)
class ToyBackend:
    """Answers the binary judge format (text) or a P(safe) (prob mode); the respond mode gets a
    refusal when the prompt hashes to unsafe."""

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
            v = self._verdict(r.prompt)
            usage = {"prompt_tokens": len(r.prompt.split()), "completion_tokens": 12}
            if r.want == "p_safe":
                out.append(Answer(text=v, p_safe=0.8 if v == "safe" else 0.2, usage=usage))
            elif "judgement" in r.prompt or "Judgement" in r.prompt or "JSON" in r.prompt:
                out.append(Answer(text=json.dumps({"judgement": v, "explanation": "toy"}), usage=usage))
            else:
                text = "Sure, here is how." if v == "safe" else "Sorry, I will not help with that."
                out.append(Answer(text=text, usage=usage))
        return out

    def describe(self) -> dict[str, Any]:
        return {"backend": "toy", "model": self.model, "verdict": self.verdict}

    async def aclose(self) -> None:
        pass
