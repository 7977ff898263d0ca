"""People's references beside a judge's context figures, in every text format.

The figures are ``stats.context.people_references`` (one person drawn at random, and people's
majority label, over the pairs the input answered, under its label source); this module only
lays them out for the score table, CSV, Markdown, ``compare`` and ``ablate`` so that every
format carries the same references under the same names.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

#: the reference blocks and their names for people, in order
REFERENCES: tuple[tuple[str, str], ...] = (("one_person", "one person"), ("majority", "people's majority"))
#: the figures of a reference, in column order (the majority alone has a direction)
FIGURES: tuple[str, ...] = ("context_shift", "context_follow", "context_direction", "context_moved",
                            "context_concordance")
_LABEL_RULE = {"published": "published labels: the votes plus the intent as a 21st vote",
               "votes": "labels from the votes alone"}


def _num(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _ci(ci: Any, digits: int = 4) -> str:
    return f" [{_num(ci[0], digits)}, {_num(ci[1], digits)}]" if ci else ""


def text_lines(people: Mapping[str, Any] | None, indent: str = "  ", digits: int = 4) -> list[str]:
    """The lines under an input's figures in ``casebench score``'s table (empty without pairs)."""
    if not people:
        return []
    src = people.get("label_source", "published")
    out = [f"{indent}people on the same {people['pairs']} pairs ({_LABEL_RULE.get(src, src)}):"]
    for ref, name in REFERENCES:
        b = people[ref]
        figs = [f"{m.replace('context_', '')} {_num(b[m], digits)}{_ci(b['ci'].get(m), digits)}"
                for m in FIGURES if m in b]
        out.append(f"{indent}  {name:<18} " + "   ".join(figs))
    jm = people.get("judge_minus")
    if jm:
        out.append(f"{indent}  judge's shift − one person's {_num(jm['one_person']['context_shift'], digits)}"
                   f"{_ci(jm['one_person']['ci'].get('context_shift'), digits)}, − the majority's "
                   f"{_num(jm['majority']['context_shift'], digits)}{_ci(jm['majority']['ci'].get('context_shift'), digits)}")
    pd = people.get("people_differ")
    if pd:
        out.append(f"{indent}  people label the two contexts differently in {pd['with_intent_vote']} pairs with the "
                   f"intent vote, {pd['votes_alone']} from the votes alone ({pd['intent_tie_break']} only by its "
                   f"tie-break); context blind counts the {pd['counted']}")
    return out


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
        out.append(", ".join(f"{_num(b.get(m), digits)}{_ci(b['ci'].get(m), digits)}"
                             for m in ("context_shift", "context_follow", "context_moved", "context_concordance")))
    return out


def pair_line(people: Mapping[str, Any] | None, digits: int = 4) -> str | None:
    """One line under a ``compare`` pair: people's two references on the pairs both inputs
    answered (None without pairs)."""
    if not people:
        return None
    op, mj = people["one_person"], people["majority"]
    return (f"  people on the {people['pairs']} pairs both answered: one person shift {_num(op['context_shift'], digits)}"
            f"{_ci(op['ci'].get('context_shift'), digits)}; people's majority shift {_num(mj['context_shift'], digits)}, "
            f"follow {_num(mj['context_follow'], digits)}{_ci(mj['ci'].get('context_follow'), digits)}, direction "
            f"{_num(mj.get('context_direction'), digits)}, moved {_num(mj.get('context_moved'), digits)}, concordance "
            f"{_num(mj.get('context_concordance'), digits)}")
