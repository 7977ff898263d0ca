"""The runner: asks a backend every (case, sample) of a run, concurrently, and records the answers.

Why it is built this way:

* **Resumable by construction.** The plan is "every (case, sample) of the selection"; what is
  asked is the plan minus the pairs that already have a final record in ``records.jsonl``. A run
  killed at any point (even ``kill -9``) resumes by repeating the same command. A resume that
  would ask anything differently (``record.Asked``) is refused before the manifest is touched.
* **Bounded concurrency.** API backends (``batch_size == 1``) get up to ``max_connections``
  requests in flight; local backends (``batch_size > 1``) get batches sorted by prompt length,
  one batch at a time.
* **Every answer on disk at once.** A backend that delivers answers one by one
  (``Capabilities.per_answer``: local models) has each answer read and recorded the moment it is
  ready, not when its batch ends, so a kill loses at most the sequences still being generated;
  cancelling the call (Ctrl-C) stops the backend at its next step, and what it had not finished
  is asked again on resume.
* **The runner owns retries.** Transport failures (``TransientError``: 429, 5xx, timeouts,
  dropped connections, malformed bodies) are retried with exponential backoff and full jitter,
  honouring ``Retry-After``. An answer the mode cannot read is asked again ``parse_retries``
  times (the paper re-asked twice), then recorded as a missing value with its text. A request
  whose transport retries run out gets a non-final record and is asked again on resume; it never
  counts as a judgement. ``PermanentError`` stops the run after what is done is on disk.
* **The mode decides** how a case is asked (its chat, what the backend must give, when to stop
  generating) and how an answer is read; the runner never looks at a mode's name.
* **Money.** Costs come from ``pricing``; ``max_cost`` is checked before each request against the
  worst case (estimated prompt tokens + ``max_tokens``), so the run stops *before* passing it.
* **Async first.** ``arun`` works inside a running event loop (a notebook: ``await
  casebench.arun(config)``); ``run`` is its synchronous wrapper. Cancelling the task (Ctrl-C
  under ``asyncio.run``, or the CLI's SIGTERM handler) writes the manifest with status
  ``interrupted``; the run resumes with the same command. Signal handlers are the CLI's business.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import os
import platform
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..backends.base import (
    Answer, Backend, BackendError, PermanentError, Request, TransientError, Unreachable, check_supports,
)
from ..data import Dataset
from ..modes import Reading
from ..prompts import REVEAL_PLACEMENTS, REVEAL_QUERY, RevealTurn
from .config import DEFAULT_MODEL, DEFAULT_PARSE_RETRIES, RetryPolicy, RunConfig, default_out_dir, resolve_data_path
from .pricing import ZERO, PriceMatch
from .prepare import Prepared, casebench_version, check_resumable, grow, prepare, smaller_run_beside
from .progress import Progress
from .record import (
    Invocation, Record, RunDir, RunError, RunCounts, RunState, Totals, add_usage, final_records, iter_records, now_iso,
    usage_tokens,
)
from .redact import redact_json, redact_text
from .reveal import RevealSteps, reader_prompt
from .select import stratified_indices

__all__ = [
    "DEFAULT_MODEL", "DEFAULT_PARSE_RETRIES", "RetryPolicy", "RunConfig", "Prepared", "RunSummary", "prepare",
    "check_resumable", "arun", "run", "run_prepared", "make_run_backend", "stratified_indices", "resolve_data_path",
    "default_out_dir",
]

log = logging.getLogger("casebench.runner")

#: Until real usage is seen, assume a token per 2 bytes of prompt (an over-estimate for every
#: common tokenizer), so the cost check errs on the side of stopping early.
INITIAL_TOKENS_PER_BYTE = 0.5
#: the provider batch's state, in the run directory (``backends.batch``)
BATCH_STATE = "batch.json"

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


# --------------------------------------------------------------------------------------------
# Execution


@dataclass
class _Job:
    case: int
    sample: int
    system: str | None
    prompt: str
    asks: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    #: the (user, assistant) turns before ``prompt`` (context as turns)
    history: tuple[tuple[str, str], ...] = ()
    #: the last unreadable answer and why (a re-ask with a repair message quotes it)
    unread: tuple[str, str] | None = None
    #: the case's query and its context as asked (``Request.query`` / ``Request.context``)
    query: str | None = None
    context: Mapping[str, Any] | None = None
    #: a live reveal conversation (``runs.reveal``): every user turn, and the 0-based turn asked
    reveal: tuple[RevealTurn, ...] = ()
    turn: int = 0

    @property
    def size(self) -> int:
        return len(self.prompt) + len(self.system or "") + sum(len(u) + len(a) for u, a in self.history)


class _GaveUp(Exception):
    """Transport retries exhausted for one backend call."""


class _Sink:
    """Answers a per-answer backend delivered, waiting to be read and recorded: filled by the
    backend's ``on_answer`` (on the event loop's thread), emptied by the runner's drain task."""

    def __init__(self) -> None:
        self.items: list[tuple[_Job, Answer, float]] = []
        self.delivered: set[int] = set()  # id() of the jobs that got an answer
        self.closed = False
        self.ready = asyncio.Event()
        self.t0 = time.monotonic()

    def for_jobs(self, jobs: Sequence[_Job], seconds: float | None = None) -> Callable[[int, Answer], None]:
        """The ``on_answer`` of a call that asked ``jobs`` (positions index into them)."""

        def on_answer(i: int, answer: Answer) -> None:
            if not 0 <= i < len(jobs) or id(jobs[i]) in self.delivered or self.closed:
                return
            self.delivered.add(id(jobs[i]))
            self.items.append((jobs[i], answer, time.monotonic() - self.t0 if seconds is None else seconds))
            self.ready.set()

        return on_answer

    def undelivered(self, jobs: Sequence[_Job]) -> list[_Job]:
        return [j for j in jobs if id(j) not in self.delivered]

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    async def take(self) -> tuple[list[tuple[_Job, Answer, float]], bool]:
        """What was delivered since the last take, and whether more may come."""
        await self.ready.wait()
        self.ready.clear()
        items, self.items = self.items, []
        return items, not self.closed or bool(self.items)


@dataclass(kw_only=True)
class RunSummary(RunCounts):
    """What one invocation of a run did: the run's counts (``RunCounts``) and state when it
    stopped, and this invocation's own requests, retries, tokens, cost and time."""

    run_dir: Path
    status: RunState
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
        if self.status is RunState.COMPLETE:
            return EXIT_OK
        if self.status is RunState.INTERRUPTED:
            return EXIT_INTERRUPTED
        return EXIT_FAILED

    def line(self) -> str:
        cost = f"${self.cost_usd:.4f}" if self.cost_known else "cost unknown"
        return (f"{self.status}: {self.describe()}; "
                f"{self.asked_this_session} asked now, {self.retries} retries; "
                f"{self.prompt_tokens + self.completion_tokens} tokens, {cost}; {self.elapsed_s:.1f}s")


def interrupted_message(counts: RunCounts, final_at_start: int | None) -> str:
    """What an interrupted invocation kept, counted on disk: the requests that became final
    while it ran (each finished answer is recorded the moment it is read), and the run's total."""
    kept = counts.final - final_at_start if final_at_start is not None else 0
    return (f"interrupted: kept {kept} answer(s) finished in this invocation ({counts.final} of "
            f"{counts.requests} requests final in all); re-run the same command to resume")


class Runner(RevealSteps):
    """Executes a prepared run on an open run directory with a backend (a reveal conversation's
    steps: ``reveal.RevealSteps``)."""

    job_type = _Job

    def __init__(self, prep: Prepared, backend: Backend, rundir: RunDir, rng: random.Random | None = None):
        self.prep, self.backend, self.rundir = prep, backend, rundir
        self.cfg = prep.config
        self.mode = prep.mode
        self.rng = rng or random.Random()
        self.batch_size = max(1, int(getattr(backend, "batch_size", 1) or 1))
        self.shared_samples = bool(getattr(backend.capabilities, "shared_samples", False))
        self.per_answer = bool(getattr(backend.capabilities, "per_answer", False))
        self.call_limit = self.cfg.call_limit_s
        self.stop = self.mode.stopper() if prep.asked.stop_at_verdict else None
        self.queue: collections.deque[_Job] = collections.deque()
        self.stop_reason: RunState | None = None
        self.stop_message = ""
        #: requests final on disk when this invocation planned (None: it never planned)
        self.final_at_start: int | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.progress: Progress | None = None
        # accounting
        self.spent = 0.0
        self.reserved = 0.0
        self.tokens_per_byte = INITIAL_TOKENS_PER_BYTE
        self.observed_tpb = 0.0
        self.asked = 0
        self.retries = 0
        self.transport_failures = 0
        #: the transport failures already said (each cause is said once without -v) and the last
        self.causes_said: set[str] = set()
        self.last_cause: str | None = None
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
        live = prep.context_as in REVEAL_PLACEMENTS
        earlier = self._recorded_turns() if live else {}  # a conversation goes on from its last recorded turn
        jobs: list[_Job] = []
        done = 0
        for ci in prep.cases:
            chat = None
            for s in range(prep.samples):
                if (ci, s) in finals:
                    done += 1
                    continue
                if live:
                    asked = ds[ci].ablated(prep.removed)
                    if prep.mutation is not None:
                        asked = replace(asked, query=prep.mutation.texts[ci])
                    jobs.append(self._turn_job(ci, s, asked, earlier.get((ci, s), ())))
                    continue
                if chat is None:
                    asked = ds[ci].ablated(prep.removed)
                    if prep.mutation is not None:  # the query reworded, the context untouched
                        asked = replace(asked, query=prep.mutation.texts[ci])
                    # --system comes first, a system-placed context after it
                    chat = self.mode.conversation(asked, prep.templates, prep.context_as).with_system(
                        prep.settings.system)
                jobs.append(_Job(ci, s, chat.system, chat.prompt, history=chat.history, query=asked.query,
                                 context=asked.context))
        if self.batch_size > 1:
            jobs.sort(key=lambda j: j.size)
        self.final_at_start = done
        return jobs, done

    # -- money
    def _worst_cost(self, jobs: Sequence[_Job]) -> float:
        price = self.prep.price.price
        return sum(price.cost(math.ceil(j.size * self.tokens_per_byte), self.prep.settings.max_tokens) for j in jobs)

    def _reserve(self, jobs: Sequence[_Job]) -> float | None:
        worst = self._worst_cost(jobs)
        limit = self.cfg.max_cost
        if limit is not None and self.spent + self.reserved + worst > limit:
            return None
        self.reserved += worst
        return worst

    def _account(self, job: _Job, usage: dict[str, int], price: Any = None) -> None:
        p, c = usage_tokens(usage)
        self.prompt_tokens += p
        self.completion_tokens += c
        self.spent += (price or self.prep.price.price).cost(p, c)
        if p:  # learn the tokenizer's density from real usage (the largest seen, with a margin)
            self.observed_tpb = max(self.observed_tpb, p / max(1, job.size))
            self.tokens_per_byte = self.observed_tpb * 1.1

    # -- asking
    def _request(self, j: _Job) -> Request:
        prompt, history = j.prompt, j.history
        repair = self.mode.repair_message(j.unread[1]) if j.unread and self.prep.manifest.asked.reask == "repair" else None
        if repair:  # a re-ask that can differ: the unreadable answer, then what was wrong and the format
            prompt, history = repair, (*history, (j.prompt, j.unread[0]))
        return Request(case=j.case, sample=j.sample, prompt=prompt, want=self.mode.want,  # type: ignore[arg-type]
                       system=j.system, stop=self.stop, history=history, mode=self.mode.name, query=j.query,
                       context=j.context)

    async def _call(self, jobs: Sequence[_Job], sink: "_Sink | None" = None) -> tuple[list[Answer], float]:
        """Ask ``jobs`` with transport retries. With a ``sink`` (per-answer backends), each
        answer goes to it as soon as the backend has it, and a retry asks only the jobs that
        got none."""
        policy = self.cfg.retry
        for attempt in range(1, policy.max_attempts + 1):
            todo = list(jobs) if sink is None else sink.undelivered(jobs)
            if not todo:
                return [], 0.0
            reqs = [self._request(j) for j in todo]
            t0 = time.monotonic()
            retry_after = None
            try:
                if sink is None:
                    coro = self.backend.answer(reqs, self.prep.settings)
                else:
                    coro = self.backend.answer(reqs, self.prep.settings,  # type: ignore[call-arg]
                                               on_answer=sink.for_jobs(todo), on_tokens=self._tokens)
                if self.call_limit:
                    answers = await asyncio.wait_for(coro, self.call_limit)
                else:
                    answers = await coro
                if len(answers) != len(reqs):
                    raise PermanentError(f"backend returned {len(answers)} answers for {len(reqs)} requests")
                if sink is not None:  # whatever the backend returned without delivering it
                    deliver = sink.for_jobs(todo, time.monotonic() - t0)
                    for i, a in enumerate(answers):
                        deliver(i, a)
                return list(answers), time.monotonic() - t0
            except PermanentError:
                raise
            except TransientError as e:
                reason, retry_after = str(e), e.retry_after
            except asyncio.TimeoutError:
                reason = f"no answer within {self.call_limit:g}s"
            except BackendError as e:
                reason = str(e)
            reason = redact_text(reason)
            self.last_cause = reason
            if attempt == policy.max_attempts:
                if reason not in self.causes_said:
                    self.causes_said.add(reason)
                    log.warning("case %d sample %d: %s; gave up after %d attempts", todo[0].case, todo[0].sample,
                                reason, attempt)
                raise _GaveUp(f"{reason} (gave up after {attempt} attempts)")
            self.retries += 1
            wait = policy.delay(attempt, retry_after, self.rng)
            where = f"case {todo[0].case} sample {todo[0].sample}" + (f" (+{len(todo) - 1})" if len(todo) > 1 else "")
            # each cause once in plain words without -v; every retry with -v
            level = logging.INFO if reason in self.causes_said else logging.WARNING
            self.causes_said.add(reason)
            log.log(level, "%s: %s; retry %d/%d in %.1fs", where, reason, attempt, policy.max_attempts - 1, wait)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(self, jobs: Sequence[_Job], answers: Sequence[Answer]) -> list[Reading]:
        """The mode's reading of each answer; modes that read behaviour ask the refusal
        classifier first (one batch for the whole call)."""
        stopped = self.stop is not None
        if not self.mode.reads_behaviour:
            return [self.mode.read(a, stopped_early=stopped) for a in answers]
        from ..classify import Item

        # an encoded query asked for an answer in the same encoding: the reader reads the answer
        # decoded (and the query in its base wording); the record keeps the raw answer
        decode = self.prep.mutation.mutation.decode if self.prep.mutation is not None else None
        texts = [decode(a.text or "") if decode else (a.text or "") for a in answers]
        # a reveal turn before the query is read against what the user said in it (runs.reveal)
        items = [Item(reader_prompt(j.turn, len(j.reveal), j.reveal[-1].holds == REVEAL_QUERY, j.prompt,
                                    self.prep.dataset[j.case].query) if j.reveal
                      else self.prep.dataset[j.case].query, t) for j, t in zip(jobs, texts)]
        t0 = time.perf_counter()
        verdicts = await self.prep.classifier.aclassify(items)
        per_item = (time.perf_counter() - t0) / max(1, len(items))
        readings = [self.mode.read_behaviour(a, v, partial_as_safe=self.cfg.partial_as_safe)
                    for a, v in zip(answers, verdicts)]
        if decode:
            readings = [replace(r, detail={**r.detail, "decoded_answer": t}) for r, t in zip(readings, texts)]
        # what reading the behaviour cost, per answer (the bench compares it with the run's time)
        return [replace(r, detail={**r.detail, "classify_s": round(per_item, 6)}) for r in readings]

    def _record(self, job: _Job, ans: Answer, reading: Reading) -> Record | None:
        """The final record for an answer, or None when it should be asked again."""
        base = dict(case=job.case, sample=job.sample, text=ans.text, usage=job.usage,
                    latency_s=round(job.latency_s, 4), attempts=job.asks,
                    detail={**dict(ans.detail or {}), **dict(reading.detail)})
        if reading.ok:
            return Record(label=reading.label, score=reading.score, p_safe=reading.p_safe,
                          behaviour=reading.behaviour, **base)
        if reading.retry and job.asks <= self.cfg.parse_retries:
            job.unread = (ans.text or "", str(reading.error))
            return None
        return Record(error=redact_text(str(reading.error)), behaviour=reading.behaviour, **base)

    def _work(self, job: _Job) -> float:
        """A job's share of the run's time, for the expected duration (prompt bytes in prob mode)."""
        return float(max(1, job.size)) if self.mode.want == "p_safe" else 1.0

    def _postfix(self) -> str:
        tok = self.prompt_tokens + self.completion_tokens
        cost = f"${self.spent:.4f}" if self.prep.price.status != "unknown" else "$?"
        return f"tok={tok} cost={cost} miss={self.missing} retry={self.retries} fail={self.transport_failures}"

    async def _process(self, jobs: list[_Job]) -> None:
        assert self.progress is not None
        reserved = self._reserve(jobs)
        if reserved is None:
            for j in reversed(jobs):
                self.queue.appendleft(j)
            if self.stop_reason is None:
                self.stop_reason = RunState.BUDGET
                self.stop_message = (f"stopped before passing --max-cost ${self.cfg.max_cost:g} "
                                     f"(spent ${self.spent:.4f}); raise --max-cost and re-run the same command "
                                     "to go on")
            return
        if self.per_answer:
            await self._process_each(jobs, reserved)
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
        await self._answered(jobs, answers, latency)

    async def _process_each(self, jobs: list[_Job], reserved: float) -> None:
        """One call to a per-answer backend: each answer is read and recorded as soon as the
        backend delivers it (in delivery order, by one drain task), while the call goes on. When
        the call is cancelled, what was delivered is still recorded before this returns."""
        sink = _Sink()
        drain = asyncio.create_task(self._drain(sink))
        try:
            try:
                await self._call(jobs, sink)
            except _GaveUp as e:
                for j in sink.undelivered(jobs):
                    self.rundir.append(Record(case=j.case, sample=j.sample, error=f"transport: {e}",
                                              usage=j.usage, latency_s=round(j.latency_s, 4), attempts=j.asks,
                                              final=False))
                    self.transport_failures += 1
                self.progress.update(0, self._postfix())  # type: ignore[union-attr]
        finally:
            self.reserved -= reserved
            sink.close()
            await drain  # the answers delivered before a cancellation are recorded too

    async def _drain(self, sink: "_Sink") -> None:
        while True:
            items, more = await sink.take()
            if items:
                await self._answered([j for j, _, _ in items], [a for _, a, _ in items],
                                     [t for _, _, t in items])
            if not more:
                return

    def _tokens(self, n: int) -> None:
        if self.progress is not None:
            self.progress.tokens(n, self._postfix())

    async def _answered(self, jobs: Sequence[_Job], answers: Sequence[Answer], latency: float | Sequence[float],
                        price: Any = None) -> None:
        """Account for, read and record the answers of one call (online or from a batch).
        ``latency``: the call's seconds, or one per answer; an answer that timed itself
        (``Answer.latency_s``) carries its own."""
        assert self.progress is not None
        self.asked += len(jobs)
        latencies = [latency] * len(jobs) if isinstance(latency, (int, float)) else list(latency)
        for job, ans, call_s in zip(jobs, answers, latencies):
            job.asks += 1
            usage = dict(ans.usage or {})
            if usage_tokens(usage)[0] == 0 and usage_tokens(usage)[1] and ans.detail.get("closed_early"):
                # a stream closed at the verdict reports no prompt tokens: estimate them, so the
                # cost is not under-counted (the record says so)
                usage["prompt_tokens"] = math.ceil(job.size * max(self.observed_tpb, 0.25))
                ans.detail["prompt_tokens_estimated"] = True
            job.usage = add_usage(job.usage, usage)
            job.latency_s += ans.latency_s if ans.latency_s is not None else call_s
            self._account(job, usage, price)
        readings = await self._read(jobs, answers)
        finished, work = 0, 0.0
        for job, ans, reading in zip(jobs, answers, readings):
            rec = self._record(job, ans, reading)
            if rec is not None and job.reveal:
                nxt, rec = self._go_on(job, ans, rec)
                if nxt is not None:  # the conversation goes on: its next turn is asked next
                    job, rec = nxt, None
            if rec is None:
                if self.batch_size > 1:
                    self.queue.append(job)
                else:
                    self.queue.appendleft(job)
                continue
            self.rundir.append(rec)
            finished += 1
            work += self._work(job)
            if not rec.answered:
                self.missing += 1
        self.progress.update(finished, self._postfix(), work=work)

    def _take(self) -> list[_Job]:
        """The next call's jobs: a batch for local backends; for API backends that answer several
        samples of one chat in one request (``shared_samples``), every queued sample of the next
        case; else one job."""
        if self.batch_size > 1:
            return [self.queue.popleft() for _ in range(min(self.batch_size, len(self.queue)))]
        jobs = [self.queue.popleft()]
        if self.shared_samples:
            while (self.queue and self.queue[0].case == jobs[0].case and self.queue[0].prompt == jobs[0].prompt
                   and self.queue[0].history == jobs[0].history):
                jobs.append(self.queue.popleft())
        return jobs

    async def _worker(self) -> None:
        while self.stop_reason is None and self.queue:
            jobs = self._take()
            try:
                await self._process(jobs)
                if self.progress is not None:
                    self.progress.call_done()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # PermanentError, or a bug: stop everything, keep what is on disk
                if isinstance(e, Unreachable):
                    msg = str(e)
                elif isinstance(e, PermanentError):
                    msg = f"the backend refused a request: {e}"
                else:
                    log.debug("worker failed", exc_info=True)
                    msg = f"unexpected error: {type(e).__name__}: {e}"
                if self.stop_reason is None:
                    self.stop_reason = RunState.FAILED
                    self.stop_message = redact_text(msg)
                for t in self.tasks:
                    if t is not asyncio.current_task():
                        t.cancel()
                return

    async def _batch(self) -> None:
        """Ask the queued requests through the provider's batch API (``backends.batch``); the
        batch id lives in ``<run>/batch.json``, so a killed run resumes polling the same batch.
        Answers are recorded like online ones at batch prices; what the batch did not answer is
        left in the queue for the online workers."""
        from ..backends.batch import BatchItemError, BatchPending, custom_id, mark_collected, submit_or_resume

        assert self.progress is not None
        state = self.rundir.path / BATCH_STATE
        price = self.prep.prices.lookup(self.cfg.model, batch=True).price

        def progress(p: Any) -> None:
            self.progress.say(f"casebench: batch {p.batch_id}: {p.status}, {p.done}/{p.total} done, "  # type: ignore[union-attr]
                              f"{p.failed} failed, {p.elapsed_s:.0f}s{' (resumed)' if p.resumed else ''}")

        for _round in range(3):  # a batch left in progress by an earlier invocation, then ours
            queued = {(j.case, j.sample): j for j in self.queue}
            by_id = {custom_id(c, s): j for (c, s), j in queued.items()}
            reqs = [replace(self._request(j), stop=None) for j in queued.values()]  # a batch answers whole
            try:
                results = await submit_or_resume(self.backend, reqs, self.prep.settings, state, progress,
                                                 poll_interval=self.cfg.batch_poll_s)
            except BatchPending as e:
                self.stop_reason = RunState.INCOMPLETE
                self.stop_message = f"{e}; re-run the same command to go on polling"
                return
            if not results:
                return
            jobs, answers = [], []
            for cid, res in results.items():
                if isinstance(res, BatchItemError):
                    log.info("batch item case %d sample %d: %s (%s); asked again online", res.case, res.sample,
                             res.kind, res.message)
                elif cid in by_id:  # not yet recorded (a resumed batch may hold what is)
                    jobs.append(by_id.pop(cid))
                    answers.append(res)
            if jobs:
                done = {(j.case, j.sample) for j in jobs}
                self.queue = collections.deque(j for j in self.queue if (j.case, j.sample) not in done)
                await self._answered(jobs, answers, 0.0, price)
            mark_collected(state)
            if not self.queue:
                return

    def interrupt(self) -> None:
        """Stop asking: what is in flight is cancelled, what is on disk stays."""
        if self.stop_reason is None:
            self.stop_reason = RunState.INTERRUPTED
            self.stop_message = "interrupted; re-run the same command to resume"
        for t in self.tasks:
            t.cancel()

    async def execute(self) -> RunSummary:
        t0 = time.monotonic()
        jobs, done = self.plan()
        total = len(self.prep.cases) * self.prep.samples
        self.queue.extend(jobs)
        # prob mode's time grows with prompt length: the expected duration is measured in prompt
        # bytes; text modes' answers end staggered within a batch, so their pace is a whole call's
        n_workers = 1 if self.batch_size > 1 else min(self.cfg.max_connections, max(1, len(jobs)))
        self.progress = Progress(total, done, self.cfg.progress, work_total=sum(self._work(j) for j in jobs),
                                 from_answers=self.mode.want == "p_safe" or self.batch_size == 1,
                                 in_flight=self.batch_size if self.batch_size > 1 else n_workers)
        try:
            if self.cfg.batch and self.queue:
                self.tasks = [asyncio.create_task(self._batch())]
                try:
                    await asyncio.gather(*self.tasks)
                except asyncio.CancelledError:
                    self.interrupt()
                    await asyncio.gather(*self.tasks, return_exceptions=True)
                    return self.summary(time.monotonic() - t0)
            # online: everything not answered by a batch (expired or failed items, parse re-asks)
            self.tasks = [asyncio.create_task(self._worker()) for _ in range(n_workers)]
            try:
                await asyncio.gather(*self.tasks, return_exceptions=False)
            except asyncio.CancelledError:
                self.interrupt()  # cancelled from outside (Ctrl-C under asyncio.run, the CLI's SIGTERM)
                await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            self.progress.close()
        return self.summary(time.monotonic() - t0)

    def summary(self, elapsed: float) -> RunSummary:
        finals = final_records(iter_records(self.rundir.path))
        counts = RunCounts.tally(((c, s) for c in self.prep.cases for s in range(self.prep.samples)), finals)
        status = self.stop_reason or (RunState.COMPLETE if counts.all_final else RunState.INCOMPLETE)
        message = self.stop_message
        if status is RunState.INCOMPLETE:
            cause = f" (last cause: {self.last_cause})" if self.last_cause else ""
            message = (f"{counts.pending} request(s) failed in transport after {self.cfg.retry.max_attempts} "
                       f"attempts{cause}; re-run the same command to ask them again")
        elif status is RunState.INTERRUPTED:
            message = interrupted_message(counts, self.final_at_start)
        return RunSummary(
            **asdict(counts), run_dir=self.rundir.path, status=status, asked_this_session=self.asked,
            transport_failures=self.transport_failures, retries=self.retries, prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens, cost_usd=self.spent,
            cost_known=self.prep.price.status != "unknown", elapsed_s=elapsed, message=message,
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
    return redact_json(desc)


async def run_prepared(prep: Prepared, backend: Backend, rng: random.Random | None = None) -> RunSummary:
    """Execute a prepared run with a ready backend (the caller owns the backend)."""
    check_supports(backend, prep.mode.want, prep.mode.name)
    if prep.config.batch and not getattr(backend.capabilities, "batch", False):
        from ..backends.registry import backends

        have = " and ".join(f"{b.prefix}/" for b in backends() if b.batch_api) or "none"
        raise RunError(f"--batch: backend {backend.spec!r} has no batch API ({have} have)")
    with RunDir(prep.out) as rundir:
        old = check_resumable(prep)  # again, now under the lock
        manifest = old or prep.manifest
        backend_desc = _describe(backend)
        if old is None:
            if prep.price.status == "unknown" and _is_local(backend_desc.get("base_url")):
                prep.price = PriceMatch(ZERO, "local")  # a server on this machine costs nothing per token
                manifest.price = prep.price.to_dict()
        elif old.price.get("status") == "local":
            prep.price = PriceMatch(ZERO, "local")
        grew = grow(old, prep) if old is not None else None
        invocation = Invocation(started_at=now_iso(), host=platform.node(), pid=os.getpid(),
                                casebench_version=casebench_version(), transport=prep.transport, backend=backend_desc,
                                grew=grew)
        if grew:
            log.warning("%s grows from %s (%d cases) to %s: asking the %d new cases; the %d already asked are kept",
                        prep.out, grew["from"], grew["cases_before"], grew["to"], grew["cases_added"],
                        grew["cases_before"])
        manifest.history.append(invocation)
        manifest.status = RunState.RUNNING
        manifest.finished_at = None
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
            # cancelled before the workers started: same outcome as after
            runner.stop_reason = RunState.INTERRUPTED
            summary = runner.summary(0.0)
        finally:
            if summary is None:  # an unexpected error: still leave a readable, resumable manifest
                summary = runner.summary(0.0)
                summary.status = RunState.FAILED
            invocation.backend = _describe(backend)  # what was detected while running (n, stream usage)
            invocation.finished_at = now_iso()
            invocation.status = summary.status.value
            invocation.asked = summary.asked_this_session
            invocation.retries = summary.retries
            invocation.transport_failures = summary.transport_failures
            invocation.elapsed_s = round(summary.elapsed_s, 3)
            invocation.message = summary.message or None
            prev_elapsed = float(manifest.totals.elapsed_s or 0.0) if old is not None else 0.0
            manifest.status = summary.status
            manifest.finished_at = now_iso() if summary.status is RunState.COMPLETE else None
            manifest.message = summary.message or None
            manifest.totals = Totals(
                **asdict(summary.counts()), prompt_tokens=summary.prompt_tokens,
                completion_tokens=summary.completion_tokens, cost_usd=round(summary.cost_usd, 6),
                cost_status=prep.price.status, elapsed_s=round(prev_elapsed + summary.elapsed_s, 3),
            )
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


async def arun(config: RunConfig, backend: Backend | None = None, dataset: Dataset | None = None,
               rng: random.Random | None = None) -> RunSummary:
    """Prepare, check and execute a run inside the running event loop (``await casebench.arun(...)``).

    Builds the backend (in a worker thread: loading a local model blocks) and closes it unless
    one is given. Raises ``RunError`` (incl. ``ManifestMismatch``, ``RunLocked``) before anything
    is asked when the inputs or the run directory do not fit.
    """
    prep = prepare(config, dataset, backend)
    if prep.mutation is not None:
        log.warning("%s", prep.mutation.line())
    if config.salvage:
        from .repair import salvage

        for line in salvage(prep.out, prep.manifest).lines():
            log.warning("--salvage: %s", line)
    check_resumable(prep)  # refuse a mismatching or damaged directory before loading a model
    beside = smaller_run_beside(prep)
    if beside is not None:
        log.warning("%s already holds %d of these %d cases, asked with the same settings: `-o %s` grows that "
                    "run and asks only the rest; this run asks them all in %s", beside[0], beside[1],
                    len(prep.cases), beside[0], prep.out)
    own = backend is None
    if own:
        log.info("loading the backend of %s", config.model)
        backend = await asyncio.to_thread(make_run_backend, config)
    assert backend is not None
    try:
        return await run_prepared(prep, backend, rng)
    finally:
        # closing is best effort, and a Ctrl-C that lands while closing (the run already ended and
        # its manifest is written) must not turn the run's summary into an interruption
        if own:
            try:
                await backend.aclose()
            except (Exception, asyncio.CancelledError):
                pass
        if prep.classifier is not None:
            try:
                await prep.classifier.aclose()
            except (Exception, asyncio.CancelledError):
                pass


def run(config: RunConfig, backend: Backend | None = None, dataset: Dataset | None = None,
        rng: random.Random | None = None) -> RunSummary:
    """The synchronous ``arun``. Inside a running event loop (a notebook), use ``await arun(...)``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(config, backend, dataset, rng))
    raise RuntimeError("casebench.run() was called inside a running event loop; use `await casebench.arun(...)`")
