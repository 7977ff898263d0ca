"""Refusal classifiers: read a chatbot's answer, say ``comply``, ``partial`` or ``refuse``.

``make_classifier(spec, **options)`` builds one from a spec. Every classifier describes itself once,
with ``@refusal_classifier(...)`` on its class (``casebench.classify.registry``: kind, argument,
options with their help); the CLI flags and the table in docs/readers.md are derived from those
descriptions. The built-in ones:

- ``learned`` (also ``default``, or no spec at all): the offline default, a logistic regression
  over the answer's words and the rules' reading, trained on our own labelled answers
  (``casebench.classify.learned``); numpy only, under a millisecond per answer.
- ``rules``: hand-written rules (``casebench.classify.rules``); no network, no model, about
  0.2 ms per answer.
- ``llm:SPEC``: any casebench model spec asked with a three-class prompt of our own wording
  (``casebench.classify.llm``); options ``base_url``, ``api_key_env``, ``max_tokens``,
  ``concurrency`` and the backend's own keyword arguments.
- ``hf-classifier:PATH``: a local transformers sequence-classification model
  (``casebench.classify.hf_classifier``); options ``labels`` (model label -> behaviour),
  ``batch_size``, ``device``, ``max_length``, ``text`` (``answer`` or ``pair``).

``refusal_eval`` (in ``casebench.classify.evaluate``) scores a classifier against
human-labelled answers in XSTest's CSV format. Importing this package stays light: the rules
need only ``re``, the learned classifier imports numpy when built, and the model-based
classifiers import their libraries when built.
"""

from __future__ import annotations

from typing import Any

from .base import BEHAVIOURS, ClassifierError, Item, RefusalClassifier, Verdict, parse_label_map
from .registry import ClassifierInfo, classifiers, refusal_classifier, register_classifier

__all__ = [
    "BEHAVIOURS",
    "ClassifierError",
    "Item",
    "RefusalClassifier",
    "Verdict",
    "DEFAULT_CLASSIFIER",
    "make_classifier",
    "ClassifierInfo",
    "classifiers",
    "refusal_classifier",
    "register_classifier",
]

#: The spec used when none is given.
DEFAULT_CLASSIFIER = "learned"



def make_classifier(spec: str | None = None, **options: Any) -> RefusalClassifier:
    """Build the refusal classifier ``spec`` names (``KIND`` or ``KIND:ARGUMENT``).

    Options whose value is None are ignored (so a CLI can pass every flag through). Raises
    ``ClassifierError`` for an unknown spec, an option the classifier does not take, or a
    classifier that cannot be built (missing file, missing extra, unknown backend).
    """
    from .outcome_refine import give_outcomes
    from .registry import build

    # every reader with its outcomes (classify.outcome); the refinement is given to it here, so
    # no reader imports the refinement
    return give_outcomes(build(spec, DEFAULT_CLASSIFIER, options))
