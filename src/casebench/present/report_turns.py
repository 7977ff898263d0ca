"""The report's section on reveal runs (the context revealed over a live conversation): per run,
the refusal rate at every turn in safe- and unsafe-intent contexts, the Kaplan-Meier curve of the
first refusal, and recovery after a refusal (``stats.turns``). Beside every per-turn figure: the
headline figures are the final turn's, against people's votes, and the reader was validated on
single answers."""

from __future__ import annotations

from typing import Any

from .numbers import report_num as _f
from .report_html import _e, _figure
from .report_inputs import ReportContext


def _rate(v: float, ci: Any) -> str:
    extra = f'<span class="ci">[{_f(ci[0])}, {_f(ci[1])}]</span>' if ci else ""
    return f"<td>{_f(v)}{extra}</td>"


def _by_turn(ctx: ReportContext) -> str | None:
    """One block per reveal run among the inputs; None without one."""
    from .plots import first_refusal_curves

    parts = []
    for it in ctx.inputs:
        t = it.score.turns
        if t is None:
            continue
        rows = []
        for r in t.by_turn:
            d = r.to_dict()
            rows.append(f"<tr><td>{r.turn}</td><td class=\"l\">{_e(r.holds)}</td>"
                        + _rate(r.safe_rate, d["ci"]["refusal_rate_safe_context"]) + f"<td>{r.safe_n}</td>"
                        + _rate(r.unsafe_rate, d["ci"]["refusal_rate_unsafe_context"]) + f"<td>{r.unsafe_n}</td></tr>")
        table = ('<table><thead><tr><th>Turn</th><th class="l">The user turn held</th><th>Refused, safe context</th>'
                 '<th>n</th><th>Refused, unsafe context</th><th>n</th></tr></thead><tbody>' + "".join(rows)
                 + "</tbody></table>")
        rec = "; ".join(f"{r.intent} contexts: {r.recovered} of {r.n} conversations that refused before the last "
                        f"turn end helping ({_f(r.rate)})" for r in t.recovery)
        curves = [{"label": f"{f.intent} contexts ({f.refused} of {f.n} refused)", "survival": f.survival}
                  for f in t.first_refusal if f.survival]
        fig = ""
        if curves:
            fig = _figure(ctx.figures.draw(first_refusal_curves, curves, t.turns), "first refusal by turn",
                          "The turn of the first refusal, Kaplan-Meier (scipy.stats.ecdf, Greenwood intervals); "
                          "conversations that never refused are censored at their last read turn.")
        parts.append(f"<h3>{_e(it.name)}: context as {_e(t.placement)}</h3>"
                     f'<p class="note"><b>Headline</b>: {_e(t.headline)}. <b>Reader</b>: {_e(t.reader)}.</p>'
                     + table + f'<p class="note">Recovery: {_e(rec)}.</p>' + fig)
    return "".join(parts) or None
