"""casebench: context-aware safety evaluation of LLM judges (CASE-Bench, ICML 2025).

The public API, re-exported here; everything else may change. Heavy parts (torch, matplotlib)
are imported only by the functions that need them.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("casebench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from .data import (  # noqa: E402
    ALWAYS_UNSAFE_CATEGORIES, CI_PARAMETERS, AblationError, Case, Dataset, DatasetError, ablate_context,
    human_label_safe, load_dataset,
)
from .stats.human import human_stats, label_safe, power_analysis, votes_majority_safe  # noqa: E402
from .stats.metrics import Score, score_predictions  # noqa: E402
from .parse import Parsed, parse_binary, parse_score  # noqa: E402
from .predictions import Predictions, load_predictions  # noqa: E402
from .prompts import BUILTIN_TEMPLATES, Templates, load_templates, render_prompt  # noqa: E402
from .published import load_published, write_published  # noqa: E402
from .run.execute import RunConfig, run, stratified_indices  # noqa: E402
from .run.rundir import export_run, load_run  # noqa: E402
from .stats.compare import compare  # noqa: E402
from .stats.ablation import analyse_ablation, run_ablation  # noqa: E402
from .present.report import write_report  # noqa: E402

__all__ = [
    "__version__", "ALWAYS_UNSAFE_CATEGORIES", "CI_PARAMETERS", "AblationError", "Case", "Dataset", "DatasetError",
    "ablate_context", "human_label_safe", "load_dataset", "human_stats", "label_safe", "power_analysis",
    "votes_majority_safe", "Score", "score_predictions", "Parsed", "parse_binary", "parse_score", "Predictions",
    "load_predictions", "BUILTIN_TEMPLATES", "Templates", "load_templates", "render_prompt", "load_published",
    "write_published", "RunConfig", "run", "stratified_indices", "export_run", "load_run", "compare",
    "analyse_ablation", "run_ablation", "write_report",
]
