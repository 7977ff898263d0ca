"""A run, resolved before anything is asked: every default filled in, every input checked, the
manifest of a new run written out in memory (``prepare``), and the checks against a run already
in the output directory: what it recorded (``check_resumable``: a resume that would change an
answer is refused, naming each difference), whether it grows to a larger nested selection
(``grow``), and a smaller run beside a new one that could grow instead (``smaller_run_beside``).

Apart from ``execute`` (which asks and records) so that what a run *is* reads in one place and
what it *does* in another; nothing here talks to a backend.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.base import Backend, GenerationSettings
from ..data import Dataset, load_dataset, validate_parameter_names
from ..modes import Mode
from ..prompts import BUILTIN_TEMPLATES, CHATBOT_PLACEMENTS, REVEAL_PLACEMENTS, Templates, check_placement, wording_of
from .config import RunConfig, default_out_dir, resolve_data_path, selection_tag
from .pricing import PriceMatch, PriceTable
from .record import (
    Asked, DatasetRef, Manifest, ManifestMismatch, RunError, effective_reask, now_iso, read_manifest,
)
from .redact import redact_json, redact_text
from .select import SELECTION_PROCEDURE, growth_refusal, select_cases

__all__ = ["Prepared", "prepare", "recorded_procedure", "check_resumable", "smaller_run_beside", "grow"]


def casebench_version() -> str:
    from .. import __version__

    return __version__


@dataclass
class Prepared:
    """A run, resolved: the dataset, mode, selection, settings and the manifest of a new run."""

    config: RunConfig
    dataset: Dataset
    out: Path
    mode: Mode
    removed: tuple[str, ...]
    context_as: str
    cases: list[int]
    samples: int
    settings: GenerationSettings
    templates: Templates
    prices: PriceTable
    price: PriceMatch
    transport: dict[str, Any]
    manifest: Manifest
    classifier: Any = None
    #: the query mutation: the queries as asked, per case index (None: the dataset's wording)
    mutation: Any = None

    @property
    def asked(self) -> Asked:
        return self.manifest.asked


def prepare(config: RunConfig, dataset: Dataset | None = None, backend: Backend | None = None) -> Prepared:
    """Resolve every default and validate every input before anything is asked or written.

    Raises ``RunError`` (or ``ModeError``, ``AblationError``, ``extras.MissingExtra``) naming
    what is wrong. ``backend``: one the caller built, whose constructor's options are recorded.
    """
    from ..backends import resolve_options

    mode = config.mode_spec
    if dataset is None:
        dataset = load_dataset(resolve_data_path(config.data))
    removed = validate_parameter_names(config.removed)
    context_as = config.context_as or mode.default_context_as
    try:
        check_placement(context_as, "--context-as")
    except ValueError as e:
        raise RunError(str(e)) from None
    if context_as in CHATBOT_PLACEMENTS and not mode.reads_behaviour:
        raise RunError(f"--context-as {context_as} asks the model as the chatbot: use it with --mode respond, "
                       f"not {mode.name!r}")
    templates = config.templates or BUILTIN_TEMPLATES
    template = mode.template(templates)
    samples = mode.default_samples if config.samples is None else int(config.samples)
    if samples < 1:
        raise RunError(f"--samples must be at least 1, got {samples}")
    if context_as in REVEAL_PLACEMENTS and samples != 1:
        raise RunError(f"--context-as {context_as} asks one live conversation per case: --samples must be 1, "
                       f"got {samples}")
    if context_as in REVEAL_PLACEMENTS and config.batch:
        raise RunError(f"--batch cannot ask a live conversation ({context_as}): each turn waits for the model's "
                       "answer to the one before")
    if config.parse_retries < 0:
        raise RunError(f"--parse-retries must be 0 or more, got {config.parse_retries}")
    if config.max_connections < 1:
        raise RunError(f"--max-connections must be at least 1, got {config.max_connections}")
    if config.max_cost is not None and config.max_cost < 0:
        raise RunError(f"--max-cost must be 0 or more, got {config.max_cost}")
    if config.max_tokens is not None and config.max_tokens < 1:
        raise RunError(f"--max-tokens must be at least 1, got {config.max_tokens}")
    out = Path(config.out) if config.out else default_out_dir(
        config.model, mode.name, removed, context_as, mode.default_context_as, dataset.sha256,
        selection_tag(config.limit, config.stratified, config.pairs, config.selection_seed, config.cases is not None),
        mutation=config.mutation)
    cases, selection = select_cases(dataset, limit=config.limit, cases=config.cases,
                                    stratified=config.stratified, seed=config.selection_seed,
                                    pairs=config.pairs, procedure=recorded_procedure(out))
    settings = GenerationSettings(
        temperature=mode.default_temperature if config.temperature is None else float(config.temperature),
        top_p=config.top_p,
        max_tokens=mode.default_max_tokens if config.max_tokens is None else int(config.max_tokens),
        system=config.system,
    )
    try:
        answer_opts, transport = resolve_options(config.model, dict(config.backend_options),
                                                 type(backend) if backend is not None else None)
    except ValueError as e:
        raise RunError(redact_text(str(e))) from None
    classifier = None
    classifier_desc = None
    if mode.reads_behaviour:
        from ..classify import make_classifier

        try:
            classifier = make_classifier(config.refusal_classifier, **config.classifier_options)
        except ValueError as e:
            raise RunError(f"--refusal-classifier: {e}") from None
        classifier_desc = {**redact_json(classifier.describe()), "partial_as": "safe" if config.partial_as_safe else "unsafe"}
    elif config.refusal_classifier or config.partial_as_safe:
        raise RunError(f"--refusal-classifier and --partial-as apply to modes that read behaviour, not {mode.name!r}")
    prices = config.prices or PriceTable.load()
    price = prices.lookup(config.model)
    mutation = None
    if config.mutation is not None:
        from .mutator import mutation_source

        mutation = mutation_source(config, [dataset[i] for i in cases], out)
    wording, wording_version = wording_of(context_as)
    asked = Asked(
        dataset_sha256=dataset.sha256, model=config.model, mode=mode.name, context_as=context_as,
        removed=list(removed), cases=cases, samples=samples, settings=settings.to_dict(),
        template_sha256=None if template is None else hashlib.sha256(template.encode("utf-8")).hexdigest(),
        parse_retries=config.parse_retries, reask=effective_reask(mode, config.parse_retries, config.reask),
        stop_at_verdict=bool(mode.stopper() is not None and not config.full_answers),
        backend_options=redact_json(answer_opts), classifier=classifier_desc,
        context_wording_sha256=(None if wording is None else hashlib.sha256(wording.encode("utf-8")).hexdigest()),
        context_wording_version=wording_version,
        mutation=None if mutation is None else mutation.describe(),
    )
    manifest = Manifest(
        dataset=DatasetRef(str(Path(dataset.path).resolve()), dataset.sha256, dataset.fingerprint, len(dataset)),
        asked=asked, selection=selection,
        templates_source=None if template is None else (
            templates.source if mode.template_key in templates.texts else f"mode {mode.name}"),
        price=price.to_dict(), retry=config.retry.to_dict(), created_at=now_iso(), casebench_version=casebench_version(),
    )
    transport = redact_json({**transport, "max_connections": config.max_connections, "batch": config.batch})
    return Prepared(config=config, dataset=dataset, out=out, mode=mode, removed=removed, context_as=context_as,
                    cases=cases, samples=samples, settings=settings, templates=templates, prices=prices, price=price,
                    transport=transport, manifest=manifest, classifier=classifier, mutation=mutation)


def recorded_procedure(out: Path) -> int:
    """The selection procedure of the run already in ``out`` (``select.SELECTION_PROCEDURE`` for
    a new directory), so that a run chosen by an earlier procedure resumes on exactly its own
    cases instead of being reinterpreted under today's order. An unreadable manifest is left to
    ``check_resumable`` to report."""
    if (out / "manifest.json").is_file():
        try:
            return read_manifest(out).selection.effective_procedure or SELECTION_PROCEDURE
        except (RunError, OSError, ValueError):
            pass
    return SELECTION_PROCEDURE


def check_resumable(prep: Prepared) -> Manifest | None:
    """The existing manifest of the output directory (None if new); raises ``ManifestMismatch``
    naming every difference when it holds another run, and ``repair.RunDamaged`` saying how to
    recover when it is damaged (records without a readable manifest, a damaged line); nothing
    is written."""
    from .repair import check_not_damaged

    if prep.out.is_dir():
        check_not_damaged(prep.out)
    if not (prep.out / "manifest.json").exists():
        # files starting with "." are ours (the lock, a temp manifest left by a kill)
        if prep.out.exists() and (not prep.out.is_dir()
                                  or any(not p.name.startswith(".") for p in prep.out.iterdir())):
            raise RunError(f"{prep.out} exists, is not empty and is not a run directory; choose another -o")
        return None
    old = read_manifest(prep.out)
    if old.format_version < 2:
        raise RunError(f"{prep.out} was written by an older casebench (run format {old.format_version}), which did "
                       "not record every option that changes an answer; it can be scored and exported, not "
                       "resumed. Start a new run directory (-o).")
    diffs = old.asked.differences(prep.asked)
    if any(name == "cases" for name, _, _ in diffs):
        # other cases: a run grows in place to a larger nested selection, else it is refused
        why = growth_refusal(old.selection, old.asked.cases, prep.manifest.selection, prep.cases)
        # a mutator's texts (kept per query in the manifest) grow with the cases: each text
        # already recorded must stay as it was, the new queries' texts join them
        diffs = [d for d in diffs if d[0] != "cases" and not (why is None and d[0] == "mutation.texts" and _extends(d[1], d[2]))]
        if why is not None:
            raise ManifestMismatch(prep.out, [*diffs, ("selection", old.selection.how, prep.manifest.selection.how)],
                                   why)
    if diffs:
        raise ManifestMismatch(prep.out, diffs)
    return old


def smaller_run_beside(prep: Prepared) -> tuple[Path, int] | None:
    """A run in a default folder beside ``prep``'s new one (same model, mode, settings and seed, a
    smaller nested selection) that ``-o`` would grow instead of asking its cases again, and how
    many of the cases it holds (None: there is none, or the user chose the folder)."""
    sel = prep.manifest.selection
    cfg = prep.config
    tag = selection_tag(cfg.limit, cfg.stratified, cfg.pairs, cfg.selection_seed, cfg.cases is not None)
    if cfg.out or sel.kind is None or not tag or not prep.out.name.endswith(tag) or prep.out.exists():
        return None
    best: tuple[Path, int] | None = None
    stem = prep.out.name[: -len(tag)]
    for other in sorted(prep.out.parent.glob(stem + "*")) if prep.out.parent.is_dir() else []:
        try:
            m = read_manifest(other)
        except (RunError, OSError, ValueError):
            continue
        same = [d for d in m.asked.differences(prep.asked) if d[0] != "cases"]
        if same or growth_refusal(m.selection, m.asked.cases, sel, prep.cases) is not None:
            continue
        if best is None or len(m.asked.cases) > best[1]:
            best = (other, len(m.asked.cases))
    return best


def _extends(old: Any, new: Any) -> bool:
    """Whether the mapping ``new`` holds every key of ``old`` with the same value."""
    return isinstance(old, dict) and isinstance(new, dict) and all(k in new and new[k] == v for k, v in old.items())


def grow(manifest: Manifest, prep: Prepared) -> dict[str, Any] | None:
    """Make ``manifest`` (a run's, checked by ``check_resumable``) ask ``prep``'s cases when they
    are a larger nested selection: its cases and selection become the new ones, nothing else
    changes, and the returned note (None: the run did not grow) goes into the invocation's
    ``grew``, so the history says when and from what the run grew."""
    before = list(manifest.asked.cases)
    if before == list(prep.cases):
        return None
    note = {"from": manifest.selection.how, "to": prep.manifest.selection.how, "cases_before": len(before),
            "cases_added": len(set(prep.cases) - set(before))}
    manifest.asked.cases = list(prep.cases)
    manifest.selection = prep.manifest.selection
    if manifest.asked.mutation is not None:  # a mutator's texts of the new queries join the old
        manifest.asked.mutation = prep.asked.mutation
    return note
