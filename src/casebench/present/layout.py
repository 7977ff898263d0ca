"""The pieces every table of scores shares: the width a text table keeps to, how a note wraps,
what an input is called, which metrics apply to it, and the legend of the context figures.

The score tables (``score_text``, ``score_formats``), the comparison and study texts
(``compare_text``, ``study_text``) and the report read these, so a table's layout and words are
decided once.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..naming import partial_name
from ..stats.metrics import METRIC, Score, metric_names


def row_metrics() -> tuple[str, ...]:
    """Every registered metric, in table order, read when a table is drawn (a metric registered
    after this module was imported is shown too)."""
    return tuple(METRIC)


#: the width the text tables and their notes keep to
WIDTH = 100


def wrap(text: str, indent: str = "", width: int = WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` characters (a note, never a table row)."""
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def title(s: Score) -> str:
    """What an input is called in a table: its display name (``naming.display_names``, set by the
    command that shows it beside others), else ``model [mode] without removed``."""
    name = s.name or f"{s.model} [{s.mode}]" + (f" without {','.join(s.removed)}" if s.removed else "")
    return partial_name(name, s.partial)


def shown_metrics(s: Score, names: Sequence[str] | None = None) -> list[str]:
    """The metrics of ``names`` that apply to the input (the others are not printed)."""
    applies = metric_names(s.mode)
    return [m for m in (row_metrics() if names is None else names) if m in applies and m in s.values]


def breakdown_groups(s: Score) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, group, figures) of every breakdown the score holds, in order."""
    return [(kind, name, r) for kind, rows in s.breakdowns.items() for name, r in rows.items()]


#: what each context figure measures, over which pairs, and its range: the legend under every
#: table that prints them (the names alone cannot say it; their denominators differ)
CONTEXT_LEGEND: tuple[tuple[str, str], ...] = (
    ("context_shift", "shift = mean safe- minus unsafe-intent value (-1 to 1)"),
    ("context_follow", "follow = pairs safe only in the safe context (0 to 1)"),
    ("context_moved", "moved = pairs whose values differ (0 to 1)"),
    ("context_direction", "direction = mean of +1 (people's way), -1 (against), 0 (unmoved) where people "
                          "differ (-1 to 1)"),
    ("context_concordance", "concordance = the same over moved pairs (-1 to 1)"),
    ("context_blind", "blind = pairs people label differently given one label (0 to 1)"),
)


def unvoted(text: str) -> str:
    """``text`` for a set without votes (the demo set, a new domain's): its labels are not
    people's, so what would name people names the labels."""
    return text.replace("pairs people label differently", "pairs whose two labels differ").replace(
        "people's share", "the safe rate").replace("people's", "the labels'").replace("people", "labels")


def legend(names: Sequence[str], width: int = WIDTH, voted: bool = True) -> list[str]:
    """The legend of the context figures among ``names`` (empty when none is printed);
    ``voted``: False for a set without people's votes (``unvoted``)."""
    parts = [text if voted else unvoted(text) for m, text in CONTEXT_LEGEND if m in names]
    return wrap("per query pair: " + "; ".join(parts), width=width) if parts else []


def lower_is_better_note(names: Sequence[str]) -> str:
    """``BCE and Brier: lower is better`` for the losses among ``names`` (empty if none)."""
    losses = [METRIC[m].heading for m in names if not METRIC[m].higher_is_better]
    if not losses:
        return ""
    joined = losses[0] if len(losses) == 1 else ", ".join(losses[:-1]) + " and " + losses[-1]
    return f"{joined}: lower is better"


CLUSTER_PLURAL = {"case": "cases", "query": "queries", "category": "categories"}
