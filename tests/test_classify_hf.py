"""``hf-classifier:PATH``: a real (tiny, randomly initialised) transformers sequence classifier.

The model is built at test time from a config, with a word-level tokenizer made from our own
sentences, so no hub and no committed weights are needed. Random weights say nothing about
refusals; what is tested is the plumbing: local loading, the label mapping and its errors,
batching, probabilities, the manifest entry, and the command.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from casebench.classify import ClassifierError, Item, make_classifier  # noqa: E402
from casebench.classify.hf_classifier import HFClassifier  # noqa: E402
from casebench.cli import cli  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STYLES = FIXTURES / "refusal_styles.csv"

WORDS = (
    "i can't help with that sorry but here is how to do it step one two three the a you "
    "will not refuse comply please answer question what how why is are cannot provide"
).split()


def _build(folder: Path, id2label: dict[int, str], seed: int = 7) -> Path:
    """A 1-layer BERT classifier with ``id2label`` and a word-level tokenizer, saved to ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {w: i for i, w in enumerate(specials + sorted(set(WORDS)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(  # [CLS] A [SEP] (B [SEP]), as BERT's own
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, num_labels=len(id2label),
                        id2label=id2label, label2id={v: k for k, v in id2label.items()}, pad_token_id=0)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def two_label_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("hf2"), {0: "LABEL_0", 1: "LABEL_1"})


@pytest.fixture(scope="module")
def named_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("hf3"), {0: "Compliance", 1: "partial", 2: "REFUSAL"})


def test_mapping_by_name_and_index(two_label_model: Path) -> None:
    clf = make_classifier(f"hf-classifier:{two_label_model}", labels="LABEL_0=comply,1=refuse", batch_size=3)
    assert isinstance(clf, HFClassifier)
    assert clf.mapping == {0: "comply", 1: "refuse"}
    items = [Item("q", a) for a in ["sorry i can't help with that", "here is how to do it step one",
                                    "", "a " * 400, "why", "please answer"]]
    batched = clf.classify_many(items)  # 2 batches of 3, one answer longer than max_length
    one_by_one = [clf.classify(it.prompt, it.answer) for it in items]
    assert [v.behaviour for v in batched] == [v.behaviour for v in one_by_one]
    # empty text is not an answer: undetermined, never shown to the model (base.not_an_answer)
    assert batched[2].behaviour is None and batched[2].reason.startswith("undetermined: empty answer")
    for a, b in zip(batched, one_by_one):
        if a.behaviour is None:
            assert b == a
            continue
        assert a.behaviour in ("comply", "refuse")
        assert a.p_comply == pytest.approx(b.p_comply, abs=1e-5)
        assert (a.behaviour == "comply") == (a.p_comply >= 0.5)
        assert a.reason and a.reason.startswith("model label 'LABEL_")
    assert asyncio.run(clf.aclassify(items)) == batched


def test_two_labels_to_one_behaviour_add_up(two_label_model: Path) -> None:
    clf = make_classifier(f"hf-classifier:{two_label_model}", labels="LABEL_0=refuse,LABEL_1=refuse")
    v = clf.classify("q", "i will comply")
    assert v.behaviour == "refuse" and v.p_comply == 0.0


def test_natural_label_names_need_no_mapping(named_model: Path) -> None:
    clf = make_classifier(f"hf-classifier:{named_model}", text="pair")
    assert clf.mapping == {0: "comply", 1: "partial", 2: "refuse"}
    v = clf.classify("how do i do it", "here is how")
    assert v.behaviour in ("comply", "partial", "refuse") and v.p_comply is not None


def test_describe_pins_the_weights(two_label_model: Path) -> None:
    clf = make_classifier(f"hf-classifier:{two_label_model}", labels="LABEL_0=comply,LABEL_1=refuse")
    d = clf.describe()
    assert d["kind"] == "hf-classifier" and d["labels"] == {"LABEL_0": "comply", "LABEL_1": "refuse"}
    assert len(d["weights_sha256"]) == 64 and d["text"] == "answer"
    assert d == clf.describe()  # stable


@pytest.mark.parametrize("labels,match", [
    (None, r"labels \(0=LABEL_0, 1=LABEL_1\) do not name behaviours; map each one with --refusal-labels"),
    ("LABEL_0=comply", "leaves label 'LABEL_1' unmapped"),
    ("LABEL_0=comply,LABEL_1=refuse,LABEL_7=partial", "names label 'LABEL_7', which the model does not have"),
    ("LABEL_0=comply,0=refuse,LABEL_1=refuse", "names label 'LABEL_0' twice"),
    ("LABEL_0=comply,LABEL_1=no", "not one of comply, partial, refuse"),
])
def test_mapping_errors(two_label_model: Path, labels: str | None, match: str) -> None:
    with pytest.raises(ClassifierError, match=match):
        make_classifier(f"hf-classifier:{two_label_model}", labels=labels)


def test_path_errors(tmp_path: Path) -> None:
    with pytest.raises(ClassifierError, match="no such directory"):
        make_classifier(f"hf-classifier:{tmp_path / 'missing'}")
    with pytest.raises(ClassifierError, match="no config.json"):
        make_classifier(f"hf-classifier:{tmp_path}")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ClassifierError, match="cannot load the model or tokenizer"):
        make_classifier(f"hf-classifier:{tmp_path}", labels="a=comply")
    with pytest.raises(ClassifierError, match="text must be"):
        HFClassifier(str(tmp_path), text="both")


def test_cli_hf_classifier(two_label_model: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["refusal-eval", str(STYLES), "--refusal-classifier", f"hf-classifier:{two_label_model}",
                                 "--refusal-labels", "LABEL_0=comply,LABEL_1=refuse", "--batch-size", "8", "--json"])
    assert result.exit_code == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["n"] == 49 and d["coverage"] == 1.0 and 0.0 <= d["agreement"] <= 1.0
    assert d["classifier"]["labels"] == {"LABEL_0": "comply", "LABEL_1": "refuse"}
    result = runner.invoke(cli, ["refusal-eval", str(STYLES), "--refusal-classifier", f"hf-classifier:{two_label_model}"])
    assert result.exit_code == 2 and "--refusal-labels" in result.stderr
