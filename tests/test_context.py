"""model/context.py: context layers between the encoder and the head (model.context) keep every text
of a row to itself (or a row to one text), learn at the head's rate, and export like the rest."""
import numpy as np
import paddle
import pytest

import globalpointer
from globalpointer.cli import train_main
from globalpointer.config import ModelConfig, load_config
from globalpointer.data.batching import collate, collate_rows
from globalpointer.data.features import Featurizer
from globalpointer.deploy.export import compile_if_it_pays, export_checkpoint
from globalpointer.model.encoders import build_tiny
from globalpointer.model.network import build_network, model_inputs
from globalpointer.training.step import build_optimizer
from synthetic import tiny_config

TEXTS = ["北京大学的张三", "上海", "深圳的李四在广州工作"]


def network_of(context: str):
    paddle.seed(3)
    encoder = build_tiny()
    network = build_network(ModelConfig(context=context, context_layers=2), encoder, 3)
    network.eval()
    return network, Featurizer(encoder.tokenizer, "char", 32, 8)


@pytest.mark.parametrize("context", ["transformer", "bilstm"])
def test_each_text_is_read_as_if_it_were_alone(context):
    """A text's logits do not depend on the texts beside it: in rows of their own with padding
    (both), and sharing one row (transformer; a BiLSTM reads a row end to end, so rows hold one text)."""
    network, featurizer = network_of(context)
    windows = featurizer.text_windows(TEXTS)
    alone = [network(**model_inputs(collate([w], featurizer.pad_id))).numpy()[0] for w in windows]
    padded = network(**model_inputs(collate(windows, featurizer.pad_id))).numpy()
    for i, logits in enumerate(alone):
        n = len(windows[i].input_ids)
        np.testing.assert_allclose(padded[i, :, :n, :n], logits, atol=1e-5)
    assert network.packs_texts == (context == "transformer")
    if network.packs_texts:
        row = network(**model_inputs(collate_rows([windows], featurizer.pad_id))).numpy()[0]
        start = 0
        for i, logits in enumerate(alone):
            n = len(windows[i].input_ids)
            np.testing.assert_allclose(row[:, start:start + n, start:start + n], logits, atol=1e-5)
            start += n


def test_context_layers_learn_at_the_heads_rate():
    network, _ = network_of("transformer")
    config = load_config(overrides=["train.lr=1e-5", "train.head_lr=1e-3", "train.layer_lr_decay=1.0"])
    optimizer, _ = build_optimizer(network, config, 10)
    rate_of = {id(p): group["learning_rate"] for group in optimizer._param_groups for p in group["params"]}
    assert {rate_of[id(p)] for p in network.context.parameters()} == {1e-3}
    assert {rate_of[id(p)] for p in network.encoder.parameters()} == {1e-5}


@pytest.mark.parametrize("context", ["transformer", "bilstm"])
def test_a_model_with_context_layers_trains_loads_and_exports(tmp_path, monkeypatch, context):
    """Train, load, export (Paddle Inference and ONNX): the same entities from every backend."""
    assert train_main(["--config", tiny_config(tmp_path, model__context=context, train__epochs=2)]) == 0
    best = tmp_path / "run" / "best"
    export_checkpoint(str(best), str(tmp_path / "export"), onnx=True)
    texts = [line for line in (tmp_path / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:20]]
    texts = [__import__("json").loads(line)["text"] for line in texts]
    checkpoint = globalpointer.load(str(best), backend="dynamic")
    dynamic = checkpoint.pipe(texts)
    expected = [[(e["start"], e["end"], e["type"]) for e in found] for found in dynamic]
    assert any(expected)
    # a BiLSTM reads a row end to end: its export, like its checkpoint, keeps each text to a row of its own
    assert checkpoint.extractor.pack_texts == (context == "transformer")
    from globalpointer.model.backends import openvino_available

    for backend in ("paddle-inference", "onnxruntime") + (("openvino",) if openvino_available() else ()):
        exported = globalpointer.load(str(tmp_path / "export"), backend=backend)
        assert exported.extractor.pack_texts == checkpoint.extractor.pack_texts, backend
        found = exported.pipe(texts)
        assert [[(e["start"], e["end"], e["type"]) for e in f] for f in found] == expected, backend
    # and the program compiled from the checkpoint for a long input, which runs in its place
    monkeypatch.setenv("GLOBALPOINTER_CACHE", str(tmp_path / "cache"))
    compile_if_it_pays(str(best), [], None, lines=10 ** 6)
    compiled = globalpointer.load(str(best))
    assert compiled.backend == "paddle-inference"
    assert compiled.extractor.pack_texts == checkpoint.extractor.pack_texts
