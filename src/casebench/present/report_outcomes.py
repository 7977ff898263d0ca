"""The report's outcome section: a stacked bar per respond input and context intent (how the
answers land: full refusal, clarifying question, partial compliance, full compliance), people's
share of safe votes on the same cases beside each (``stats.outcomes``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .report_html import _figure
from .report_inputs import ReportContext


def _outcomes(ctx: ReportContext) -> str | None:
    """The section, or None when no input carries outcomes."""
    from ..stats.outcomes import ORDER
    from .outcomes import ORDER_SHORT
    from .plots import outcome_bars

    rows, shares, people = [], [], []
    readers: dict[tuple[str, str, tuple[str, ...]], list[dict[str, Any]]] = {}
    for it in ctx.inputs:
        f = getattr(it.score, "outcomes", None)
        if f is None:
            continue
        cl = getattr(it.score, "classifier", None) or {}
        if cl.get("name"):
            checks = list(cl.get("outcome_checks") or [])  # they differ by the kind of writer: keyed by their sets
            readers[(str(cl["name"]), str(cl.get("version") or ""), tuple(str(c.get("set")) for c in checks))] = checks
        for c in f.contexts:
            if not c.answers:
                continue
            rows.append(f"{it.name}: {c.intent} contexts")
            shares.append([c.share(o).value for o in ORDER])
            people.append(c.people_safe_share)
    if not rows:
        return None
    png = ctx.figures.draw(outcome_bars, rows, shares, [ORDER_SHORT[o] for o in ORDER], people)
    return _figure(png, "how the answers land per input and context",
                   "Each bar: the share of a chatbot's read answers in safe- or unsafe-intent contexts that were "
                   "a full refusal, a clarifying question, partial compliance (a safe completion) or full "
                   "compliance, as the refusal classifier read them (not people's labels). The black tick: "
                   "people's share of safe votes on the same cases. " + reader_checks(readers))


#: whose labels a check set holds, in the caption's words
_WHOSE = {"people": "people's labels", "writers": "an AI writer's own labels (what it wrote each answer to do)",
          "ai-readers": "AI readers' labels"}
_SHORT = {"refuse": "refusal", "clarify": "clarifying", "partial": "partial", "comply": "full"}
#: an outcome labelled fewer times than this gets no F1 (it would be noise), only its count
MIN_SUPPORT = 10


def reader_checks(readers: Mapping[tuple[str, str, tuple[str, ...]], Sequence[Mapping[str, Any]]]) -> str:
    """How well each reader of the inputs reads each outcome on answers it never saw (its
    ``outcome_checks``, from ``classify.validation.reader_as_read``; they differ by the kind of
    writer, so one sentence per reader and set of checks), with how many answers each outcome's
    F1 rests on; an outcome labelled fewer than ``MIN_SUPPORT`` times gets no F1. A reader with
    none stored says so. The bars are only as good as this, partial answers above all."""
    from ..stats.outcomes import ORDER

    said = []
    for (name, version, _), checks in readers.items():
        if not checks:
            said.append(f"How well {name}{f' v{version}' if version else ''} reads each outcome is not measured.")
            continue
        parts = []
        for c in checks:
            support, f1 = c.get("support") or {}, c.get("f1") or {}
            read = [f"{_SHORT[o]} {f1[o]:.2f} (of {support[o]})" for o in ORDER
                    if o in f1 and support.get(o, 0) >= MIN_SUPPORT]
            few = [f"{_SHORT[o]} ({support[o]})" for o in ORDER if 0 < support.get(o, 0) < MIN_SUPPORT]
            said_of = [", ".join(read)] if read else []
            if few:
                said_of.append(f"too few labelled for an F1: {', '.join(few)}")
            parts.append(f"{_WHOSE.get(str(c['labelled_by']), str(c['labelled_by']))} on {c['n']} answers "
                         f"({c['set']}): " + "; ".join(said_of))
        said.append(f"How well {name} reads each outcome, F1 on answers it never saw: " + "; ".join(parts) + ".")
    return " ".join(said)
