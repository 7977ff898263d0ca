"""inspect_ai logs read back: a log of casebench's task as ``Predictions``, any log as scores per sample.

This module sits beside ``loader`` (which calls it): it owns the format casebench's inspect task
(``integrations.inspect_task``) writes into a log -- a sample's metadata holds its whole case
(``case_metadata``), a score's value its reading (``reading_of``) -- so that the writer and the
reader share one definition of it.

Two readers, both through inspect's own log reader (``inspect_ai.log.read_eval_log``, so ``.eval``
and ``.json`` logs alike, whatever inspect version wrote them):

* ``load_inspect_log``: a log of ``casebench/case_bench`` -> ``Predictions``, the hand-over point
  every scoring command reads (``loader.load_predictions`` calls it), so ``score``, ``compare``,
  ``diff``, ``report`` and ``study`` read a log as they read a run directory. The cases come from
  the samples' metadata (the task writes the whole case there, ``inspect_task.case_metadata``)
  and are checked against ``dataset`` when one is given; the mode, the context placement and the
  removed CI parameters from the task's metadata in the log's header; the model from the
  header; the answers' readings from the samples' scores (one per epoch, aggregated by the
  mode as ``casebench run`` aggregates samples). A sample that errored, or whose answer could not
  be read, is a missing answer; a sample the log does not hold yet (an unfinished eval) is
  pending, as a request without a final record is in a run.
* ``load_sample_scores``: a log of *any* task -> ``SampleScores``: per scorer, one value per
  sample (inspect's own ``value_to_float``; a dict value gives one scorer per key, named
  ``scorer/key``; epochs averaged), and each sample's metadata, for the paired comparison of two
  logs (``stats.sample_compare``; the CLI hands it over).

``is_inspect_log`` says from the file alone (its extension, or a ``.json`` file's first bytes)
whether a path is an inspect log, without importing inspect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .data import Case

if TYPE_CHECKING:
    from .data import Dataset
    from .input_state import InputState
    from .modes import Mode
    from .predictions import Predictions

#: the name of casebench's task in inspect's registry, and the key of its header metadata
TASK_NAME = "casebench/case_bench"
META_KEY = "casebench"


class InspectLogError(ValueError):
    """A log that cannot be read as asked (not casebench's task, a sample without its case, ...);
    the message names the file and the sample."""


# --------------------------------------------------------------------------------------------
# The task's format: a sample's case, a score's reading


#: Metadata keys of a sample that hold its case (enough to rebuild the ``Case`` exactly).
CASE_KEYS = ("index", "query", "context", "category", "safe_rate", "votes", "intended_safe")


def case_metadata(case: Case, removed: Sequence[str]) -> dict[str, Any]:
    """A sample's metadata: the whole case (its original context), what is removed from the
    context before judging, and the human label, so that the solver, the scorer and the metric
    (which sees only metadata) all work from the same case."""
    return {
        "index": case.index,
        "query": case.query,
        "context": dict(case.context),
        "category": case.category,
        "safe_rate": case.safe_rate,
        "votes": list(case.votes),
        "intended_safe": case.intended_safe,
        "removed": list(removed),
        "human_safe": case.human_safe,
        "human_safe_rate": case.human_safe_rate,
    }


def case_from_metadata(md: Mapping[str, Any]) -> Case:
    """The case a sample was made from (``case_metadata``'s inverse)."""
    missing = [k for k in CASE_KEYS if k not in md]
    if missing:
        raise ValueError(f"sample metadata lacks {missing}: not a casebench sample")
    return Case(index=int(md["index"]), query=md["query"], context=md["context"], category=md["category"],
                safe_rate=float(md["safe_rate"]), votes=tuple(md["votes"]),
                intended_safe=bool(md["intended_safe"]))


def value_key(readings: Sequence[Any]) -> str:
    """The key of a continuous mode's value in an inspect score: ``score`` when the mode's
    readings carry a 1-10 score (the value ``Mode.aggregate`` averages), else ``p_safe`` (prob:
    P(safe); respond: 1 answered, 0 not)."""
    return "score" if any(getattr(r, "score", None) is not None for r in readings) else "p_safe"


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def reading_of(mode: Mode, value: Any) -> SimpleNamespace | None:
    """An inspect score value as the reading ``Mode.aggregate`` takes (``label``, ``score``,
    ``p_safe``), or None when the value holds none of the mode's."""
    if not isinstance(value, Mapping):
        return None
    score, p_safe = _number(value.get("score")), _number(value.get("p_safe"))
    safe = _number(value.get("safe"))
    if mode.continuous:
        if score is None and p_safe is None:
            return None
        raw = score if score is not None else p_safe
        label = "safe" if mode.labels([raw])[0] == 1.0 else "unsafe"
    else:
        if safe is None:
            return None
        label = "safe" if safe > 0.5 else "unsafe"
    return SimpleNamespace(label=label, score=score, p_safe=p_safe)


# --------------------------------------------------------------------------------------------
# Reading logs


def is_inspect_log(path: str | Path) -> bool:
    """True for a file inspect wrote: ``.eval`` (a zip archive), or ``.json`` whose top-level
    object opens with inspect's log fields (a published ``exp/`` file is a list)."""
    p = Path(path)
    if not p.is_file():
        return False
    if p.suffix == ".eval":
        return True
    if p.suffix != ".json":
        return False
    with p.open("rb") as f:
        head = f.read(2048).decode("utf-8", "replace").lstrip()
    return head.startswith("{") and '"version"' in head and ('"eval"' in head or '"status"' in head)


def _read(path: str | Path, header_only: bool = False) -> Any:
    from .extras import MissingExtra

    try:
        from inspect_ai.log import read_eval_log
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "inspect_ai":
            raise
        raise MissingExtra("inspect_ai", "inspect", what="reading inspect logs") from None
    try:
        if header_only:
            return read_eval_log(str(path), header_only=True)
        return read_eval_log(str(path), exclude_fields={"events", "store", "attachments"})
    except Exception as e:  # inspect raises its own and pydantic's errors for a damaged file
        raise InspectLogError(f"{path}: not a readable inspect log ({type(e).__name__}: {e})") from None


def casebench_header(path: str | Path) -> Mapping[str, Any] | None:
    """The casebench task's metadata in a log's header (mode, placement, removed parameters,
    dataset, classifier), or None when the log is of another task."""
    log = _read(path, header_only=True)
    meta = (log.eval.metadata or {}).get(META_KEY)
    return meta if isinstance(meta, Mapping) and meta.get("mode") else None


def _samples_expected(log: Any) -> int:
    ids = log.eval.dataset.sample_ids
    n = len(ids) if ids is not None else int(log.eval.dataset.samples or 0)
    if log.eval.config.limit is not None and isinstance(log.eval.config.limit, int):
        n = min(n, int(log.eval.config.limit))
    epochs = int(log.eval.config.epochs or 1)
    return n * epochs


def _verdict_score(sample: Any, mode_name: str) -> Any:
    """The score casebench's scorer gave a sample (the one whose metadata names the mode; else
    the one scorer), or None."""
    scores = sample.scores or {}
    for s in scores.values():
        if isinstance(s.metadata, Mapping) and s.metadata.get("mode") == mode_name:
            return s
    return next(iter(scores.values())) if len(scores) == 1 else None


def load_inspect_log(path: str | Path, dataset: "Dataset | None" = None, mode: "str | Mode | None" = None) -> "Predictions":
    """Per-case predictions of a log of ``casebench/case_bench`` (see the module docstring).
    ``mode`` (``--mode``): refused when it contradicts the log's. Raises ``InspectLogError``
    for a log of another task or a sample whose case is not ``dataset``'s."""
    from .classify.validation import reader_as_read
    from .modes import get_mode
    from .predictions import Predictions
    from .runs.results import model_short_name
    
    p = Path(path)
    log = _read(p)
    cb = (log.eval.metadata or {}).get(META_KEY)
    if not isinstance(cb, Mapping) or not cb.get("mode"):
        raise InspectLogError(
            f"{p}: a log of inspect task {log.eval.task!r}, not of {TASK_NAME}: score, report and study read "
            "casebench's task; `casebench compare` and `casebench diff` compare two logs of any task per scorer")
    m = get_mode(str(cb["mode"]))
    if mode is not None and get_mode(mode).name != m.name:
        raise InspectLogError(f"{p}: this log is in {m.name} mode, not {mode} (--mode)")
    cases: dict[int, Any] = {}
    readings: dict[int, list[Any]] = {}
    behaviours: dict[int, list[str | None]] = {}
    outcomes_of: dict[int, list[str | None]] = {}  # how each answer landed (classify.outcome), as a run records
    masses: dict[int, list[float]] = {}
    #: a reveal log: per case, the first epoch's reading at every turn and what each turn held
    by_turn: dict[int, tuple[tuple[str | None, ...], tuple[str, ...]]] = {}
    present = 0
    errored: set[int] = set()
    for s in log.samples or []:
        present += 1
        where = f"{p}, sample {s.id!r} (epoch {s.epoch})"
        try:
            case = case_from_metadata(s.metadata or {})
        except (ValueError, TypeError, KeyError) as e:
            raise InspectLogError(f"{where}: {e}") from None
        if str(case.index) != str(s.id):
            raise InspectLogError(f"{where}: the sample's id is not its case's index ({case.index})")
        if dataset is not None:
            if not 0 <= case.index < len(dataset) or dataset[case.index] != case:
                raise InspectLogError(f"{where}: case {case.index} is not the case of that index in {dataset.path} "
                                      "(the log was made on another dataset)")
            case = dataset[case.index]
        if cases.setdefault(case.index, case) != case:
            raise InspectLogError(f"{where}: another case than the sample's other epochs")
        readings.setdefault(case.index, [])
        behaviours.setdefault(case.index, [])
        if s.error:
            errored.add(case.index)
        score = None if s.error else _verdict_score(s, m.name)
        value = None if score is None else score.value
        reading = reading_of(m, value)
        if reading is not None:
            readings[case.index].append(reading)
        md = score.metadata if score is not None and isinstance(score.metadata, Mapping) else {}
        if m.reads_behaviour and md.get("behaviour") is not None:
            behaviours[case.index].append(str(md["behaviour"]))
            outcomes_of.setdefault(case.index, []).append(None if md.get("outcome") is None else str(md["outcome"]))
        said = (s.metadata or {}).get("reveal_turns")
        if isinstance(said, list) and said and case.index not in by_turn:
            earlier = {int(t["turn"]): t for t in md.get("turns") or [] if isinstance(t, Mapping)}
            final = md.get("behaviour") if score is not None else None
            by_turn[case.index] = (
                tuple([*(earlier.get(k + 1, {}).get("behaviour") for k in range(len(said) - 1)), final]),
                tuple(str(t.get("holds", "")) for t in said))
        mass = md.get("verdict_mass")
        if reading is not None and isinstance(mass, (int, float)) and math.isfinite(mass):
            masses.setdefault(case.index, []).append(float(mass))
    if not cases:
        retry = "" if log.status == "success" else f"; nothing to score yet: resume it with inspect eval-retry {p}"
        raise InspectLogError(f"{p}: the log holds no samples (status {log.status}){retry}")
    order = sorted(cases)
    values = [m.aggregate(readings[i]) if readings[i] else None for i in order]
    mass = None
    if m.want == "p_safe" and masses:
        mass = [sum(masses[i]) / len(masses[i]) if masses.get(i) else None for i in order]
    meta: dict[str, Any] = {"format": "inspect", "log": str(p), "model_spec": log.eval.model, "status": log.status,
                            "task": log.eval.task, "samples": int(log.eval.config.epochs or 1)}
    if isinstance(cb.get("classifier"), Mapping):
        meta["classifier"] = reader_as_read(cb["classifier"], log.eval.model)
    behaviour = [behaviours[i] for i in order] if any(behaviours[i] for i in order) else None
    outcome = ([outcomes_of.get(i, []) for i in order]
               if any(o for i in order for o in outcomes_of.get(i, [])) else None)
    mutation = cb.get("mutation")
    state = log_state(p, log, present, sum(1 for s in log.samples or [] if s.error), len(order), errored)
    pred = Predictions.from_values(
        str(p), model_short_name(log.eval.model), m, [cases[i] for i in order], values,
        tuple(cb.get("removed") or ()), meta, context_as=str(cb.get("context_as") or ""),
        pending=max(0, _samples_expected(log) - present), behaviour=behaviour, outcome=outcome, verdict_mass=mass,
        mutation=str(mutation["name"]) if isinstance(mutation, Mapping) else None, state=state)
    if by_turn:  # a reveal log: the readings by turn, as a reveal run's (``stats.turns``)
        from .predictions import TurnReadings

        partial_safe = isinstance(cb.get("classifier"), Mapping) and cb["classifier"].get("partial_as") == "safe"
        pred.turns = TurnReadings(tuple(by_turn.get(i, ((), ()))[0] for i in order),
                                  tuple(by_turn.get(i, ((), ()))[1] for i in order), str(cb.get("context_as")),
                                  partial_safe)
    return pred


def _error_words(message: str) -> str | None:
    """An eval's error in a few words: its last line (inspect's model errors quote the whole
    request first, then the provider's error), at most 200 characters; None when empty."""
    lines = [line.strip() for line in message.replace("\\n", "\n").splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    return (last[:197] + "...") if len(last) > 200 else last


def log_state(path: Path, log: Any, present: int, failed: int, cases: int, errored: set[int]) -> "InputState":
    """Whether a log's eval is whole (``input_state``): an eval that did not end in success
    (errored, cancelled, still running), with the samples the log does not hold yet (``pending``)
    and those that errored (``failed``), the eval's error, and the command that resumes it
    (``inspect eval-retry LOG``, which asks the errored and missing samples again and keeps the
    rest)."""
    import shlex

    from .input_state import InputState

    expected = _samples_expected(log)
    pending = max(0, expected - present)
    status = str(log.status or "")
    # an eval that ended "success" is whole even with errored samples (--no-fail-on-error kept
    # going): those are missing answers, and inspect retries only an eval that did not succeed
    complete = pending == 0 and status in ("success", "")
    error = getattr(log, "error", None)
    reason = _error_words(str(getattr(error, "message", "") or ""))
    return InputState(source=str(path), complete=complete, status="complete" if complete else (status or "error"),
                      requests=expected, cases=cases + (pending // max(1, int(log.eval.config.epochs or 1))),
                      pending=pending, failed=failed,
                      cases_to_ask=len(errored) + pending // max(1, int(log.eval.config.epochs or 1)),
                      reason=None if complete else reason,
                      resume=None if complete else f"inspect eval-retry {shlex.quote(str(path))}")


# --------------------------------------------------------------------------------------------
# Any task: scores per sample


@dataclass
class SampleScores:
    """One log's scores per sample, for a paired comparison: ``values[scorer][sample_id]`` the
    sample's value (the mean over its epochs' scored values; a sample no epoch scored is absent),
    ``metadata[sample_id]`` the sample's metadata, ``answers[scorer][sample_id]`` the score's
    answer (the last epoch's), ``unscored[scorer]`` how many samples had no value."""

    source: str
    task: str
    model: str
    status: str
    values: dict[str, dict[str, float]] = field(default_factory=dict)
    metadata: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    answers: dict[str, dict[str, str]] = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)
    epochs: int = 1

    @property
    def name(self) -> str:
        return f"{self.model} [{self.task}]"


def _flatten(name: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [(f"{name}/{k}", v) for k, v in value.items()]
    return [(name, value)]


def load_sample_scores(path: str | Path) -> SampleScores:
    """Every scorer's value per sample of a log of any task (see the module docstring). A value
    inspect cannot read as a number (a list, NaN: unscored) leaves that sample out of that
    scorer. Raises ``InspectLogError`` for a log without samples."""
    from inspect_ai.scorer import value_to_float

    to_float = value_to_float()
    p = Path(path)
    log = _read(p)
    if not log.samples:
        raise InspectLogError(f"{p}: the log holds no samples (status {log.status})")
    out = SampleScores(str(p), log.eval.task, log.eval.model, log.status, epochs=int(log.eval.config.epochs or 1))
    sums: dict[str, dict[str, list[float]]] = {}
    names: set[str] = set()
    for s in log.samples:
        sid = str(s.id)
        out.metadata.setdefault(sid, dict(s.metadata or {}))
        for scorer, score in (s.scores or {}).items():
            if score.value is None or (isinstance(score.value, float) and math.isnan(score.value)):
                continue  # unscored (inspect's Score.unscored): in no scorer's mean, counted in ``unscored``
            for name, v in _flatten(scorer, score.value):
                names.add(name)
                x = None
                if not isinstance(v, (list, tuple, Mapping)) and v is not None:
                    try:
                        x = float(to_float(v))
                    except (TypeError, ValueError):
                        x = None
                if x is not None and math.isfinite(x):
                    sums.setdefault(name, {}).setdefault(sid, []).append(x)
                if score.answer is not None:
                    out.answers.setdefault(name, {})[sid] = str(score.answer)
    ids = list(out.metadata)
    for name in sorted(names):
        got = sums.get(name, {})
        out.values[name] = {sid: sum(got[sid]) / len(got[sid]) for sid in ids if sid in got}
        out.unscored[name] = len(ids) - len(out.values[name])
    return out


def all_casebench(paths: Sequence[str | Path]) -> bool:
    """Whether every path is a log of casebench's task (so ``Predictions`` can be read)."""
    return all(casebench_header(x) is not None for x in paths)
