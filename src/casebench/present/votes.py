"""The text of ``casebench annotate stats``: abilities, posteriors, agreement over time and drift
(``stats.votes.VoteStats``), on one short screen; the JSON output holds every figure."""

from __future__ import annotations

from ..stats.votes import Alpha, Interval, VoteStats


def _iv(iv: Interval, fmt: str = ".2f") -> str:
    if iv.low is None or iv.high is None:
        return "[-]"
    return f"[{iv.low:{fmt}}, {iv.high:{fmt}}]"


def _alpha(a: Alpha) -> str:
    if a.alpha is None:
        return "undefined (no case with two votes, or every vote alike)"
    return f"{a.alpha:.2f} {_iv(a.interval)}"


def vote_stats_lines(s: VoteStats, top: int = 3) -> list[str]:
    """At most about 15 lines: what the votes say about their voters, their cases and their
    agreement, each figure named where it is printed."""
    pct = f"{s.level:.0%}"
    lines = [f"{s.votes} people's votes from {len(s.annotators)} annotators on {len(s.items)} cases; "
             f"latent-class model (one accuracy per annotator), {pct} intervals from {s.n_boot} case resamples"]
    if s.annotators:
        best, worst = s.annotators[:top], s.annotators[-top:]
        lines.append("ability (P(vote = the case's latent label)), highest: "
                     + "; ".join(f"{a.annotator} {a.ability:.2f} {_iv(a.interval)}" for a in best))
        lines.append("  lowest: " + "; ".join(f"{a.annotator} {a.ability:.2f} {_iv(a.interval)}" for a in worst))
    flips = [i for i in s.items if (i.posterior_safe > 0.5) != (i.safe_votes * 2 > i.votes)]
    unsure = [i for i in s.items if i.interval.low is not None and i.interval.high is not None
              and i.interval.low < 0.5 < i.interval.high]
    lines.append(f"posterior P(safe): {len(flips)} case(s) where its 0.5 cut differs from the plain majority of votes; "
                 f"{len(unsure)} whose interval straddles 0.5")
    lines.append(f"agreement (Krippendorff's alpha, nominal): {_alpha(s.agreement.overall)} over all votes")
    lines.append(f"  per window of {s.agreement.window_votes} votes: "
                 + ", ".join(f"{w.window}: {w.agreement.alpha:.2f}" if w.agreement.alpha is not None
                             else f"{w.window}: -" for w in s.agreement.windows))
    d = s.drift
    if d.alert:
        lines.append("DRIFT ALERT:")
        lines.extend(f"  {r}" for r in d.reasons)
    else:
        figures = (f" (latest window against the earlier votes: alpha {d.latest_vs_earlier:.2f}; earlier votes "
                   f"among themselves: {d.earlier:.2f})" if d.latest_vs_earlier is not None and d.earlier is not None
                   else "")
        lines.append(f"drift: no alert{figures}")
    return lines
