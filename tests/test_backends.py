"""model/backends.py: the table of backends carries their rules, and choose_backend only filters it
(the built backends are checked against the dynamic graph in test_export.py)."""
from types import SimpleNamespace

import pytest

from globalpointer.model_directory.opening import open_model
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


def test_an_int8_model_runs_where_it_was_verified_and_is_named_elsewhere():
    from globalpointer.cpu_math import CpuInfo, int8_kernels
    from globalpointer.model.backends import int8_unfit

    assert int8_kernels(CpuInfo("AuthenticAMD", "AMD EPYC", {"avx2", "avx512f", "avx512_vnni"})) == "vnni"
    assert int8_kernels(CpuInfo("GenuineIntel", "Core i7", {"avx2", "avx_vnni"})) == "vnni"
    assert int8_kernels(CpuInfo("AuthenticAMD", "AMD EPYC 7B12", {"avx2", "fma"})) == "avx2"
    assert int8_kernels(CpuInfo("GenuineIntel", "Xeon", {"avx2", "avx512f", "avx512bw"})) == "avx2"  # no VNNI
    from globalpointer.model.backends import int8_measurement

    row = int8_measurement({"backend": "onnxruntime", "f1": 70.5}, {"backend": "onnxruntime", "f1": 70.96}, "vnni",
                           "AMD EPYC", "dev.json", 1.0)  # as export --verify writes it
    verified = {"int8": {"onnxruntime": {"scheme": {"reduce_range": True}, "verified": row}}}
    assert int8_unfit(verified, "onnxruntime", "vnni") == ""
    said = int8_unfit(verified, "onnxruntime", "avx2")
    assert said == ("model.int8.onnx was verified on a CPU with vnni integer kernels (dev F1 70.5 against float32's "
                    "70.96), and this one has avx2")
    # made by this version without --verify: a scheme that cannot saturate, run as exported
    assert int8_unfit({"int8": {"onnxruntime": {"scheme": {"reduce_range": True}}}}, "onnxruntime", "avx2") == ""
    # made by an earlier version (no record): full-range weights, known to saturate without VNNI
    assert "made by an earlier version" in int8_unfit({}, "onnxruntime", "avx2")
    assert int8_unfit({}, "onnxruntime", "vnni") == ""
    assert "model.int8.xml was made by an earlier version" in int8_unfit({"int8": "?"}, "openvino", "aarch64")
