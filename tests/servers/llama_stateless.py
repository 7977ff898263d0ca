"""``python -m llama_cpp.server`` with the prompt cache off: every request is decoded from scratch.

llama-cpp-python keeps the previous request's KV state and reuses its longest common prefix with
the next prompt, evaluating only the rest. How much is reused depends on what was asked before,
and a prompt evaluated in other batch splits gets logits that differ in the last bits, so two
requests for the same prompt can decode differently (greedy answers part after a sentence or
two). Tests that compare answers from two separate runs (two tools, two processes) need each
answer to depend on its prompt alone: this launcher resets the model state before every
generation, then hands over to the server's own ``main`` with the same command-line arguments.
"""

from __future__ import annotations

import functools

import llama_cpp


def _stateless(generate):  # type: ignore[no-untyped-def]
    @functools.wraps(generate)
    def wrapper(self, tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.reset()  # n_tokens = 0: no prefix is reused, the whole prompt is evaluated afresh
        return generate(self, tokens, *args, **kwargs)

    return wrapper


llama_cpp.Llama.generate = _stateless(llama_cpp.Llama.generate)

if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    main()
