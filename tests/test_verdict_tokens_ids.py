"""Variant token ids, checked against SmolLM2's real tokenizer (read from the embedded GGUF).

The expected ids are named with the reason each is there; every one is also checked against the
tokenizer's own vocabulary (``convert_tokens_to_ids`` on the byte-level BPE spelling, where "Ġ" is
a leading space), which is independent of the code under test.
"""

from __future__ import annotations

import pytest

from casebench.backends.verdict_tokens import (
    continuation_forms,
    derive_variants,
    surface_forms,
    variant_strings,
    verdict_variants,
)

# id, BPE spelling, why it is a variant
EXPECTED_SAFE = [
    (18437, "safe", '"safe" is one whole-word token'),
    (2991, "Ġsafe", '" safe" (leading space) is one token'),
    (34806, "Safe", '"Safe" is one token'),
    (16872, "ĠSafe", '" Safe" is one token'),
    (4988, "SA", '"SAFE" splits into "SA" + "FE": the first piece counts'),
    (48702, "ĠSAF", '" SAFE" splits into " SAF" + "E": the first piece counts'),
]
EXPECTED_UNSAFE = [
    (10082, "uns", '"unsafe" without a space splits into "uns" + "afe": the first piece counts'),
    (20408, "Ġunsafe", '" unsafe" with a leading space is one token'),
    (3706, "Un", '"Unsafe" splits into "Un" + "safe"'),
    (810, "ĠUn", '" Unsafe" splits into " Un" + "safe"'),
    (5633, "UN", '"UNSAFE" splits into "UN" + "SA" + "FE"'),
    (4954, "ĠUN", '" UNSAFE" splits into " UN" + "SA" + "FE"'),
]


@pytest.fixture(scope="session")
def smol_tokenizer():
    from transformers import AutoTokenizer

    from casebench.backends.embedded import gguf_path

    path = gguf_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)


def test_surface_forms_cover_case_and_space():
    assert surface_forms("safe") == ["safe", " safe", "Safe", " Safe", "SAFE", " SAFE"]
    assert surface_forms("ok") == ["ok", " ok", "Ok", " Ok", "OK", " OK"]


@pytest.mark.parametrize("expected", [EXPECTED_SAFE, EXPECTED_UNSAFE], ids=["safe", "unsafe"])
def test_expected_ids_are_what_the_vocabulary_says(smol_tokenizer, expected):
    for token_id, spelling, why in expected:
        assert smol_tokenizer.convert_tokens_to_ids(spelling) == token_id, why


def test_smollm2_variants(smol_tokenizer):
    assert derive_variants(smol_tokenizer, "safe") == [i for i, _, _ in EXPECTED_SAFE]
    assert derive_variants(smol_tokenizer, "unsafe") == [i for i, _, _ in EXPECTED_UNSAFE]
    both = verdict_variants(smol_tokenizer)
    assert both == {"safe": [i for i, _, _ in EXPECTED_SAFE], "unsafe": [i for i, _, _ in EXPECTED_UNSAFE]}
    strings = variant_strings(smol_tokenizer, both)
    assert strings["unsafe"]["10082"] == "uns" and strings["safe"]["2991"] == " safe"


def test_the_split_the_issue_describes(smol_tokenizer):
    # The reason first pieces matter at all: "unsafe" is two tokens, " unsafe" one.
    assert smol_tokenizer.encode("unsafe", add_special_tokens=False) == [10082, 9980]
    assert smol_tokenizer.encode(" unsafe", add_special_tokens=False) == [20408]


def test_an_id_shared_by_both_words_is_dropped(smol_tokenizer):
    # "Unsafe" starts with "Un" (3706), and so does "Unsure"'s spelling if it splits the same
    # way; whichever pieces two words share must leave both sets, all others stay.
    a, b = "unsafe", "unusual"
    va, vb = derive_variants(smol_tokenizer, a), derive_variants(smol_tokenizer, b)
    shared = set(va) & set(vb)
    assert shared, "the pair must share a first piece for this test to mean anything"
    both = verdict_variants(smol_tokenizer, a, b)
    assert not set(both["safe"]) & set(both["unsafe"])
    assert both["safe"] == [i for i in va if i not in shared]
    assert both["unsafe"] == [i for i in vb if i not in shared]


def test_a_word_with_no_unambiguous_token_is_refused(smol_tokenizer):
    with pytest.raises(ValueError, match="continuation"):
        verdict_variants(smol_tokenizer, "safe", "safe")


def test_continuation_forms_are_whole_words_and_disjoint(smol_tokenizer):
    forms = continuation_forms(smol_tokenizer)
    decoded = {k: [smol_tokenizer.decode(list(s)) for s in v] for k, v in forms.items()}
    assert decoded == {"safe": surface_forms("safe"), "unsafe": surface_forms("unsafe")}
    everything = forms["safe"] + forms["unsafe"]
    for a in everything:  # no sequence may be a proper prefix of another: the events must be disjoint
        assert not any(len(b) > len(a) and b[: len(a)] == a for b in everything)


def _metaspace_tokenizer():
    """A real SentencePiece-style tokenizer (``tokenizers`` BPE with a Metaspace pre-tokenizer),
    letters only and no merges: every word starts with a lone "▁" piece, then its letters."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "▁": 1}
    for c in "safeSAFEun":
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    core.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>")


def test_a_lone_space_marker_is_not_evidence():
    tok = _metaspace_tokenizer()
    assert tok.encode("safe", add_special_tokens=False)[0] == 1  # the lone marker comes first
    # The marker begins every word alike, so it says nothing about which one: no variant at all,
    # and the first-token method refuses this tokenizer rather than scoring noise.
    assert derive_variants(tok, "safe") == []
    with pytest.raises(ValueError, match="continuation"):
        verdict_variants(tok)
    assert continuation_forms(tok)["safe"]  # whole words can still be scored
