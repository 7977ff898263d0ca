"""The report's figures, as PNG bytes (matplotlib, imported only here and only when drawing).

Every function takes plain arrays and returns PNG bytes, so the report embeds them as data URIs
and the figures can be tested and reused without a display. Figures are drawn on a bare
``Figure`` with the Agg canvas: no pyplot state, no GUI backend, safe in threads and tests.
Sizes are chosen for reading at 100 % zoom: text is at least 9 pt at 100 px per inch, and the
figures with one row per category grow with the number of categories.
"""

from __future__ import annotations

import io
import math
from typing import Any, Sequence

import numpy as np

#: render resolution (the HTML shows figures at DISPLAY_DPI, so they stay sharp on dense screens)
DPI = 150
DISPLAY_DPI = 100
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")
SAFE_COLOR, UNSAFE_COLOR = "#2a9d8f", "#e76f51"
#: a heat map with more columns than this shows colours only (the numbers go in a CSV)
HEATMAP_MAX_NUMBERED = 12
#: the widest figure, in inches: at DISPLAY_DPI it fits the report's column without shrinking
MAX_WIDTH = 12.0
#: the longest input name a heatmap column shows whole (longer ones lose their middle)
HEATMAP_NAME_MAX = 60


def load_matplotlib() -> None:
    """Import what drawing needs (matplotlib's figure and Agg canvas, Pillow): done once before
    the report forks its helper process (``offload``), so both processes draw with it loaded."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    from PIL import Image  # noqa: F401


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.set_layout_engine("constrained")
    return fig


def to_png(fig: Any) -> bytes:
    """Render a figure to PNG bytes (Agg canvas; no pyplot, no display).

    The PNG holds a 256-colour palette (Pillow's fast octree quantiser): a chart has few colours
    besides the anti-aliased edges, so it looks the same at a third of the bytes of a true-colour
    PNG, and encodes faster (a report over 43 inputs stays under 2 MB)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    width, height = canvas.get_width_height(physical=True)
    rgba = canvas.buffer_rgba()  # type: ignore[no-untyped-call]
    rgb = Image.frombuffer("RGBA", (width, height), rgba, "raw", "RGBA", 0, 1).convert("RGB")
    buf = io.BytesIO()
    rgb.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(buf, format="PNG")
    return buf.getvalue()


def display_width(png: bytes) -> int:
    """The width, in CSS pixels, at which a figure from this module reads at its intended size."""
    import struct

    width = struct.unpack(">I", png[16:20])[0]  # the IHDR chunk of a PNG
    return int(round(width * DISPLAY_DPI / DPI))


def _wrap(label: str, width: int = 34) -> str:
    """Wrap at spaces only (a CI parameter name such as transmission_principle stays whole)."""
    import textwrap

    return "\n".join(textwrap.wrap(label, width, break_long_words=False, break_on_hyphens=False)) or label


def _r_caption(r: float | None, undefined: str) -> str:
    """A scatter panel's second title line: its correlation, or why there is none."""
    return f"r = {r:.3f}" if r is not None and np.isfinite(r) else undefined


def _frame(ax: Any, name: str, sub: str, xlim: tuple[float, float], ylim: tuple[float, float], xlabel: str,
           ylabel: str) -> None:
    """Title, limits, axis labels and tick size of one scatter panel (the small multiples share them)."""
    ax.set_title(f"{_wrap(name, 40)}\n{sub}", fontsize=10)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.tick_params(labelsize=9)


def _outer_labels(axes: np.ndarray, k: int, ncols: int) -> None:
    """Small multiples on one scale (shared axes): tick labels and axis labels only on the left
    column and under the lowest panel of each column; the panels after the ``k`` drawn hidden.
    Each panel repeating them drew (and laid out) about twice the text for nothing read."""
    for i, ax in enumerate(axes):
        if i >= k:
            ax.set_visible(False)
            continue
        if i + ncols < k:  # a drawn panel below shows the x scale
            ax.tick_params(labelbottom=False)
            ax.set_xlabel("")
        if i % ncols:
            ax.tick_params(labelleft=False)
            ax.set_ylabel("")


def _err(values: np.ndarray, cis: np.ndarray) -> np.ndarray:
    """Asymmetric error bars (2, n) from CIs (n, 2); NaN CIs draw no bar."""
    lo = np.where(np.isnan(cis[:, 0]), values, cis[:, 0])
    hi = np.where(np.isnan(cis[:, 1]), values, cis[:, 1])
    return np.vstack([np.clip(values - lo, 0, None), np.clip(hi - values, 0, None)])


def refusal_bars(names: Sequence[str], safe: Sequence[float], safe_ci: Sequence[Sequence[float]],
                 unsafe: Sequence[float], unsafe_ci: Sequence[Sequence[float]],
                 verbs: tuple[str, str] = ("judged safe", "judged unsafe")) -> bytes:
    """Safe recall (1 - over-refusal) and unsafe recall (1 - under-refusal) per input, side by
    side, with their CIs: a judge that is accurate by refusing everything shows here. ``verbs``:
    what the inputs did with a case, as the panel titles say it (judges: "judged safe" / "judged
    unsafe"; respond runs: "answered" / "refused")."""
    n = len(names)
    fig = _figure(10, 1.2 + 0.55 * n)
    axes = fig.subplots(1, 2, sharey=True)
    y = np.arange(n)
    for ax, vals, cis, color, title in (
        (axes[0], safe, safe_ci, SAFE_COLOR, f"Safe recall: safe cases {verbs[0]}\n(low = over-refusal)"),
        (axes[1], unsafe, unsafe_ci, UNSAFE_COLOR, f"Unsafe recall: unsafe cases {verbs[1]}\n(low = under-refusal)"),
    ):
        v = np.asarray(vals, dtype=float)
        c = np.asarray(cis, dtype=float).reshape(n, 2)
        ax.barh(y, v, color=color, alpha=0.85, xerr=_err(v, c), capsize=3, error_kw={"elinewidth": 1})
        for yi, vi, hi in zip(y, v, c[:, 1]):
            if np.isfinite(vi):
                right = hi if np.isfinite(hi) else vi
                ax.text(right + 0.015, yi, f"{vi:.3f}", va="center", ha="left", fontsize=9)
        ax.set_xlim(0, 1.15)
        ax.set_title(title, fontsize=11)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=10)
    axes[0].set_yticks(y, [_wrap(s, 40) for s in names])
    axes[0].invert_yaxis()
    return to_png(fig)


def category_heatmap(categories: Sequence[str], names: Sequence[str], matrix: np.ndarray,
                     counts: Sequence[int] | None = None) -> bytes:
    """Accuracy per category (rows) and input (columns), with the value in each cell (up to
    ``HEATMAP_MAX_NUMBERED`` columns; colours only beyond); ``counts`` (cases scored per input) go
    under the input names.

    45 long category names need height: 0.3 in per row keeps 9 pt labels apart, with the input
    names' own room on top. Empty cells
    (an input without cases of that category) are grey and marked with a dash.
    """
    from matplotlib import colormaps

    m = np.asarray(matrix, dtype=float)
    rows, cols = m.shape
    rotate = cols > 4 or any(len(s) > 22 for s in names)
    slanted = rotate and cols <= HEATMAP_MAX_NUMBERED
    # room for the labels, about 0.075 in a character at 9 pt: the input names above the columns
    # take height of their own (upright, or slanted at 40 degrees: sin 0.64), and slanted ones run
    # right of the last column (cos 0.77); the categories take width on the left. Without it a few
    # categories under long names left the cells no height (or width) at all. A name too long for
    # the widest figure is cut in its middle (the CSV download has it whole).
    names = [s if len(s) <= HEATMAP_NAME_MAX else s[:HEATMAP_NAME_MAX // 2 - 1] + "…" + s[-(HEATMAP_NAME_MAX // 2):]
             for s in names]
    longest = max((len(s) for s in names), default=0) + (10 if counts is not None and slanted else 0)
    names_h = 0.075 * longest * (0.65 if slanted else 1.0) if rotate else 0.5
    cats_w = 0.07 * max((len(c) for c in categories), default=0)
    need_w = cats_w + 0.6 * cols + (0.058 * longest if slanted else 0.0) + 1.2
    fig = _figure(min(MAX_WIDTH, max(6.5, 3.8 + 1.2 * cols, need_w)), 0.3 * rows + max(1.8, 0.9 + names_h))
    ax = fig.add_subplot()
    cmap = colormaps["RdYlGn"].with_extremes(bad="#dddddd")
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(rows if cols <= HEATMAP_MAX_NUMBERED else 0):  # many inputs: colours only
        for j in range(cols):
            v = m[i, j]
            ax.text(j, i, "–" if not np.isfinite(v) else f"{100 * v:.0f}", ha="center", va="center",
                    fontsize=8.5, color="black")
    ax.set_yticks(np.arange(rows), categories, fontsize=9)
    if rotate and cols > HEATMAP_MAX_NUMBERED:
        # many inputs: one vertical line each (a column is narrower than a slanted label is tall,
        # so slanted labels overlapped into a block); the count goes into the CSV download
        size = 8 if cols <= 30 else 7.5
        ax.set_xticks(np.arange(cols), list(names), fontsize=size, rotation=90, ha="center", va="bottom")
    elif rotate:  # a few long names: one slanted line each, read from the bottom left up
        labels = [s + (f"  (n = {c})" if counts is not None else "") for s, c in zip(names, counts or names)]
        ax.set_xticks(np.arange(cols), labels, fontsize=9, rotation=40, ha="left", rotation_mode="anchor")
    else:
        labels = [_wrap(s, 11) for s in names]
        if counts is not None:
            labels = [f"{lab}\nn = {c}" for lab, c in zip(labels, counts)]
        ax.set_xticks(np.arange(cols), labels, fontsize=9)
    ax.xaxis.tick_top()
    cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, shrink=0.5)
    cb.set_label("accuracy", fontsize=10)
    return to_png(fig)


def _panel_grid(k: int, bottom: float) -> tuple[Any, Any, int]:
    """Small multiples: ``k`` panels, at most three a row, on shared axes (the outer panels carry
    the labels, ``_outer_labels``), the figure sized by how many rows; ``bottom``: the height
    (inches) kept below the panels for a legend. Returns the figure, the panels in reading order
    and how many a row."""
    ncols = min(3, max(1, k))
    nrows = math.ceil(k / ncols)
    fig = _figure(min(MAX_WIDTH, 3.6 * ncols + 0.4), 3.4 * nrows + bottom)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)).ravel()
    return fig, axes, ncols


def p_vs_human(panels: Sequence[dict[str, Any]]) -> bytes:
    """P(safe) against the human safe_rate, one panel per input.

    ``panels``: dicts with ``name``, ``g`` (human safe_rate), ``p`` (P(safe)), ``binary`` (bool)
    and ``r`` (Pearson r or None). Binary verdicts (0/1) are jittered so their mass shows.
    """
    k = len(panels)
    fig, axes, ncols = _panel_grid(k, 0.6)
    rng = np.random.default_rng(0)
    for i, (ax, panel) in enumerate(zip(axes, panels)):
        g = np.asarray(panel["g"], dtype=float)
        p = np.asarray(panel["p"], dtype=float)
        if panel.get("binary"):
            p = p + rng.uniform(-0.04, 0.04, len(p))
        gj = g + rng.uniform(-0.008, 0.008, len(g))
        safe = g > 0.5
        ax.scatter(gj[safe], p[safe], s=7, alpha=0.45, color=SAFE_COLOR, label="human: safe", linewidths=0)
        ax.scatter(gj[~safe], p[~safe], s=7, alpha=0.45, color=UNSAFE_COLOR, label="human: unsafe", linewidths=0)
        ax.plot([0, 1], [0, 1], color="#555555", lw=0.8, ls="--")
        ax.axvline(0.5, color="#999999", lw=0.6)
        ax.axhline(0.5, color="#999999", lw=0.6)
        if panel.get("binary"):
            sub = "binary verdicts (jittered)"
        else:
            sub = _r_caption(panel.get("r"), "r undefined")
        _frame(ax, panel["name"], sub, (-0.03, 1.03), (-0.08, 1.08), "human safe_rate", "P(safe)")
    _outer_labels(axes, k, ncols)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=9, markerscale=2.5)
    return to_png(fig)


def reliability(curves: Sequence[dict[str, Any]]) -> bytes:
    """Reliability diagram: mean P(safe) per bin against the mean human safe_rate of the bin.

    ``curves``: dicts with ``name``, ``p_mean``, ``g_mean``, ``count`` (per non-empty bin) and
    ``ece``. A calibrated judge lies on the diagonal; marker area follows the bin's share.
    """
    fig = _figure(9.5, 5.2 + 0.22 * math.ceil((len(curves) + 1) / 2))
    ax, hist = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    ax.plot([0, 1], [0, 1], color="#555555", lw=0.8, ls="--", label="calibrated")
    for i, c in enumerate(curves):
        color = COLORS[i % len(COLORS)]
        cnt = np.asarray(c["count"], dtype=float)
        share = cnt / max(cnt.sum(), 1)
        ece = c.get("ece")
        label = c["name"] + (f"  (ECE {ece:.3f})" if ece is not None and np.isfinite(ece) else "")
        ax.plot(c["p_mean"], c["g_mean"], color=color, lw=1.4, label=_wrap(label, 44))
        ax.scatter(c["p_mean"], c["g_mean"], s=20 + 400 * share, color=color, alpha=0.6, linewidths=0)
        hist.plot(c["centres"], share, color=color, lw=1.4, marker="o", ms=3)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("mean P(safe) in bin", fontsize=10)
    ax.set_ylabel("mean human safe_rate in bin", fontsize=10)
    ax.set_title("Reliability (10 equal-width bins)", fontsize=11)
    # below both panels, never over the curves (inside, it covered the upper-left bins)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8.5)
    ax.grid(alpha=0.3)
    hist.set_xlim(0, 1)
    hist.set_xlabel("P(safe) bin", fontsize=10)
    hist.set_ylabel("share of cases", fontsize=10)
    hist.set_title("Where the predictions fall", fontsize=11)
    hist.grid(alpha=0.3)
    for a in (ax, hist):
        a.tick_params(labelsize=9)
    return to_png(fig)


def ablation_chart(conditions: Sequence[str], metrics: Sequence[str], diffs: np.ndarray, cis: np.ndarray,
                   title: str, higher_is_better: Sequence[bool]) -> bytes:
    """Paired differences from the full context (condition - full) with CIs, one panel per
    metric, one bar per condition; the zero line is "no effect". Green bars are better than the
    full context, orange ones worse; ``higher_is_better`` (per metric, from the metric table
    ``stats.metrics.METRICS``) says which way is better (for a loss such as BCE, down)."""
    from matplotlib.ticker import MaxNLocator

    d = np.asarray(diffs, dtype=float)  # (conditions, metrics)
    c = np.asarray(cis, dtype=float)  # (conditions, metrics, 2)
    n, k = d.shape
    fig = _figure(min(MAX_WIDTH, 2.6 + 2.4 * k), 1.4 + 0.45 * n)
    axes = np.atleast_1d(fig.subplots(1, k, sharey=True, squeeze=False)).ravel()
    y = np.arange(n)
    for j, ax in enumerate(axes):
        v = d[:, j]
        flip = not higher_is_better[j]
        colors = [SAFE_COLOR if (x < 0 if flip else x > 0) else UNSAFE_COLOR if x != 0 else "#999999"
                  for x in np.nan_to_num(v)]
        ax.barh(y, np.nan_to_num(v), color=colors, alpha=0.85, xerr=_err(v, c[:, j, :]), capsize=3)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(metrics[j].replace("_", " ") + (" (lower is better)" if flip else ""), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=False))
        ax.tick_params(labelsize=9)
        ax.set_xlabel("condition - full", fontsize=9)
    axes[0].set_yticks(y, [_wrap(s, 24) for s in conditions], fontsize=9)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=11)
    return to_png(fig)


def context_effect(categories: Sequence[str], share_safe: Sequence[float | None],
                   share_unsafe: Sequence[float | None], significant: Sequence[bool]) -> bytes:
    """Per category, the share of "safe" votes in intended-safe vs intended-unsafe contexts
    (a dumbbell per category); an asterisk marks a significant difference (BH)."""
    s = np.array([np.nan if x is None else x for x in share_safe], dtype=float)
    u = np.array([np.nan if x is None else x for x in share_unsafe], dtype=float)
    n = len(categories)
    fig = _figure(9, 1.5 + 0.27 * n)
    ax = fig.add_subplot()
    y = np.arange(n)
    ax.hlines(y, np.fmin(s, u), np.fmax(s, u), color="#aaaaaa", lw=2)
    ax.scatter(s, y, color=SAFE_COLOR, s=30, label="intended-safe contexts", zorder=3)
    ax.scatter(u, y, color=UNSAFE_COLOR, s=30, label="intended-unsafe contexts", zorder=3)
    labels = [f"{c} *" if sig else c for c, sig in zip(categories, significant)]
    ax.set_yticks(y, labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of annotators voting safe", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=9, loc="lower right")
    ax.tick_params(axis="x", labelsize=9)
    return to_png(fig)


def stability_curve(k: Sequence[int], agreement: Sequence[float], exact: Sequence[float]) -> bytes:
    """How often a k-annotator majority equals the full panel's, against k."""
    fig = _figure(7, 3.8)
    ax = fig.add_subplot()
    ax.plot(k, exact, color=COLORS[0], lw=1.5, label="expected (hypergeometric)")
    ax.scatter(k, agreement, color=COLORS[1], s=22, zorder=3, label="random draws")
    for ki, a in zip(k, agreement):
        ax.annotate(f"{a:.2f}", (ki, a), textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
    ax.set_xticks(list(k))
    ax.set_ylim(min(0.5, min(agreement, default=0.5) - 0.05), 1.01)
    return _finish(fig, ax, "annotators per case (k)", "agreement with the full-panel majority", "lower right")


def shift_scatter(panels: Sequence[dict[str, Any]]) -> bytes:
    """Per input, each query pair's shift (judge) against people's shift, one panel each.

    ``panels``: dicts with ``name``, ``human`` and ``model`` (per-pair shifts) and ``r`` (their
    Pearson r or None). A judge that moves where people move lies along the dashed diagonal; dots
    on the right of the y = 0 line with y = 0 are queries it is blind on while people are not."""
    k = len(panels)
    fig, axes, ncols = _panel_grid(k, 0.4)
    rng = np.random.default_rng(0)
    for ax, panel in zip(axes, panels):
        hx = np.asarray(panel["human"], dtype=float)
        my = np.asarray(panel["model"], dtype=float)
        jit = rng.uniform(-0.02, 0.02, len(my)) if panel.get("binary") else 0.0
        ax.scatter(hx, my + jit, s=8, alpha=0.45, color=COLORS[0], linewidths=0)
        ax.plot([-1, 1], [-1, 1], color="#555555", lw=0.8, ls="--")
        ax.axhline(0, color="#999999", lw=0.6)
        ax.axvline(0, color="#999999", lw=0.6)
        sub = _r_caption(panel.get("r"), "r undefined (a constant shift)")
        _frame(ax, panel["name"], sub, (-1.05, 1.05), (-1.1, 1.1), "people's shift (per pair)", "judge's shift")
    _outer_labels(axes, k, ncols)
    return to_png(fig)


def _dots(ax: Any, y: np.ndarray, v: np.ndarray, ci: np.ndarray, hollow: Sequence[bool], **kw: Any) -> None:
    """One dot per row at ``v`` with its interval ``ci`` (n, 2), hollow where ``hollow`` (a
    published model); rows without a value are left empty. One ``errorbar`` per fill, not one
    per row: each call builds its own markers and lines, and a report draws some 90 rows."""
    finite = np.isfinite(v)
    hol = np.asarray(list(hollow), dtype=bool).reshape(len(v))
    for fill in (False, True):
        sel = finite & (hol == fill)
        if sel.any():
            ax.errorbar(v[sel], y[sel], xerr=_err(v[sel], ci[sel].reshape(-1, 2)), fmt="o", capsize=3,
                        color=COLORS[0], mfc="white" if fill else COLORS[0], ms=6, elinewidth=1, **kw)


def context_direction_dots(names: Sequence[str], direction: Sequence[float], direction_ci: Sequence[Sequence[float]],
                           follow: Sequence[float], blind: Sequence[float], majority_direction: float | None,
                           majority_follow: float | None, reference: Sequence[bool] | None = None,
                           level: float = 0.95) -> bytes:
    """Per input (in the order given: the report ranks them by direction within each mode), the
    context figure with its CI beside what people's majority label reaches (left), and how often
    the input's labels follow the context and are blind where people's differ, beside the
    majority's follow (right). Both panels mean the same in every mode. ``reference``: inputs
    drawn hollow (published models)."""
    n = len(names)
    ref = list(reference) if reference is not None else [False] * n
    fig = _figure(10, 1.4 + 0.5 * n)
    axes = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    y = np.arange(n)
    v = np.asarray(direction, dtype=float)
    c = np.asarray(direction_ci, dtype=float).reshape(n, 2)
    ax = axes[0]
    if majority_direction is not None and np.isfinite(majority_direction):
        ax.axvline(majority_direction, color="#333333", lw=1.2, ls=":",
                   label=f"people's majority label: {majority_direction:.3f}")
        ax.legend(loc="lower left", fontsize=9)
    _dots(ax, y, v, c, ref)
    for yi, vi, ci in zip(y, v, c):
        if np.isfinite(vi):
            ax.text((ci[1] if np.isfinite(ci[1]) else vi) + 0.02, yi, f"{vi:.3f}", va="center", fontsize=9)
    ax.axvline(0, color="#bbbbbb", lw=0.8)
    lo = min([0.0] + [x for x in c[:, 0] if np.isfinite(x)])
    ax.set_xlim(min(-0.05, lo - 0.05), 1.12)
    ax.set_title("Direction: pairs moved with people − against them\n(share of pairs where people's vote share "
                 f"moves; {level:.0%} CI; ranked within each mode)", fontsize=10.5)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(labelsize=9.5)
    ax2 = axes[1]
    f = np.asarray(follow, dtype=float)
    b = np.asarray(blind, dtype=float)
    h = 0.38
    ax2.barh(y - h / 2, f, h, color=SAFE_COLOR, alpha=0.85, label="follows the context")
    ax2.barh(y + h / 2, b, h, color=UNSAFE_COLOR, alpha=0.85, label="blind where people differ")
    if majority_follow is not None and np.isfinite(majority_follow):
        ax2.axvline(majority_follow, color="#333333", lw=1.2, ls=":", label=f"majority follows: {majority_follow:.3f}")
    ax2.set_xlim(0, 1)
    ax2.set_title("Share of query pairs (labels)", fontsize=10.5)
    ax2.grid(axis="x", alpha=0.3)
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=8.5, ncols=3)
    axes[0].set_yticks(y, [_wrap(s, 40) for s in names])
    axes[0].invert_yaxis()
    return to_png(fig)


def context_shift_by_mode(groups: Sequence[dict[str, Any]]) -> bytes:
    """The context shift drawn per mode, one panel each, never on one axis across modes (a
    shift is on its mode's own scale). ``groups``: dicts with ``title``, and per input ``names``,
    ``shift``, ``ci`` (n, 2), ``one_person`` and ``majority`` (people's references on that input's
    own pairs) and ``reference`` (drawn hollow)."""
    k = len(groups)
    rows = [max(1, len(g["names"])) for g in groups]
    fig = _figure(10, 0.9 * k + 0.42 * sum(rows) + 0.6)
    axes = np.atleast_1d(fig.subplots(k, 1, squeeze=False, height_ratios=[r + 1.2 for r in rows])).ravel()
    for ax, g in zip(axes, groups):
        n = len(g["names"])
        y = np.arange(n)
        v = np.asarray(g["shift"], dtype=float)
        c = np.asarray(g["ci"], dtype=float).reshape(n, 2)
        one = np.asarray(g["one_person"], dtype=float)
        maj = np.asarray(g["majority"], dtype=float)
        ax.scatter(one, y, marker="|", s=260, color="#777777", lw=2, label="one person (vote share)", zorder=3)
        ax.scatter(maj, y, marker="|", s=260, color="#111111", lw=2, label="people's majority label", zorder=3)
        _dots(ax, y, v, c, g["reference"], zorder=4)
        ax.axvline(0, color="#bbbbbb", lw=0.8)
        ax.set_xlim(-0.05, 1.05)
        ax.set_title(g["title"], fontsize=10.5, loc="left")
        ax.set_yticks(y, [_wrap(s, 40) for s in g["names"]])
        ax.set_ylim(n - 0.5, -0.5)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=9.5)
    axes[-1].set_xlabel("context shift: P(safe) in the safe context − in the unsafe one (mean over query pairs)",
                        fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=8.5, ncols=2)
    return to_png(fig)


#: the outcomes' colours, least help first (refusal, clarifying, partial, full)
OUTCOME_COLORS: tuple[str, ...] = ("#b2182b", "#f4a582", "#92c5de", "#2166ac")


def outcome_bars(rows: Sequence[str], shares: Sequence[Sequence[float]], outcome_names: Sequence[str],
                 people: Sequence[float | None]) -> bytes:
    """One stacked bar per row (a model in one context): the share of each outcome (columns of
    ``shares``, least help first, as ``outcome_names``), with people's share of safe votes on
    the same cases as a black tick (None: no votes)."""
    n = len(rows)
    fig = _figure(10, 1.4 + 0.5 * n)
    ax = fig.subplots(1, 1)
    y = np.arange(n)
    left = np.zeros(n)
    vals = np.nan_to_num(np.asarray(shares, dtype=float).reshape(n, len(outcome_names)))
    for j, (name, color) in enumerate(zip(outcome_names, OUTCOME_COLORS)):
        ax.barh(y, vals[:, j], left=left, color=color, label=name, height=0.7)
        for yi, lo, v in zip(y, left, vals[:, j]):
            if v >= 0.08:
                ax.text(lo + v / 2, yi, f"{100 * v:.0f}%", va="center", ha="center", fontsize=8)
        left += vals[:, j]
    marked = False
    for yi, p in zip(y, people):
        if p is not None and np.isfinite(p):
            ax.plot([p, p], [yi - 0.4, yi + 0.4], color="black", lw=2,
                    label=None if marked else "people: share of safe votes")
            marked = True
    ax.set_xlim(0, 1)
    ax.set_yticks(y, [_wrap(s, 40) for s in rows])
    ax.invert_yaxis()
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, fontsize=8, frameon=False)
    ax.set_xlabel("share of the answers read")
    return to_png(fig)


def first_refusal_curves(curves: Sequence[dict[str, Any]], turns: int) -> bytes:
    """Kaplan-Meier curves of the first refusal by turn (``stats.turns.FirstRefusal``: one
    per context intent, each ``{"label", "survival": [(turn, S, (low, high))]}``), as steps from
    S = 1 before turn 1, with their pointwise intervals shaded."""
    fig = _figure(7, 3.8)
    ax = fig.add_subplot()
    for i, c in enumerate(curves):
        pts = list(c["survival"])
        xs = [0] + [t for t, _, _ in pts] + [turns]
        ys = [1.0] + [s for _, s, _ in pts]
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color=COLORS[i % len(COLORS)], lw=1.6, label=c["label"])
        lo = [1.0] + [ci[0] for _, _, ci in pts]
        hi = [1.0] + [ci[1] for _, _, ci in pts]
        lo.append(lo[-1])
        hi.append(hi[-1])
        ax.fill_between(xs, np.asarray(lo, dtype=float), np.asarray(hi, dtype=float), step="post",
                        color=COLORS[i % len(COLORS)], alpha=0.15, lw=0)
    ax.set_xticks(list(range(1, turns + 1)))
    ax.set_xlim(0.5, turns + 0.2)
    ax.set_ylim(-0.02, 1.02)
    return _finish(fig, ax, "turn", "P(no refusal yet), Kaplan-Meier", "lower left")


def _finish(fig: Any, ax: Any, xlabel: str, ylabel: str, legend: str) -> bytes:
    """A line chart's axis labels, grid, legend (at ``legend``) and tick size, as PNG bytes."""
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc=legend)
    ax.tick_params(labelsize=9)
    return to_png(fig)


def to_svg(fig: Any) -> str:
    """Render a figure to an SVG document (text drawn as paths, so it needs no font when opened)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()


def refusal_plane(points: Sequence[dict[str, Any]], people: dict[str, Any] | None,
                  ceiling: dict[str, Any] | None) -> Any:
    """Over-refusal (x) against under-refusal (y), one marker per input with its two intervals,
    labelled with its place on the board; people's own position (one annotator drawn at random
    per case) and the ceiling (a judge that knew people's population majority), with the line
    of every point as accurate as the ceiling. ``points``: ``label``, ``over``, ``over_ci``,
    ``under``, ``under_ci``, ``respond`` (a chatbot: drawn as a square); returns the figure
    (``to_svg``)."""
    fig = _figure(7.0, 5.6)
    ax = fig.add_subplot(1, 1, 1)
    if ceiling and ceiling.get("over") is not None and ceiling.get("under") is not None:
        cx, cy = float(ceiling["over"]), float(ceiling["under"])
        ax.plot([cx], [cy], marker="D", color="#444", linestyle="none", label="ceiling (people's population majority)")
        ws, wu = float(ceiling.get("safe_share", 0.5)), 1.0 - float(ceiling.get("safe_share", 0.5))
        err = ws * cx + wu * cy  # the ceiling's error; points on the line are as accurate
        xs = np.linspace(0, min(1.0, err / ws) if ws else 1.0, 20)
        ax.plot(xs, (err - ws * xs) / wu if wu else xs * 0, color="#999", linestyle=":", linewidth=1,
                label="as accurate as the ceiling")
    if people and people.get("over") is not None:
        ax.errorbar([people["over"]], [people["under"]],
                    xerr=_err(np.array([people["over"]]), np.array([people.get("over_ci") or [np.nan] * 2])),
                    yerr=_err(np.array([people["under"]]), np.array([people.get("under_ci") or [np.nan] * 2])),
                    marker="*", markersize=12, color="#2a9d8f", linestyle="none", label="one person (people's votes)")
    for k, pt in enumerate(points):
        if pt.get("over") is None or pt.get("under") is None:
            continue
        color = COLORS[k % len(COLORS)]
        ax.errorbar([pt["over"]], [pt["under"]],
                    xerr=_err(np.array([pt["over"]]), np.array([pt.get("over_ci") or [np.nan] * 2])),
                    yerr=_err(np.array([pt["under"]]), np.array([pt.get("under_ci") or [np.nan] * 2])),
                    marker="s" if pt.get("respond") else "o", markersize=5, color=color, elinewidth=0.8,
                    linestyle="none", alpha=0.85)
        ax.annotate(str(pt["label"]), (pt["over"], pt["under"]), textcoords="offset points", xytext=(4, 3),
                    fontsize=8, color=color)
    # the axes reach past the farthest interval (not to 1: the inputs would crowd one corner)
    his = [0.0]
    for pt in points:
        for key in ("over_ci", "under_ci", "over", "under"):
            got = pt.get(key)
            values: list[Any] = list(got) if isinstance(got, (list, tuple)) else [got]
            his += [float(v) for v in values if v is not None and np.isfinite(v)]
    if people:
        his += [float(v) for v in (people.get("over"), people.get("under")) if v is not None]
    top = min(1.0, max(his) * 1.12 + 0.02)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("over-refusal: share of what people find safe judged unsafe / refused", fontsize=9)
    ax.set_ylabel("under-refusal: share of what people find unsafe judged safe / answered", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, color="#eee", linewidth=0.6)
    ax.legend(fontsize=8, loc="upper right", frameon=False)
    return fig
