"""The runner: asks a backend every (case, sample) of a run, concurrently, and records the answers.

Why it is built this way:

* **Resumable by construction.** The plan is "every (case, sample) of the selection"; what is
  asked is the plan minus the pairs that already have a final record in ``records.jsonl``. A run
  killed at any point (even ``kill -9``) resumes by repeating the same command.
* **Bounded concurrency.** API backends (``batch_size == 1``) get up to ``max_connections``
  requests in flight; local backends (``batch_size > 1``) get batches sorted by prompt length,
  one batch at a time.
* **The runner owns retries.** Transport failures (``TransientError``: 429, 5xx, timeouts,
  dropped connections, malformed bodies) are retried with exponential backoff and full jitter,
  honouring ``Retry-After``. An answer that cannot be parsed is asked again ``parse_retries``
  times (the paper re-asked twice), then recorded as a missing value with its text. A request
  whose transport retries run out gets a non-final record (see ``runs``) and is asked again on
  resume; it never counts as a judgement. ``PermanentError`` stops the run after what is done is
  on disk.
* **Money.** Costs come from ``pricing``; ``max_cost`` is checked before each request against the
  worst case (estimated prompt tokens + ``max_tokens``), so the run stops *before* passing it.
* **Ctrl-C** (or SIGTERM) cancels what is in flight, writes the manifest with status
  ``interrupted`` and returns; the run resumes with the same command.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import math
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..backends.base import (
    Answer, Backend, BackendError, GenerationSettings, PermanentError, Request, TransientError, check_supports,
)
from ..data import Dataset, load_dataset, validate_parameter_names
from ..parse import parse_answer
from .pricing import ZERO, PriceMatch, PriceTable
from ..prompts import BUILTIN_TEMPLATES, MODES, Templates, render_prompt
from .rundir import (
    ManifestMismatch, Record, RunDir, RunError, add_usage, final_records, iter_records, manifest_differences,
    model_short_name, now_iso, read_manifest, usage_tokens,
)

log = logging.getLogger("casebench.run.execute")

DEFAULT_MODEL = "hf/smollm2-135m-instruct"
#: Per-mode defaults, as the paper ran them: score mode averages 3 samples at temperature 1.0.
DEFAULT_SAMPLES = {"binary": 1, "score": 3, "prob": 1}
DEFAULT_TEMPERATURE = {"binary": 0.0, "score": 1.0, "prob": 0.0}
#: The paper re-asked an unparseable answer twice.
DEFAULT_PARSE_RETRIES = 2
DEFAULT_MAX_CONNECTIONS = 8
#: Until real usage is seen, assume a token per 2 bytes of prompt (an over-estimate for every
#: common tokenizer), so the cost check errs on the side of stopping early.
INITIAL_TOKENS_PER_BYTE = 0.5

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


# --------------------------------------------------------------------------------------------
# Inputs: data path, case selection, configuration


def resolve_data_path(data: str | os.PathLike[str] | None) -> Path:
    """The dataset to run on: ``--data``, else ``$CASEBENCH_DATA``, else the user cache.

    Library calls never download or fall back to the demo set behind the caller's back; the
    ``casebench run`` command does both, and says so (``fetch.resolve_dataset``).
    """
    from ..sources import FetchError, resolve_dataset

    try:
        return resolve_dataset(str(data) if data else None, allow_download=False, allow_demo=False).path
    except FetchError as e:
        raise RunError(str(e)) from None


def _largest_remainder(sizes: Sequence[int], n: int, rng: random.Random) -> list[int]:
    """Split ``n`` across groups proportionally to ``sizes`` (Hamilton's method); ties in the
    remainders are broken at random (seeded), and no group gets more than its size."""
    total = sum(sizes)
    quotas = [n * s / total for s in sizes]
    alloc = [min(int(math.floor(q)), s) for q, s in zip(quotas, sizes)]
    order = sorted(range(len(sizes)), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), rng.random()))
    left = n - sum(alloc)
    while left > 0:
        progressed = False
        for i in order:
            if left and alloc[i] < sizes[i]:
                alloc[i] += 1
                left -= 1
                progressed = True
        if not progressed:  # pragma: no cover - n <= total makes this impossible
            break
    return alloc


def stratified_indices(dataset: Dataset | Sequence[Any], n: int, seed: int = 0) -> list[int]:
    """A seeded subset of ``n`` cases, stratified by category, then by intended safety.

    ``n`` is split across categories in proportion to their size (so 45 cases of the published
    dataset are one per category, 90 are one per category x intent), then within each category
    across the two intents, then drawn at random within each stratum. Deterministic for a given
    dataset, ``n`` and ``seed``; the indices come back in dataset order.
    """
    cases = list(dataset)
    if not 0 < n <= len(cases):
        raise RunError(f"--stratified {n}: must be between 1 and the dataset's {len(cases)} cases")
    rng = random.Random(seed)
    by_cat: dict[str, dict[bool, list[int]]] = {}
    for c in cases:
        by_cat.setdefault(c.category, {}).setdefault(bool(c.intended_safe), []).append(c.index)
    cats = sorted(by_cat)
    cat_alloc = _largest_remainder([sum(len(v) for v in by_cat[k].values()) for k in cats], n, rng)
    chosen: list[int] = []
    for cat, k in zip(cats, cat_alloc):
        if not k:
            continue
        intents = sorted(by_cat[cat])
        alloc = _largest_remainder([len(by_cat[cat][i]) for i in intents], k, rng)
        for intent, m in zip(intents, alloc):
            if m:
                chosen.extend(rng.sample(by_cat[cat][intent], m))
    return sorted(chosen)


@dataclass
class RetryPolicy:
    """Transport retries: exponential backoff with full jitter, honouring ``Retry-After``."""

    max_attempts: int = 8
    base_s: float = 0.5
    cap_s: float = 60.0
    #: a server asking for more than this is waited on only this long per attempt
    max_retry_after_s: float = 600.0

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
    resolved (and recorded in the manifest) by ``prepare``."""

    mode: str
    model: str = DEFAULT_MODEL
    data: str | os.PathLike[str] | None = None
    out: str | os.PathLike[str] | None = None
    removed: Sequence[str] | str = ()
    samples: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    system: str | None = None
    templates: Templates | None = None
    limit: int | None = None
    cases: Sequence[int] | None = None
    stratified: int | None = None
    seed: int = 0
    parse_retries: int = DEFAULT_PARSE_RETRIES
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_cost: float | None = None
    prices: PriceTable | None = None
    #: a runner-side limit per backend call (the backend has its own transport timeout)
    call_timeout: float | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    #: None: a bar on a terminal, periodic lines otherwise; False: quiet
    progress: bool | None = None


def default_out_dir(model: str, mode: str, removed: Sequence[str] = ()) -> Path:
    tail = "_" + "-".join(removed) if removed else ""
    return Path("runs") / f"{model_short_name(model)}_{mode}{tail}"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("casebench")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


def _secrets() -> tuple[str, ...]:
    """Values of environment variables that look like credentials, so that no error text we
    write or log can carry them even if a library put one there."""
    out = []
    for k, v in os.environ.items():
        ku = k.upper()
        if any(w in ku for w in ("KEY", "TOKEN", "SECRET", "PASSWORD")) and v and len(v.strip()) >= 6:
            out.append(v.strip())
    return tuple(sorted(set(out), key=len, reverse=True))


def redact_text(text: str) -> str:
    from ..backends import redact

    return redact(text, _secrets())


@dataclass
class Prepared:
    """A run, resolved: the dataset, selection, settings and the manifest's "what was asked"."""

    config: RunConfig
    dataset: Dataset
    out: Path
    mode: str
    removed: tuple[str, ...]
    cases: list[int]
    samples: int
    settings: GenerationSettings
    templates: Templates
    prices: PriceTable
    price: PriceMatch
    manifest: dict[str, Any]


def prepare(config: RunConfig, dataset: Dataset | None = None) -> Prepared:
    """Resolve every default and validate every input before anything is asked or written."""
    mode = config.mode
    if mode not in MODES:
        raise RunError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if dataset is None:
        dataset = load_dataset(resolve_data_path(config.data))
    removed = validate_parameter_names(config.removed)
    templates = config.templates or BUILTIN_TEMPLATES
    samples = DEFAULT_SAMPLES[mode] if config.samples is None else int(config.samples)
    if samples < 1:
        raise RunError(f"--samples must be at least 1, got {samples}")
    if config.parse_retries < 0:
        raise RunError(f"--parse-retries must be 0 or more, got {config.parse_retries}")
    if config.max_connections < 1:
        raise RunError(f"--max-connections must be at least 1, got {config.max_connections}")
    if config.max_cost is not None and config.max_cost < 0:
        raise RunError(f"--max-cost must be 0 or more, got {config.max_cost}")
    chosen = [x is not None for x in (config.limit, config.cases, config.stratified)]
    if sum(chosen) > 1:
        raise RunError("choose one of --limit, --stratified and an explicit case list")
    if config.limit is not None:
        if config.limit < 1:
            raise RunError(f"--limit must be at least 1, got {config.limit}")
        cases = list(range(min(config.limit, len(dataset))))
        how = f"limit={config.limit}"
    elif config.stratified is not None:
        cases = stratified_indices(dataset, config.stratified, config.seed)
        how = f"stratified={config.stratified} seed={config.seed}"
    elif config.cases is not None:
        cases = sorted(dict.fromkeys(int(c) for c in config.cases))
        bad = [c for c in cases if not 0 <= c < len(dataset)]
        if bad or not cases:
            raise RunError(f"case index {bad[0] if bad else '(none)'} is not in the dataset (0..{len(dataset) - 1})")
        how = "explicit"
    else:
        cases = list(range(len(dataset)))
        how = "all"
    base = GenerationSettings()
    settings = GenerationSettings(
        temperature=DEFAULT_TEMPERATURE[mode] if config.temperature is None else float(config.temperature),
        top_p=config.top_p,
        max_tokens=base.max_tokens if config.max_tokens is None else int(config.max_tokens),
        system=config.system,
    )
    prices = config.prices or PriceTable.load()
    price = prices.lookup(config.model)
    out = Path(config.out) if config.out else default_out_dir(config.model, mode, removed)
    manifest: dict[str, Any] = {
        "format": "casebench-run",
        "format_version": 1,
        "casebench_version": _version(),
        "dataset": {"path": str(Path(dataset.path).resolve()), "sha256": dataset.sha256,
                    "fingerprint": dataset.fingerprint, "cases": len(dataset)},
        "model": config.model,
        "mode": mode,
        "samples": samples,
        "settings": settings.to_dict(),
        "templates": {"source": templates.source, "sha256": templates.sha256(mode)},
        "removed": list(removed),
        "selection": {"how": how, "limit": config.limit, "stratified": config.stratified,
                      "seed": config.seed if config.stratified is not None else None, "cases": cases},
        "parse_retries": config.parse_retries,
        "retry": config.retry.to_dict(),
        "max_connections": config.max_connections,
        "price": price.to_dict(),
    }
    return Prepared(config, dataset, out, mode, removed, cases, samples, settings, templates, prices, price, manifest)


def check_resumable(prep: Prepared) -> dict[str, Any] | None:
    """The existing manifest of the output directory (None if new); raises ``ManifestMismatch``
    listing every difference when it holds another run."""
    if not (prep.out / "manifest.json").exists():
        # files starting with "." are ours (the lock, a temp manifest left by a kill)
        if prep.out.exists() and (not prep.out.is_dir()
                                  or any(not p.name.startswith(".") for p in prep.out.iterdir())):
            raise RunError(f"{prep.out} exists, is not empty and is not a run directory; choose another -o")
        return None
    old = read_manifest(prep.out)
    diffs = manifest_differences(old, prep.manifest)
    if diffs:
        raise ManifestMismatch(prep.out, diffs)
    return old


# --------------------------------------------------------------------------------------------
# Execution


@dataclass
class _Job:
    case: int
    sample: int
    prompt: str
    asks: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0


class _GaveUp(Exception):
    """Transport retries exhausted for one backend call."""


@dataclass
class RunSummary:
    run_dir: Path
    status: str  # complete | incomplete | interrupted | budget | failed
    requests: int
    final: int
    answered: int
    missing: int
    pending: int
    asked_this_session: int
    transport_failures: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cost_known: bool
    elapsed_s: float
    message: str = ""
    repaired_bytes: int = 0

    @property
    def exit_code(self) -> int:
        if self.status == "complete":
            return EXIT_OK
        if self.status == "interrupted":
            return EXIT_INTERRUPTED
        return EXIT_FAILED

    def line(self) -> str:
        cost = f"${self.cost_usd:.4f}" if self.cost_known else "cost unknown"
        return (f"{self.status}: {self.final}/{self.requests} requests final "
                f"({self.answered} answered, {self.missing} missing), {self.pending} pending; "
                f"{self.asked_this_session} asked now, {self.retries} retries; "
                f"{self.prompt_tokens + self.completion_tokens} tokens, {cost}; {self.elapsed_s:.1f}s")


class _Progress:
    """A tqdm bar on a terminal; on a pipe (CI logs) a plain line every 10% or 30 s."""

    def __init__(self, total: int, initial: int, enabled: bool | None):
        self.total, self.n = total, initial
        self.enabled = enabled is not False
        self.tty = bool(enabled) or (enabled is None and sys.stderr.isatty())
        self.bar = None
        self.t0 = time.monotonic()
        self.initial = initial
        self._last_line = (initial, self.t0)
        if self.enabled and self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="req", dynamic_ncols=True, smoothing=0.1,
                            file=sys.stderr)

    def update(self, k: int, postfix: str) -> None:
        self.n += k
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(k)
            return
        now = time.monotonic()
        last_n, last_t = self._last_line
        if self.n - last_n >= max(1, self.total // 10) or now - last_t >= 30 or self.n == self.total:
            rate = (self.n - self.initial) / max(now - self.t0, 1e-9)
            eta = f"{(self.total - self.n) / rate:.0f}s" if rate > 0 else "?"
            print(f"casebench: {self.n}/{self.total} requests, {rate:.2f} req/s, ETA {eta}, {postfix}",
                  file=sys.stderr, flush=True)
            self._last_line = (self.n, now)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Runner:
    """Executes a prepared run on an open run directory with a backend."""

    def __init__(self, prep: Prepared, backend: Backend, rundir: RunDir, rng: random.Random | None = None):
        self.prep, self.backend, self.rundir = prep, backend, rundir
        self.cfg = prep.config
        self.rng = rng or random.Random()
        self.batch_size = max(1, int(getattr(backend, "batch_size", 1) or 1))
        self.queue: collections.deque[_Job] = collections.deque()
        self.stop_reason: str | None = None
        self.stop_message = ""
        self.tasks: list[asyncio.Task[None]] = []
        # accounting
        self.spent = 0.0
        self.reserved = 0.0
        self.tokens_per_byte = INITIAL_TOKENS_PER_BYTE
        self.observed_tpb = 0.0
        self.asked = 0
        self.retries = 0
        self.transport_failures = 0
        self.missing = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    # -- planning
    def plan(self) -> tuple[list[_Job], int]:
        """Pending jobs (no final record yet) and the number already final."""
        recs = list(iter_records(self.rundir.path))
        finals = final_records(recs)
        for r in recs:
            p, c = usage_tokens(r.usage)
            self.prompt_tokens += p
            self.completion_tokens += c
            self.spent += self.prep.price.price.cost(p, c)
        ds, prep = self.prep.dataset, self.prep
        jobs: list[_Job] = []
        done = 0
        for ci in prep.cases:
            prompt = None
            for s in range(prep.samples):
                if (ci, s) in finals:
                    done += 1
                    continue
                if prompt is None:
                    prompt = render_prompt(ds[ci].ablated(prep.removed), prep.mode, prep.templates)
                jobs.append(_Job(ci, s, prompt))
        if self.batch_size > 1:
            jobs.sort(key=lambda j: len(j.prompt))
        return jobs, done

    # -- money
    def _worst_cost(self, jobs: Sequence[_Job]) -> float:
        price = self.prep.price.price
        return sum(price.cost(math.ceil(len(j.prompt.encode()) * self.tokens_per_byte), self.prep.settings.max_tokens)
                   for j in jobs)

    def _reserve(self, jobs: Sequence[_Job]) -> float | None:
        worst = self._worst_cost(jobs)
        limit = self.cfg.max_cost
        if limit is not None and self.spent + self.reserved + worst > limit:
            return None
        self.reserved += worst
        return worst

    def _account(self, job: _Job, usage: dict[str, int]) -> None:
        p, c = usage_tokens(usage)
        self.prompt_tokens += p
        self.completion_tokens += c
        self.spent += self.prep.price.price.cost(p, c)
        if p:  # learn the tokenizer's density from real usage (the largest seen, with a margin)
            self.observed_tpb = max(self.observed_tpb, p / max(1, len(job.prompt.encode())))
            self.tokens_per_byte = self.observed_tpb * 1.1

    # -- asking
    async def _call(self, jobs: Sequence[_Job]) -> tuple[list[Answer], float]:
        want = "p_safe" if self.prep.mode == "prob" else "text"
        reqs = [Request(case=j.case, sample=j.sample, prompt=j.prompt, want=want, system=self.prep.settings.system)
                for j in jobs]
        policy = self.cfg.retry
        for attempt in range(1, policy.max_attempts + 1):
            t0 = time.monotonic()
            retry_after = None
            try:
                coro = self.backend.answer(reqs, self.prep.settings)
                if self.cfg.call_timeout:
                    answers = await asyncio.wait_for(coro, self.cfg.call_timeout)
                else:
                    answers = await coro
                if len(answers) != len(reqs):
                    raise PermanentError(f"backend returned {len(answers)} answers for {len(reqs)} requests")
                return list(answers), time.monotonic() - t0
            except PermanentError:
                raise
            except TransientError as e:
                reason, retry_after = str(e), e.retry_after
            except asyncio.TimeoutError:
                reason = f"no answer within {self.cfg.call_timeout:g}s"
            except BackendError as e:
                reason = str(e)
            reason = redact_text(reason)
            if attempt == policy.max_attempts:
                raise _GaveUp(f"{reason} (gave up after {attempt} attempts)")
            self.retries += 1
            wait = policy.delay(attempt, retry_after, self.rng)
            where = f"case {jobs[0].case} sample {jobs[0].sample}" + (f" (+{len(jobs) - 1})" if len(jobs) > 1 else "")
            log.info("%s: %s; retry %d/%d in %.1fs", where, reason, attempt, policy.max_attempts - 1, wait)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _judge(self, job: _Job, ans: Answer) -> Record | None:
        """The final record for an answer, or None when it should be asked again."""
        mode = self.prep.mode
        base = dict(case=job.case, sample=job.sample, text=ans.text, usage=job.usage,
                    latency_s=round(job.latency_s, 4), attempts=job.asks, detail=dict(ans.detail or {}))
        if mode == "prob":
            p = ans.p_safe
            if p is not None and isinstance(p, (int, float)) and math.isfinite(p) and 0.0 <= p <= 1.0:
                return Record(label="safe" if p > 0.5 else "unsafe", p_safe=float(p), **base)
            # A missing P(safe) is final: the same prompt at temperature 0 gives the same tokens.
            err = ans.error or ("no P(safe): neither 'safe' nor 'unsafe' was among the answer's first-token "
                                "alternatives" if p is None else f"P(safe) out of range: {p!r}")
            return Record(error=redact_text(err), **base)
        if ans.text is None:
            err = ans.error or "empty answer"
        else:
            parsed = parse_answer(mode, ans.text)
            if parsed.ok:
                p_safe = None if parsed.score is None else (parsed.score - 0.5) / 10.0
                return Record(label=parsed.label, score=parsed.score, p_safe=p_safe, **base)
            err = parsed.error
        if job.asks <= self.cfg.parse_retries:
            return None
        return Record(error=redact_text(str(err)), **base)

    def _postfix(self) -> str:
        tok = self.prompt_tokens + self.completion_tokens
        cost = f"${self.spent:.4f}" if self.prep.price.status in ("table", "local") else "$?"
        return f"tok={tok} cost={cost} miss={self.missing} retry={self.retries} fail={self.transport_failures}"

    async def _process(self, jobs: list[_Job]) -> None:
        reserved = self._reserve(jobs)
        if reserved is None:
            for j in reversed(jobs):
                self.queue.appendleft(j)
            if self.stop_reason is None:
                self.stop_reason = "budget"
                self.stop_message = (f"stopped before passing --max-cost ${self.cfg.max_cost:g} "
                                     f"(spent ${self.spent:.4f}); raise --max-cost and re-run the same command "
                                     "to go on")
            return
        try:
            try:
                answers, latency = await self._call(jobs)
            except _GaveUp as e:
                for j in jobs:
                    self.rundir.append(Record(case=j.case, sample=j.sample, error=f"transport: {e}",
                                              usage=j.usage, latency_s=round(j.latency_s, 4), attempts=j.asks,
                                              final=False))
                    self.transport_failures += 1
                self.progress.update(0, self._postfix())
                return
        finally:
            self.reserved -= reserved
        self.asked += len(jobs)
        finished = 0
        for job, ans in zip(jobs, answers):
            job.asks += 1
            job.usage = add_usage(job.usage, ans.usage or {})
            job.latency_s += latency
            self._account(job, ans.usage or {})
            rec = self._judge(job, ans)
            if rec is None:
                if self.batch_size > 1:
                    self.queue.append(job)
                else:
                    self.queue.appendleft(job)
                continue
            self.rundir.append(rec)
            finished += 1
            if not rec.answered:
                self.missing += 1
        self.progress.update(finished, self._postfix())

    async def _worker(self) -> None:
        while self.stop_reason is None and self.queue:
            jobs = [self.queue.popleft() for _ in range(min(self.batch_size, len(self.queue)))]
            try:
                await self._process(jobs)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # PermanentError, or a bug: stop everything, keep what is on disk
                if isinstance(e, PermanentError):
                    msg = f"the backend refused a request: {e}"
                else:
                    log.debug("worker failed", exc_info=True)
                    msg = f"unexpected error: {type(e).__name__}: {e}"
                if self.stop_reason is None:
                    self.stop_reason = "failed"
                    self.stop_message = redact_text(msg)
                for t in self.tasks:
                    if t is not asyncio.current_task():
                        t.cancel()
                return

    def _interrupt(self) -> None:
        if self.stop_reason is None:
            self.stop_reason = "interrupted"
            self.stop_message = "interrupted; re-run the same command to resume"
        for t in self.tasks:
            t.cancel()

    async def execute(self) -> RunSummary:
        t0 = time.monotonic()
        jobs, done = self.plan()
        total = len(self.prep.cases) * self.prep.samples
        self.queue.extend(jobs)
        self.progress = _Progress(total, done, self.cfg.progress)
        loop = asyncio.get_running_loop()
        handled: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._interrupt)
                handled.append(sig)
            except (RuntimeError, NotImplementedError, ValueError):
                pass
        n_workers = 1 if self.batch_size > 1 else min(self.cfg.max_connections, max(1, len(jobs)))
        try:
            self.tasks = [asyncio.create_task(self._worker()) for _ in range(n_workers)]
            try:
                await asyncio.gather(*self.tasks, return_exceptions=False)
            except asyncio.CancelledError:
                if self.stop_reason is None:  # cancelled from outside (e.g. asyncio.run on Ctrl-C)
                    self._interrupt()
                await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            self.progress.close()
        elapsed = time.monotonic() - t0
        return self._summary(elapsed)

    def _summary(self, elapsed: float) -> RunSummary:
        recs = list(iter_records(self.rundir.path))
        finals = final_records(recs)
        planned = [(c, s) for c in self.prep.cases for s in range(self.prep.samples)]
        final = sum(1 for k in planned if k in finals)
        answered = sum(1 for k in planned if k in finals and finals[k].answered)
        pending = len(planned) - final
        status = self.stop_reason or ("complete" if pending == 0 else "incomplete")
        message = self.stop_message
        if status == "incomplete":
            message = (f"{pending} request(s) failed in transport after {self.cfg.retry.max_attempts} attempts; "
                       "re-run the same command to ask them again")
        return RunSummary(
            run_dir=self.rundir.path, status=status, requests=len(planned), final=final, answered=answered,
            missing=final - answered, pending=pending, asked_this_session=self.asked,
            transport_failures=self.transport_failures, retries=self.retries, prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens, cost_usd=self.spent,
            cost_known=self.prep.price.status in ("table", "local"), elapsed_s=elapsed, message=message,
            repaired_bytes=self.rundir.repaired_bytes,
        )


def _is_local(url: Any) -> bool:
    from ..backends import is_local_url

    return isinstance(url, str) and is_local_url(url)


def _describe(backend: Backend) -> dict[str, Any]:
    try:
        desc = backend.describe()
    except Exception as e:  # a description is bookkeeping; never fail a run on it
        desc = {"error": f"describe() failed: {type(e).__name__}"}
    return json.loads(redact_text(json.dumps(desc, default=str)))


async def run_async(prep: Prepared, backend: Backend, rng: random.Random | None = None) -> RunSummary:
    """Execute a prepared run with a ready backend (the caller owns the backend)."""
    check_supports(backend, "p_safe" if prep.mode == "prob" else "text", prep.mode)
    with RunDir(prep.out) as rundir:
        old = check_resumable(prep)  # again, now under the lock
        manifest = dict(old or {})
        sessions = list(manifest.get("sessions") or [])
        manifest.update(prep.manifest)
        manifest["backend"] = _describe(backend)
        if prep.price.status == "unknown" and _is_local(manifest["backend"].get("base_url")):
            prep.price = PriceMatch(ZERO, "local")  # a server on this machine costs nothing per token
            manifest["price"] = prep.price.to_dict()
        manifest.setdefault("started_at", now_iso())
        manifest["status"] = "running"
        manifest["finished_at"] = None
        session = {"started_at": now_iso(), "pid": os.getpid()}
        manifest["sessions"] = sessions + [session]
        rundir.write_manifest(manifest)
        if prep.price.status == "unknown":
            log.warning("no price known for %s: cost is counted as 0 (add it with --prices FILE.json)",
                        prep.config.model)
            if prep.config.max_cost is not None:
                log.warning("--max-cost has no effect without a price for %s", prep.config.model)
        runner = Runner(prep, backend, rundir, rng)
        summary: RunSummary | None = None
        try:
            summary = await runner.execute()
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Ctrl-C before the signal handlers were in place: same outcome as after
            summary = runner._summary(0.0)
            summary.status, summary.message = "interrupted", "interrupted; re-run the same command to resume"
        finally:
            if summary is None:  # an unexpected error: still leave a readable, resumable manifest
                summary = runner._summary(0.0)
                summary.status = "failed"
            session.update(finished_at=now_iso(), status=summary.status, asked=summary.asked_this_session,
                           retries=summary.retries, transport_failures=summary.transport_failures,
                           elapsed_s=round(summary.elapsed_s, 3))
            prev_elapsed = float((old or {}).get("totals", {}).get("elapsed_s", 0.0) or 0.0)
            manifest["status"] = summary.status
            manifest["finished_at"] = now_iso() if summary.status == "complete" else None
            manifest["stopped_at"] = now_iso()
            manifest["message"] = summary.message or None
            manifest["totals"] = {
                "requests": summary.requests, "final": summary.final, "answered": summary.answered,
                "missing": summary.missing, "pending": summary.pending,
                "prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.completion_tokens,
                "cost_usd": round(summary.cost_usd, 6), "cost_status": prep.price.status,
                "elapsed_s": round(prev_elapsed + summary.elapsed_s, 3),
            }
            rundir.write_manifest(manifest)
        return summary


def make_run_backend(config: RunConfig) -> Backend:
    """The backend a config names (``make_backend`` with the options the user gave)."""
    from ..backends import make_backend

    options = {k: v for k, v in config.backend_options.items() if v is not None}
    try:
        return make_backend(config.model, **options)
    except TypeError as e:
        raise RunError(f"backend for {config.model!r} does not take these options: {redact_text(str(e))}") from None


def run(config: RunConfig, backend: Backend | None = None, dataset: Dataset | None = None,
        rng: random.Random | None = None) -> RunSummary:
    """Prepare, check and execute a run (synchronously). Builds and closes the backend unless one
    is given. Raises ``RunError`` (incl. ``ManifestMismatch``, ``RunLocked``) before anything is
    asked when the inputs or the run directory do not fit."""
    prep = prepare(config, dataset)
    check_resumable(prep)  # refuse a mismatching directory before loading a model
    own = backend is None
    if own:
        backend = make_run_backend(config)
    assert backend is not None

    async def main() -> RunSummary:
        try:
            return await run_async(prep, backend, rng)
        finally:
            if own:
                try:
                    await backend.aclose()
                except Exception:  # closing is best effort
                    pass

    return asyncio.run(main())
