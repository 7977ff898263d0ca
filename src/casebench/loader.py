"""One loader for everything scorable: a run directory, a published output file or an inspect log
of casebench's task (``inspect_log``) -> Predictions.

``predictions`` depends on nothing above it; this module sits above ``runs`` and ``published``
and is what every scoring command (score, compare, ablate, report) calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .data import Dataset
    from .modes import Mode
    from .predictions import Predictions


def load_predictions(path: str | Path, dataset: "Dataset | None" = None, mode: "str | Mode | None" = None,
                     removed: Sequence[str] | None = None) -> "Predictions":
    """Load a run directory (``runs.results.load_run``), an inspect log of casebench's task
    (``.eval`` or ``.json``, ``inspect_log.load_inspect_log``) or a published output
    file (``published.load_published``).

    ``dataset`` is needed by run directories whose manifest points at a dataset path that is not
    reachable from here. A published file is checked record for record against ``dataset`` or,
    without one, against the dataset it sits beside in the authors' layout
    (``published.reference_dataset_path``): a file of other length or order is refused.
    ``mode`` and ``removed`` (``--mode``, ``--remove``) say what a published file holds when its
    name does not (``published.load_published``); a run directory knows both (a contradicting
    ``mode`` is refused; ``removed`` applies only to inputs that do not say).
    """
    p = Path(path)
    if p.is_dir():
        from .data import DatasetError
        from .modes import get_mode
        from .runs.results import load_run

        pred = load_run(p, dataset=dataset)
        if mode is not None and get_mode(mode) != pred.mode:
            raise DatasetError(p, [(None, None, f"this run is in {pred.mode} mode, not {mode} (--mode)")])
        return pred
    from .inspect_log import is_inspect_log

    if is_inspect_log(p):
        from .data import DatasetError
        from .inspect_log import InspectLogError, load_inspect_log

        try:
            return load_inspect_log(p, dataset=dataset, mode=mode)
        except InspectLogError as e:
            raise DatasetError(p, [(None, None, str(e).removeprefix(f"{p}: ").removeprefix(f"{p}, "))]) from None
    from .published import load_published, reference_dataset_path

    reference, origin = dataset, None
    if reference is None:
        beside = reference_dataset_path(p)
        if beside is not None:
            reference = _dataset_beside(beside)
        else:
            reference, origin = _known_dataset()
    return load_published(p, mode=mode, removed=removed, reference=reference, reference_origin=origin)


def _known_dataset() -> "tuple[Dataset | None, str | None]":
    """The dataset the user's setup names when a command was given none: ``$CASEBENCH_DATA``,
    else the user cache (``casebench data fetch``), and which; (None, None) when neither. A
    published file is checked against it (a file of 899 rows is refused, naming both counts)."""
    from .sources import DATA_ENV, FetchError, resolve_dataset

    try:
        choice = resolve_dataset(None, allow_download=False, allow_demo=False)
    except FetchError:
        return None, None
    origin = f"from ${DATA_ENV}" if choice.origin == "environment" else "from the user cache"
    if not choice.path.is_file():
        from .data import DatasetError

        raise DatasetError(choice.path, [(None, None, f"no such dataset file ({origin})")])
    return _dataset_beside(choice.path), origin


def _dataset_beside(path: Path) -> "Dataset":
    """The dataset beside published files, read once per scoring session (a report reads dozens
    of files beside the same dataset); keyed by path, size and mtime so an edited file is re-read."""
    from .data import load_dataset
    from .session import memo_by_key

    st = path.stat()
    return memo_by_key("dataset", (str(path), st.st_size, st.st_mtime_ns), lambda: load_dataset(path))
