"""The report's HTML primitives: the page's style, escaping, embedded PNG figures and data-URI
downloads (``present.report`` assembles the page; the sections are in ``report_scores`` and
``report_studies``; the figures' digits are ``numbers.report_num``, ``report_metric``,
``report_p``). No script, no network: every figure is an embedded PNG and every download a data URI."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from .report_figures import Png, png_img

CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 15px;
       line-height: 1.45; color: #1d1d1f; background: #fff; margin: 0; }
main { max-width: 1280px; margin: 0 auto; padding: 24px 32px 64px; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 40px 0 8px; padding-top: 12px; border-top: 2px solid #e5e5e5; }
h3 { font-size: 17px; margin: 24px 0 6px; }
p.lead { color: #444; margin-top: 0; }
.meta { color: #555; font-size: 13px; }
.note { color: #555; font-size: 13.5px; max-width: 960px; }
nav ol { columns: 2; font-size: 14px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 13.5px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 9px; text-align: right; vertical-align: top; }
th { background: #f5f5f7; font-weight: 600; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
td .ci { display: block; color: #666; font-size: 11.5px; white-space: nowrap; }
tr.best td { background: #f1faf5; }
span.src { display: block; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11px;
           color: #666; overflow-wrap: anywhere; font-weight: normal; }
td.name { min-width: 150px; max-width: 260px; }
#leaderboard th, #leaderboard td, table.leaderboard th, table.leaderboard td { padding: 5px 6px; }
#leaderboard td.name, table.leaderboard td.name { min-width: 130px; max-width: 210px; }
#leaderboard td .ci, table.leaderboard td .ci { font-size: 11px; }
table.pairwise td { white-space: nowrap; }
table.pairwise td.l { white-space: normal; min-width: 120px; max-width: 220px; overflow-wrap: anywhere; }
table.pairwise .ci { white-space: normal; }
.sig { color: #b00020; font-weight: 600; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; max-width: 960px; }
.downloads a { margin-right: 14px; font-size: 13.5px; }
.wide { overflow-x: auto; }
.kv td { text-align: left; }
.warn { color: #8a3b00; }
table.matrix { font-size: 11px; }
table.matrix th, table.matrix td { padding: 1px 2px; min-width: 14px; text-align: center; border: 1px solid #eee; }
table.matrix th.name { text-align: left; min-width: 200px; max-width: 290px; white-space: normal; overflow-wrap: anywhere; font-weight: normal; }
table.matrix td.better, .better-key { background: #d8f0e0; color: #0a6b2f; }
table.matrix td.worse, .worse-key { background: #f8dcd6; color: #a3260f; }
table.matrix td.self { background: #f5f5f7; color: #aaa; }
tr.reference td { background: #f7f7f7; font-style: italic; }
p.reference { font-size: 14px; }
ul.blind { font-size: 13.5px; max-width: 1000px; }
ul.verdicts { font-size: 13.5px; columns: 1; margin: 4px 0 12px; padding-left: 20px; }
details { margin: 6px 0 14px; max-width: 960px; }
details > summary { color: #555; font-size: 13.5px; cursor: pointer; }
details[open] > summary { margin-bottom: 4px; }
table.behaviour td.name { min-width: 150px; max-width: 300px; }
"""




def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _lv(options: Any) -> str:
    """The confidence level as the report's words say it (``95%``), from the options."""
    return f"{getattr(options, 'level', 0.95):.0%}"


def _img(png: Png, alt: str) -> str:
    """The figure as an ``<img>`` of its intended width (a figure still to be drawn: its
    placeholder, ``report_figures``)."""
    if not isinstance(png, bytes):
        return png.placeholder(alt)
    return png_img(png, alt)


def _figure(png: Png, alt: str, caption: str) -> str:
    return f"<figure>{_img(png, alt)}<figcaption>{caption}</figcaption></figure>"


def _download(text: str, filename: str, mime: str, label: str) -> str:
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f'<a download="{_e(filename)}" href="data:{mime};charset=utf-8;base64,{data}">{_e(label)}</a>'


def _short_source(source: str) -> str:
    """The last two path components (``safety_gpt-4o/output_score.json``); the full path is in
    the cell's title."""
    parts = Path(source).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else source



def _details(summary: str, body: str, cls: str = "method") -> str:
    """``body`` folded away beneath the figures it explains, opened by ``summary`` (no script:
    the browser's own ``<details>``)."""
    if not body:
        return ""
    return f'<details class="{cls}"><summary>{_e(summary)}</summary>{body}</details>'
