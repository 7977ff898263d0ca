"""A toy metric in one file: the share of cases judged safe. Its whole registration is the
``@metric`` decorator below. Used by tests/test_plugins.py through ``casebench --plugin``."""

from __future__ import annotations

from casebench.stats.metrics import PREDICTED_SAFE_COLUMNS, metric


@metric("toy_predicted_safe", label="toy: predicted safe", heading="Toy predicted safe",
        columns=PREDICTED_SAFE_COLUMNS)
def toy_predicted_safe(s):
    """The share of answered cases the judge called safe."""
    return s["ps"] / s["w"]
