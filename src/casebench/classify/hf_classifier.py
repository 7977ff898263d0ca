"""``hf-classifier:PATH``: a local transformers sequence-classification model as a refusal
classifier (e.g. a refusal-detection checkpoint the user has downloaded).

Nothing is fetched: the model is loaded from ``PATH`` with ``local_files_only=True``.
Such models name their classes in ``config.id2label`` (``LABEL_0``, ``refusal``, ...), which
say nothing casebench can trust about comply/partial/refuse, so a label mapping is required
unless the model's label names already are behaviours (``comply``/``compliance``,
``partial``, ``refuse``/``refusal``, in any case). The mapping (``labels``, on the command
line ``--refusal-labels LABEL_0=comply,LABEL_1=refuse``) must cover every label of the model,
and may name a label by its name or its index.

The verdict is the behaviour with the largest total probability (labels mapping to the same
behaviour add up); ``p_comply`` is the probability mass on labels mapped to ``comply``.
``text`` chooses what the model reads: ``answer`` (the default; most refusal detectors read
the response alone) or ``pair`` (question and answer as a text pair).
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from .base import reader_description, BEHAVIOURS, ClassifierError, Item, Verdict, not_an_answer
from ..backends.registry import Option
from .registry import refusal_classifier

#: Label names taken as behaviours without a mapping.
_NATURAL = {
    "comply": "comply", "compliance": "comply", "complied": "comply", "full_compliance": "comply",
    "partial": "partial", "partial_refusal": "partial", "partial_compliance": "partial",
    "refuse": "refuse", "refusal": "refuse", "refused": "refuse", "full_refusal": "refuse",
}
_HINT = "pip install 'casebench[hf]'"


@refusal_classifier(
    "hf-classifier", argument="PATH",
    summary="a local transformers sequence-classification model read through a label mapping",
    options=(
        Option("labels", "The model's labels as behaviours, e.g. "
               "'LABEL_0=comply,LABEL_1=refuse,LABEL_2=partial'.", flag="--refusal-labels", metavar="MAP"),
        Option("batch_size", "Answers per batch (default 16).", type="int", answers=False, minimum=1),
        Option("device", "Torch device (default cpu)."),
        Option("max_length", "Tokens per input (default 512).", flag=None, type="int"),
        Option("text", "What the model reads: 'answer' or 'pair' (question and answer).",
               flag=None, choices=("answer", "pair")),
    ),
)
class HFClassifier:
    """A local ``AutoModelForSequenceClassification`` read through a label mapping."""

    version = "1"

    def __init__(
        self,
        path: str,
        *,
        labels: Mapping[str, str] | str | None = None,
        batch_size: int = 16,
        device: str = "cpu",
        max_length: int = 512,
        text: str = "answer",
    ) -> None:
        if batch_size < 1:
            raise ClassifierError(f"batch_size must be at least 1, not {batch_size}")
        if max_length < 8:
            raise ClassifierError(f"max_length must be at least 8 tokens, not {max_length}")
        if text not in ("answer", "pair"):
            raise ClassifierError(f"text must be 'answer' or 'pair', not {text!r}")
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ClassifierError(
                f"hf-classifier:{path}: no such directory; give the folder of a downloaded "
                f"sequence-classification model (config.json, weights, tokenizer files)"
            )
        if not (folder / "config.json").is_file():
            raise ClassifierError(f"hf-classifier:{path}: no config.json in {folder}; is this a transformers model folder?")
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as e:
            raise ClassifierError(f"hf-classifier needs torch and transformers ({e.name or e}); install them with: {_HINT}") from None

        self._torch = torch
        self.path = str(folder)
        self.name = f"hf-classifier:{path}"
        self.batch_size = batch_size
        self.max_length = max_length
        self.text = text
        self.device = device
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError, KeyError) as e:
            raise ClassifierError(f"hf-classifier:{path}: cannot load the model or tokenizer: {e}") from None
        try:
            self.model.to(device)
        except (RuntimeError, AssertionError, ValueError) as e:
            raise ClassifierError(f"hf-classifier:{path}: cannot use device {device!r}: {e}") from None
        self.model.eval()
        # Never feed more tokens than the model has positions for: a tokenizer saved without a
        # limit reports a huge model_max_length, and a longer input crashes inside the model.
        limits = [max_length]
        positions = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(positions, int) and positions > 0:
            limits.append(positions)
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_limit, int) and 0 < tok_limit < 1_000_000:
            limits.append(tok_limit)
        self.max_length = min(limits)
        id2label = {int(i): str(n) for i, n in self.model.config.id2label.items()}
        self.id2label = dict(sorted(id2label.items()))
        self.mapping = self._resolve_mapping(labels)

    # ------------------------------------------------------------------ labels
    def _resolve_mapping(self, labels: Mapping[str, str] | str | None) -> dict[int, str]:
        """Model class index -> behaviour, checked to cover every class exactly."""
        if isinstance(labels, str):
            from .base import parse_label_map

            labels = parse_label_map(labels)
        names = ", ".join(f"{i}={n}" for i, n in self.id2label.items())
        if not labels:
            natural = {i: _NATURAL.get(n.strip().lower()) for i, n in self.id2label.items()}
            if all(natural.values()):
                return {i: b for i, b in natural.items() if b}
            raise ClassifierError(
                f"{self.name}: the model's labels ({names}) do not name behaviours; map each one with "
                f"--refusal-labels, e.g. --refusal-labels "
                + ",".join(f"{n}={'comply' if k == 0 else 'refuse'}" for k, n in enumerate(self.id2label.values()))
            )
        by_name = {n: i for i, n in self.id2label.items()}
        mapping: dict[int, str] = {}
        for key, behaviour in labels.items():
            if behaviour not in BEHAVIOURS:
                raise ClassifierError(f"{self.name}: behaviour {behaviour!r} for label {key!r} is not one of {', '.join(BEHAVIOURS)}")
            if key in by_name:
                idx = by_name[key]
            elif str(key).isdigit() and int(key) in self.id2label:
                idx = int(key)
            else:
                raise ClassifierError(f"{self.name}: the mapping names label {key!r}, which the model does not have (its labels: {names})")
            if idx in mapping:
                raise ClassifierError(f"{self.name}: the mapping names label {self.id2label[idx]!r} twice (by name and by index)")
            mapping[idx] = behaviour
        unmapped = [self.id2label[i] for i in self.id2label if i not in mapping]
        if unmapped:
            raise ClassifierError(
                f"{self.name}: the mapping leaves label{'s' if len(unmapped) > 1 else ''} "
                f"{', '.join(repr(u) for u in unmapped)} unmapped; every label needs a behaviour (its labels: {names})"
            )
        return mapping

    # ------------------------------------------------------------------ protocol
    #: where its outcomes' probabilities come from (``outcome_refine.OutcomeReader``)
    outcome_probabilities = "the model's label masses, split within each side by the refinement"

    def describe(self) -> dict[str, Any]:
        import transformers

        return reader_description(self, "hf-classifier", {
            "path": self.path,
            "weights_sha256": self._weights_digest(),
            "labels": {self.id2label[i]: b for i, b in self.mapping.items()},
            "text": self.text,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "device": self.device,
            "transformers_version": transformers.__version__,
            "torch_version": self._torch.__version__,
        })

    def _weights_digest(self) -> str:
        """SHA-256 over config.json and the weight files, so the manifest pins the model."""
        h = hashlib.sha256()
        folder = Path(self.path)
        files = [folder / "config.json"] + sorted(
            p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()
        )
        for f in files:
            h.update(f.name.encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        return h.hexdigest()

    def _classify_batch(self, items: Sequence[Item]) -> list[Verdict]:
        torch = self._torch
        answers = [it.answer or "" for it in items]
        if self.text == "pair":
            enc = self.tokenizer([it.prompt or "" for it in items], answers, padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
        else:
            enc = self.tokenizer(answers, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        with torch.inference_mode():
            probs = torch.softmax(self.model(**enc).logits.float(), dim=-1).cpu().tolist()
        out = []
        for row in probs:
            mass = {b: 0.0 for b in BEHAVIOURS}
            for idx, p in enumerate(row):
                mass[self.mapping[idx]] += p
            behaviour = max(BEHAVIOURS, key=lambda b: mass[b])
            top = max(range(len(row)), key=lambda i: row[i])
            out.append(Verdict(behaviour, p_comply=min(1.0, max(0.0, mass["comply"])),  # type: ignore[arg-type]
                               reason=f"model label {self.id2label[top]!r} ({row[top]:.2f})",
                               probabilities={b: min(1.0, max(0.0, mass[b])) for b in BEHAVIOURS}))
        return out

    def classify_many(self, items: Sequence[Item]) -> list[Verdict]:
        """Classify in batches of ``batch_size`` (blocking). Text that is not an answer (empty,
        no readable language: ``base.not_an_answer``) is undetermined, as in every classifier,
        and is not shown to the model."""
        verdicts: list[Verdict | None] = [not_an_answer(it.answer, it.prompt) for it in items]
        todo = [i for i, v in enumerate(verdicts) if v is None]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for i, v in zip(chunk, self._classify_batch([items[i] for i in chunk])):
                verdicts[i] = v
        return [v for v in verdicts if v is not None]

    def classify(self, prompt: str, answer: str) -> Verdict:
        return self.classify_many([Item(prompt, answer)])[0]

    async def aclassify(self, items: Sequence[Item]) -> list[Verdict]:
        return await asyncio.to_thread(self.classify_many, list(items))

    async def aclose(self) -> None:
        return None
