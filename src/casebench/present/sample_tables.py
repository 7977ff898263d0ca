"""The text of a per-scorer comparison of two evaluations of any task (``stats.sample_compare``):
``casebench compare LOG_A LOG_B`` and ``casebench diff LOG_A LOG_B`` on inspect logs."""

from __future__ import annotations

from typing import Any, Sequence

from ..stats.sample_compare import SampleComparison
from .numbers import fmt_num, fmt_p, fmt_p_adjusted

_TEST = {"mcnemar": "McNemar exact", "mcnemar_clustered": "McNemar clustered", "bootstrap": "paired bootstrap"}


def format_sample_comparison(c: SampleComparison) -> str:
    """A table per pair of inputs: per scorer the means, A - B with its interval, the primary
    test's p and BH-adjusted p, the MDD."""
    s = c.settings
    lines = ["inputs:"]
    for d in c.inputs:
        lines.append(f"  {d['label']}  {d['name']}  {d['source']}")
    clus = (f", clustered by sample metadata field {s['cluster_by']!r}" if s.get("cluster_by") else
            "; the samples taken as independent: no --cluster-by")
    lines.append(f"per scorer, the mean over the samples both scored; differences are A - B with {s['level']:.0%} "
                 f"paired-bootstrap CIs ({s['bootstrap']} resamples, seed {s['seed']}{clus}); p: McNemar for 0/1 "
                 f"scores, else the paired bootstrap; p(BH): Benjamini-Hochberg over all scorers (alpha {s['alpha']}); "
                 "MDD: the smallest difference the test had 80% power to detect")
    head = ["scorer", "n", "mean A", "mean B", "A - B", "CI", "test", "p", "p(BH)", "MDD", ""]
    for pc in c.pairs:
        a, b = c.inputs[pc.a], c.inputs[pc.b]
        lines.append("")
        lines.append(f"{a['label']} vs {b['label']}: {pc.shared} samples scored by both")
        rows = []
        notes = []
        for k, m in pc.scorers.items():
            ci = f"[{fmt_num(m.ci[0])}, {fmt_num(m.ci[1])}]"
            disc = ""
            if m.mcnemar is not None:
                disc = f" ({m.mcnemar['a_only']}/{m.mcnemar['b_only']} discordant)"
            mark = "*" if m.significant else ""
            rows.append([k, str(m.n), fmt_num(m.a), fmt_num(m.b), fmt_num(m.diff), ci, _TEST.get(m.test, m.test) + disc,
                         fmt_p(m.p, floor=m.p_floor), fmt_p_adjusted(m.p_adjusted, m.p, m.p_floor), fmt_num(m.mdd), mark])
            if m.withheld:
                notes.append(f"  {k}: no significance mark ({m.withheld})")
            if m.only_a or m.only_b:
                notes.append(f"  {k}: {m.only_a} samples scored by {a['label']} only, {m.only_b} by {b['label']} only "
                             "(left out)")
        lines += _table(head, rows)
        lines += notes
    if s.get("independence"):
        lines.append(f"note: {s['independence']}")
    if any(m.test.startswith(("t on", "exact")) for pc in c.pairs for m in pc.scorers.values()):
        lines.append(f"note: {s.get('few_clusters')}; an exact interval of a bounded mean where the differences "
                     "have no spread")
    lines.append("* significant after Benjamini-Hochberg")
    return "\n".join(lines) + "\n"


def format_sample_diff(rows: Sequence[dict[str, Any]], a: str, b: str, shared: int) -> str:
    """``casebench diff`` of two logs of any task: the samples whose scores differ."""
    lines = [f"A  {a}", f"B  {b}", f"{len(rows)} disagreements over {shared} scored samples in common"]
    if rows:
        lines += _table(["scorer", "sample", "A", "B"],
                        [[r["scorer"], r["sample"], fmt_num(r["a"], 3), fmt_num(r["b"], 3)] for r in rows])
    return "\n".join(lines) + "\n"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(head)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    for r in rows:
        out.append("  " + "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
    return out
