"""One loader for everything scorable: a run directory or a published output file -> Predictions.

``predictions`` depends on nothing above it; this module sits above ``runs`` and ``published``
and is what every scoring command (score, compare, ablate, report) calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .data import Dataset
    from .predictions import Predictions


def load_predictions(path: str | Path, dataset: "Dataset | None" = None) -> "Predictions":
    """Load a run directory (``runs.results.load_run``) or a published output file
    (``published.load_published``).

    ``dataset`` is needed by run directories whose manifest points at a dataset path that is not
    reachable from here.
    """
    p = Path(path)
    if p.is_dir():
        from .runs.results import load_run

        return load_run(p, dataset=dataset)
    from .published import load_published

    return load_published(p)
