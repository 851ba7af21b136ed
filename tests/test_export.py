"""Paddle Inference and ONNX exports predict what the dynamic graph predicts."""
import json
import os

import numpy as np
import pytest

from globalpointer.cli import evaluate_main, predict_main
from globalpointer.data.batching import collate
from globalpointer.data.splits import text_encoder_for
from globalpointer.errors import CheckpointError, UserError
from globalpointer.export import InferenceModel, export_checkpoint
from globalpointer.inference import model_inputs
from globalpointer.model import load_checkpoint


@pytest.fixture(scope="module")
def exported(trained):
    export_dir = trained / "export"
    files = export_checkpoint(str(trained / "run" / "best"), str(export_dir), onnx=True)
    assert {"inference.json", "inference.pdiparams", "model.onnx", "vocab.txt", "labels.json"} <= set(files)
    return export_dir


def batch_of_windows(trained, texts):
    loaded = load_checkpoint(str(trained / "run" / "best"))
    encoder = text_encoder_for(loaded.config, loaded.encoder.tokenizer)
    windows = [w for i, t in enumerate(texts) for w in encoder.windows(i, encoder.tokenize(t))]
    return loaded.model, model_inputs(collate(windows, encoder.pad_id))


TEXTS = ["北京大学的张三在上海", "的一是在不了有" * 12 + "李四", "深圳"]


def test_inference_model_equals_dynamic_graph(trained, exported):
    model, inputs = batch_of_windows(trained, TEXTS)
    expected = model(**inputs).numpy()
    static = InferenceModel(str(exported), tril_mask=True)(**inputs).numpy()
    assert static.shape == expected.shape and expected.shape[0] > 3  # several windows, varying lengths
    np.testing.assert_allclose(static, expected, atol=1e-4)


def test_onnx_equals_dynamic_graph(trained, exported):
    ort = pytest.importorskip("onnxruntime")
    model, inputs = batch_of_windows(trained, TEXTS)
    session = ort.InferenceSession(str(exported / "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {name: value.numpy() for name, value in inputs.items()}
    np.testing.assert_allclose(session.run(None, feed)[0], model(**inputs).numpy(), atol=1e-4)


def test_predict_and_evaluate_through_the_export(trained, exported, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    outputs = {}
    for name, model_dir in (("dynamic", trained / "run" / "best"), ("static", exported)):
        target = tmp_path / f"{name}.jsonl"
        assert predict_main(["--model", str(model_dir), "--input", str(source), "--output", str(target)]) == 0
        outputs[name] = [json.loads(line) for line in open(target)]
    for a, b in zip(outputs["dynamic"], outputs["static"]):
        assert [(e["start"], e["end"], e["type"]) for e in a["entities"]] == [(e["start"], e["end"], e["type"]) for e in b["entities"]]
        assert np.allclose([e["score"] for e in a["entities"]], [e["score"] for e in b["entities"]], atol=1e-4)
    assert any(e["text"] == "北京大学" for e in outputs["static"][0]["entities"])
    report = tmp_path / "report.json"
    assert evaluate_main(["--model", str(exported), "--data", str(trained / "dev.jsonl"), "--output", str(report)]) == 0
    assert json.load(open(report))["micro"]["f1"] == json.load(open(trained / "run" / "summary.json"))["best_dev_f1"]


def test_corrupted_export_is_a_clear_error(exported, tmp_path):
    broken = tmp_path / "broken"
    os.makedirs(broken)
    for name in os.listdir(exported):
        (broken / name).write_bytes((exported / name).read_bytes())
    (broken / "inference.pdiparams").write_bytes(b"not parameters")
    with pytest.raises(CheckpointError, match="cannot load the exported model"):
        InferenceModel(str(broken), tril_mask=True)


def test_tagger_heads_are_not_exported(tmp_path):
    from globalpointer.cli import train_main
    from synthetic import tiny_config

    config = tiny_config(tmp_path, model__head="softmax_tagger", train__epochs=1)
    assert train_main(["--config", config]) == 0
    with pytest.raises(UserError, match="cannot be exported"):
        export_checkpoint(str(tmp_path / "run" / "best"), str(tmp_path / "export"))
