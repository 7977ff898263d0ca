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

The blocking torch work runs in the backend's own worker thread (always the same one, so its
OpenMP team and malloc arena stay warm between batches) under a lock, so the event loop stays
responsive and two batches never share the model at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .base import Answer, Capabilities, GenerationSettings, PermanentError, Request
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


@backend(
    "hf",
    summary="a local transformers causal LM (hf alone or hf/smollm2-135m-instruct: the embedded model)",
    model_help="ID-or-path",
    options=(
        Option("batch_size", "Batch size of local models (prob and generation).", type="int", answers=False),
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

    capabilities = Capabilities(generate=True, token_probs=True)
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
        self.prob_method = prob_method
        self.system = system
        #: Samples of one prompt share its prefill (False: one prefill per sample, for benches).
        self.share_prefill = True

        self.malloc = _keep_freed_memory() if device == "cpu" else None
        # Every torch call of this backend, loading included, runs on one worker thread: a second
        # thread doing torch work gets its own OpenMP thread pool, and on a small CPU two pools
        # slow each other (measured: the same forward pass 10-15% slower on 2 cores).
        from concurrent.futures import ThreadPoolExecutor

        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="casebench-hf")
        self.tokenizer, self.model = self._worker.submit(self._load).result()
        self.variants = verdict_variants(self.tokenizer)
        self.forms = continuation_forms(self.tokenizer)
        self._keep_arg = _logits_to_keep_arg(self.model)
        self._lock = threading.Lock()

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
        model.to(self.device)
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
        return self._worker.submit(fn, *args).result()

    # ------------------------------------------------------------------ the protocol
    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        if not requests:
            return []
        if self._worker is None:
            raise PermanentError("the hf backend was closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._answer_blocking, list(requests), settings)

    def _answer_blocking(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        system = self.system
        answers: list[Answer | None] = [None] * len(requests)
        with self._lock, self._torch.inference_mode():
            prob = [i for i, r in enumerate(requests) if r.want == "p_safe"]
            text = [i for i, r in enumerate(requests) if r.want != "p_safe"]
            if prob:
                for i, a in zip(prob, self._prob([requests[i] for i in prob], system)):
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
                for i, a in zip(idx, self._generate(batch, settings, temperature, max_tokens, system)):
                    answers[i] = a
        return [a for a in answers if a is not None]

    # ------------------------------------------------------------------ prob mode
    def _prob(self, requests: Sequence[Request], system: str | None) -> list[Answer]:
        out: list[Answer | None] = [None] * len(requests)
        encoded = self._encode_sorted(requests, system)
        for start in range(0, len(encoded), self.prob_batch_size):
            chunk = encoded[start : start + self.prob_batch_size]
            started = time.perf_counter()
            try:
                if self.prob_method == "first-token":
                    rows = self._first_token_batch(chunk)
                else:
                    rows = self._continuation_batch(chunk)
            except RuntimeError as e:  # out of memory, device errors: not worth retrying as is
                raise PermanentError(f"hf model failed on a batch of {len(chunk)}: {e}") from None
            seconds = time.perf_counter() - started
            for e, (p, s_mass, u_mass, top) in zip(chunk, rows):
                out[e.index] = Answer(
                    text=top,
                    p_safe=p,
                    usage={"prompt_tokens": len(e.ids), "completion_tokens": 0},
                    detail={
                        "p_safe_mass": s_mass,
                        "p_unsafe_mass": u_mass,
                        "method": self.prob_method,
                        "batch_seconds": round(seconds, 4),
                    },
                )
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

    def _first_token_batch(self, chunk: Sequence[_Encoded]) -> list[tuple[float, float, float, str]]:
        torch = self._torch
        logits, _, _ = self._last_logits(chunk)
        logp = torch.log_softmax(logits, dim=-1)
        safe = torch.logsumexp(logp[:, self.variants["safe"]], dim=-1)
        unsafe = torch.logsumexp(logp[:, self.variants["unsafe"]], dim=-1)
        return self._rows(safe, unsafe, logp)

    def _continuation_batch(self, chunk: Sequence[_Encoded]) -> list[tuple[float, float, float, str]]:
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

    def _rows(self, safe: Any, unsafe: Any, logp: Any) -> list[tuple[float, float, float, str]]:
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
        system: str | None,
    ) -> list[Answer]:
        """Answer text requests that share a temperature and a token budget.

        Requests with the same chat (the samples of one case) become one *unit*: at temperature 0
        the unit is generated once and its answer copied (greedy decoding is deterministic); when
        sampling, its prompt is prefilled once and the key/value cache repeated for each sample.
        Units are packed into batches of at most ``generation_batch_size`` sequences.
        """
        torch = self._torch
        config = self._generation_config(max_tokens, settings, temperature)
        eos = config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        out: list[Answer | None] = [None] * len(requests)
        by_chat: dict[tuple[int, ...], _Unit] = {}
        for e in self._encode_sorted(requests, system):  # shortest first
            unit = by_chat.setdefault(tuple(e.ids), _Unit(encoded=e, members=[]))
            unit.members.append(e.index)
        greedy = temperature <= 0
        cap = self.generation_batch_size
        batches: list[list[_Unit]] = []
        size = 0
        for u in by_chat.values():
            n = 1 if greedy else len(u.members)
            if batches and size + n <= cap:
                batches[-1].append(u)
                size += n
            else:
                batches.append([u])
                size = n
        for batch in batches:
            if not greedy and settings.seed is not None:
                torch.manual_seed(settings.seed)
            # One row per generated sequence: (position of its unit in the batch, the requests it answers).
            rows: list[tuple[int, list[int]]] = []
            for k, u in enumerate(batch):
                rows.extend([(k, list(u.members))] if greedy else [(k, [m]) for m in u.members])
            stops = [requests[members[0]].stop for _, members in rows]
            started = time.perf_counter()
            try:
                new, stopped_at = self._generate_rows([u.encoded for u in batch], [k for k, _ in rows], stops,
                                                      config, eos_ids)
            except RuntimeError as e:
                raise PermanentError(f"hf model failed to generate for a batch of {len(rows)}: {e}") from None
            seconds = time.perf_counter() - started
            for (k, members), tokens, at in zip(rows, new, stopped_at):
                kept, finish = _cut(tokens, eos_ids, at)
                for i in members:
                    out[i] = Answer(
                        text=self.tokenizer.decode(kept, skip_special_tokens=True),
                        usage={"prompt_tokens": len(batch[k].encoded.ids), "completion_tokens": len(kept)},
                        detail={
                            "temperature": temperature,
                            "finish": finish,
                            "batch_seconds": round(seconds, 4),
                            "batch_sequences": len(rows),
                        },
                    )
        return [a for a in out if a is not None]

    def _generate_rows(
        self, prompts: Sequence[_Encoded], row_prompt: Sequence[int], stops: Sequence[Any], config: Any,
        eos_ids: set[int],
    ) -> tuple[list[list[int]], list[int | None]]:
        """Generate one sequence per row (``row_prompt[r]``: which prompt row r continues).

        Returns the new tokens of each row (padded after its end) and, per row, after how many
        new tokens its ``stop`` predicate fired (None: it did not).
        """
        from transformers import StoppingCriteriaList

        torch = self._torch
        ids, mask, pos = self._pad_left(prompts)
        width = ids.shape[1]
        padded = any(len(e.ids) != width for e in prompts)
        criterion = _StopWhen(stops, self.tokenizer, eos_ids) if any(s is not None for s in stops) else None
        kwargs: dict[str, Any] = {"generation_config": config}
        if criterion is not None:
            kwargs["stopping_criteria"] = StoppingCriteriaList([criterion])
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
        new = generated[:, width:].tolist()
        stopped = criterion.stopped_at if criterion is not None else [None] * len(new)
        return new, stopped

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
            "generation_batch_size": self.generation_batch_size,
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
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        if self.embedded:
            from .embedded import GGUF_FILE_NAME, conversion_info

            info["embedded_source"] = GGUF_FILE_NAME
            info["conversion"] = conversion_info(Path(self.path))
        return info

    async def aclose(self) -> None:
        """Drop the model so its memory can be freed (GPU memory especially)."""
        with self._lock:
            self.model = None
            if self._worker is not None:
                self._worker.shutdown(wait=False)
                self._worker = None
            if self.device == "cuda":
                self._torch.cuda.empty_cache()


#: glibc mallopt parameters (malloc.h) and the values set by ``_keep_freed_memory``.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # the largest glibc accepts on 64-bit (HEAP_MAX_SIZE / 2)
_TRIM_THRESHOLD = 512 * 1024 * 1024
_MALLOC_STATE: dict[str, Any] = {}


def _keep_freed_memory() -> str | None:
    """Make glibc keep the memory a forward pass frees, instead of handing it back to the kernel.

    Why (found by profiling prob mode at batch 1, issue 13): a forward pass allocates and frees
    tens of megabytes of activations. glibc's default thresholds adapt as it goes: blocks above
    a moving mmap threshold are mapped and unmapped on every call, and free memory at the top
    of a heap is trimmed back to the kernel, so the next pass touches fresh pages and takes a
    page fault for each 4 KiB. How many depends on the thread and on the history (0 to ~46,000
    faults per 512-token pass measured on one machine, ~3 us each in a VM, i.e. up to ~130 ms
    of system time per pass), more where faults cost more. One of the two causes of the
    prob-mode overhead (the other: torch work split across two threads, see ``__init__``).
    Fixing both thresholds ends the churn: after the first pass, a pass takes no page faults.

    Process-wide and done once, on Linux with glibc only; ``CASEBENCH_MALLOC_TUNING=0`` leaves
    malloc alone. Returns what was done (for the manifest), None when nothing was.
    """
    import os

    if "done" in _MALLOC_STATE:
        return _MALLOC_STATE["done"]
    result = None
    if os.environ.get("CASEBENCH_MALLOC_TUNING", "1") != "0":
        try:
            import ctypes
            import platform

            if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
                libc = ctypes.CDLL("libc.so.6")
                if libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) and libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD):
                    result = f"glibc mmap threshold {_MMAP_THRESHOLD >> 20} MiB, trim threshold {_TRIM_THRESHOLD >> 20} MiB"
        except (OSError, AttributeError):
            result = None
    _MALLOC_STATE["done"] = result
    return result


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


def _cut(tokens: Sequence[int], eos_ids: set[int], stopped_at: int | None) -> tuple[list[int], str]:
    """The tokens a row really generated, and why it ended ("stop", "eos" or "length").

    A row ends at its first end token (kept, as generated), or where its stop predicate fired;
    whatever follows in the batch's output is padding.
    """
    limit = len(tokens) if stopped_at is None else min(stopped_at, len(tokens))
    for n, t in enumerate(tokens[:limit]):
        if t in eos_ids:
            return list(tokens[: n + 1]), "eos"
    if stopped_at is not None and stopped_at <= len(tokens):
        return list(tokens[:limit]), "stop"
    return list(tokens), "length"


def _stop_criterion_class() -> Any:
    """Built lazily: transformers is imported only when a model is loaded."""
    from transformers import StoppingCriteria

    class StopWhen(StoppingCriteria):
        """Stops each row independently once its predicate holds for the text generated so far.

        Called by ``generate`` after every step with all rows; returns one bool per row (rows
        already finished are reported as done again, which generate ignores). Records, per row,
        the number of new tokens at the step its predicate first fired, so the answer can be cut
        exactly there.
        """

        def __init__(self, stops: Sequence[Any], tokenizer: Any, eos_ids: set[int]) -> None:
            self.stops = list(stops)
            self.tokenizer = tokenizer
            self.eos_ids = eos_ids
            self.tokens: list[list[int]] = [[] for _ in self.stops]
            self.stopped_at: list[int | None] = [None] * len(self.stops)
            self.ended = [s is None for s in self.stops]  # rows with no predicate are never checked

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            import torch

            last = input_ids[:, -1].tolist()
            done = []
            for r, t in enumerate(last):
                if not self.ended[r]:
                    if t in self.eos_ids:
                        self.ended[r] = True
                    else:
                        self.tokens[r].append(t)
                        text = self.tokenizer.decode(self.tokens[r], skip_special_tokens=True)
                        if self.stops[r](text):
                            self.ended[r] = True
                            self.stopped_at[r] = len(self.tokens[r])
                done.append(self.stopped_at[r] is not None)
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StopWhen


def _StopWhen(stops: Sequence[Any], tokenizer: Any, eos_ids: set[int]) -> Any:
    global _STOP_CLASS
    if _STOP_CLASS is None:
        _STOP_CLASS = _stop_criterion_class()
    return _STOP_CLASS(stops, tokenizer, eos_ids)


_STOP_CLASS: Any = None
