"""What a run directory says: per-case predictions, counts, and export to the published format.

Readers only: they never write into the run (``casebench classify`` writes a *new* run). The
mode decides how samples aggregate into one value per case (``modes.Mode.aggregate``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..data import Dataset, load_dataset
from ..input_state import InputState, shell_command
from ..modes import get_mode
from ..prompts import REVEAL_PLACEMENTS
from .record import (
    Manifest, Record, RunCounts, RunError, RunState, final_records, iter_records, read_manifest,
)

if TYPE_CHECKING:
    from ..predictions import Predictions


def model_short_name(spec: str) -> str:
    """The short name published files use: the last path component of the model spec
    (``openai/gpt-4o-mini`` -> ``gpt-4o-mini``)."""
    return spec.rstrip("/").split("/")[-1] or spec


def aggregate(mode: str, finals: Mapping[tuple[int, int], Record], cases: Sequence[int],
              samples: int) -> list[Any]:
    """One raw value per case from its answered final records (None = missing), as the mode
    aggregates samples. Non-final (transport) records never reach here."""
    m = get_mode(mode)
    out: list[Any] = []
    for c in cases:
        recs = [finals[(c, s)] for s in range(samples) if (c, s) in finals]
        out.append(m.aggregate([r for r in recs if r.answered]))
    return out


def record_verdict_mass(rec: Record) -> float | None:
    """The probability mass a prob-mode answer put on the verdict tokens (safe plus unsafe), from
    its detail: ``verdict_mass`` as the backends write it, or the two masses older runs recorded
    (``p_safe_mass``/``p_unsafe_mass`` locally, ``safe_mass``/``unsafe_mass`` from API logprobs).
    None when the record has none."""
    d = rec.detail or {}
    v = d.get("verdict_mass")
    if v is None:
        for s_key, u_key in (("p_safe_mass", "p_unsafe_mass"), ("safe_mass", "unsafe_mass")):
            if isinstance(d.get(s_key), (int, float)) and isinstance(d.get(u_key), (int, float)):
                v = float(d[s_key]) + float(d[u_key])
                break
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
        return None
    return min(max(float(v), 0.0), 1.0)


def verdict_masses(finals: Mapping[tuple[int, int], Record], cases: Sequence[int], samples: int) -> list[float | None]:
    """Per case, the mean verdict mass of its answered samples (None: none recorded)."""
    out: list[float | None] = []
    for c in cases:
        found = [record_verdict_mass(finals[(c, s)]) for s in range(samples) if (c, s) in finals]
        ms = [m for m in found if m is not None]
        out.append(sum(ms) / len(ms) if ms else None)
    return out


def run_dataset(run_path: str | Path, manifest: Manifest, dataset: Dataset | None = None) -> Dataset:
    """The dataset a run was asked on: the one given, or the file its manifest names; its
    SHA-256 (or, failing that, its content fingerprint) must match the manifest."""
    want = manifest.dataset
    if dataset is None:
        if not want.path:
            raise RunError(f"{run_path}: the manifest names no dataset path; pass the dataset explicitly")
        p = Path(want.path)
        if not p.is_absolute():
            p = (Path(run_path) / p) if (Path(run_path) / p).exists() else p
        if not p.exists():
            raise RunError(f"{run_path}: the run's dataset {want.path} is not there any more; "
                           "pass the dataset (--data) explicitly")
        dataset = load_dataset(p)
    if dataset.sha256 != want.sha256 and dataset.fingerprint != want.fingerprint:
        raise RunError(f"{run_path}: the run was asked on dataset sha256 {want.sha256}, "
                       f"but {dataset.path} has sha256 {dataset.sha256}")
    return dataset


@dataclass
class RunProgress(RunCounts):
    """A run directory's counts as its records say them (``RunCounts``), the state its manifest
    records, and how many transport failures its records hold."""

    status: RunState = RunState.RUNNING
    transport_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the state as its value)."""
        return {**asdict(self), "status": self.status.value}


def run_status(run_path: str | Path) -> RunProgress:
    """Counts of a run read from its records: requests planned, final, answered, missing,
    pending; the manifest's state; transport failures."""
    m = read_manifest(run_path)
    recs = list(iter_records(run_path))
    counts = RunCounts.tally(((c, s) for c in m.cases for s in range(m.samples)), final_records(recs))
    return RunProgress(**asdict(counts), status=m.status, transport_failures=sum(1 for r in recs if not r.final))


def _values(run_path: str | Path, m: Manifest, ds: Dataset,
            records: Sequence[Record] | None = None) -> tuple[list[int], list[Any], int, dict]:
    cases = m.cases
    bad = [c for c in cases if not 0 <= c < len(ds)]
    if bad:
        raise RunError(f"{run_path}: the manifest selects case {bad[0]}, but the dataset has {len(ds)} cases")
    finals = final_records(records if records is not None else iter_records(run_path))
    values = aggregate(m.mode, finals, cases, m.samples)
    pending = sum(1 for c in cases for s in range(m.samples) if (c, s) not in finals)
    return cases, values, pending, finals


def run_classifier(run_path: str | Path, m: Manifest, finals: dict | None = None) -> dict[str, Any]:
    """The refusal classifier a respond run recorded, with ``validation`` replaced by the stored
    figures that apply to the run (``classify.validation.applicable``: the classifier version,
    ``--partial-as`` setting and kind of writer). Labels of the run's own answers
    (``run_labels``) do not replace them: they measure the run's refusals directly
    (``stats.people_refusal``) and test whether the stored figures hold."""
    from ..classify import validation as _validation

    return _validation.reader_as_read(m.asked.classifier or {}, m.model)


#: who may have labelled a run's answers (``labelled_by`` in ``reader_labels.csv``)
LABELLERS: tuple[str, ...] = ("people", "ai", "writer")


def run_labels(run_path: str | Path, finals: Mapping[tuple[int, int], Record] | None = None) -> dict[str, Any] | None:
    """Labels of a respond run's own answers (``RUN_LABELS_FILE`` in the run directory, written
    by ``annotate export --answers``), or None when there is no such file: who labelled
    (``labelled_by``; people unless the file's column says otherwise), whether the sample was
    drawn stratified (every row records its ``weight``), and per labelled answer its case,
    sample, label and weight. Each row must name an answer of the run."""
    from ..classify import validation as _validation

    labels_path = Path(run_path) / _validation.RUN_LABELS_FILE
    if not labels_path.is_file():
        return None
    from ..classify.evaluate import RefusalDataError, load_labelled_csv

    try:
        rows = load_labelled_csv(labels_path)
    except RefusalDataError as e:
        raise RunError(str(e)) from None
    if finals is None:
        finals = final_records(iter_records(run_path))
    out_rows: list[dict[str, Any]] = []
    who: set[str] = set()
    seen: dict[tuple[int, int], int] = {}
    weights = 0
    for r in rows:
        where = f"{labels_path}, row {r.row}"
        try:
            key = (int(r.extra["case"]), int(r.extra["sample"]))
        except (KeyError, ValueError):
            raise RunError(f"{where}: columns 'case' and 'sample' must name an answer of the run "
                           "(write the file with casebench annotate export --answers)") from None
        if key not in finals:
            raise RunError(f"{where}: the run has no answer for case {key[0]}, sample {key[1]}")
        if key in seen:
            raise RunError(f"{where}: case {key[0]}, sample {key[1]} is labelled again (first in row {seen[key]}); "
                           "one row per answer")
        seen[key] = r.row
        by = (r.extra.get("labelled_by") or "people").strip()
        if by not in LABELLERS:
            raise RunError(f"{where}, column 'labelled_by': {by!r} is not one of {', '.join(LABELLERS)}")
        who.add(by)
        w: float | None = None
        if (r.extra.get("weight") or "").strip():
            try:
                w = float(r.extra["weight"])
            except ValueError:
                w = float("nan")
            if not (w == w and 1.0 <= w < float("inf")):
                raise RunError(f"{where}, column 'weight': {r.extra['weight']!r} is not an inverse inclusion "
                               "probability (a number >= 1)")
            weights += 1
        out_rows.append({"case": key[0], "sample": key[1], "label": r.label, "weight": w,
                         "stratum": r.extra.get("stratum") or None})
    if len(who) > 1:
        raise RunError(f"{labels_path}, column 'labelled_by': the rows mix {', '.join(sorted(who))}; one file, one "
                       "kind of labeller")
    if 0 < weights < len(out_rows):
        raise RunError(f"{labels_path}, column 'weight': {len(out_rows) - weights} of {len(out_rows)} rows have no "
                       "weight; a stratified sample weights every row")
    return {"file": str(labels_path), "labelled_by": (who.pop() if who else "people"),
            "stratified": bool(out_rows) and weights == len(out_rows), "rows": out_rows}


def load_run(run_path: str | Path, dataset: Dataset | None = None) -> "Predictions":
    """Per-case predictions of a run over its selected cases, in dataset order.

    Cases still pending (no final record) are missing values; ``pending`` says how many, so a
    scorer can warn that the run is incomplete. The predictions carry the run's context
    placement; respond runs also carry, per case, the behaviour the refusal classifier read
    (``behaviour``).
    """
    from ..predictions import Predictions
    from .repair import check_not_damaged

    check_not_damaged(run_path)  # the same account of a damaged directory as `run` and `runs repair`
    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    records = list(iter_records(run_path))
    cases, values, pending, finals = _values(run_path, m, ds, records)
    state = run_input_state(run_path, m, finals, records)
    meta: dict[str, Any] = {
        "format": "run", "run_dir": str(run_path), "model_spec": m.model, "status": m.status.value,
        "samples": m.samples,
    }
    behaviours = [[finals[(c, s)].behaviour for s in range(m.samples) if (c, s) in finals] for c in cases]
    outcomes = [[finals[(c, s)].detail.get("outcome") for s in range(m.samples) if (c, s) in finals] for c in cases]
    if m.asked.classifier:
        # provenance: which classifier read the answers, and the validation of it that applies
        # to this run (its own people's labels, else the stored figures for its --partial-as
        # setting and kind of writer; classify.validation.applicable)
        meta["classifier"] = run_classifier(run_path, m, finals)
        labels = run_labels(run_path, finals)
        if labels is not None:
            meta["run_labels"] = labels
    mass = verdict_masses(finals, cases, m.samples) if get_mode(m.mode).want == "p_safe" else None
    pred = Predictions.from_values(str(run_path), model_short_name(m.model), m.mode, ds.subset(cases),
                                   values, m.removed, meta, context_as=m.asked.context_as or "", pending=pending,
                                   behaviour=behaviours if any(b for bs in behaviours for b in bs) else None,
                                   verdict_mass=mass if mass and any(v is not None for v in mass) else None,
                                   mutation=m.mutation, state=state,
                                   outcome=outcomes if any(o for os_ in outcomes for o in os_) else None)
    if m.asked.context_as in REVEAL_PLACEMENTS:  # what the reader read at every turn (runs.reveal)
        from .reveal import turn_readings

        pred.turns = turn_readings(run_path, cases, finals, m.asked.context_as,
                                   bool((m.asked.classifier or {}).get("partial_as") == "safe"))
        pred.meta["reveal"] = {"placement": m.asked.context_as, "wording_version": m.asked.context_wording_version}
    return pred


def resume_command(run_path: str | Path, m: Manifest, here: str | None = None) -> tuple[str | None, str | None]:
    """The exact command that resumes a run and, when none is known, what to do instead:
    the command line of its latest invocation that recorded one (``Invocation.command``; a
    ``casebench run`` or ``study`` resumes by being repeated), run from the directory it ran in
    (``cd DIR && ...`` when that is not ``here``, the current directory by default). A run made
    through the Python API records none: the hint names ``casebench run`` with the run's model
    and mode into the same directory."""
    import os

    here = os.getcwd() if here is None else here
    for inv in reversed(m.history):
        if inv.command:
            return shell_command(inv.command, inv.cwd, here), None
    hint = (f"repeat the command or call that made it (this run records none): e.g. casebench run --model {m.model} "
            f"--mode {m.mode} -o {run_path} with the same options")
    return None, hint


def run_input_state(run_path: str | Path, m: Manifest, finals: Mapping[tuple[int, int], Record],
                    records: Sequence[Record], here: str | None = None) -> InputState:
    """Whether a run is whole (``input_state``): its requests without a final record, split into
    never asked (``pending``) and asked but failed in transport (``failed``, a non-final record
    and no final one), the cases they belong to, the manifest's state and message, and the
    command that resumes it (``resume_command``; ``here``: the directory it is read from, ""
    to always say where to run it)."""
    planned = [(c, s) for c in m.cases for s in range(m.samples)]
    open_keys = [k for k in planned if k not in finals]
    tried = {r.key for r in records if not r.final}
    failed = sum(1 for k in open_keys if k in tried)
    complete = not open_keys
    resume, hint = (None, None) if complete else resume_command(run_path, m, here)
    status = m.status.value
    if not complete and m.status is RunState.COMPLETE:  # a run grown or edited since: say what the records say
        status = RunState.INCOMPLETE.value
    return InputState(source=str(run_path), complete=complete, status="complete" if complete else status,
                      requests=len(planned), cases=len(m.cases), pending=len(open_keys) - failed, failed=failed,
                      cases_to_ask=len({c for c, _ in open_keys}), reason=None if complete else m.message,
                      resume=resume, resume_hint=hint)


#: below this share of cases answered, ``casebench run`` exits with ``EXIT_LOW_COVERAGE``
DEFAULT_MIN_COVERAGE = 0.5
EXIT_LOW_COVERAGE = 3


@dataclass
class RunCheck:
    """What the end of a run says beyond its status: coverage against ``--min-coverage`` (with
    advice when below it) and, in prob mode, the verdict-mass warning."""

    cases: int
    answered: int
    min_coverage: float
    advice: list[str] = field(default_factory=list)
    verdict_mass_warning: str | None = None
    #: respond mode: replies that are not a chatbot's answer (a judge's verdict, a bare label, the
    #: request echoed: ``classify.base.NOT_A_CHATBOT``), of ``replies``; an empty reply or one in
    #: neither plain language nor the query's encoding is unread, but says nothing of what answers
    non_answers: int = 0
    replies: int = 0

    @property
    def coverage(self) -> float:
        return self.answered / self.cases if self.cases else 0.0

    @property
    def not_a_chatbot(self) -> bool:
        """Most replies are not a chatbot's answers: the endpoint does not answer as a chatbot."""
        return self.replies > 0 and 2 * self.non_answers > self.replies

    @property
    def low_coverage(self) -> bool:
        return self.cases > 0 and (self.coverage < self.min_coverage or self.not_a_chatbot)


def _non_answer_kind(error: str | None) -> str:
    """Why a reply was not read, in a few words, from its record's error: the screen's kind
    ("classifier: undetermined: a judge's verdict as JSON (keys ...), not a chatbot's answer
    (...)" -> "a judge's verdict as JSON"; "empty answer"; "neither plain language nor in the
    caesar encoding"), else the error's first part ("parse error", "classifier")."""
    text = error or ""
    if "undetermined:" not in text:
        return text.split(":", 1)[0][:80] or "no answer"
    text = text.split("undetermined:", 1)[-1].strip()
    return text.split(" (", 1)[0].split(", not a chatbot", 1)[0][:60] or "no answer"


def check_run(run_path: str | Path, min_coverage: float = DEFAULT_MIN_COVERAGE,
              min_verdict_mass: float | None = None, dataset: Dataset | None = None, examples: int = 3,
              pred: "Predictions | None" = None) -> RunCheck:
    """Coverage of a finished run (cases with a readable answer, whatever their verdict mass) and
    what to do when it is below ``min_coverage``: the reasons answers could not be read, what the
    model wrote (``examples`` answers, shortened) and what to try. Prob mode: the verdict-mass
    warning when the median is below ``min_verdict_mass`` (default: ``Predictions``' own).
    ``pred``: the run's predictions when the caller has them already (not loaded again)."""
    from collections import Counter

    from ..predictions import verdict_mass_warning

    if pred is None:
        pred = load_run(run_path, dataset)
    pred = pred.at_min_verdict_mass(min_verdict_mass)
    check = RunCheck(pred.n, int(pred.has_value.sum()), float(min_coverage))
    vm = pred.verdict_mass_summary()
    if vm and vm["median"] < vm["threshold"]:
        check.verdict_mass_warning = verdict_mass_warning(pred.model, vm)
    m = read_manifest(run_path)
    mode = get_mode(m.mode)
    finals = final_records(iter_records(run_path)) if mode.reads_behaviour or check.low_coverage else {}
    if mode.reads_behaviour:
        from ..classify.base import NOT_A_CHATBOT

        check.replies = len(finals)
        check.non_answers = sum(1 for r in finals.values() if not r.answered and NOT_A_CHATBOT in (r.error or ""))
    if not check.low_coverage:
        return check
    missing = [r for r in finals.values() if not r.answered]
    # the causes seen, each counted (never a guess): the screen's kinds, else the error's first part
    reasons = Counter(_non_answer_kind(r.error) for r in missing)
    adv = [f"only {check.answered} of {check.cases} cases have a readable answer (coverage "
           f"{100 * check.coverage:.0f}%, {'below' if check.coverage < check.min_coverage else 'at least'} "
           f"--min-coverage {100 * check.min_coverage:.0f}%)"]
    if check.not_a_chatbot:
        from ..classify.base import NOT_A_CHATBOT

        kinds = Counter(_non_answer_kind(r.error) for r in missing if NOT_A_CHATBOT in (r.error or ""))
        adv.append(f"the endpoint does not answer as a chatbot: {check.non_answers} of {check.replies} replies are "
                   f"not a chatbot's answer ({'; '.join(f'{k} ({n})' for k, n in kinds.most_common(3))}), so no "
                   "reader reads them; is a judge or guard model behind this URL? respond mode needs the chatbot "
                   "itself")
    elif reasons:
        adv.append("why: " + "; ".join(f"{why} ({n})" for why, n in reasons.most_common(4)))
    shown = [r for r in missing if r.text][:examples]
    for r in shown:
        text = " ".join((r.text or "").split())
        adv.append(f"case {r.case} wrote: {text[:160]!r}" + (" ..." if len(text) > 160 else ""))
    if check.not_a_chatbot:
        adv.append("try: --model and --base-url naming the chatbot users talk to (not a judge or guard model), "
                   "or a judge mode (--mode binary) if this endpoint is meant to judge")
        check.advice = adv
        return check
    tries = []
    if mode.reads_behaviour:  # what to try follows from the causes seen
        from ..classify.encoded import NOT_IN_THE_ENCODING

        if any(k.startswith(NOT_IN_THE_ENCODING) for k in reasons):
            tries.append(f"a chatbot that answers in plain language or in the {m.mutation} encoding (these answers "
                         "read as neither), or the run without --mutation")
        if "empty answer" in reasons:
            tries.append("more --max-tokens, or a look at the server's log (empty replies)")
        tries.append("another reader (--refusal-classifier) if the answers above are plain answers or refusals")
        adv.append("try: " + "; ".join(tries))
        check.advice = adv
        return check
    # never one judge mode for another: a model that cannot judge in one rarely judges in the
    # other (the embedded SmolLM2 does neither), so the way out is another model, or asking what
    # the model does instead of what it says
    if mode.want != "p_safe":
        if m.asked.reask != "repair" and mode.repair_message(None):
            tries.append("--reask repair (re-asks quote the answer format)")
        tries.append("more --max-tokens if answers were cut off")
    tries.append("a model that can judge (a larger instruction-tuned model: --model hf/ID or an API model)")
    if not mode.reads_behaviour:
        tries.append("--mode respond, which measures what this model does as the chatbot rather than what it says "
                     "(the main job: casebench run with no --model)")
    adv.append("try: " + "; ".join(tries))
    check.advice = adv
    return check


def export_run(run_path: str | Path, out_path: str | Path, dataset: Dataset | None = None,
               name: str | None = None, allow_incomplete: bool = False) -> Path:
    """Write a run in the published ``exp/`` format (atomically).

    The file holds the run's *selected* cases only, in dataset order, each with one key named
    after the model (``name`` or the spec's last component), in the mode's published value
    format ("" = missing, as the published files write failures). A run over the whole dataset
    therefore exports the full published shape; a subset run exports its records each naming
    the dataset record it is (``published.DATASET_RECORD_FIELD``), so that ``score`` of the file
    with the dataset known checks it record by record and agrees with ``score`` of the run. A run
    under a query mutation gets the default key ``<model>_mut-<mutation>`` (the format has no
    field for it).

    An incomplete run (requests still pending) is refused unless ``allow_incomplete``: the
    published format cannot tell "not asked yet" from "could not be parsed".
    """
    from ..published import ExportHeader, write_published

    m = read_manifest(run_path)
    ds = run_dataset(run_path, m, dataset)
    records = list(iter_records(run_path))
    cases, values, pending, finals = _values(run_path, m, ds, records)
    if pending and not allow_incomplete:
        raise RunError(f"{run_path}: {pending} request(s) still pending; resume the run first "
                       "(or export anyway with allow_incomplete, writing \"\" for them)")
    out = Path(out_path)
    # the published format has no field for a query mutation: the default model key names it;
    # a subset names the dataset record each of its records is, so that it scores as the run does
    default = model_short_name(m.model) + (f"_mut-{m.mutation}" if m.mutation else "")
    key = name or default
    # what the file holds, inside it: its name is free (``published.EXPORT_FIELD``)
    sel = {k: v for k, v in asdict(m.selection).items() if v is not None}
    state = run_input_state(run_path, m, finals, records, here="")  # read anywhere: says where to resume
    header = ExportHeader(mode=get_mode(m.mode).name, model_key=key, model_spec=m.model,
                          context_as=m.asked.context_as or get_mode(m.mode).default_context_as, removed=m.removed,
                          mutation=m.mutation, reader=_reader_identity(m.asked.classifier), selection=sel,
                          samples=m.samples, state={k: v for k, v in state.to_dict().items() if k != "source"},
                          run_dir=str(Path(run_path).resolve()))
    write_published(out, ds.subset(cases), key, m.mode, values, name_records=list(cases) != list(range(len(ds))),
                    header=header)
    return out


def export_reader(reader: Mapping[str, Any], model_spec: str | None) -> dict[str, Any]:
    """The reader an export of a respond run names, as a run's is read (``run_classifier``): with
    the validation that applies to its writer."""
    from ..classify import validation as _validation

    return _validation.reader_as_read(reader, model_spec)


#: what an export leaves out of the reader a run recorded: where it ran, not what it is
_READER_PRIVATE = ("base_url", "api_key_env", "path", "labels_path")


def _reader_identity(classifier: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The reader of a respond run as an export carries it: the run's record of it (its name,
    version, ``partial_as`` and validation: what ``classify.validation.reader_as_read`` needs to
    find the validation that applies), less where it ran (an endpoint, a path of this machine)."""
    if not classifier:
        return None
    return {k: v for k, v in classifier.items() if k not in _READER_PRIVATE}
