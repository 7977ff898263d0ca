"""Refusal classifiers: read a chatbot's answer, say ``comply``, ``partial`` or ``refuse``.

``make_classifier(spec, **options)`` builds one from a spec:

- ``rules`` (also ``default``, or no spec at all): the offline default, hand-written rules
  (``casebench.classify.rules``); no network, no model, about 0.2 ms per answer.
- ``llm:SPEC``: any casebench model spec asked with a three-class prompt of our own wording
  (``casebench.classify.llm``); options ``base_url``, ``api_key_env``, ``max_tokens``,
  ``concurrency`` and the backend's own keyword arguments.
- ``hf-classifier:PATH``: a local transformers sequence-classification model
  (``casebench.classify.hf_classifier``); options ``labels`` (model label -> behaviour),
  ``batch_size``, ``device``, ``max_length``, ``text`` (``answer`` or ``pair``).

``refusal_eval`` (in ``casebench.classify.evaluate``) scores a classifier against
human-labelled answers in XSTest's CSV format. Importing this package stays light: the rules
need only ``re``, and the model-based classifiers import their libraries when built.
"""

from __future__ import annotations

from typing import Any

from .base import BEHAVIOURS, ClassifierError, Item, RefusalClassifier, Verdict, parse_label_map

__all__ = [
    "BEHAVIOURS",
    "ClassifierError",
    "Item",
    "RefusalClassifier",
    "Verdict",
    "DEFAULT_CLASSIFIER",
    "make_classifier",
]

#: The spec used when none is given.
DEFAULT_CLASSIFIER = "rules"

_SPEC_HELP = (
    "valid refusal classifiers: 'rules' (the offline default), 'llm:MODEL_SPEC' "
    "(e.g. llm:openai/gpt-4o-mini) and 'hf-classifier:PATH' (a local sequence-classification model)"
)


def make_classifier(spec: str | None = None, **options: Any) -> RefusalClassifier:
    """Build the refusal classifier ``spec`` names.

    Options whose value is None are ignored (so a CLI can pass every flag through). Raises
    ``ClassifierError`` for an unknown spec, an option the classifier does not take, or a
    classifier that cannot be built (missing file, missing extra, unknown backend).
    """
    opts = {k: v for k, v in options.items() if v is not None}
    name = (spec or DEFAULT_CLASSIFIER).strip()
    kind, sep, rest = name.partition(":")
    if name in ("rules", "default"):
        if opts:
            raise ClassifierError(
                f"the rules classifier takes no options; got {', '.join(sorted(opts))} "
                f"(they belong to llm:... or hf-classifier:...)"
            )
        from .rules import RulesClassifier

        return RulesClassifier()
    if sep and kind == "llm":
        if not rest.strip():
            raise ClassifierError(f"refusal classifier {name!r} names no model; write llm:MODEL_SPEC, e.g. llm:openai/gpt-4o-mini")
        from .llm import LLMClassifier

        return LLMClassifier(rest.strip(), **opts)
    if sep and kind == "hf-classifier":
        if not rest.strip():
            raise ClassifierError(f"refusal classifier {name!r} names no path; write hf-classifier:PATH")
        from .hf_classifier import HFClassifier

        return HFClassifier(rest.strip(), **opts)
    raise ClassifierError(f"unknown refusal classifier {name!r}; {_SPEC_HELP}")
