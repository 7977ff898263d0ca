"""The report's outcome section: a stacked bar per respond input and context intent (how the
answers land: full refusal, clarifying question, partial compliance, full compliance), people's
share of safe votes on the same cases beside each (``stats.outcomes``)."""

from __future__ import annotations

from .report_html import _figure
from .report_inputs import ReportContext


def _outcomes(ctx: ReportContext) -> str | None:
    """The section, or None when no input carries outcomes."""
    from ..stats.outcomes import ORDER
    from .outcomes import ORDER_SHORT
    from .plots import outcome_bars

    rows, shares, people = [], [], []
    for it in ctx.inputs:
        f = getattr(it.score, "outcomes", None)
        if f is None:
            continue
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
                   "people's share of safe votes on the same cases. ")
