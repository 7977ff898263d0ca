"""``hf/<model id or local path>``: a local transformers model as the judge.

Needs the optional extra ``casebench[hf]`` (torch, transformers, gguf, safetensors); imported
only when this backend is built. Nothing is ever downloaded: a local folder is loaded as is, a hub
id only from the local Hugging Face cache (``local_files_only=True``), and the special id
``smollm2-135m-instruct`` (also the default model) from the embedded GGUF via ``casebench.backends.embedded``.

Prompts go through the model's own chat template (a system message when one is given); a model
without a template gets the raw prompt.

Prob mode, two methods (``prob_method``):

* ``first-token`` (the paper's): one batched forward pass over the prompts, asking the model for
  the logits at the last position only (``logits_to_keep=1``). With the token ids that begin a
  way of writing "safe" (S) and "unsafe" (U), derived from the tokenizer by
  ``verdict_tokens.verdict_variants``, P(safe) = mass(S) / (mass(S) + mass(U)). Cheap, but a
  first piece such as "uns" or "SA" is only the start of a word, and the mass it gets is credited
  to the whole word.
* ``continuation`` (sounder): every surface form of each word ("safe", " safe", "Safe", ...,
  "unsafe", ...) is scored as a whole continuation by its log-likelihood, and P(safe) =
  sum P(safe forms) / sum P(all forms). The prompt is encoded once; its key/value cache is
  repeated for the forms that need more than one token, so the extra cost is a few tokens per
  form, not a prompt per form.

``Answer.detail`` holds the masses before renormalising (``p_safe_mass``, ``p_unsafe_mass``), so
a user can see when the model puts little mass on either word; ``Answer.text`` is the most likely
next token. The arithmetic is done in log space, so tiny masses never underflow to 0/0.

Batches: sorted by prompt length (little padding). A batch that needs padding is padded on the
left with an attention mask and position ids counted from the first real token, so a prompt gets
the same P(safe) whatever batch it is in (within float rounding: about 1e-6 in float32; half
precision is far coarser). A batch without padding (batch 1 always) gets neither: exactly a
bare forward pass. Prob mode and generation have their own batch sizes (``prob_batch_size``,
``generation_batch_size``; ``batch_size`` sets both), each defaulting to what was measured
fastest on the device.

Binary, score (and respond) modes: batched ``generate``, greedy when the temperature is 0, else
sampling at that temperature (``Request.temperature`` overrides the run's setting, as score-mode
samples do; ``Request.max_tokens`` the token budget). A request's ``stop`` predicate is checked
after every new token on the text so far, each sequence of a batch on its own; the answer is cut
exactly where it fired and ``completion_tokens`` counts the tokens that sequence really generated.
Requests with the same chat (the samples of one case) are generated from one prefill: the prompt
is run once and its key/value cache repeated per sample, each sample then drawn on its own; at
temperature 0 the answer is generated once and copied (greedy decoding is deterministic).

Every answer is delivered as soon as it is ready (``Capabilities.per_answer``): a prob batch's
answers when its forward pass ends, a generated sequence's answer at the step it ends (its end
token, its stop predicate or its token budget), while the other rows of its batch go on. Each
answer carries its own latency (from its batch's start to that step). Prob batches are sized as
they run so that one forward pass takes about ``PROB_BATCH_SECONDS`` on the machine at hand (at
most ``prob_batch_size``; an explicit ``batch_size`` is taken as is). Cancelling ``answer``
stops the work at the next decoding step or between prob batches: what ended was delivered,
half-generated sequences are dropped.

The blocking torch work runs in the backend's own worker thread (always the same one, so its
OpenMP team and malloc arena stay warm between batches) under a lock, so the event loop stays
responsive and two batches never share the model at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .base import Answer, Capabilities, GenerationSettings, OnAnswer, OnTokens, PermanentError, Request
from .cpu_policy import keep_freed_memory
from .hf_watch import CallHooks, Cancelled, RowWatch, cut_row, threadsafe, watch_layers
from .registry import Option, backend

PROB_METHODS = ("first-token", "continuation")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: Default batch size per device, chosen by measurement (bench/bench_hf_prob.py, SmolLM2-135M,
#: 100 real prompts of ~512 tokens, 2 CPU cores): per case, batch 1 took 781 ms, 2: 800, 4: 940,
#: 8: 1084. On CPU a padded batch loses the unmasked causal fast path and pays for padding, so 1.
#: On a GPU, batching is where the speed lies (16 is a conventional choice, not measured here).
DEFAULT_BATCH_SIZE = {"cpu": 1, "cuda": 16}
#: Default batch size for text generation (binary, score, respond), in sequences, chosen by
#: measurement (bench/bench_hf_generate.py): decoding is bound by reading the weights once per
#: step, so a batch of rows costs little more per step than one row, even on a CPU. On 2 pinned
#: cores of an otherwise idle Intel Xeon (16 real queries, 128 new tokens, greedy) batch 4, 8 and
#: 16 gave 2.3x, 3.4x and 4.9x the tokens per second of batch 1.
DEFAULT_GENERATION_BATCH_SIZE = {"cpu": 16, "cuda": 32}
#: Prob mode with the default batch size: a batch (one forward pass) is sized, from the time the
#: batches before it took, to take about this long, so that a kill loses at most this much work
#: and Ctrl-C is answered within it (capped by ``prob_batch_size``).
PROB_BATCH_SECONDS = 1.5
#: Text generation with the default batch size: a batch is sized, from the seconds per decoding
#: step measured on the batches before it, to take about this long, so that a stop (Ctrl-C, a
#: kill) loses at most about this much generation: a batch's answers are kept once it ends, and
#: none of a batch cut short (capped by ``generation_batch_size``). 30 s, not less: on 2 busy
#: cores one row of the embedded model takes 20 s for 80 tokens, and a 10 s target there gave
#: batches of one or two rows, the main job a tenth of its throughput (16 answers in 468 s, where
#: batches of 16 gave 90 in 280 s beside the test suite); on an idle machine 30 s still admits
#: the full batch of 16.
GENERATION_BATCH_SECONDS = 30.0
#: The first generation batch, before any step is measured: small, so that its measure comes
#: early and little is at risk.
FIRST_GENERATION_BATCH = 2
#: How a decoding step's time grows with the rows of a batch, ``(n / m) ** GROWTH`` times the step
#: time measured with m rows: decoding reads the weights once per step whatever the rows, so the
#: growth is below linear (the measures above: 4, 8 and 16 rows take 1.7x, 2.4x and 3.3x one row's
#: time, about 0.42); 0.5 errs towards smaller batches.
STEP_GROWTH = 0.5


class ModelLoadError(PermanentError):
    """The model cannot be loaded (not local, not in the local cache, or not a causal LM)."""


@dataclass
class _Encoded:
    """One prompt, tokenised: its position in the request list and its token ids."""

    index: int
    ids: list[int]


def resolve_model(model: str) -> tuple[str, bool]:
    """(what to pass to ``from_pretrained``, whether it is the embedded model)."""
    from .embedded import EMBEDDED_MODEL_ID, embedded_model_path

    name = model.strip()
    if name == "" or name.lower() == EMBEDDED_MODEL_ID:
        return str(embedded_model_path()), True
    return name, False


def from_spec(spec: str, **kwargs: Any) -> "HFBackend":
    """Build from a spec ``hf/<id or path>`` (``hf`` alone means the embedded model)."""
    prefix, _, rest = spec.partition("/")
    if prefix != "hf":
        raise ValueError(f"not an hf spec: {spec!r} (expected hf/<model id or local path>)")
    return HFBackend(rest, **kwargs)


def _logits_to_keep_arg(model: Any) -> str | None:
    """The forward argument that limits logits to the last positions, by transformers version."""
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


@dataclass
class _Unit:
    """Requests with the same chat (the samples of one case): one prompt, several answers."""

    encoded: _Encoded
    members: list[int]


@backend(
    "hf",
    summary="a local transformers causal LM (hf alone or hf/smollm2-135m-instruct: the embedded model)",
    model_help="ID-or-path",
    options=(
        Option("batch_size", "Batch size of local models (prob and generation).", type="int", answers=False,
               minimum=1),
        Option("generation_batch_size", "Batch size of text generation only.", flag=None, type="int",
               answers=False),
        Option("device", "Device of local models.", choices=DEVICES),
        Option("dtype", "Dtype of local models.", choices=DTYPES),
        Option("prob_method", "Local models, prob mode: first-token probabilities of the verdict words (default, "
               "the paper's reading) or the log-likelihood of the whole words ' safe' / ' unsafe'.",
               choices=PROB_METHODS),
        Option("system", "A system prompt of the backend's own.", flag=None),
    ),
    local=True,
)
class HFBackend:
    """A transformers causal LM answering prompts locally, in sorted, left-padded batches."""

    capabilities = Capabilities(generate=True, token_probs=True, per_answer=True)
    #: Defaults the runner and the manifest can read without building a model.
    default_batch_size = DEFAULT_BATCH_SIZE
    default_generation_batch_size = DEFAULT_GENERATION_BATCH_SIZE

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int | None = None,
        generation_batch_size: int | None = None,
        prob_method: str = "first-token",
        system: str | None = None,
    ) -> None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        if prob_method not in PROB_METHODS:
            raise ValueError(f"prob_method must be one of {', '.join(PROB_METHODS)}, not {prob_method!r}")
        for name, value in (("batch_size", batch_size), ("generation_batch_size", generation_batch_size)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")

        import torch

        from .verdict_tokens import continuation_forms, verdict_variants

        self._torch = torch
        self.model_name = model
        self.path, self.embedded = resolve_model(model)
        self.spec = "hf/" + (model.strip() or "smollm2-135m-instruct")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
        self.device = device
        if dtype == "auto":
            if device == "cpu":
                dtype = "float32"
            else:
                dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        self.dtype = dtype
        # An explicit batch_size sets both; otherwise each kind of work gets its measured default.
        self.prob_batch_size = batch_size if batch_size is not None else DEFAULT_BATCH_SIZE[device]
        self.generation_batch_size = (
            generation_batch_size if generation_batch_size is not None
            else batch_size if batch_size is not None
            else DEFAULT_GENERATION_BATCH_SIZE[device]
        )
        #: target seconds per prob batch (None: always ``prob_batch_size``, as an explicit
        #: ``batch_size`` asks); the seconds per prompt token are measured as batches run
        self.prob_batch_seconds: float | None = PROB_BATCH_SECONDS if batch_size is None else None
        self._prob_rate: float | None = None
        #: target seconds per generation batch (None: always ``generation_batch_size``, as an
        #: explicit size asks); the seconds per decoding step are measured as batches run, as
        #: (rows, seconds per step) of the last batch
        self.generation_batch_seconds: float | None = (
            GENERATION_BATCH_SECONDS if batch_size is None and generation_batch_size is None else None)
        self._step: tuple[int, float] | None = None
        self.prob_method = prob_method
        self.system = system
        #: Samples of one prompt share its prefill (False: one prefill per sample, for benches).
        self.share_prefill = True

        self.malloc = keep_freed_memory() if device == "cpu" else None
        # Every torch call of this backend, loading included, runs on one worker thread: a second
        # thread doing torch work gets its own OpenMP thread pool, and on a small CPU two pools
        # slow each other (measured: the same forward pass 10-15% slower on 2 cores).
        from concurrent.futures import ThreadPoolExecutor

        self._worker: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix="casebench-hf")
        self.tokenizer, self.model = self._worker.submit(self._load).result()
        #: the hooks of the call the torch thread is working on (checked between layers)
        self._active: CallHooks | None = None
        self._cancel_points = watch_layers(self.model, self._between_layers)
        self.variants = verdict_variants(self.tokenizer)
        self.forms = continuation_forms(self.tokenizer)
        self._keep_arg = _logits_to_keep_arg(self.model)
        self._lock = threading.Lock()
        self._calls: set[CallHooks] = set()  # the calls in progress (aclose cancels them)

    @property
    def batch_size(self) -> int:
        """How many requests the runner should hand over at once: the larger of the two batch
        sizes (the backend splits a call into batches of the right size for its kind of work)."""
        return max(self.prob_batch_size, self.generation_batch_size)

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"batch_size must be at least 1, not {value}")
        self.prob_batch_size = self.generation_batch_size = int(value)
        self.prob_batch_seconds = None  # a size the caller chose is taken as is
        self.generation_batch_seconds = None

    def batch_size_for(self, want: str) -> int:
        """The batch size used for requests that want ``want`` ("p_safe" or "text")."""
        return self.prob_batch_size if want == "p_safe" else self.generation_batch_size

    # ------------------------------------------------------------------ loading
    def _load(self) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch = self._torch
        where = self.path
        local = Path(where).expanduser()
        looks_local = local.exists() or where.startswith((".", "/", "~")) or where.count("/") > 1
        if looks_local and not local.is_dir():
            raise ModelLoadError(f"model folder {where!r} does not exist")
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a local load takes a second: casebench says what it loads, no bar
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(local) if looks_local else where, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                str(local) if looks_local else where,
                local_files_only=True,
                dtype=getattr(torch, self.dtype),
            )
        except (OSError, ValueError) as e:
            if looks_local:
                raise ModelLoadError(f"cannot load a causal LM from {where!r}: {e}") from None
            raise ModelLoadError(
                f"model {where!r} is neither a local folder nor in the local Hugging Face cache, and "
                "casebench never downloads models. Download it yourself (e.g. `hf download "
                f"{where}`) or pass the path of a local folder. ({type(e).__name__})"
            ) from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        model.to(self.device)  # type: ignore[arg-type]  # transformers' stubs take a device string
        model.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        return tokenizer, model

    # ------------------------------------------------------------------ prompts
    def render(self, prompt: str, system: str | None = None, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Token ids of the prompt as the model expects it: its chat template, if it has one
        (``history``: the (user, assistant) turns before ``prompt``)."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            messages = ([{"role": "system", "content": system}] if system else []) + Request(
                case=0, sample=0, prompt=prompt, history=tuple(history)).messages()
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return list(tok.encode(text, add_special_tokens=False))
        if history:  # no chat template: the conversation as plain text, the prompt last
            prompt = "\n\n".join([*(f"User: {u}\n\nAssistant: {a}" for u, a in history), f"User: {prompt}"])
        return list(tok.encode(prompt, add_special_tokens=True))

    def _encode_sorted(self, requests: Sequence[Request], system: str | None) -> list[_Encoded]:
        """Encode each request's chat (its own system message, else ``system``), shortest first."""
        encoded = [_Encoded(i, self.render(r.prompt, r.system if r.system is not None else system, r.history))
                   for i, r in enumerate(requests)]
        encoded.sort(key=lambda e: len(e.ids))
        return encoded

    def _pad_left(self, chunk: Sequence[_Encoded]) -> tuple[Any, Any, Any]:
        """input_ids, attention_mask, position_ids for a left-padded batch."""
        torch = self._torch
        width = max(len(e.ids) for e in chunk)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, e in enumerate(chunk):
            ids[row, width - len(e.ids) :] = torch.tensor(e.ids, dtype=torch.long)
            mask[row, width - len(e.ids) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), positions.to(self.device)

    def on_torch_thread(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the backend's torch thread and return its result (for benches
        that time other code against the backend's on equal terms)."""
        assert self._worker is not None, "the backend is closed"
        return self._worker.submit(fn, *args).result()

    # ------------------------------------------------------------------ the protocol
    async def answer(self, requests: Sequence[Request], settings: GenerationSettings, *,
                     on_answer: OnAnswer | None = None, on_tokens: OnTokens | None = None) -> list[Answer]:
        """Answer each request, in order; ``on_answer(position, answer)`` is called (on the
        event loop's thread) as soon as each answer is ready, ``on_tokens(n)`` as tokens are
        processed. Cancelling the call stops the torch work at its next step (the call then
        waits for that step, so the model is free again when it raises ``CancelledError``)."""
        if not requests:
            return []
        if self._worker is None:
            raise PermanentError("the hf backend was closed")
        loop = asyncio.get_running_loop()
        hooks = CallHooks(threading.Event(), threadsafe(loop, on_answer), threadsafe(loop, on_tokens))
        self._calls.add(hooks)
        future = loop.run_in_executor(self._worker, self._answer_blocking, list(requests), settings, hooks)
        try:
            return await asyncio.shield(future)
        except Cancelled:  # not this call's cancellation: the backend was closed under it
            raise PermanentError("the hf backend was closed while answering") from None
        except asyncio.CancelledError:
            hooks.cancel.set()
            try:  # the torch thread notices at its next step; what ended by then was delivered
                await future
            except BaseException:  # Cancelled, as expected (or a second cancellation)
                pass
            raise
        finally:
            self._calls.discard(hooks)

    def _between_layers(self, module: Any, args: Any) -> None:
        """A forward pre-hook on every decoder layer: a cancelled call stops within one layer
        of a forward pass (a long prompt's pass takes seconds on a busy CPU), not after it."""
        active = self._active
        if active is not None:
            active.check()

    def _answer_blocking(self, requests: list[Request], settings: GenerationSettings,
                         hooks: CallHooks | None = None) -> list[Answer]:
        with self._lock:
            self._active = hooks = hooks or CallHooks()
            try:
                return self._answer_locked(requests, settings, hooks)
            finally:
                self._active = None

    def _answer_locked(self, requests: list[Request], settings: GenerationSettings, hooks: CallHooks) -> list[Answer]:
        system = self.system
        answers: list[Answer | None] = [None] * len(requests)
        with self._torch.inference_mode():
            hooks.check()
            prob = [i for i, r in enumerate(requests) if r.want == "p_safe"]
            text = [i for i, r in enumerate(requests) if r.want != "p_safe"]
            if prob:
                emit = lambda j, a: hooks.answer(prob[j], a)  # noqa: E731
                for i, a in zip(prob, self._prob([requests[i] for i in prob], system, hooks, emit)):
                    answers[i] = a
            # Text requests are grouped by effective temperature and token budget: one pass per setting.
            groups: dict[tuple[float, int], list[int]] = {}
            for i in text:
                r = requests[i]
                t = r.temperature if r.temperature is not None else settings.temperature
                n = r.max_tokens if r.max_tokens is not None else settings.max_tokens
                groups.setdefault((float(t), int(n)), []).append(i)
            for (temperature, max_tokens), idx in groups.items():
                batch = [requests[i] for i in idx]
                def emit_at(j: int, a: Answer, idx: list[int] = idx) -> None:
                    hooks.answer(idx[j], a)

                for i, a in zip(idx, self._generate(batch, settings, temperature, max_tokens, system, hooks, emit_at)):
                    answers[i] = a
            hooks.tokens(0, flush=True)
        return [a for a in answers if a is not None]

    # ------------------------------------------------------------------ prob mode
    def _prob_chunk_size(self, encoded: Sequence[_Encoded], start: int) -> int:
        """How many prompts from ``start`` the next forward pass takes: ``prob_batch_size``, or,
        adaptively, as many as fit in ``prob_batch_seconds`` at the seconds per token measured
        so far (a padded batch costs rows x its longest prompt; one prompt before any measure)."""
        cap = min(self.prob_batch_size, len(encoded) - start)
        if self.prob_batch_seconds is None or cap <= 1:
            return max(1, cap)
        if self._prob_rate is None:
            return 1
        n = 1
        while n < cap and (n + 1) * len(encoded[start + n].ids) * self._prob_rate <= self.prob_batch_seconds:
            n += 1
        return n

    def _prob(self, requests: Sequence[Request], system: str | None, hooks: CallHooks | None = None,
              emit: Callable[[int, Answer], None] | None = None) -> list[Answer]:
        hooks = hooks or CallHooks()
        out: list[Answer | None] = [None] * len(requests)
        encoded = self._encode_sorted(requests, system)
        start = 0
        while start < len(encoded):
            hooks.check()
            chunk = encoded[start : start + self._prob_chunk_size(encoded, start)]
            start += len(chunk)
            started = time.perf_counter()
            try:
                if self.prob_method == "first-token":
                    rows = self._first_token_batch(chunk)
                else:
                    rows = self._continuation_batch(chunk)
            except RuntimeError as e:  # out of memory, device errors: not worth retrying as is
                raise PermanentError(f"hf model failed on a batch of {len(chunk)}: {e}") from None
            seconds = time.perf_counter() - started
            cells = len(chunk) * max(len(c.ids) for c in chunk)  # what a padded batch computes
            rate = seconds / max(1, cells)
            self._prob_rate = rate if self._prob_rate is None else 0.5 * (self._prob_rate + rate)
            for enc, (p, s_mass, u_mass, top) in zip(chunk, rows):
                out[enc.index] = Answer(
                    text=top,
                    p_safe=p,
                    usage={"prompt_tokens": len(enc.ids), "completion_tokens": 0},
                    detail={
                        "p_safe_mass": s_mass,
                        "p_unsafe_mass": u_mass,
                        "verdict_mass": min(1.0, s_mass + u_mass),
                        "method": self.prob_method,
                        "batch_prompts": len(chunk),
                    },
                    latency_s=round(seconds, 4),
                )
                if emit is not None:
                    emit(enc.index, out[enc.index])  # type: ignore[arg-type]
            hooks.tokens(sum(len(c.ids) for c in chunk))
        return [a for a in out if a is not None]

    def _last_logits(self, chunk: Sequence[_Encoded], use_cache: bool = False) -> tuple[Any, Any, Any]:
        ids, mask, pos = self._pad_left(chunk)
        kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": use_cache}
        if any(len(e.ids) != ids.shape[1] for e in chunk):
            # Padded: the mask hides the padding and positions count from each first real token.
            # Unpadded (batch 1 always): neither is passed, exactly a bare forward pass.
            kwargs["attention_mask"], kwargs["position_ids"] = mask, pos
        if self._keep_arg:
            kwargs[self._keep_arg] = 1
        output = self.model(**kwargs)
        return output.logits[:, -1, :].float(), output, (mask, pos)

    def _first_token_batch(self, chunk: Sequence[_Encoded]) -> list[tuple[float | None, float, float, str]]:
        torch = self._torch
        logits, _, _ = self._last_logits(chunk)
        logp = torch.log_softmax(logits, dim=-1)
        safe = torch.logsumexp(logp[:, self.variants["safe"]], dim=-1)
        unsafe = torch.logsumexp(logp[:, self.variants["unsafe"]], dim=-1)
        return self._rows(safe, unsafe, logp)

    def _continuation_batch(self, chunk: Sequence[_Encoded]) -> list[tuple[float | None, float, float, str]]:
        torch = self._torch
        logits, output, (mask, pos) = self._last_logits(chunk, use_cache=True)
        logp_first = torch.log_softmax(logits, dim=-1)
        seqs = self.forms["safe"] + self.forms["unsafe"]
        n_safe = len(self.forms["safe"])
        # Log-likelihood of each form: its first token from the prompt's last position ...
        ll = torch.stack([logp_first[:, s[0]] for s in seqs], dim=1)  # (B, F)
        # ... plus its later tokens, read with the prompt's cache repeated once per long form.
        long_forms = [f for f, s in enumerate(seqs) if len(s) > 1]
        if long_forms:
            batch, m = len(chunk), len(long_forms)
            width = max(len(seqs[f]) - 1 for f in long_forms)
            pad = self.tokenizer.pad_token_id
            tail = torch.full((batch * m, width), pad, dtype=torch.long)
            tail_mask = torch.zeros((batch * m, width), dtype=torch.long)
            for j, f in enumerate(long_forms):
                inputs = seqs[f][:-1]
                tail[j::m, : len(inputs)] = torch.tensor(inputs, dtype=torch.long)
                tail_mask[j::m, : len(inputs)] = 1
            tail, tail_mask = tail.to(self.device), tail_mask.to(self.device)
            cache = output.past_key_values
            cache.batch_repeat_interleave(m)
            full_mask = torch.cat([mask.repeat_interleave(m, dim=0), tail_mask], dim=1)
            start = pos[:, -1:].repeat_interleave(m, dim=0) + 1
            tail_pos = start + torch.arange(width, device=self.device)
            more = self.model(
                input_ids=tail, attention_mask=full_mask, position_ids=tail_pos, past_key_values=cache, use_cache=True
            )
            logp_tail = torch.log_softmax(more.logits.float(), dim=-1)  # (B*m, width, V)
            for j, f in enumerate(long_forms):
                targets = seqs[f][1:]
                rows = logp_tail[j::m]  # (B, width, V)
                add = sum(rows[:, k, t] for k, t in enumerate(targets))
                ll[:, f] = ll[:, f] + add
        safe = torch.logsumexp(ll[:, :n_safe], dim=-1)
        unsafe = torch.logsumexp(ll[:, n_safe:], dim=-1)
        return self._rows(safe, unsafe, logp_first)

    def _rows(self, safe: Any, unsafe: Any, logp: Any) -> list[tuple[float | None, float, float, str]]:
        """(P(safe), mass(safe), mass(unsafe), top token) per row, from log masses."""
        torch = self._torch
        p = torch.sigmoid(safe - unsafe)  # = S / (S + U), without forming S + U
        top = logp.argmax(dim=-1).tolist()
        rows = []
        for b in range(len(top)):
            pb = p[b].item()
            rows.append(
                (
                    pb if pb == pb else None,  # NaN only when both masses are exactly 0
                    float(safe[b].exp().item()),
                    float(unsafe[b].exp().item()),
                    self.tokenizer.decode([top[b]], clean_up_tokenization_spaces=False),
                )
            )
        return rows

    # ------------------------------------------------------------------ text modes
    def _generation_config(self, max_tokens: int, settings: GenerationSettings, temperature: float) -> Any:
        from transformers import GenerationConfig

        sample = temperature > 0
        return GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=sample,
            temperature=temperature if sample else None,
            top_p=(settings.top_p if settings.top_p is not None else 1.0) if sample else None,
            top_k=None,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id,
            bos_token_id=self.model.generation_config.bos_token_id,
        )

    def _generate(
        self, requests: Sequence[Request], settings: GenerationSettings, temperature: float, max_tokens: int,
        system: str | None, hooks: CallHooks | None = None, emit: Callable[[int, Answer], None] | None = None,
    ) -> list[Answer]:
        """Answer text requests that share a temperature and a token budget.

        Requests with the same chat (the samples of one case) become one *unit*: at temperature 0
        the unit is generated once and its answer copied (greedy decoding is deterministic); when
        sampling, its prompt is prefilled once and the key/value cache repeated for each sample.
        Units are packed into batches of at most ``generation_batch_size`` sequences. Each
        sequence's answers are made (and passed to ``emit``) at the step it ends.
        """
        torch = self._torch
        hooks = hooks or CallHooks()
        config = self._generation_config(max_tokens, settings, temperature)
        eos = config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        out: list[Answer | None] = [None] * len(requests)
        by_chat: dict[tuple[int, ...], _Unit] = {}
        for e in self._encode_sorted(requests, system):  # shortest first
            unit = by_chat.setdefault(tuple(e.ids), _Unit(encoded=e, members=[]))
            unit.members.append(e.index)
        greedy = temperature <= 0
        units = list(by_chat.values())
        while units:
            hooks.check()
            # the next batch: as many rows as fit in its size, chosen now from the steps measured
            cap = self._generation_chunk_size(max_tokens)
            batch, size = [units.pop(0)], 0
            size = 1 if greedy else len(batch[0].members)
            while units and size + (1 if greedy else len(units[0].members)) <= cap:
                size += 1 if greedy else len(units[0].members)
                batch.append(units.pop(0))
            if not greedy and settings.seed is not None:
                torch.manual_seed(settings.seed)
            # One row per generated sequence: (position of its unit in the batch, the requests it answers).
            rows: list[tuple[int, list[int]]] = []
            for k, u in enumerate(batch):
                rows.extend([(k, list(u.members))] if greedy else [(k, [m]) for m in u.members])
            stops = [requests[members[0]].stop for _, members in rows]
            started = time.perf_counter()

            def ended(r: int, kept: list[int], finish: str, batch: list[_Unit] = batch,
                      rows: list[tuple[int, list[int]]] = rows, started: float = started) -> None:
                k, members = rows[r]
                seconds = round(time.perf_counter() - started, 4)
                for i in members:
                    out[i] = Answer(
                        text=self.tokenizer.decode(kept, skip_special_tokens=True),
                        usage={"prompt_tokens": len(batch[k].encoded.ids), "completion_tokens": len(kept)},
                        detail={"temperature": temperature, "finish": finish, "batch_sequences": len(rows)},
                        latency_s=seconds,
                    )
                    if emit is not None:
                        emit(i, out[i])  # type: ignore[arg-type]

            watch = RowWatch(stops, self.tokenizer, eos_ids, max_tokens, hooks, ended)
            try:
                new = self._generate_rows([u.encoded for u in batch], [k for k, _ in rows], watch, config)
            except RuntimeError as e:
                raise PermanentError(f"hf model failed to generate for a batch of {len(rows)}: {e}") from None
            hooks.check()  # cancelled: the rows that had not ended are dropped
            for r, tokens in enumerate(new):
                if not watch.ended[r]:  # ended without the watch seeing it (another stop rule of generate)
                    ended(r, *cut_row(tokens, eos_ids, None))
            steps = max((len(t) for t in new), default=0)
            if steps:
                self._step = (len(rows), (time.perf_counter() - started) / steps)
        return [a for a in out if a is not None]

    def _generation_chunk_size(self, max_tokens: int) -> int:
        """How many rows the next generation batch takes: ``generation_batch_size``, or,
        adaptively, the most whose ``max_tokens`` steps take at most ``generation_batch_seconds``
        at the step time measured so far (grown with the rows as ``STEP_GROWTH`` says; at least
        one row; ``FIRST_GENERATION_BATCH`` before any measure)."""
        cap = self.generation_batch_size
        if self.generation_batch_seconds is None:
            return cap
        if self._step is None:
            return max(1, min(cap, FIRST_GENERATION_BATCH))
        rows, per_step = self._step
        n = 1
        while n < cap and per_step * ((n + 1) / rows) ** STEP_GROWTH * max_tokens <= self.generation_batch_seconds:
            n += 1
        return n

    def _generate_rows(
        self, prompts: Sequence[_Encoded], row_prompt: Sequence[int], watch: Any, config: Any,
    ) -> list[list[int]]:
        """Generate one sequence per row (``row_prompt[r]``: which prompt row r continues), under
        ``watch`` (a ``RowWatch``: it ends rows at their stop, reports each row as it ends, and
        stops everything when the call is cancelled). Returns the new tokens of each row
        (padded after its end)."""
        from transformers import StoppingCriteriaList

        torch = self._torch
        ids, mask, pos = self._pad_left(prompts)
        width = ids.shape[1]
        padded = any(len(e.ids) != width for e in prompts)
        kwargs: dict[str, Any] = {"generation_config": config, "stopping_criteria": StoppingCriteriaList([watch])}
        shared = self.share_prefill and len(row_prompt) > len(prompts) and width > 1
        pick = torch.tensor(list(row_prompt), device=ids.device)
        if not shared:
            # One row per prompt: a plain generate, with no mask at all when nothing is padded
            # (generate drops an all-ones mask anyway; this keeps the two paths alike).
            if len(row_prompt) != len(prompts) or list(row_prompt) != list(range(len(prompts))):
                ids, mask = ids[pick], mask[pick]
            if padded:
                kwargs["attention_mask"] = mask
            generated = self.model.generate(input_ids=ids, **kwargs)
        else:
            # Several samples of one prompt: prefill every prompt once (all but its last token),
            # then repeat its cache once per sample; generate then runs only the last prompt
            # token and what follows, independently per sample.
            head: dict[str, Any] = {"input_ids": ids[:, :-1], "use_cache": True}
            if padded:
                head["attention_mask"], head["position_ids"] = mask[:, :-1], pos[:, :-1]
            if self._keep_arg:
                head[self._keep_arg] = 1
            cache = self.model(**head).past_key_values
            cache.reorder_cache(pick)
            generated = self.model.generate(input_ids=ids[pick], attention_mask=mask[pick], past_key_values=cache,
                                            **kwargs)
        return generated[:, width:].tolist()

    # ------------------------------------------------------------------ manifest
    def describe(self) -> dict[str, Any]:
        import torch
        import transformers

        from .verdict_tokens import variant_strings

        template = getattr(self.tokenizer, "chat_template", None)
        info: dict[str, Any] = {
            "backend": "hf",
            "spec": self.spec,
            "model": self.model_name or "smollm2-135m-instruct",
            "path": self.path,
            "embedded": self.embedded,
            "device": self.device,
            "dtype": self.dtype,
            "batch_size": self.prob_batch_size,
            "prob_batch": (f"adaptive: about {self.prob_batch_seconds:g} s of work per forward pass, at most "
                           f"{self.prob_batch_size} prompts" if self.prob_batch_seconds is not None
                           else f"{self.prob_batch_size} prompts"),
            "generation_batch_size": self.generation_batch_size,
            "generation_batch": (f"adaptive: about {self.generation_batch_seconds:g} s of generation per batch, at "
                                 f"most {self.generation_batch_size} sequences"
                                 if self.generation_batch_seconds is not None
                                 else f"{self.generation_batch_size} sequences"),
            "padding": "left, sorted by length",
            "prob_method": self.prob_method,
            "variants": variant_strings(self.tokenizer, self.variants),
            "continuation_forms": {
                k: [self.tokenizer.decode(list(s), clean_up_tokenization_spaces=False) for s in v]
                for k, v in self.forms.items()
            },
            "system": self.system,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
            "decoding": "greedy when temperature is 0, else sampling at the temperature",
            "malloc": self.malloc,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        if self.embedded:
            from .embedded import GGUF_FILE_NAME, conversion_info

            info["embedded_source"] = GGUF_FILE_NAME
            info["conversion"] = conversion_info(Path(self.path))
        return info

    async def aclose(self) -> None:
        """Drop the model so its memory can be freed (GPU memory especially). Calls still in
        progress are cancelled first, and the model is dropped on the torch thread once it lets
        go of it (at most a step later), so closing never blocks the event loop."""
        for hooks in list(self._calls):
            hooks.cancel.set()
        worker, self._worker = self._worker, None
        if worker is None:
            return

        def release() -> None:
            with self._lock:
                self.model = None
                if self.device == "cuda":
                    self._torch.cuda.empty_cache()

        try:
            await asyncio.get_running_loop().run_in_executor(worker, release)
        finally:
            worker.shutdown(wait=False)
