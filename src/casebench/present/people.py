"""People's references beside a judge's context figures, in every text format.

The figures are ``stats.context.people_references`` (one person drawn at random, and people's
majority label, over the pairs the input answered, under its label source); this module only
lays them out for the score table, CSV, Markdown, ``compare`` and ``ablate`` so that every
format carries the same references under the same names.
"""

from __future__ import annotations

from typing import Any, Mapping

from .numbers import fmt_bounds, fmt_num

#: the reference blocks and their names for people, in order
REFERENCES: tuple[tuple[str, str], ...] = (("one_person", "one person"), ("majority", "people's majority"))
#: the figures of a reference, in column order (the majority alone has a direction)
FIGURES: tuple[str, ...] = ("context_shift", "context_follow", "context_direction", "context_moved",
                            "context_concordance")
_LABEL_RULE = {"published": "published labels: the votes plus the intent as a 21st vote",
               "votes": "labels from the votes alone"}


def text_lines(people: Mapping[str, Any] | None, indent: str = "  ", digits: int = 3, mode: Any = None) -> list[str]:
    """People's references with their intervals, as a table at most 100 characters wide (``score
    --explain``; empty without pairs). ``mode``: the input's (a respond run is "the model", never
    "the judge")."""
    if not people:
        return []
    src = people.get("label_source", "published")
    who = "the model's" if getattr(mode, "reads_behaviour", False) else "the judge's"
    w = 16
    out = [f"{indent}people on the same {people['pairs']} pairs ({_LABEL_RULE.get(src, src)}):",
           f"{indent}  {'':<18}" + "".join(f"{m.replace('context_', ''):<{w}}" for m in FIGURES)]
    for ref, name in REFERENCES:
        b = people[ref]
        out.append(f"{indent}  {name:<18}" + "".join(f"{fmt_num(b[m], digits) if m in b else '':<{w}}" for m in FIGURES))
        out.append(f"{indent}  {'':<18}" + "".join(f"{fmt_bounds(b['ci'].get(m), digits) if m in b else '':<{w}}"
                                               for m in FIGURES))
    out = [line.rstrip() for line in out]
    jm = people.get("judge_minus")
    if jm:
        out.append(f"{indent}  {who} shift minus one person's {fmt_num(jm['one_person']['context_shift'], digits)}"
                   f"{fmt_bounds(jm['one_person']['ci'].get('context_shift'), digits, lead=' ')}, minus the majority's "
                   f"{fmt_num(jm['majority']['context_shift'], digits)}{fmt_bounds(jm['majority']['ci'].get('context_shift'), digits, lead=' ')}")
    out += _differ_lines(people, indent)
    return out


def _differ_lines(people: Mapping[str, Any], indent: str) -> list[str]:
    """How many pairs people label differently (the pairs ``context blind`` counts)."""
    pd = people.get("people_differ")
    if not pd:
        return []
    return [f"{indent}  people label the two contexts differently in {pd['with_intent_vote']} pairs with the intent "
            f"vote ({pd['votes_alone']} from the votes alone); blind counts the {pd['counted']}"]


def table_columns(people: Mapping[str, Any] | None) -> dict[str, Any]:
    """People's references as two columns beside an input's context figures in ``score``'s table
    (one person, people's majority; points: their intervals are under ``--explain``; the labels'
    rule in the reference line under the table), with the heading that says whose. Empty without
    pairs."""
    if not people:
        return {}
    cols: dict[str, Any] = {"headings": ["1 person", "majority"]}
    for m in FIGURES:
        cols[m] = [fmt_num(people[ref].get(m), 3) if m in people[ref] else "" for ref, _ in REFERENCES]
    cols["title"] = f"people on the same {people['pairs']} pairs ->"
    return cols


def csv_cells(people: Mapping[str, Any] | None) -> dict[str, Any]:
    """The people's columns of an input's CSV row (``people_<reference>_<figure>`` with
    ``_ci_lo``/``_ci_hi``, the judge's differences and the pair counts); None cells without pairs."""
    cells: dict[str, Any] = {"people_pairs": None, "people_label_source": None}
    for ref, _ in REFERENCES:
        for m in FIGURES:
            if ref == "one_person" and m == "context_direction":
                continue
            key = f"people_{ref}_{m}"
            cells[key] = cells[f"{key}_ci_lo"] = cells[f"{key}_ci_hi"] = None
        key = f"judge_minus_{ref}_context_shift"
        cells[key] = cells[f"{key}_ci_lo"] = cells[f"{key}_ci_hi"] = None
    cells.update({"people_differ_counted": None, "people_differ_with_intent_vote": None,
                  "people_differ_votes_alone": None})
    if not people:
        return cells
    cells["people_pairs"] = people["pairs"]
    cells["people_label_source"] = people.get("label_source")
    for ref, _ in REFERENCES:
        b = people[ref]
        for m in FIGURES:
            if m not in b:
                continue
            key = f"people_{ref}_{m}"
            lo, hi = b["ci"].get(m, (None, None))
            cells[key], cells[f"{key}_ci_lo"], cells[f"{key}_ci_hi"] = b[m], lo, hi
        jm = (people.get("judge_minus") or {}).get(ref)
        if jm:
            key = f"judge_minus_{ref}_context_shift"
            lo, hi = jm["ci"].get("context_shift", (None, None))
            cells[key], cells[f"{key}_ci_lo"], cells[f"{key}_ci_hi"] = jm["context_shift"], lo, hi
    pd = people.get("people_differ") or {}
    cells["people_differ_counted"] = pd.get("counted")
    cells["people_differ_with_intent_vote"] = pd.get("with_intent_vote")
    cells["people_differ_votes_alone"] = pd.get("votes_alone")
    return cells


#: the Markdown columns of people's references (one per reference)
MD_COLUMNS: tuple[str, ...] = ("people: one person (shift, follow, moved, concordance)",
                               "people: majority (shift, follow, moved, concordance)")


def md_cells(people: Mapping[str, Any] | None, digits: int = 3) -> list[str]:
    """The Markdown cells of ``MD_COLUMNS`` (blank without pairs)."""
    if not people:
        return ["" for _ in MD_COLUMNS]
    out = []
    for ref, _ in REFERENCES:
        b = people[ref]
        out.append(", ".join(f"{fmt_num(b.get(m), digits)}{fmt_bounds(b['ci'].get(m), digits, lead=' ')}"
                             for m in ("context_shift", "context_follow", "context_moved", "context_concordance")))
    return out


def pair_line(people: Mapping[str, Any] | None, digits: int = 4) -> str | None:
    """One line under a ``compare`` pair: people's two references on the pairs both inputs
    answered (None without pairs)."""
    if not people:
        return None
    op, mj = people["one_person"], people["majority"]
    return (f"  people on the {people['pairs']} pairs both answered: one person shift {fmt_num(op['context_shift'], digits)}"
            f"{fmt_bounds(op['ci'].get('context_shift'), digits, lead=' ')}; people's majority shift {fmt_num(mj['context_shift'], digits)}, "
            f"follow {fmt_num(mj['context_follow'], digits)}{fmt_bounds(mj['ci'].get('context_follow'), digits, lead=' ')}, direction "
            f"{fmt_num(mj.get('context_direction'), digits)}, moved {fmt_num(mj.get('context_moved'), digits)}, concordance "
            f"{fmt_num(mj.get('context_concordance'), digits)}")


def reference_line(ref: Mapping[str, Any]) -> str:
    """One line of the human references for a table footer (``stats.context.human_references``;
    the paper-compatible footer of ``score`` and ``compare``, as it always was)."""
    def f(x: Any) -> str:
        return fmt_num(x, 3, "-")

    shift = f(ref["context_shift"]) + fmt_bounds(ref.get("ci", {}).get("context_shift"), 3, "-", lead=" ")
    return (f"people ({ref['cases']} cases, {ref['context_pairs']} pairs): context shift {shift}, "
            f"follow {f(ref['context_follow'])}; one annotator agrees with another {f(ref['annotator_agreement'])}, "
            f"the majority with single votes {f(ref['oracle_vote_agreement'])} (vote-agreement ceiling); "
            f"BCE floor {f(ref['bce_floor'])}")


def people_line(ref: Mapping[str, Any]) -> str:
    """One line of people's references over the whole dataset (``human_references``) for a table
    footer: one person's shift and the majority's follow under the label source, which label
    source, the other's figures, and the agreement and BCE references."""
    def f(x: Any) -> str:
        return fmt_num(x, 3, "-")

    def ci(b: dict[str, Any], m: str) -> str:
        return fmt_bounds(b["ci"].get(m), 3, "-", lead=" ")

    src = ref.get("label_source", "published")
    other = "votes" if src == "published" else "published"
    ob = ref["by_label_source"][other]
    op, mj = ref["one_person"], ref["majority"]
    rule = {"published": "with the intent vote", "votes": "from the votes alone",
            "posterior": "from the votes alone (labels: the posterior)"}
    return (f"people ({ref['cases']} cases, {ref['context_pairs']} pairs, {rule[src]}): one person shifts by "
            f"{f(op['context_shift'])}{ci(op, 'context_shift')}, the majority label by {f(mj['context_shift'])} and "
            f"follows in {f(mj['context_follow'])}{ci(mj, 'context_follow')}; {rule[other]}: "
            f"{f(ob['one_person']['context_shift'])} and {f(ob['majority']['context_follow'])}; one annotator agrees "
            f"with another {f(ref['annotator_agreement'])}, the majority with single votes "
            f"{f(ref['oracle_vote_agreement'])} (vote-agreement ceiling); BCE floor {f(ref['bce_floor'])}")
