"""Provider batch APIs (OpenAI Batch API, Anthropic Message Batches): ask a run's remaining
requests as one batch, at half the list price, and map the results back into ``Answer``s.

Entry point: ``submit_or_resume``. The runner calls it with the requests still unanswered and a
state file in the run directory (``<run_dir>/batch.json``); the state file is what makes a
killed ``casebench run --batch`` resume polling the same batch instead of paying twice:

- The state is written (atomically) *before* every step that costs money or creates something
  remote: ``uploading`` before the input file goes up (OpenAI), ``submitting`` (with the file id)
  before the batch is created, ``submitted`` (with the batch id) right after. A call that finds a
  batch in ``submitted`` only polls it. One found in ``submitting`` (killed between "create" and
  writing its id) is looked for among the provider's recent batches (OpenAI: by its input file,
  exact; Anthropic: a batch created since then with the same number of requests) before anything
  new is created.
- When the batch has ended its results are read (the output and error files, or Anthropic's
  results stream), mapped by ``custom_id`` to ``(case, sample)`` and returned; the state becomes
  ``ended`` and records which items failed. Results stay downloadable, so a call that finds an
  ``ended`` batch whose items the caller still asks for reads them again (free) rather than
  submitting them again. Once none of its successful items is asked for any more (the runner has
  recorded them), the batch is marked ``collected`` and the next call submits a new batch.
- ``mark_collected(state_path)`` says "recorded": call it once the returned results are in the
  run's records, so the next call submits a new batch even for (case, sample) that came back
  as answers (e.g. a parse failure asked again). Without it, those would be read again from
  the ended batch (that is the kill-before-recording case, where reading again is right).
- Expired, failed, errored or cancelled items come back as ``BatchItemError`` (never as an
  ``Answer``), so the runner asks them again: online, or in a new batch by calling again.

Each batch line carries exactly the body an online request would (``backend._params``, the
backend's ``extra_body`` merged in) and each result goes through the backend's own
``_to_answer``, so a batch run's records are the same as an online run's. Answers are full (a
batch cannot stop at the verdict) and carry ``detail["batch"]`` (provider and batch id) so cost
can use batch prices (``PriceTable.lookup(spec, batch=True)``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from casebench.atomic import write_json_atomic
from casebench.backends import sdk_errors
from casebench.backends.base import Answer, BackendError, GenerationSettings, Request, TransientError

log = logging.getLogger(__name__)

STATE_VERSION = 1
#: OpenAI batch statuses after which nothing changes any more.
OPENAI_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
CHAT_ENDPOINT = "/v1/chat/completions"


class BatchError(BackendError):
    """The batch cannot go on as asked (wrong provider for the state file, unreadable state)."""


class BatchPending(BackendError):
    """``max_wait_s`` passed before the batch ended; the state file keeps it, so calling
    ``submit_or_resume`` again resumes polling the same batch."""


@dataclass
class BatchItemError:
    """A request the batch did not answer: ``kind`` is ``expired``, ``failed`` (a whole batch
    that failed, or a non-200 line), ``errored`` (Anthropic), ``canceled`` or ``missing`` (no
    line for it in the results). The runner should ask it again."""

    custom_id: str
    case: int
    sample: int
    kind: str
    message: str


@dataclass
class BatchProgress:
    """What ``progress_cb`` gets after each poll."""

    batch_id: str
    status: str  # the provider's own status word
    total: int
    done: int  # answered so far (as far as the provider tells)
    failed: int
    elapsed_s: float
    polls: int
    resumed: bool


@dataclass
class BatchJob:
    """One submitted (or being submitted) batch, as kept in the state file."""

    provider: str  # openai | anthropic
    model: str
    base_url: str | None
    want: str
    items: dict[str, list[int]]  # custom_id -> [case, sample]
    phase: str = "uploading"  # uploading | submitting | submitted | ended | collected | abandoned
    input_file_id: str | None = None
    batch_id: str | None = None
    created_at: str = ""
    submitting_at: float | None = None  # unix time just before "create" was sent
    submitted_at: str | None = None
    ended_at: str | None = None
    status: str | None = None  # the provider's status word, last seen
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failed_ids: list[str] = field(default_factory=list)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "BatchJob":
        known = {k: d[k] for k in BatchJob.__dataclass_fields__ if k in d}
        return BatchJob(**known)


@dataclass
class BatchState:
    """Every batch a run has made, oldest first; at most one is not yet collected."""

    jobs: list[BatchJob] = field(default_factory=list)
    version: int = STATE_VERSION

    @staticmethod
    def load(path: str | Path) -> "BatchState":
        p = Path(path)
        if not p.exists():
            return BatchState()
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            jobs = [BatchJob.from_dict(j) for j in data.get("jobs", [])]
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise BatchError(f"{p}: cannot read the batch state file ({e}); it names the batches this run "
                             f"has paid for, so it is not overwritten. Move it away to start afresh.") from None
        return BatchState(jobs=jobs, version=int(data.get("version", STATE_VERSION)))

    def save(self, path: str | Path) -> None:
        # One line: a batch of 2,700 items would be 10,000 lines indented, and no one edits it.
        write_json_atomic(path, {"version": self.version, "jobs": [asdict(j) for j in self.jobs]}, indent=None,
                          fsync=True)

    def active(self) -> BatchJob | None:
        for job in reversed(self.jobs):
            if job.phase not in ("collected", "abandoned"):
                return job
        return None


def custom_id(case: int, sample: int) -> str:
    """The id of one (case, sample) inside a batch (``[A-Za-z0-9_-]``, as Anthropic requires)."""
    return f"case-{int(case)}-sample-{int(sample)}"


Result = dict[str, "Answer | BatchItemError"]
ProgressCallback = Callable[[BatchProgress], None]


async def submit_or_resume(
    backend: Any,
    requests: Sequence[Request],
    settings: GenerationSettings,
    state_path: str | Path,
    progress_cb: ProgressCallback | None = None,
    *,
    poll_interval: float = 10.0,
    max_poll_interval: float = 120.0,
    max_wait_s: float | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> Result:
    """Answer ``requests`` through the provider's batch API, or finish the batch already running.

    ``backend`` is an ``OpenAIBackend`` or ``AnthropicBackend`` (its client, request body and
    answer reading are reused). ``requests`` are the (case, sample) still unanswered; each
    becomes one line with ``custom_id(case, sample)``. ``state_path`` is the run's
    ``batch.json`` (see the module docstring for what is kept there and why).

    Returns ``{custom_id: Answer | BatchItemError}`` for every item of the batch this call
    finished. When a batch was already in progress, that is *its* items, which may differ from
    ``requests`` (a resumed run asks for what it had asked before; if it asks for more, call again
    for the rest once these are recorded). Answers for a (case, sample) already recorded may come
    back again; keep the first. Calling with no request and no batch in progress returns ``{}``.

    Polls every ``poll_interval`` seconds, growing by half each time up to ``max_poll_interval``;
    ``progress_cb`` gets a ``BatchProgress`` after each poll. Transient failures while polling
    (5xx, dropped connections) are logged and polling goes on. ``max_wait_s`` bounds the wait:
    past it ``BatchPending`` is raised and the batch stays in the state file for a later call.
    Transport failures while submitting raise ``TransientError``/``PermanentError`` as online
    requests do; the state file then says how far submission got, so a retry never pays twice.
    """
    adapter = _adapter(backend)
    state = BatchState.load(state_path)
    wanted: dict[str, Request] = {}
    for r in requests:
        cid = custom_id(r.case, r.sample)
        if cid in wanted:
            raise ValueError(f"two requests for case {r.case} sample {r.sample} in one batch")
        wanted[cid] = r

    job = state.active()
    if job is not None and (job.provider != adapter.provider or job.model != backend.model):
        raise BatchError(
            f"{state_path}: a {job.provider} batch for model {job.model!r} ({job.batch_id or 'not yet created'}) "
            f"is in progress in this run directory, but this run uses {adapter.provider}/{backend.model}"
        )
    resumed = job is not None
    if job is not None and job.phase == "uploading":
        # Killed before the batch was created: nothing was paid for. Start again.
        job.phase = "abandoned"
        state.save(state_path)
        job = None
    if job is not None and job.phase == "submitting":
        found = await adapter.find_created(job, [j.batch_id for j in state.jobs if j.batch_id])
        if found:
            log.info("found batch %s, created before the last run stopped", found)
            job.batch_id, job.phase, job.submitted_at = found, "submitted", _now()
        else:
            job.phase = "abandoned"
            job = None
        state.save(state_path)
    if job is not None and job.phase == "ended":
        still = (set(wanted) & set(job.items)) - set(job.failed_ids)
        if not still:
            job.phase = "collected"
            state.save(state_path)
            job = None
    if job is None:
        if not wanted:
            return {}
        resumed = False
        job = BatchJob(provider=adapter.provider, model=backend.model, base_url=adapter.where,
                       want=next(iter(wanted.values())).want,
                       items={cid: [r.case, r.sample] for cid, r in wanted.items()}, created_at=_now())
        if any(r.want != job.want for r in wanted.values()):
            raise ValueError("a batch holds one kind of request (all text or all p_safe)")
        state.jobs.append(job)
        state.save(state_path)
        await adapter.submit(job, list(wanted.values()), settings, lambda: state.save(state_path))
    if job.phase == "submitted":
        await _poll(adapter, job, state, state_path, progress_cb, resumed=resumed, poll_interval=poll_interval,
                    max_poll_interval=max_poll_interval, max_wait_s=max_wait_s, sleep=sleep)
    results = await adapter.collect(job)
    for cid, (case, sample) in job.items.items():
        if cid not in results:
            results[cid] = BatchItemError(cid, case, sample, "missing",
                                          f"no result for it in batch {job.batch_id} (status {job.status})")
    job.failed_ids = sorted(cid for cid, r in results.items() if isinstance(r, BatchItemError))
    if job.phase != "ended":
        job.phase, job.ended_at = "ended", _now()
    state.save(state_path)
    return results


def mark_collected(state_path: str | Path) -> None:
    """Say that the results of the ended batch are recorded (see the module docstring), so the
    next ``submit_or_resume`` submits a new batch instead of reading this one again. A batch
    still running is left alone."""
    if not Path(state_path).exists():
        return
    state = BatchState.load(state_path)
    job = state.active()
    if job is not None and job.phase == "ended":
        job.phase = "collected"
        state.save(state_path)


async def _poll(adapter: "_Adapter", job: BatchJob, state: BatchState, state_path: str | Path,
                progress_cb: ProgressCallback | None, *, resumed: bool, poll_interval: float,
                max_poll_interval: float, max_wait_s: float | None,
                sleep: Callable[[float], Awaitable[Any]]) -> None:
    t0 = time.monotonic()
    delay = max(0.0, poll_interval)
    polls = 0
    while True:
        try:
            status, ended = await adapter.retrieve(job)
        except TransientError as e:
            log.info("polling batch %s: %s; trying again in %.1fs", job.batch_id, e, delay)
        else:
            polls += 1
            state.save(state_path)
            if progress_cb is not None:
                c = job.counts
                progress_cb(BatchProgress(str(job.batch_id), status, c.get("total", len(job.items)),
                                          c.get("done", 0), c.get("failed", 0), time.monotonic() - t0,
                                          polls, resumed))
            if ended:
                return
        if max_wait_s is not None and time.monotonic() - t0 >= max_wait_s:
            raise BatchPending(f"batch {job.batch_id} has not ended after {max_wait_s:g} s (status {job.status}); "
                               f"run again to resume polling it")
        await sleep(delay)
        delay = min(max(delay * 1.5, 0.01), max(max_poll_interval, poll_interval))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _adapter(backend: Any) -> "_Adapter":
    """The batch adapter the backend's description names (``@backend(..., batch_api=...)``)."""
    from importlib import import_module

    from casebench.backends.registry import info_for

    info = info_for(getattr(backend, "spec", ""))
    target = info.batch_api if info is not None and info.cls is type(backend) else None
    if target is None:
        have = [f"{i.prefix}/" for i in _registered() if i.batch_api]
        raise BatchError(f"backend {getattr(backend, 'spec', backend)!r} has no batch API: --batch works with "
                         f"{' and '.join(have) or 'no registered backend'} models")
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)(backend)


def _registered() -> list[Any]:
    from casebench.backends.registry import backends

    return backends()


class _Adapter:
    """A provider's batch API, driven through a backend's public ``transport`` (the SDK, the
    endpoint, the redacting error mapping) and ``client``; subclasses fill in the provider's
    calls. A plugin backend with a batch API names its own subclass in ``batch_api``."""

    provider = ""

    def __init__(self, backend: Any):
        self.backend = backend
        self.transport = backend.transport
        self.client = backend.client
        self.where = self.transport.where
        self.sdk = self.transport.sdk

    async def call(self, awaitable: Awaitable[Any]) -> Any:
        return await self.transport.call(awaitable)

    def translating(self) -> Any:
        return self.transport.translating()

    def request_for(self, job: BatchJob, cid: str) -> Request:
        case, sample = job.items[cid]
        return Request(case=case, sample=sample, prompt="", want=job.want)  # type: ignore[arg-type]

    def answer_from(self, job: BatchJob, cid: str, read: Callable[[], Answer]) -> "Answer | BatchItemError":
        """Read one result through the backend's own code; a malformed one is a failed item."""
        case, sample = job.items[cid]
        try:
            answer = sdk_errors.read_response(read, where=self.where)
        except BackendError as e:
            return BatchItemError(cid, case, sample, "failed", str(e))
        answer.detail["batch"] = {"provider": self.provider, "batch_id": job.batch_id}
        return answer

    async def create(self, job: BatchJob, creating: Awaitable[Any], save: Callable[[], None]) -> Any:
        """Send the provider's "create batch" call for a job already saved as submitting, and
        return the batch, its id and phase set on the job (the caller adds the provider's
        status and saves). A transient failure is raised as it is: the batch may have been
        created, and the next call looks for it (``find_created``); a refusal (4xx) created
        nothing, so the job is saved as abandoned before the error is raised."""
        try:
            batch = await self.call(creating)
        except TransientError:
            raise
        except BackendError:
            job.phase = "abandoned"
            save()
            raise
        job.batch_id = batch.id
        job.phase, job.submitted_at = "submitted", _now()
        return batch

    # provider-specific
    async def submit(self, job: BatchJob, requests: list[Request], settings: GenerationSettings,
                     save: Callable[[], None]) -> None:
        raise NotImplementedError

    async def find_created(self, job: BatchJob, known: list[str | None]) -> str | None:
        raise NotImplementedError

    async def retrieve(self, job: BatchJob) -> tuple[str, bool]:
        raise NotImplementedError

    async def collect(self, job: BatchJob) -> Result:
        raise NotImplementedError


class OpenAIBatch(_Adapter):
    """OpenAI's Batch API (``openai/`` models)."""

    provider = "openai"

    def body(self, request: Request, settings: GenerationSettings) -> dict[str, Any]:
        return {**self.backend._params(request, settings), **self.backend.extra_body}

    async def submit(self, job: BatchJob, requests: list[Request], settings: GenerationSettings,
                     save: Callable[[], None]) -> None:
        lines = [json.dumps({"custom_id": custom_id(r.case, r.sample), "method": "POST", "url": CHAT_ENDPOINT,
                             "body": self.body(r, settings)}, ensure_ascii=False) for r in requests]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = await self.call(self.client.files.create(
            file=("casebench-batch.jsonl", data, "application/jsonl"), purpose="batch", timeout=self.backend.timeout))
        job.input_file_id = uploaded.id
        job.phase, job.submitting_at = "submitting", time.time()
        save()
        batch = await self.create(job, self.client.batches.create(
            input_file_id=uploaded.id, endpoint=CHAT_ENDPOINT, completion_window="24h",
            metadata={"casebench": "run"}, timeout=self.backend.timeout), save)
        job.status = batch.status
        save()
        log.info("submitted OpenAI batch %s with %d requests", batch.id, len(requests))

    async def find_created(self, job: BatchJob, known: list[str | None]) -> str | None:
        if not job.input_file_id:
            return None
        page = await self.call(self.client.batches.list(limit=100, timeout=self.backend.timeout))
        for b in getattr(page, "data", None) or []:
            if getattr(b, "input_file_id", None) == job.input_file_id and b.id not in known:
                return str(b.id)
        return None

    async def retrieve(self, job: BatchJob) -> tuple[str, bool]:
        b = await self.call(self.client.batches.retrieve(job.batch_id, timeout=self.backend.timeout))
        job.status = b.status
        job.output_file_id = b.output_file_id or job.output_file_id
        job.error_file_id = b.error_file_id or job.error_file_id
        rc = b.request_counts
        if rc is not None:
            job.counts = {"total": rc.total, "done": rc.completed, "failed": rc.failed}
        if b.status == "failed" and b.errors is not None and b.errors.data:
            first = b.errors.data[0]
            job.counts["batch_error"] = 1
            job.status = f"failed ({getattr(first, 'code', None) or 'error'})"
        return b.status, b.status in OPENAI_ENDED

    async def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        content = await self.call(self.client.files.content(file_id, timeout=self.backend.timeout))
        out = []
        for n, line in enumerate(content.text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                log.warning("batch %s: file %s line %d is not JSON; skipped", self.where, file_id, n)
                continue
            if isinstance(obj, dict) and isinstance(obj.get("custom_id"), str):
                out.append(obj)
        return out

    async def collect(self, job: BatchJob) -> Result:
        from openai.types.chat import ChatCompletion

        results: Result = {}
        status = job.status or ""
        for obj in await self._lines(job.output_file_id) + await self._lines(job.error_file_id):
            cid = obj["custom_id"]
            if cid not in job.items or (cid in results and not isinstance(results[cid], BatchItemError)):
                continue
            case, sample = job.items[cid]
            error = obj.get("error")
            got = obj.get("response")
            response: dict[str, Any] = got if isinstance(got, dict) else {}
            code = response.get("status_code")
            if error:
                kind = "expired" if isinstance(error, dict) and error.get("code") == "batch_expired" else "failed"
                what = error.get("code") if isinstance(error, dict) else None
                results[cid] = BatchItemError(cid, case, sample, kind, f"batch item {kind} ({what or 'error'})")
            elif code == 200 and isinstance(response.get("body"), dict):
                completion = ChatCompletion.construct(**response["body"])
                req = self.request_for(job, cid)
                results[cid] = self.answer_from(job, cid, lambda c=completion, r=req: self.backend._to_answer(r, c))  # type: ignore[misc]
            else:
                excerpt = self.transport.excerpt(json.dumps(response.get("body")))
                results[cid] = BatchItemError(cid, case, sample, "failed", f"HTTP {code} in batch: {excerpt}")
        if status.startswith("failed") or status == "expired" or status == "cancelled":
            kind = {"expired": "expired", "cancelled": "canceled"}.get(status, "failed")
            for cid, (case, sample) in job.items.items():
                if cid not in results:
                    results[cid] = BatchItemError(cid, case, sample, kind, f"batch {job.batch_id} {status}")
        return results


class AnthropicBatch(_Adapter):
    """Anthropic's Message Batches (``anthropic/`` models)."""

    provider = "anthropic"

    def params(self, request: Request, settings: GenerationSettings) -> dict[str, Any]:
        params = dict(self.backend._params(request, settings))
        extra = params.pop("extra_body", None) or {}
        return {**params, **extra}

    async def submit(self, job: BatchJob, requests: list[Request], settings: GenerationSettings,
                     save: Callable[[], None]) -> None:
        lines = [{"custom_id": custom_id(r.case, r.sample), "params": self.params(r, settings)} for r in requests]
        job.phase, job.submitting_at = "submitting", time.time()
        save()
        batch = await self.create(job, self.client.messages.batches.create(requests=lines,
                                                                           timeout=self.backend.timeout), save)
        job.status = batch.processing_status
        save()
        log.info("submitted Anthropic message batch %s with %d requests", batch.id, len(requests))

    async def find_created(self, job: BatchJob, known: list[str | None]) -> str | None:
        # Message batches carry no metadata: adopt the one batch created since "create" was sent
        # with as many requests as ours, if there is exactly one.
        if job.submitting_at is None:
            return None
        page = await self.call(self.client.messages.batches.list(limit=100, timeout=self.backend.timeout))
        hits = []
        for b in getattr(page, "data", None) or []:
            rc = b.request_counts
            total = rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired
            if b.id not in known and b.created_at.timestamp() >= job.submitting_at - 5 and total == len(job.items):
                hits.append(str(b.id))
        return hits[0] if len(hits) == 1 else None

    async def retrieve(self, job: BatchJob) -> tuple[str, bool]:
        b = await self.call(self.client.messages.batches.retrieve(job.batch_id, timeout=self.backend.timeout))
        rc = b.request_counts
        job.status = b.processing_status
        job.counts = {"total": rc.processing + rc.succeeded + rc.errored + rc.canceled + rc.expired,
                      "done": rc.succeeded, "failed": rc.errored + rc.canceled + rc.expired}
        return b.processing_status, b.processing_status == "ended"

    async def collect(self, job: BatchJob) -> Result:
        results: Result = {}
        decoder = await self.call(self.client.messages.batches.results(job.batch_id, timeout=self.backend.timeout))
        with self.translating():
            async for item in decoder:
                cid = item.custom_id
                if cid not in job.items:
                    continue
                case, sample = job.items[cid]
                result = item.result
                kind = getattr(result, "type", None)
                if kind == "succeeded":
                    message = result.message
                    results[cid] = self.answer_from(job, cid, lambda m=message: self.backend._to_answer(m))  # type: ignore[misc]
                elif kind == "errored":
                    err = getattr(getattr(result, "error", None), "error", None)
                    what = getattr(err, "type", None) or "error"
                    results[cid] = BatchItemError(cid, case, sample, "errored", f"batch item errored ({what})")
                elif kind in ("expired", "canceled"):
                    results[cid] = BatchItemError(cid, case, sample, kind, f"batch item {kind}")
                else:
                    results[cid] = BatchItemError(cid, case, sample, "failed", f"unknown result type {kind!r}")
        return results


__all__ = ["AnthropicBatch", "OpenAIBatch", "BatchError", "BatchItemError", "BatchJob", "BatchPending", "BatchProgress", "BatchState",
           "custom_id", "mark_collected", "submit_or_resume"]
