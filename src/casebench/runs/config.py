"""What a run is asked to do: ``RunConfig`` and its defaults, before anything is resolved.

``None`` in a config means "the default for this mode"; ``execute.prepare`` resolves every
default and records it in the manifest.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..prompts import Templates, check_placement
from .pricing import PriceTable
from .record import RunError
from .results import model_short_name

if TYPE_CHECKING:
    from ..modes import Mode
    from ..mutations import Mutation

DEFAULT_MODEL = "hf/smollm2-135m-instruct"
#: The paper re-asked an unparseable answer twice.
DEFAULT_PARSE_RETRIES = 2
DEFAULT_MAX_CONNECTIONS = 8


@dataclass
class RetryPolicy:
    """Transport retries: exponential backoff with full jitter, honouring ``Retry-After``."""

    max_attempts: int = 8
    base_s: float = 0.5
    cap_s: float = 60.0
    #: a server asking for more than this is waited on only this long per attempt
    max_retry_after_s: float = 600.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise RunError(f"--max-attempts must be a whole number of at least 1, got {self.max_attempts!r}")
        for name in ("base_s", "cap_s", "max_retry_after_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value != value or value < 0:
                raise RunError(f"RetryPolicy.{name} must be a number, 0 or more, got {value!r}")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        wait = rng.uniform(0.0, min(self.cap_s, self.base_s * (2 ** (attempt - 1))))
        if retry_after is not None and retry_after > 0:
            wait = max(wait, min(retry_after, self.max_retry_after_s))
        return wait

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunConfig:
    """Everything a run needs. ``None`` means "the default for this mode", and every default is
    resolved (and recorded in the manifest) by ``execute.prepare``."""

    #: the mode: a registered mode's name, or a ``modes.Mode`` object (resolved once, into
    #: ``mode_spec``, which the run passes along; nothing looks the name up again)
    mode: "str | Mode"
    model: str = DEFAULT_MODEL
    data: str | os.PathLike[str] | None = None
    out: str | os.PathLike[str] | None = None
    removed: Sequence[str] | str = ()
    #: where the context goes: "user" (inside the judge prompt), "system" (the system prompt) or
    #: "turns" (the conversation before the query); None: the mode's default
    context_as: str | None = None
    samples: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    system: str | None = None
    templates: Templates | None = None
    limit: int | None = None
    cases: Sequence[int] | None = None
    stratified: int | None = None
    #: a seeded subset of this many whole query pairs, stratified by category (``select.stratified_pairs``)
    pairs: int | None = None
    #: the seed of the case selection (``stratified``, ``pairs``): the only thing it seeds (the
    #: bootstrap's and the human draws' seeds are ``ScoringOptions``')
    selection_seed: int = 0
    parse_retries: int = DEFAULT_PARSE_RETRIES
    #: how an unreadable answer is asked again: "repair" (the answer, then a short message quoting
    #: the required format) or "same" (the question as it was, as the paper did)
    reask: str = "repair"
    #: text modes: keep generating after the verdict (the explanations), as the paper's runs did
    full_answers: bool = False
    #: respond mode: the refusal classifier spec (None: the offline default) and its options
    refusal_classifier: str | None = None
    classifier_options: dict[str, Any] = field(default_factory=dict)
    #: respond mode: count a partial answer as answering ("safe") instead of refusing
    partial_as_safe: bool = False
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: ask through the provider's batch API (openai/, anthropic/): half price, answers within 24 h
    batch: bool = False
    #: seconds between polls of a batch (growing by half each time)
    batch_poll_s: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_cost: float | None = None
    prices: PriceTable | None = None
    #: the runner's wall-clock limit per backend call, in seconds, above the backend's own
    #: transport timeout; None: the default for the backend (``call_limit_s``)
    call_timeout: float | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    #: None: a bar on a terminal, periodic lines otherwise; False: quiet
    progress: bool | None = None
    #: a damaged run directory: move damaged record lines aside and rebuild a lost manifest from
    #: these settings when every surviving record fits them (``runs.repair.salvage``)
    salvage: bool = False
    #: a query mutation (``mutations``: SORRY-Bench's name, e.g. "caesar"): every query asked in
    #: its rewording, the contexts untouched; None: the queries as the dataset words them
    mutation: str | None = None
    #: the user's copy of SORRY-Bench's released files (``question_<mutation>.jsonl`` and the
    #: base file), where the rewordings come from; None: the built-in rewording
    mutations_from: str | os.PathLike[str] | None = None
    #: a model spec that writes the rewordings of a mutation casebench cannot reword by itself
    #: (``runs.mutator``), and its backend options (e.g. base_url)
    mutator: str | None = None
    mutator_options: dict[str, Any] = field(default_factory=dict)
    #: the ``Mode`` object of ``mode`` (set by ``__post_init__``)
    mode_spec: "Mode" = field(init=False, repr=False, compare=False)
    #: the ``Mutation`` object of ``mutation``, resolved once as the mode is (set by
    #: ``__post_init__``; None: the dataset's wording)
    mutation_spec: "Mutation | None" = field(init=False, repr=False, compare=False, default=None)

    @property
    def call_limit_s(self) -> float | None:
        """The per-call limit the runner applies: ``call_timeout``, else the backend's default
        (``default_call_timeout``), the same from the CLI and the Python API."""
        if self.call_timeout is not None:
            return float(self.call_timeout)
        return default_call_timeout(self.model, self.backend_options)

    def __post_init__(self) -> None:
        """Refuse nonsense where it is given (``RunError`` naming the option), not at ``run()``."""
        from ..modes import ModeError, get_mode

        try:
            self.mode_spec = get_mode(self.mode)
        except ModeError as e:
            raise RunError(str(e)) from None
        for name, value, low in (("samples", self.samples, 1), ("max_tokens", self.max_tokens, 1),
                                 ("limit", self.limit, 1), ("stratified", self.stratified, 1),
                                 ("parse_retries", self.parse_retries, 0), ("max_connections", self.max_connections, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise RunError(f"--{name.replace('_', '-')} must be a whole number of at least {low}, got {value!r}")
        number: float | None
        for name, number, ok, want in (
                ("temperature", self.temperature, lambda v: 0 <= v <= 2, "from 0 to 2"),
                ("top_p", self.top_p, lambda v: 0 < v <= 1, "above 0 and at most 1"),
                ("max_cost", self.max_cost, lambda v: v >= 0, "0 or more"),
                ("call_timeout", self.call_timeout, lambda v: v > 0, "above 0"),
                ("batch_poll", self.batch_poll_s, lambda v: v > 0, "above 0")):
            if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))
                                       or number != number or (abs(number) == float("inf") and name != "max_cost")
                                       or not ok(number)):
                raise RunError(f"--{name.replace('_', '-')} must be a number {want}, got {number!r}")
        if self.reask not in ("repair", "same"):
            raise RunError(f"--reask must be one of repair, same, got {self.reask!r}")
        if self.context_as is not None:
            try:
                check_placement(self.context_as, "--context-as")
            except ValueError as e:
                raise RunError(str(e)) from None
        if self.mutation is not None or self.mutations_from is not None or self.mutator is not None:
            from ..mutations import MutationError, get_mutation

            if self.mutation is None:
                raise RunError(f"{'--mutations-from' if self.mutator is None else '--mutator'} names where the "
                               "rewordings come from; give --mutation NAME too")
            try:
                m = get_mutation(self.mutation)
            except MutationError as e:
                raise RunError(f"--mutation: {e}") from None
            if self.mutator is not None and self.mutations_from is not None:
                raise RunError("choose one source of rewordings: --mutations-from DIR or --mutator SPEC")
            if self.mutator is not None and m.builtin:
                raise RunError(f"--mutator: {m.name} is built in; a mutator writes the mutations casebench cannot")
            if self.mutations_from is None and self.mutator is None and not m.builtin:
                raise RunError(f"--mutation {m.name}: no built-in rewording ({m.no_builtin}) Give your copy of "
                               "SORRY-Bench's files with --mutations-from DIR, or name a model to write them "
                               "(--mutator SPEC).")
            self.mutation = m.name
            self.mutation_spec = m


def default_call_timeout(model: str, options: dict[str, Any] | None = None) -> float | None:
    """The wall-clock safety net per call a run gets when it names none: for a backend that asks
    a server, twice its own transport timeout (its ``timeout`` option, 60 s if not given) plus
    10 s; a local backend none (a local call ends when its batch does)."""
    from ..backends.registry import is_remote_spec

    try:
        remote = is_remote_spec(model)
    except Exception:  # an unknown spec is refused later, with its reason
        remote = False
    if not remote:
        return None
    return 2 * float((options or {}).get("timeout") or 60.0) + 10


def default_out_dir(model: str, mode: "str | Mode", removed: Sequence[str] = (), context_as: str | None = None,
                    default_context_as: str | None = None, dataset_sha256: str | None = None,
                    selection: str | None = None, mutation: str | None = None) -> Path:
    """``runs/<model>_<mode>[_<removed>][_ctx-<placement>][_mut-<mutation>][_<dataset>][_<selection>]``: the
    placement only when it is not the mode's default; the query mutation when there is one; the first 8 hex digits of the dataset's
    SHA-256 and the selection (``pairs45``, ``strat450s0``, ``limit10``) when given, so that two
    runs that differ in what they ask land in different folders (``casebench run`` gives both;
    a study names its condition runs without them)."""
    tail = "_" + "-".join(removed) if removed else ""
    if context_as and context_as != default_context_as:
        tail += f"_ctx-{context_as}"
    if mutation:
        tail += f"_mut-{mutation}"
    if dataset_sha256:
        tail += f"_{dataset_sha256[:8]}"
    if selection:
        tail += f"_{selection}"
    return Path("runs") / f"{model_short_name(model)}_{mode}{tail}"


def selection_tag(limit: int | None = None, stratified: int | None = None, pairs: int | None = None,
                  seed: int = 0, explicit: bool = False) -> str | None:
    """The short name of a case selection in a default run folder (None: every case)."""
    if pairs is not None:
        return f"pairs{pairs}" + (f"s{seed}" if seed else "")
    if stratified is not None:
        return f"strat{stratified}" + (f"s{seed}" if seed else "")
    if limit is not None:
        return f"limit{limit}"
    return "cases" if explicit else None


def resolve_data_path(data: str | os.PathLike[str] | None) -> Path:
    """The dataset to run on: ``--data``, else ``$CASEBENCH_DATA``, else the user cache.

    Library calls never download or fall back to the demo set behind the caller's back; the
    ``casebench run`` command does both, and says so (``sources.resolve_dataset``).
    """
    from ..sources import FetchError, resolve_dataset

    try:
        return resolve_dataset(str(data) if data else None, allow_download=False, allow_demo=False).path
    except FetchError as e:
        raise RunError(str(e)) from None
