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

Batches: sorted by prompt length (little padding), padded on the left with an attention mask and
position ids counted from the first real token, so a prompt gets the same P(safe) whatever batch
it is in (within float rounding: about 1e-6 in float32; half precision is far coarser).

Binary and score modes: batched ``generate``, greedy when the temperature is 0, else sampling at
that temperature (``Request.temperature`` overrides the run's setting, as score-mode samples do).

The blocking torch work runs in a worker thread (``asyncio.to_thread``) under a lock, so the
event loop stays responsive and two batches never share the model at once.
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

PROB_METHODS = ("first-token", "continuation")
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
#: Default batch size per device, chosen by measurement (bench/bench_hf_prob.py, SmolLM2-135M,
#: 100 real prompts of ~512 tokens, 2 CPU cores): per case, batch 1 took 781 ms, 2: 800, 4: 940,
#: 8: 1084. On CPU a padded batch loses the unmasked causal fast path and pays for padding, so 1.
#: On a GPU, batching is where the speed lies (16 is a conventional choice, not measured here).
DEFAULT_BATCH_SIZE = {"cpu": 1, "cuda": 16}


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


class HFBackend:
    """A transformers causal LM answering prompts locally, in sorted, left-padded batches."""

    capabilities = Capabilities(generate=True, token_probs=True)

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int | None = None,
        prob_method: str = "first-token",
        system: str | None = None,
    ) -> None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        if prob_method not in PROB_METHODS:
            raise ValueError(f"prob_method must be one of {', '.join(PROB_METHODS)}, not {prob_method!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")

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
        self.batch_size = batch_size if batch_size is not None else DEFAULT_BATCH_SIZE[device]
        self.prob_method = prob_method
        self.system = system

        self.tokenizer, self.model = self._load()
        self.variants = verdict_variants(self.tokenizer)
        self.forms = continuation_forms(self.tokenizer)
        self._keep_arg = _logits_to_keep_arg(self.model)
        self._lock = threading.Lock()

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
    def render(self, prompt: str, system: str | None = None) -> list[int]:
        """Token ids of the prompt as the model expects it: its chat template, if it has one."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": prompt}
            ]
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return list(tok.encode(text, add_special_tokens=False))
        return list(tok.encode(prompt, add_special_tokens=True))

    def _encode_sorted(self, requests: Sequence[Request], system: str | None) -> list[_Encoded]:
        """Encode each request's chat (its own system message, else ``system``), shortest first."""
        encoded = [_Encoded(i, self.render(r.prompt, r.system if r.system is not None else system))
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

    # ------------------------------------------------------------------ the protocol
    async def answer(self, requests: Sequence[Request], settings: GenerationSettings) -> list[Answer]:
        if not requests:
            return []
        return await asyncio.to_thread(self._answer_blocking, list(requests), settings)

    def _answer_blocking(self, requests: list[Request], settings: GenerationSettings) -> list[Answer]:
        system = self.system
        answers: list[Answer | None] = [None] * len(requests)
        with self._lock, self._torch.inference_mode():
            prob = [i for i, r in enumerate(requests) if r.want == "p_safe"]
            text = [i for i, r in enumerate(requests) if r.want != "p_safe"]
            if prob:
                for i, a in zip(prob, self._prob([requests[i] for i in prob], system)):
                    answers[i] = a
            # Text requests are grouped by effective temperature: one generate call per setting.
            groups: dict[float, list[int]] = {}
            for i in text:
                t = requests[i].temperature if requests[i].temperature is not None else settings.temperature
                groups.setdefault(float(t), []).append(i)
            for temperature, idx in groups.items():
                for i, a in zip(idx, self._generate([requests[i] for i in idx], settings, temperature, system)):
                    answers[i] = a
        return [a for a in answers if a is not None]

    # ------------------------------------------------------------------ prob mode
    def _prob(self, requests: Sequence[Request], system: str | None) -> list[Answer]:
        out: list[Answer | None] = [None] * len(requests)
        encoded = self._encode_sorted(requests, system)
        for start in range(0, len(encoded), self.batch_size):
            chunk = encoded[start : start + self.batch_size]
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
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos, "use_cache": use_cache}
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
    def _generation_config(self, settings: GenerationSettings, temperature: float) -> Any:
        from transformers import GenerationConfig

        sample = temperature > 0
        return GenerationConfig(
            max_new_tokens=settings.max_tokens,
            do_sample=sample,
            temperature=temperature if sample else None,
            top_p=(settings.top_p if settings.top_p is not None else 1.0) if sample else None,
            top_k=None,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id,
            bos_token_id=self.model.generation_config.bos_token_id,
        )

    def _generate(
        self, requests: Sequence[Request], settings: GenerationSettings, temperature: float, system: str | None
    ) -> list[Answer]:
        torch = self._torch
        config = self._generation_config(settings, temperature)
        eos = config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        out: list[Answer | None] = [None] * len(requests)
        encoded = self._encode_sorted(requests, system)
        for start in range(0, len(encoded), self.batch_size):
            chunk = encoded[start : start + self.batch_size]
            ids, mask, _ = self._pad_left(chunk)
            if temperature > 0 and settings.seed is not None:
                torch.manual_seed(settings.seed)
            started = time.perf_counter()
            try:
                generated = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            except RuntimeError as e:
                raise PermanentError(f"hf model failed to generate for a batch of {len(chunk)}: {e}") from None
            seconds = time.perf_counter() - started
            new = generated[:, ids.shape[1] :].tolist()
            for e, tokens in zip(chunk, new):
                kept = []
                for t in tokens:  # up to and including the first end token; the rest is padding
                    kept.append(t)
                    if t in eos_ids:
                        break
                out[e.index] = Answer(
                    text=self.tokenizer.decode(kept, skip_special_tokens=True),
                    usage={"prompt_tokens": len(e.ids), "completion_tokens": len(kept)},
                    detail={"temperature": temperature, "batch_seconds": round(seconds, 4)},
                )
        return [a for a in out if a is not None]

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
            "batch_size": self.batch_size,
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
            if self.device == "cuda":
                self._torch.cuda.empty_cache()


def _logits_to_keep_arg(model: Any) -> str | None:
    """The forward argument that limits logits to the last positions, by transformers version."""
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None
