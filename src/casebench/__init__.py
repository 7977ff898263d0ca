"""casebench: context-aware safety evaluation of LLM judges and chatbots (CASE-Bench, ICML 2025).

The public API, re-exported here *lazily*: ``import casebench`` loads no heavy module (numpy,
scipy, torch, transformers, matplotlib, the SDKs); each name is imported from its home module the
first time it is used (PEP 562). Everything not listed here may change.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("casebench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

#: public name -> home module (relative to this package)
_EXPORTS: dict[str, str] = {
    # the data model
    "ALWAYS_UNSAFE_CATEGORIES": "data", "CI_PARAMETERS": "data", "AblationError": "data", "Case": "data",
    "Dataset": "data", "DatasetError": "data", "ablate_context": "data", "human_label_safe": "data",
    "load_dataset": "data",
    # modes, prompts, parsing
    "Mode": "modes", "MODES": "modes", "get_mode": "modes", "mode_names": "modes",
    "BUILTIN_TEMPLATES": "prompts", "Templates": "prompts", "load_templates": "prompts", "render_chat": "prompts",
    "Parsed": "parse", "parse_binary": "parse", "parse_score": "parse",
    # inputs to scoring
    "Predictions": "predictions", "load_predictions": "loader", "load_published": "published",
    "write_published": "published",
    # runs
    "RunConfig": "runs.config", "run": "runs.execute", "arun": "runs.execute", "stratified_indices": "runs.select",
    "export_run": "runs.results", "load_run": "runs.results", "Manifest": "runs.record",
    # statistics and presentation
    "ScoringOptions": "stats.options", "LABEL_SOURCES": "stats.options",
    "Score": "stats.metrics", "score_predictions": "stats.result", "score_input": "stats.result",
    "ScoredInput": "stats.result", "compare": "stats.compare",
    "analyse_ablation": "stats.ablation", "run_ablation": "runs.study", "run_placements": "runs.study", "human_stats": "stats.human",
    "human_references": "stats.context",
    "run_mutations": "runs.study", "analyse_placements": "stats.placement",
    "analyse_mutations": "stats.mutation_effects",
    "get_mutation": "mutations", "MUTATIONS": "mutations",
    "label_safe": "stats.human", "power_analysis": "stats.human", "votes_majority_safe": "stats.human",
    "write_report": "present.report",
    "corrected_refusal_rate": "stats.correction", "CorrectedFigure": "stats.correction",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module 'casebench' has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
