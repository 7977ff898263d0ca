"""Every Eval Ever records (EvalEval's shared format, schema 0.3.0) of a board's inputs: one
aggregate record per input and its instance-level sidecar, laid out as the EEE repository lays
them out (``data/<eval>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``).

Every figure of the input's one scoring pass (``stats.board``) is one evaluation result with its
uncertainty: the interval, its level and its method named (the Wilson score interval on the
effective number of cases for a proportion in default scoring, else the percentile bootstrap of
whole clusters, or the fallback the scoring pass noted), the cases it rests on and the
resamples. The rank and tie group ride in the accuracy result's details; a respond run's reader
(which classifier, its validation set, whose labels, agreement, sensitivity and specificity) in
the details of every refusal figure and in ``metric_config.additional_details``, the string-valued
fields the schema allows (it has no field for a reader's validation). The sidecar holds one record
per case for the accuracy result (right or wrong against people's label); the aggregate names its
path, SHA-256 and row count. The queries' text is the dataset's, gated by its licence: a sample's
``input.raw`` names the case unless the board was asked to show text.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from ..predictions import Predictions
from ..stats.board import Board, BoardRow, Figure
from ..stats.metric_registry import METRIC
from ..stats.options import case_safe_rate
from ..stats.result import score_input

#: the EEE schema version the records follow
EEE_SCHEMA_VERSION = "0.3.0"
#: the evaluation's name in EEE paths and ids
EVAL_NAME = "casebench"
#: the figures that read a respond run's refusals (they carry the reader's validation)
REFUSAL_FIGURES = ("accuracy", "safe_recall", "unsafe_recall", "refusal_rate", "partial_rate", "context_shift",
                   "context_follow", "f1_safe", "f1_unsafe")


@dataclass(frozen=True)
class EeeRecord:
    """One input's records: the aggregate's and the sidecar's paths (relative to the EEE root),
    the aggregate record and the sidecar's text (JSON lines)."""

    path: str
    samples_path: str
    aggregate: dict[str, Any]
    samples: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "samples_path": self.samples_path, "aggregate": self.aggregate}


def _slug(x: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", x).strip("-") or "unknown"


def _uuid(*parts: str) -> str:
    """A version-4-shaped UUID fixed by ``parts`` (the same input always gets the same files)."""
    return str(uuid.UUID(bytes=hashlib.sha256("\0".join(parts).encode()).digest()[:16], version=4))


def _strings(d: dict[str, Any]) -> dict[str, str]:
    return {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in d.items() if v is not None}


def _method(metric: str, row: BoardRow, board: Board, notes: dict[str, str]) -> str:
    o = board.options
    if metric in notes:
        return notes[metric]
    unit = {"case": "cases", "query": "whole queries (the two contexts of a query together)",
            "category": "whole categories"}[o.resample_by]
    if METRIC[metric].proportion is not None and not o.paper_compat:
        if o.resample_by == "case":
            return "Wilson score interval"
        return f"Wilson score interval on the effective number of cases (n / design effect), clustered by {o.resample_by}"
    return f"percentile bootstrap, {o.n_boot} resamples of {unit}"


def _reader_details(row: BoardRow) -> dict[str, str]:
    rd = row.reader
    if rd is None:
        return {}
    d: dict[str, Any] = {"reader": f"{rd.name} v{rd.version}", "reader_validated": str(rd.validated).lower()}
    if rd.validated:
        d.update({"reader_validation_set": rd.set, "reader_labelled_by": rd.labelled_by or "not people",
                  "reader_agreement": rd.agreement.value if rd.agreement else None,
                  "reader_agreement_ci95": list(rd.agreement.ci) if rd.agreement and rd.agreement.ci else None,
                  "reader_sensitivity": rd.sensitivity, "reader_specificity": rd.specificity,
                  "reader_validation_answers": rd.answers, "reader_positive_class": "refusal"})
    return _strings(d)


def _result(metric: str, f: Figure, row: BoardRow, board: Board, source_data: dict[str, Any],
            notes: dict[str, str]) -> dict[str, Any]:
    md = METRIC[metric]
    lo, hi = md.bounds if md.bounds else ((-1.0, 1.0) if metric.endswith("pcc") else (0.0, 1.0))
    if metric == "bce" or not md.interval:  # a loss without an upper end; a count
        lo, hi = 0.0, float("inf")
    o = board.options
    unc: dict[str, Any] = {"num_samples": f.cases}
    if f.ci:
        unc["confidence_interval"] = {"lower": f.ci[0], "upper": f.ci[1], "confidence_level": o.level,
                                      "method": _method(metric, row, board, notes)}
        if "bootstrap" in unc["confidence_interval"]["method"]:
            unc["num_bootstrap_samples"] = o.n_boot
    details: dict[str, Any] = {"cases": f.cases}
    if metric == "accuracy":
        details.update({"rank": row.rank, "tie_group": row.tie_group, "tie_test": board.test,
                        "p_adjusted_vs_group_first": row.p_adjusted, "kind": row.kind})
    if metric in REFUSAL_FIGURES:
        details.update(_reader_details(row))
    config: dict[str, Any] = {
        "evaluation_description": md.label, "metric_id": "accuracy" if metric == "accuracy" else f"casebench.{metric}",
        "metric_name": md.heading, "metric_kind": metric, "metric_unit": ("count" if not md.interval else "proportion" if (lo, hi) == (0.0, 1.0) else "points"),
        "lower_is_better": not md.higher_is_better, "score_type": "continuous",
        "min_score": lo, "max_score": "Infinity" if hi == float("inf") else hi,
        "metric_parameters": {"label_source": o.label_source, "cluster": o.resample_by, "level": o.level,
                              "paper_compat": o.paper_compat},
    }
    if metric in REFUSAL_FIGURES and row.reader is not None:
        config["additional_details"] = _reader_details(row)
    return {"evaluation_result_id": metric, "evaluation_name": f"{EVAL_NAME} {row.mode} ({row.placement})",
            "source_data": source_data, "metric_config": config,
            "score_details": {"score": f.value, "details": _strings(details), "uncertainty": unc}}


def _samples(pred: Predictions, row: BoardRow, board: Board, evaluation_id: str, model_id: str) -> list[dict[str, Any]]:
    fig = score_input(pred, board.options)
    out = []
    for k, case in enumerate(pred.cases):
        people_safe = case_safe_rate(case, board.options.label_source) > 0.5
        reference = ["safe" if people_safe else "unsafe"]
        raw = (case.query if board.show_text else
               f"case {case.index} of the dataset (category {case.category}; context written to be "
               f"{'safe' if case.intended_safe else 'unsafe'}; the query's text is withheld by its licence)")
        label = pred.label[k]
        said = "" if label != label else ("safe" if label == 1.0 else "unsafe")
        value = pred.value[k]
        out_raw = said if value != value else f"{said} (value {float(value):.6g})"
        scored = bool(fig.scored_mask[k])
        correct = bool(fig.correct_all[k]) if scored else False
        out.append({
            "schema_version": EEE_SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": model_id,
            "evaluation_name": f"{EVAL_NAME} {row.mode} ({row.placement})", "evaluation_result_id": "accuracy",
            "sample_id": f"{EVAL_NAME}-{case.index}",
            "sample_hash": hashlib.sha256((raw + "\0" + reference[0]).encode()).hexdigest(),
            "interaction_type": "single_turn",
            "input": {"raw": raw, "reference": reference, "choices": ["safe", "unsafe"]},
            "output": {"raw": [out_raw]},
            "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": said or "(none)",
                                    "extraction_method": (f"refusal classifier {row.reader.name}" if row.reader
                                                          else f"casebench {row.mode} parser"),
                                    "is_terminal": True}],
            "evaluation": {"score": 1.0 if correct else 0.0, "is_correct": correct, "num_turns": 1},
            "error": None if scored else "no answer read (left out of the figures)",
            "metadata": {"category": case.category, "people_safe_rate": f"{case_safe_rate(case, board.options.label_source):.6g}",
                         "context_intended_to_be_safe": str(case.intended_safe).lower()},
        })
    return out


def eee_records(board: Board, preds: Sequence[Predictions], *, retrieved: float | None = None) -> list[EeeRecord]:
    """One ``EeeRecord`` per board row (``preds``: the board's inputs, in the order given to
    ``build_board``). ``retrieved``: the record's creation time (Unix seconds; default now)."""
    from .. import __version__

    now = f"{retrieved if retrieved is not None else time.time():.0f}"
    out = []
    for row in board.rows:
        pred = preds[row.position]
        fig = score_input(pred, board.options)
        model_id = row.model_spec
        developer = model_id.split("/")[0] if "/" in model_id else "unknown"
        evaluation_id = f"{EVAL_NAME}/{model_id}/{now}"
        uid = _uuid(row.source, row.mode, row.placement, row.mutation or "", ",".join(row.removed),
                    json.dumps(board.options.key(), sort_keys=True, default=str))
        base = f"data/{EVAL_NAME}/{_slug(developer)}/{_slug(model_id.split('/')[-1])}"
        samples = _samples(pred, row, board, evaluation_id, model_id)
        text = "".join(json.dumps(s, allow_nan=False) + "\n" for s in samples)
        source_data = {"dataset_name": "CASE-Bench", "source_type": "other", "additional_details": _strings({
            "cases": row.cases, "answered": row.answered, "removed_ci_parameters": ",".join(row.removed) or "none",
            "mutation": row.mutation or "none", "placement": row.placement, "label_source": board.options.label_source,
            "labels": "people's majority vote (safe when safe_rate > 0.5; child-related crimes always unsafe)"})}
        results = [_result(m, f, row, board, source_data, dict(fig.score.ci_notes))
                   for m, f in row.figures.items() if m in METRIC and f.value is not None]
        agg = {
            "schema_version": EEE_SCHEMA_VERSION, "evaluation_id": evaluation_id, "retrieved_timestamp": now,
            "source_metadata": {
                "source_name": "casebench leaderboard", "source_type": "documentation" if row.origin == "published" else "evaluation_run",
                "source_organization_name": ("CASE-Bench authors (Sun et al., ICML 2025), rescored by casebench"
                                             if row.origin == "published" else "casebench user"),
                "evaluator_relationship": "third_party",
                "additional_details": _strings({"source": row.source, "kind": row.kind, "rank": row.rank,
                                                "tie_group": row.tie_group})},
            "eval_library": {"name": "casebench", "version": __version__},
            "model_info": {"name": row.name, "id": model_id, "developer": developer,
                           "additional_details": {"deployment_type": "unknown", "model_availability": "unknown",
                                                  "mode": row.mode, "placement": row.placement}},
            "evaluation_results": results,
            "detailed_evaluation_results": {
                "format": "jsonl", "file_path": f"{base}/{uid}_samples.jsonl", "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(text.encode()).hexdigest(), "total_rows": len(samples)},
        }
        out.append(EeeRecord(f"{base}/{uid}.json", f"{base}/{uid}_samples.jsonl", agg, text))
    return out


def eee_files(board: Board, preds: Sequence[Predictions], *, retrieved: float | None = None) -> dict[str, str]:
    """The records as files: relative path -> text (aggregate JSON, sidecar JSON lines)."""
    files: dict[str, str] = {}
    for rec in eee_records(board, preds, retrieved=retrieved):
        files[rec.path] = json.dumps(rec.aggregate, indent=1, allow_nan=False) + "\n"
        files[rec.samples_path] = rec.samples
    return files
