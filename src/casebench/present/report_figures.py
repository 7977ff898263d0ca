"""The report's figures, drawn beside the rest of its work and placed in the page at the end.

Why: drawing (``plots``: matplotlib, then a PNG) is about half of a large report's CPU time and
needs nothing but its plain arguments, so where a second CPU is free (``offload``) a helper
process draws while the main process computes and writes the other sections, and the main
process draws from the other end of the list once it has nothing else to do. A section asks
``ReportContext.figures.draw(plot, *args)``: with a helper it gets a ``Pending`` figure that
``_img`` writes as a placeholder, and ``Figures.place`` puts each figure's ``<img>`` in its
placeholder's place when all are drawn; without one the figure is drawn at once, as before.
Either way the same functions draw the same figures from the same arguments: the page is the
same bytes.
"""

from __future__ import annotations

import base64
import html
import re
import secrets
from dataclasses import dataclass
from typing import Any, Callable

from ..offload import Offload


@dataclass(frozen=True)
class Pending:
    """A figure handed to the helper: its call's number in ``figures``."""

    figures: "Figures"
    k: int

    def placeholder(self, alt: str) -> str:
        """What the page holds where this figure goes, until ``Figures.place``."""
        return self.figures._placeholder(self.k, alt)


#: a figure as a section hands it to ``_img``: drawn (PNG bytes) or drawn later
Png = bytes | Pending


class Figures:
    """Where the report's figures are drawn: here at once (``off`` None, or without a helper),
    or beside the rest of the work (see the module docstring)."""

    def __init__(self, off: Offload | None = None) -> None:
        self._off = off if off is not None and off.helper else None
        self._nonce = secrets.token_hex(8)  # placeholders no page text can hold
        self._places: list[tuple[int, str]] = []

    def draw(self, plot: Callable[..., bytes], /, *args: Any, **kwargs: Any) -> Png:
        """``plot(*args, **kwargs)``'s PNG (a ``plots`` function, plain arguments), or the
        figure to come."""
        if self._off is None:
            return plot(*args, **kwargs)
        return Pending(self, self._off.submit(plot, *args, **kwargs))

    def _placeholder(self, k: int, alt: str) -> str:
        self._places.append((k, alt))
        return f"\x00figure {self._nonce} {len(self._places) - 1}\x00"

    def place(self, page: str) -> str:
        """``page`` with every placeholder replaced by its figure's ``<img>`` (drawn by then)."""
        if self._off is None or not self._places:
            return page
        self._off.run_all()
        imgs = [png_img(self._off.result(k), alt) for k, alt in self._places]
        return re.sub(f"\x00figure {self._nonce} (\\d+)\x00", lambda m: imgs[int(m.group(1))], page)


def png_img(png: bytes, alt: str) -> str:
    """A drawn figure as an ``<img>`` of its intended width (the one home of that tag: the page's
    ``report_html._img`` and ``Figures.place`` both write it)."""
    from .plots import display_width

    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" width="{display_width(png)}" alt="{html.escape(str(alt), quote=True)}">'
