"""Weights files are read as data: a crafted pickle cannot run code, legacy files still load."""
import collections
import io
import os
import pickle
import shutil
import sys
import types
import zipfile

import numpy as np
import pytest

from globalpointer.cli import evaluate_main, predict_main, train_main
from globalpointer.errors import CheckpointError, EncoderError
from globalpointer.model.weights import load_pickled_state, load_state, read_state, save_state
from helpers import _Payload, write_malicious_pickle
from synthetic import tiny_config


def test_save_and_load_state_round_trip_nested_values(tmp_path):
    state = {"w": np.arange(6, dtype="float32").reshape(2, 3), "LR_Scheduler": {"last_epoch": 3, "last_lr": 1e-4},
             "nested": {"m": np.ones([1], dtype="float64"), "name": "x"}}
    path = str(tmp_path / "s.safetensors")
    save_state(state, path)
    loaded = load_state(path)
    np.testing.assert_array_equal(loaded["w"], state["w"])
    np.testing.assert_array_equal(loaded["nested"]["m"], state["nested"]["m"])
    assert loaded["LR_Scheduler"] == {"last_epoch": 3, "last_lr": 1e-4} and loaded["nested"]["name"] == "x"
    assert not os.path.exists(path + ".tmp")


def test_crafted_pickle_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "model_state.pdparams"
    write_malicious_pickle(path, marker)
    with pytest.raises(CheckpointError, match="refused to load: the pickle asks to call io.open"):
        read_state(str(path))
    assert not marker.exists()


def test_paddle_pickle_of_arrays_loads(tmp_path):
    import paddle

    layer = paddle.nn.Linear(3, 2)
    paddle.save(layer.state_dict(), str(tmp_path / "w.pdparams"))
    state = load_pickled_state(str(tmp_path / "w.pdparams"))
    assert set(state) == {"weight", "bias"}
    np.testing.assert_array_equal(state["weight"], layer.weight.numpy())


def write_torch_zip(path, tensors, storage_name="FloatStorage"):
    """A file in PyTorch's zip format, made without PyTorch: stand-in modules named torch and
    torch._utils let the standard pickler write the globals PyTorch's loader expects."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    storage_class = type(storage_name, (), {"__module__": "torch", "__qualname__": storage_name})
    setattr(torch, storage_name, storage_class)

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called while writing")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils

    class Storage:
        def __init__(self, key, count):
            self.key, self.count = key, count

    class Tensor:
        def __init__(self, storage, shape):
            self.storage, self.shape = storage, shape

        def __reduce__(self):
            stride = tuple(int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape)))
            return _rebuild_tensor_v2, (self.storage, 0, tuple(self.shape), stride, False, collections.OrderedDict())

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return "storage", storage_class, obj.key, "cpu", obj.count
            return None

    saved = {name: sys.modules.get(name) for name in ("torch", "torch._utils")}
    sys.modules.update({"torch": torch, "torch._utils": utils})
    try:
        payload = collections.OrderedDict()
        buffers = {}
        for index, (name, (raw, shape)) in enumerate(tensors.items()):
            payload[name] = Tensor(Storage(str(index), int(np.prod(shape))), shape)
            buffers[str(index)] = raw
        stream = io.BytesIO()
        Pickler(stream, protocol=2).dump(payload)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", stream.getvalue())
        for key, raw in buffers.items():
            archive.writestr(f"archive/data/{key}", raw)


def test_pytorch_zip_is_read_as_arrays(tmp_path):
    weight = np.arange(6, dtype="float32").reshape(2, 3)
    path = str(tmp_path / "pytorch_model.bin")
    write_torch_zip(path, {"w": (weight.tobytes(), (2, 3))})
    np.testing.assert_array_equal(read_state(path)["w"], weight)
    # bfloat16 keeps the upper 16 bits of a float32: these values are exact in it
    exact = np.array([1.0, -2.5, 0.15625], dtype="float32")
    write_torch_zip(path, {"b": ((exact.view(np.uint32) >> 16).astype(np.uint16).tobytes(), (3,))}, "BFloat16Storage")
    np.testing.assert_array_equal(read_state(path)["b"], exact)


def test_encoder_directories_with_crafted_pickles_are_refused(tmp_path):
    from globalpointer.model.encoders import build_tiny, load_encoder

    marker = tmp_path / "ran"
    paddle_dir = tmp_path / "paddle_format"
    tiny = build_tiny()
    tiny.model.save_pretrained(str(paddle_dir))
    tiny.tokenizer.save_pretrained(str(paddle_dir))
    loaded = load_encoder(str(paddle_dir))  # a genuine PaddleNLP-format directory loads, weights equal
    for name, value in tiny.model.state_dict().items():
        np.testing.assert_array_equal(loaded.model.state_dict()[name].numpy(), value.numpy())
    write_malicious_pickle(paddle_dir / "model_state.pdparams", marker)
    with pytest.raises(EncoderError, match="refused to load"):
        load_encoder(str(paddle_dir))

    hf_dir = tmp_path / "hf_format"
    hf_dir.mkdir()
    shutil.copy(paddle_dir / "config.json", hf_dir / "config.json")
    shutil.copy(paddle_dir / "vocab.txt", hf_dir / "vocab.txt")
    with zipfile.ZipFile(hf_dir / "pytorch_model.bin", "w") as archive:
        stream = io.BytesIO()
        pickle.dump({"x": _Payload(str(marker))}, stream)
        archive.writestr("archive/data.pkl", stream.getvalue())
    with pytest.raises(EncoderError, match="refused to load"):
        load_encoder(str(hf_dir))
    assert not marker.exists()


@pytest.fixture
def crafted_checkpoint(trained, tmp_path):
    target = tmp_path / "best"
    shutil.copytree(trained / "run" / "best", target)
    (target / "model.safetensors").unlink()
    write_malicious_pickle(target / "model_state.pdparams", tmp_path / "ran")
    return target


def test_commands_refuse_a_checkpoint_with_a_crafted_pickle(crafted_checkpoint, trained, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("张三在北京\n", encoding="utf-8")
    assert predict_main(["--model", str(crafted_checkpoint), "--input", str(texts),
                         "--output", str(tmp_path / "out.jsonl")]) == 2
    assert evaluate_main(["--model", str(crafted_checkpoint), "--data", str(trained / "dev.jsonl")]) == 2
    assert "not a complete checkpoint, missing model.safetensors" in capsys.readouterr().err  # a pickle is not read
    assert not (tmp_path / "ran").exists()


def test_training_on_an_encoder_directory_with_a_crafted_pickle(tmp_path, capsys):
    from globalpointer.model.encoders import build_tiny

    encoder_dir = tmp_path / "encoder"
    tiny = build_tiny()
    tiny.model.save_pretrained(str(encoder_dir))
    tiny.tokenizer.save_pretrained(str(encoder_dir))
    write_malicious_pickle(encoder_dir / "model_state.pdparams", tmp_path / "ran")
    assert train_main(["--config", tiny_config(tmp_path, model__encoder=str(encoder_dir))]) == 2
    assert "refused to load" in capsys.readouterr().err and not (tmp_path / "ran").exists()


def test_encoder_weights_that_do_not_fit_name_the_parameters(tmp_path):
    import paddle

    from globalpointer.model.encoders import build_tiny, load_encoder

    directory = tmp_path / "encoder"
    tiny = build_tiny()
    tiny.model.save_pretrained(str(directory))
    tiny.tokenizer.save_pretrained(str(directory))
    state = {name: value for name, value in tiny.model.state_dict().items() if name != "pooler.dense.bias"}
    paddle.save(state, str(directory / "model_state.pdparams"))
    with pytest.raises(EncoderError, match="do not fit the architecture of config.json next to them: "
                                           "pooler.dense.bias missing"):
        load_encoder(str(directory))
