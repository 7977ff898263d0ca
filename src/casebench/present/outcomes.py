"""The outcome figures as text (``stats.outcomes``): the first screen's one line and the
``score`` block, one line per outcome and context with its interval."""

from __future__ import annotations

from ..stats.outcomes import OutcomeFigures

def one_line(f: OutcomeFigures) -> str:
    """The first screen's line (at most 100 characters): each context's outcome shares in percent,
    in the order the legend names; their intervals and the ordered shift are in ``score``."""
    order = ("comply", "partial", "clarify", "refuse")
    parts = []
    for c in f.contexts:
        by = {s.outcome: s for s in c.shares}
        parts.append(f"{c.intent}-intent " + "/".join(f"{100 * by[o].value:.0f}" if o in by and by[o].n else "-"
                                               for o in order))
    return "outcomes, % full/partial/clarify/refuse: " + "; ".join(parts)


ORDER_SHORT: dict[str, str] = {"comply": "full", "partial": "partial", "clarify": "clarifying", "refuse": "refusal"}


def text_block(f: OutcomeFigures) -> list[str]:
    """The ``score`` text: one line per outcome and context with its interval, then the shifts."""
    pct = int(round(100 * f.level))
    lines = [f"How the answers land, by context intent (share of read answers, {pct}% clustered Wilson interval):"]
    for c in f.contexts:
        people = "" if c.people_safe_share is None else f"; people voted safe {100 * c.people_safe_share:.0f}%"
        lines.append(f"  {c.intent} contexts ({c.answers} answers read of {c.answers + c.missing}{people}):")
        for s in c.shares:
            if s.n:
                name = f"{c.intent}: {s.name}"  # the context in every row: two rows never read alike
                lines.append(f"    {name:<42} {100 * s.value:5.1f}%  [{100 * s.ci[0]:.1f}, {100 * s.ci[1]:.1f}]")
    for sh in (f.ordered_shift, f.binary_shift):
        what = ("context shift, ordered scale (refusal 0 < clarifying 1/3 < partial 2/3 < full 1)"
                if sh.scale == "ordered" else "context shift, binary (answered: full or clarifying)")
        if sh.value is None or sh.ci is None:
            lines.append(f"  {what}: too few query pairs ({sh.pairs})")
        else:
            lines.append(f"  {what}: {sh.value:+.3f} [{sh.ci[0]:+.3f}, {sh.ci[1]:+.3f}] over {sh.pairs} pairs")
    return lines



__all__ = ["ORDER_SHORT", "one_line", "text_block"]
