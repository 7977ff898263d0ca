"""Display names that tell inputs apart: one home for what ``score``, ``compare``, ``report``,
CSV, JSON and Markdown call an input.

An input's name is ``who [mode]`` followed by each facet that sets it apart from the other
inputs shown with it: ``who`` is the model as it was asked, with its backend when a run records
one (``openai/judge``, so a judge is never reduced to "judge"); a facet is something about the
input that changes its answers (where the context went, the CI parameters removed, a query
mutation). A facet is named when it is not the mode's default, or when inputs of the same
model and mode shown together differ in it (two runs differing only in placement print
``[binary] (context as user)`` and ``[binary] (context as system)``). Inputs that still share a
name get their file or directory name, then their position.

``FACETS`` is the one list of facets: a new kind of input condition (the query mutations of a
mutation study) adds one entry, and every output names it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from .input_state import PARTIAL
from .predictions import Predictions


def who(p: Predictions) -> str:
    """The model as it was asked: a run's model spec with its backend (``openai/gpt-4o-mini``,
    ``hf/Qwen/...``), else the model's name as its file gives it (the published files name no
    backend)."""
    spec = p.meta.get("model_spec") if isinstance(p.meta, dict) else None
    return str(spec) if spec else p.model


@dataclass(frozen=True)
class Facet:
    """One thing that sets inputs of one model and mode apart. ``value``: the input's value
    (None or "" when it has none); ``default``: the value that goes unsaid unless another input
    shown with it differs; ``text``: the words for a value (appended to the name)."""

    key: str
    value: Callable[[Predictions], str | None]
    default: Callable[[Predictions], str | None]
    text: Callable[[str], str]


def _mutation(p: Predictions) -> str | None:
    """The query mutation of an input (a run's manifest records it as ``mutation``), None when
    the queries are as published."""
    m = getattr(p, "mutation", None) or (p.meta.get("mutation") if isinstance(p.meta, dict) else None)
    return str(m) if m else None


#: the level of a mutation study that is the dataset's own wording (SORRY-Bench's ``base`` style)
BASE_WORDING = "base"


def mutation_of(pred: Predictions) -> str:
    """How an input worded its queries: its query mutation (``Predictions.mutation``), or
    ``base`` for the dataset's own wording (the wording people voted on). A facet every study
    holds fixed or varies (``stats.placement.Factor``), so it lives with the other facets."""
    return pred.mutation or BASE_WORDING


#: the facets, in the order they are written after ``who [mode]``
FACETS: list[Facet] = [
    Facet("placement", lambda p: p.context_as, lambda p: p.mode.default_context_as,
          lambda v: f" (context as {v})"),
    Facet("removed", lambda p: ", ".join(p.removed), lambda p: "", lambda v: f" − {v}"),
    Facet("mutation", _mutation, lambda p: None, lambda v: f" · {v} mutation"),
]


def partial_name(name: str, partial: bool) -> str:
    """``name`` marked as the name of an unfinished input (``input_state``) when ``partial``:
    every figure printed under it rests on part of its cases."""
    mark = f" ({PARTIAL})"
    return name + mark if partial and not name.endswith(mark) else name


def display_names(preds: Sequence[Predictions]) -> list[str]:
    """Each input's name among ``preds`` (see the module docstring), all different; an unfinished
    input's marked ``(partial)``."""
    base = [f"{who(p)} [{p.mode}]" for p in preds]
    names = list(base)
    for facet in FACETS:
        values = [facet.value(p) or "" for p in preds]
        differ: dict[str, set[str]] = {}
        for b, v in zip(base, values):
            differ.setdefault(b, set()).add(v)
        for i, (p, v) in enumerate(zip(preds, values)):
            if v and (v != (facet.default(p) or "") or len(differ[base[i]]) > 1):
                names[i] += facet.text(v)
    return [partial_name(n, p.partial) for p, n in zip(preds, _unique(preds, names))]


def display_name(p: Predictions) -> str:
    """The name of one input shown alone."""
    return display_names([p])[0]


def _unique(preds: Sequence[Predictions], names: list[str]) -> list[str]:
    """Names still shared get the input's file or directory name (with its folder when that is
    shared too), then their position."""
    out = list(names)
    for depth in (1, 2):
        counts = Counter(out)
        out = [f"{n} ({'/'.join(Path(p.source).parts[-depth:]) or p.source})" if counts[o] > 1 else o
               for p, n, o in zip(preds, names, out)]
        if len(set(out)) == len(out):
            return out
    counts = Counter(out)
    return [f"{n} #{i + 1}" if counts[n] > 1 else n for i, n in enumerate(out)]
