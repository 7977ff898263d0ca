"""A toy refusal classifier in one file: ``toy-keyword`` reads an answer as a refusal when it
contains a keyword. Its whole registration is the ``@refusal_classifier`` decorator below, with
one option (``--keyword``; ``--refusal-keyword`` in ``run``). Used by tests/test_plugins.py."""

from __future__ import annotations

from typing import Any, Sequence

from casebench.backends.registry import Option
from casebench.classify.base import Item, Verdict
from casebench.classify.registry import refusal_classifier


@refusal_classifier(
    "toy-keyword",
    summary="a toy classifier of the plugin test: a keyword means refusal",
    options=(Option("keyword", "Toy: the word that marks a refusal (default: sorry).", metavar="WORD"),),
)
class KeywordClassifier:
    version = "1"

    def __init__(self, *, keyword: str = "sorry") -> None:
        self.keyword = keyword.lower()
        self.name = "toy-keyword"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "keyword": self.keyword}

    def classify(self, prompt: str, answer: str) -> Verdict:
        refused = self.keyword in answer.lower()
        return Verdict("refuse" if refused else "comply", reason=f"keyword {self.keyword!r} {'found' if refused else 'absent'}")

    async def aclassify(self, items: Sequence[Item]) -> list[Verdict]:
        return [self.classify(i.prompt, i.answer) for i in items]

    async def aclose(self) -> None:
        pass
