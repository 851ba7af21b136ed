"""model/backends.py: the table of backends carries their rules, and choose_backend only filters it
(the built backends are checked against the dynamic graph in test_export.py)."""
from types import SimpleNamespace

import pytest

from globalpointer.checkpoint import open_model
from globalpointer.errors import ConfigError
from globalpointer.model import backends
from globalpointer.model.backends import BACKENDS, Backend, choose_backend


def test_a_new_backend_is_one_entry_in_the_table(trained, monkeypatch):
    """A backend added to BACKENDS alone is accepted by the config, chosen, built and run by load;
    its rules (precisions, files, devices, library) are enforced from its entry."""
    from globalpointer.inference.pipeline import load

    built = []

    def build(directory, settings):
        built.append(directory)
        return BACKENDS["dynamic"].build(directory, settings)

    monkeypatch.setitem(BACKENDS, "counting", Backend(False, build, {"float32": ("model.safetensors",)}, ("cpu",),
                                                      lambda: True, "counting", "pip install counting", ()))
    path = str(trained / "run" / "best")
    checkpoint = open_model(path)
    ner = load(checkpoint, backend="counting")
    assert ner.backend == "counting" and built == [path]
    assert ner("北京大学的张三") == load(path, backend="dynamic")("北京大学的张三")
    assert choose_backend("auto", checkpoint) == "dynamic"  # auto_for () keeps it out of auto's choice
    with pytest.raises(ConfigError, match="inference.precision=int8 runs on openvino or onnxruntime, not counting"):
        choose_backend("counting", checkpoint, precision="int8")
    with pytest.raises(ConfigError, match="counting runs on the CPU; on gpu:0 use"):
        choose_backend("counting", checkpoint, device="gpu:0")
    with pytest.raises(ConfigError, match=r"counting: counting is not installed \(pip install counting\)"):
        choose_backend("counting", checkpoint, installed=lambda name: name != "counting")
    (trained / "elsewhere").mkdir(exist_ok=True)
    with pytest.raises(ConfigError, match="has no model.safetensors"):
        choose_backend("counting", SimpleNamespace(path=str(trained / "elsewhere"), export=False))


def test_float16_on_a_checkpoint_is_refused_not_run_in_float32(trained):
    """The dynamic graph runs float32 only; float16 was ignored on a checkpoint before the table said so."""
    with pytest.raises(ConfigError, match="inference.precision=float16 runs on paddle-inference, not dynamic"):
        choose_backend("auto", open_model(str(trained / "run" / "best")), precision="float16")


def test_every_exported_file_says_how_to_make_it():
    files = {f for backend in BACKENDS.values() if backend.runs_export for group in backend.files.values() for f in group}
    assert files <= set(backends.EXPORT_FLAGS)
