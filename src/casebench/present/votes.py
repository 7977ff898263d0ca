"""The text of ``casebench annotate stats`` (abilities, posteriors, agreement over time and drift:
``stats.votes.VoteStats``; by a trait: ``stats.vote_groups.TraitGroups``) and of ``annotate
plan`` (``stats.vote_plan.VotePlan``), each on one short screen; the JSON output holds every figure."""

from __future__ import annotations

from ..stats.vote_groups import TraitGroups
from ..stats.vote_plan import VotePlan
from ..stats.votes import Alpha, Interval, VoteStats
from .numbers import fmt_bounds, fmt_num


def _iv(iv: Interval) -> str:
    """An interval as ``[0.61, 0.74]``, or ``[-]`` where it has no two finite bounds."""
    return fmt_bounds((iv.low, iv.high), 2, finite_only=True) or "[-]"


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


def trait_lines(t: TraitGroups) -> list[str]:
    """A few lines of words (the JSON output carries every share)."""
    def a(x: float | None, iv: Interval) -> str:
        if x is None:
            return "undefined"
        return fmt_num(x, 2) + fmt_bounds((iv.low, iv.high), 2, lead=" ", finite_only=True)

    lines = [f"by {t.trait}: agreement (Krippendorff's alpha) within each group and across groups, "
             f"{t.level:.0%} intervals from {t.n_boot} case resamples"]
    for g in t.groups:
        lines.append(f"  {g.value}: {g.annotators} annotators, {g.votes} votes; within {a(g.within.alpha, g.within.interval)}")
    for x in t.across:
        lines.append(f"  {x.first} x {x.second}: across {a(x.alpha, x.interval)} over {x.cases} cases")
    lines.append("  each group's safe share per case with its Wilson interval: --json")
    return lines


def plan_lines(plan: VotePlan) -> list[str]:
    """The plan in a few lines of words."""
    what = (f"a {plan.level:.0%} Wilson interval of a case's safe share at most {plan.goal:g} wide (on average)"
            if plan.target == "width" else
            f"power {plan.goal:g} to detect a query's context effect (Fisher's exact test, alpha {plan.alpha:g}; "
            f"averaged over the pilot's {plan.pairs} queries with both contexts)")
    fits = "; ".join(f"{f.kind.replace('_', ' ')}: mean share {f.mean:.2f}, Beta({f.a:.2f}, {f.b:.2f})"
                     for f in plan.fits)
    lines = [f"pilot: {plan.pilot_votes} people's votes on {plan.pilot_cases} cases ({plan.source}); "
             f"fitted shares by context: {fits}"]
    lines.append(f"target: {what}")
    figure = "mean width" if plan.target == "width" else "mean power"
    extra = f", 90% of cases within {plan.reached_p90:.3f}" if plan.reached_p90 is not None else ""
    if plan.votes_per_case is None:
        lines.append(f"not reachable with up to {plan.max_votes} votes a case: {plan.max_votes} give {figure} "
                     f"{plan.reached:.3f}{extra}")
    else:
        lines.append(f"votes per case: {plan.votes_per_case} ({figure} {plan.reached:.3f}{extra})")
    lines.append(f"(simulated from the fitted beta-binomial: {plan.draws} draws of each case's share, seed {plan.seed})")
    return lines
