"""The text of a reveal study (``stats.reveal.RevealStudy``): the arms' figures and their paired
differences against ``full`` as a placement-style study prints them, then the order x intent
interaction and recovery after a refusal, each defined where it is printed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..stats.reveal import RevealStudy
from .numbers import fmt_num

if TYPE_CHECKING:
    from ..stats.turns import TurnFigures


def format_reveal(study: RevealStudy) -> str:
    """The study as text (see the module docstring)."""
    from .study_text import format_placements

    lines = [format_placements(study.arms).rstrip("\n"), "",
             f"Headline: {study.headline}.", f"Reader: {study.reader}.", "",
             "Order x intent (each arm against full, over the query pairs both answered in both contexts): the "
             "change of the refusal rate in unsafe-intent contexts minus that in safe-intent ones; a t interval "
             "and test over queries."]
    for i in study.interactions:
        ci = f"[{i.ci[0]:+.3f}, {i.ci[1]:+.3f}], p {i.p:.3g}" if i.ci is not None else f"({i.note})"
        lines.append(f"  {i.arm:>8} vs full: safe {fmt_num(i.safe_change, 3, 'n/a', signed=True)}, unsafe {fmt_num(i.unsafe_change, 3, 'n/a', signed=True)}, "
                     f"interaction {fmt_num(i.interaction, 3, 'n/a', signed=True)} {ci}; {i.pairs} query pairs")
    if study.recovery:
        lines += ["", "Recovery (conversations that refused before their last turn whose final answer helps):"]
        for arm, rs in study.recovery:
            parts = [f"{r.intent} contexts {r.recovered}/{r.n} ({fmt_num(r.rate, 3, 'n/a')})" for r in rs]
            lines.append(f"  {arm:>8}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def by_turn_lines(name: str, turns: "TurnFigures") -> list[str]:
    """Two lines for ``casebench score``'s table: a reveal run's refusal rate at every turn in
    safe- and unsafe-intent contexts, and what its headline figures are."""
    cells = " · ".join(f"{t.turn} {t.holds}: {fmt_num(t.safe_rate, 3, 'n/a')}/{fmt_num(t.unsafe_rate, 3, 'n/a')}" for t in turns.by_turn)
    where = "" if turns.placement in name else f", context as {turns.placement}"
    return [f"{name}{where}: refused by turn (safe/unsafe-intent contexts): {cells}",
            f"  the figures above are the final turn's, against people's votes; {turns.reader} (score --json: "
            "by_turn with intervals, first refusal, recovery)"]
