"""The text of ``casebench human``: the readable tables of the human-vote statistics
(``stats.human.human_stats``) and of a power analysis (``stats.human.power_analysis``). The JSON
output holds the same figures and more."""

from __future__ import annotations

from typing import Any

from .numbers import fmt_bounds, fmt_num, fmt_p_short, fmt_stat, p_words

#: the statistics' blocks per kind of context, with the names the tables give them
CONTEXT_BLOCKS: tuple[tuple[str, str], ...] = (("safe_contexts", "intended-safe contexts"),
                                              ("unsafe_contexts", "intended-unsafe contexts"))


def by_context(block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A statistic's per-context blocks with their names, in ``CONTEXT_BLOCKS`` order."""
    return [(name, block[key]) for key, name in CONTEXT_BLOCKS]


def context_effect_lines(ce: dict[str, Any]) -> list[str]:
    """People's context effect (``stats.human.people_context_effect``) as the lines every
    output shows: one person's shift and the majority's follow under the label source, the same
    under the other source, and which pairs people label differently with and without the
    intent vote's tie-break."""
    src = ce["label_source"]
    name = {"published": "with the intent vote", "votes": "from the votes alone",
            "posterior": "from the votes alone"}
    rule = {"published": "the published safe_rate: the votes plus the intent as a 21st vote",
            "votes": "the votes alone", "posterior": "the posterior P(safe), votes weighed by annotator ability"}
    this, other = (ce["with_intent_vote"], ce["votes_alone"]) if src == "published" else (
        ce["votes_alone"], ce["with_intent_vote"])
    pd = ce["people_differ"]
    return [
        f"1. People's context effect over {ce['pairs']} queries (--label-source {src}: {rule[src]})",
        f"  one person (a vote drawn at random): shift {fmt_num(this['one_person_shift'], 3, '-')}"
        f"{fmt_bounds(this['one_person_shift_ci'], 3, '-', lead=' ')}",
        f"  people's majority label: follow {fmt_num(this['majority_follow'], 3, '-')}{fmt_bounds(this['majority_follow_ci'], 3, '-', lead=' ')} "
        f"(labelled safe then unsafe)",
        f"  {name[ce['other_label_source']]}: one person {fmt_num(other['one_person_shift'], 3, '-')}, majority follow "
        f"{fmt_num(other['majority_follow'], 3, '-')}",
        f"  pairs people label differently: {pd['with_intent_vote']} with the intent vote, {pd['votes_alone']} from "
        f"the votes alone ({pd['intent_tie_break']} differ only because the intent vote broke a 10-10 tie); "
        f"context blind counts the {pd['counted']}",
    ]


def format_stats(r: dict[str, Any]) -> str:
    """The readable tables of ``casebench human`` (the JSON holds the same figures and more)."""
    out: list[str] = []
    ds = r["dataset"]
    per = ", ".join(f"{v} with {k}" for k, v in ds["votes_per_case"].items())
    out.append(f"Dataset: {ds.get('path', '')}  {ds['cases']} cases ({per} votes), {ds['categories']} categories")
    if ds["cases_without_votes"]:
        out.append(f"  {ds['cases_without_votes']} cases hold no votes and are left out")
    out.append("")

    v, ce = r["votes"], r["context_effect"]
    out.extend(context_effect_lines(ce))
    out.append("  pooled shares of safe votes (descriptive; votes cluster within cases and queries, so they are "
               "not tested pooled):")
    out += [f"    {name:<26} {fmt_num(b['share'], 4, '-')}  ({b['safe_votes']}/{b['votes']} votes, {b['cases']} cases)"
            for name, b in by_context(v)]
    pa = r["paired"]
    out.append(
        f"  test, paired over queries (Wilcoxon signed-rank over {pa['pairs']} queries, {pa['nonzero_differences']} "
        f"nonzero; votes alone): W = {fmt_stat(pa['statistic'])}, {p_words(fmt_p_short(pa['p']))}; mean difference "
        f"{fmt_num(pa['mean_difference'], 4, '-')} (the votes as cast, without the child-related override)"
    )
    if pa["skipped_queries"]:
        out.append(
            f"  skipped {pa['skipped_queries']} queries ({pa['skipped_cases']} cases) "
            "without exactly one context of each kind"
        )
    ps = r["pairs_significant"]
    out.append(
        f"  queries whose two cases differ at alpha {ps['alpha']:g} (Fisher's exact test within the query, "
        f"Benjamini-Hochberg over the {ps['of']} queries): {ps['count']} of "
        f"{ps['of']} ({ps['higher_in_safe_context']} safer in the safe context, "
        f"{ps['higher_in_unsafe_context']} in the unsafe one)"
    )
    cs = r["categories_significant"]
    out.append(f"  categories significant after Benjamini-Hochberg (Wilcoxon over each category's queries): "
               f"{cs['count']} of {cs['of']}")
    out.append("")
    out.append(f"  {'category':<40} {'safe ctx':>8} {'unsafe ctx':>10} {'pairs':>5} {'W':>6} {'p':>10} {'p adj':>10}")
    for c in r["categories"]:
        out.append(
            f"  {c['category'][:40]:<40} {fmt_num(c['share_safe_contexts'], 3, '-'):>8} "
            f"{fmt_num(c['share_unsafe_contexts'], 3, '-'):>10} {c['pairs']:>5} "
            f"{fmt_stat(c['statistic']):>6} {fmt_p_short(c['p']):>10} {fmt_p_short(c['p_adjusted']):>10}"
        )
    out.append("")

    kw = r["kruskal_wallis"]
    out.append("2. Differences between categories (Kruskal-Wallis on per-case safe share)")
    for name, b in by_context(kw):
        out.append(
            f"  {name:<26} H = {fmt_num(b['H'], 3, '-')}, {p_words(fmt_p_short(b['p']))} "
            f"({b['groups']} categories, {b['cases']} cases)"
        )
    out.append("")

    ag = r["agreement"]
    out.append("3. Agreement (nominal)            Fleiss' kappa   Krippendorff's alpha")
    for name, b in [("all cases", ag), *by_context(ag)]:
        out.append(f"  {name:<30} {fmt_num(b['fleiss_kappa'], 4, '-'):>13}   {fmt_num(b['krippendorff_alpha'], 4, '-'):>20}")
    if ag.get("note"):
        out.append(f"  note: {ag['note']}")
    out.append("")

    mj = r["majority"]
    out.append("4. Votes-only majorities            safe   unsafe   ties (tie = unsafe)")
    out += [f"  {name:<30} {b['safe']:>6} {b['unsafe']:>8} {b['ties']:>6}" for name, b in by_context(mj)]
    lc = mj["label_changes"]
    out.append(
        f"  published label vs votes-only majority: {lc['total']} cases differ "
        f"({lc['published_safe_votes_unsafe']} published safe -> votes unsafe, "
        f"{lc['published_unsafe_votes_safe']} published unsafe -> votes safe; "
        f"{lc['tie']} ties broken by the intent vote, {lc['always_unsafe_category']} by the always-unsafe category)"
    )
    lb = r["labels"]
    out.append(
        f"  labels used (--label-source {lb['source']}): {lb['safe']} safe, {lb['unsafe']} unsafe; "
        f"{lb['changed_from_published']} differ from the published labels"
    )
    out.append("")

    st = r["stability_settings"]
    out.append(
        f"5. Majority-label stability: k annotators drawn from each case's votes ({st['draws']} draws, "
        f"seed {st['seed']}; {st['cases_excluded_ties']} tied cases left out)"
    )
    out.append(f"  {'k':>4} {'agreement':>10} {'exact':>8} {'cases':>6}")
    for row in r["stability"]:
        out.append(f"  {row['k']:>4} {row['agreement']:>10.4f} {row['exact']:>8.4f} {row['cases']:>6}")
    pw = r["power"]
    if pw["power"] is not None:
        designs = ", ".join(
            f"{d['votes_safe_context']} vs {d['votes_unsafe_context']} votes ({d['pairs']} pairs): {d['power']:.4f}"
            for d in pw["designs"]
        )
        out.append(
            f"  power per pair (one query pair's two-proportion test of its two contexts) of the released design for "
            f"the observed effect ({fmt_num(pw['p1'], 3, '-')} vs {fmt_num(pw['p2'], 3, '-')}, h = {fmt_num(pw['effect_size_h'], 3, '-')}, "
            f"alpha {pw['alpha']:g}): {designs}"
        )
        out.append(f"  votes per case (annotators per context) for 80% power per pair: {pw['annotators_for_80_percent']}"
                   " (the figure annotate serve uses by default)")
    ref = r.get("references")
    if ref:
        ci = ref["ci"]


        out.append("")
        out.append(f"6. References for judges (h = safe_rate under --label-source {ref['label_source']}, with the "
                   "child-related override)")
        out.append(f"  context shift of one person, h(safe ctx) - h(unsafe ctx), {ref['context_pairs']} pairs: "
                   f"{fmt_num(ref['context_shift'], 4, '-')}{fmt_bounds(ci.get('context_shift'), 4, '-', lead=' ')}")
        out.append(f"  context follow of people's majority label: {fmt_num(ref['context_follow'], 4, '-')}"
                   f"{fmt_bounds(ci.get('context_follow'), 4, '-', lead=' ')}")
        out.append(f"  (the majority's shift {fmt_num(ref['majority']['context_shift'], 4, '-')}, one person's expected follow "
                   f"{fmt_num(ref['one_person']['context_follow'], 4, '-')}; the majority moves the way people's share moves: "
                   f"{fmt_num(ref['majority']['context_direction'], 4, '-')})")
        out.append(f"  annotator agreement (one annotator with another): {fmt_num(ref['annotator_agreement'], 4, '-')}")
        out.append(f"  oracle vote agreement (the majority with single votes): {fmt_num(ref['oracle_vote_agreement'], 4, '-')}")
        out.append(f"  BCE floor (mean binary entropy of h, nats): {fmt_num(ref['bce_floor'], 4, '-')}")
        out.append(f"  contested cases (0.3 <= h <= 0.7): {ref['contested_cases']}, clear: {ref['clear_cases']}")
        mk = ref.get("majority_known_accuracy")
        if mk:
            out.append(f"  expected accuracy of a judge that knows people's population majority (against the recorded "
                       f"labels; accuracy_ceiling): plug-in {fmt_num(mk['plug_in'], 4, '-')} (biased low), fitted beta-binomial prior "
                       f"{fmt_num(mk['fitted_prior'], 4, '-')}; an estimate, not a threshold")
        out.append(f"  CIs: {ref['definitions']['ci']}")
    return "\n".join(out)


def format_power(result: dict[str, Any], p1: float, p2: float, alpha: float, power: float, n: int | None) -> str:
    """The text of ``casebench human power``: the effect size, then the power ``n`` annotators
    per context reach, or the annotators per context that ``power`` needs."""
    lines = [f"p1 = {p1:g}, p2 = {p2:g}, Cohen's h = {result['effect_size_h']:.4f}, alpha = {alpha:g} (two-sided)"]
    if n is not None:
        lines.append(f"power with {n} annotators per context: {result['power']:.4f}")
    else:
        exact = "" if result["n_exact"] is None else f"exact {result['n_exact']:.2f}; "
        lines.append(f"annotators per context for power {power:g}: {result['n']} "
                     f"({exact}power reached with {result['n']}: {result['achieved_power']:.4f})")
    return "\n".join(lines)
