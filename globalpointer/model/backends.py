"""Where a model runs: its network in Paddle's dynamic graph (a checkpoint), or an export in Paddle
Inference, ONNX Runtime or OpenVINO, on the CPU or a GPU.

``BACKENDS`` is the one table of them: what each runs (an export or a checkpoint), the precisions it
takes and the export's files it reads at each, its devices, its library; the config's choices come
from it.  Every backend takes the network's call signature (input_ids, token_text, span_text ->
logits) and has its head's ``decode``, so the Extractor does not know which one it drives.
``choose_backend`` filters the table for a model directory: ``auto`` takes the first backend, in the
table's order, whose rules the directory meets (OpenVINO's INT8 IR, then ONNX Runtime, Paddle Inference,
the dynamic graph).
Nothing falls back silently: a backend or device that cannot be had is an error saying how to get it.
"""
import importlib.util
import os
import threading
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from ..errors import CheckpointError, ConfigError
from ..files import read_json
from ..model_directory.layout import (EXPORT_PROGRAM, ONNX, ONNX_INT8, OPENVINO_INT8, OPENVINO_INT8_WEIGHTS,
                                      PARAMS)
from .decode import decode_logit_array
from .network import load_network



def onnxruntime_available() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None


# ONNX Runtime 1.31 fuses bias + residual + LayerNorm after the int8 MatMuls into SkipLayerNormalization,
# whose CPU kernel took longer than the three ops it replaces: INT8 2.46x -> 2.84x float32 without it
# (docs/lab/PERFORMANCE.md, INT8: what was tried); float32 graphs are not fused that way and run the same
ONNX_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]


def onnx_providers(on_gpu: bool, available: List[str]) -> List[str]:
    if not on_gpu:
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in available:
        raise ConfigError("device: gpu with inference.backend=onnxruntime needs onnxruntime-gpu "
                          "(CUDAExecutionProvider); installed providers: " + ", ".join(available))
    return ["CUDAExecutionProvider", "CPUExecutionProvider"]


class PaddleInferenceSettings(NamedTuple):
    """What ``PaddleInferenceModel`` asks of Paddle Inference; a pure function of the config, so tested on CPU."""
    gpu_id: int  # -1: the CPU
    half_precision: bool
    tensorrt: bool


def paddle_inference_settings(device: str, precision: str, tensorrt: bool) -> PaddleInferenceSettings:
    on_gpu = device.startswith("gpu")
    if precision == "int8":
        raise ConfigError("inference.precision=int8 runs on onnxruntime (model.int8.onnx), not paddle-inference")
    if not on_gpu and (precision != "float32" or tensorrt):
        raise ConfigError(f"inference.precision={precision} / inference.tensorrt={tensorrt} need a GPU "
                          f"(device is {device}); use float32 and tensorrt: false on the CPU")
    return PaddleInferenceSettings(int(device.split(":")[1]) if on_gpu else -1, precision == "float16", tensorrt)


def program_input_dtype(program: str, name: str) -> str:
    """The dtype of input ``name`` of a Paddle program saved as JSON (PIR): the ``data`` op that
    names it.  (Paddle Inference's input handles say float32 for every input until one is fed.)"""
    def attributes(op) -> dict:
        return {a.get("N"): (a.get("AT") or {}).get("D") for a in op.get("A") or [] if isinstance(a, dict)}

    def ops(node):
        if isinstance(node, dict):
            if str(node.get("#", "")).endswith(".data"):
                yield node
            for value in node.values():
                yield from ops(value)
        elif isinstance(node, list):
            for value in node:
                yield from ops(value)

    try:
        tree = read_json(program)
        for op in ops(tree):
            found = attributes(op)
            if found.get("name") == name and isinstance(found.get("dtype"), str):
                return found["dtype"]
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{program} cannot be read ({error}); export the checkpoint again") from None
    raise CheckpointError(f"{program} declares no input {name!r}; export the checkpoint again")


class _ExportedModel:
    """An export reads rows of several texts where its program's span_text numbers the texts of a row
    (int64; exports of earlier versions take a bool span_text, one text per row) and its export.json
    does not say otherwise (``packs_texts``: false for an encoder that takes no position ids, which
    could not start each text of a row at 0).  It reads and returns numpy arrays: a round trip through Paddle
    tensors took 2% of INT8 prediction."""
    reads_arrays = True
    entity_planes = 0  # a relation model's entity types: its entity planes come first, then its pair planes

    def __init__(self, tril_mask: bool, numbers_texts: bool, packs_texts: Optional[bool] = None):
        self.tril_mask = tril_mask
        self.packs_texts = numbers_texts and packs_texts is not False
        self.input_dtypes = ["int64", "int64", "int64" if numbers_texts else "bool", "int64"]

    def feed(self, input_ids, token_text, span_text) -> List[np.ndarray]:
        """The program's inputs in its order (``network.INPUTS``)."""
        inputs = (input_ids, token_text, span_text)
        return [np.ascontiguousarray(np.asarray(value).astype(dtype, copy=False))
                for value, dtype in zip(inputs, self.input_dtypes)]

    def decode(self, logits: np.ndarray, span_text, threshold):
        if self.entity_planes:
            logits = logits[:, :self.entity_planes]
        return decode_logit_array(logits, span_text, self.tril_mask, threshold)


class PaddleInferenceModel(_ExportedModel):
    """A Paddle Inference predictor over ``inference.json`` + ``inference.pdiparams``."""

    def __init__(self, directory: str, tril_mask: bool, threads: int = 1, device: str = "cpu",
                 precision: str = "float32", tensorrt: bool = False, packs_texts: Optional[bool] = None):
        from paddle import inference

        settings = paddle_inference_settings(device, precision, tensorrt)
        config = inference.Config(os.path.join(directory, EXPORT_PROGRAM), os.path.join(directory, PARAMS))
        if settings.gpu_id >= 0:
            kind = inference.PrecisionType.Half if settings.half_precision else inference.PrecisionType.Float32
            config.enable_use_gpu(256, settings.gpu_id, kind)
            if settings.tensorrt:
                config.enable_tensorrt_engine(workspace_size=1 << 30, max_batch_size=1, min_subgraph_size=3,
                                              precision_mode=kind, use_static=False, use_calib_mode=False)
        else:
            config.disable_gpu()
            # oneDNN's kernels change this graph's logits (by up to 22 on the quickstart model, against
            # the dynamic graph): no single fuse pass is the cause, the kernels are, so they are kept off
            # by deleting the pass that places ops on them.  The CPU fusions of the oneDNN pass list
            # stay, and they are exact (2.7e-5) and 1.23x as fast as the list without oneDNN
            # (docs/lab/PERFORMANCE.md, "oneDNN in Paddle Inference").
            config.enable_mkldnn()
            config.delete_pass("onednn_placement_pass")
            config.set_cpu_math_library_num_threads(threads)
        config.disable_glog_info()
        try:
            self.predictor = inference.create_predictor(config)
        except Exception as error:  # a corrupted program or parameter file fails inside the C++ loader
            raise CheckpointError(f"{directory}: cannot load the exported model ({error})") from None
        # an export.json that says whether the export packs texts was written with an int64 span_text:
        # the program (read by Paddle's loader already) is parsed here only for exports without one
        numbers_texts = packs_texts is not None or program_input_dtype(
            os.path.join(directory, EXPORT_PROGRAM), self.predictor.get_input_names()[2]) == "int64"
        super().__init__(tril_mask, numbers_texts, packs_texts)

    def __call__(self, input_ids, token_text, span_text) -> np.ndarray:
        for name, array in zip(self.predictor.get_input_names(),
                               self.feed(input_ids, token_text, span_text)):
            handle = self.predictor.get_input_handle(name)
            handle.reshape(array.shape)
            handle.copy_from_cpu(array)
        self.predictor.run()
        return self.predictor.get_output_handle(self.predictor.get_output_names()[0]).copy_to_cpu()


class OnnxModel(_ExportedModel):
    """An ONNX Runtime session over ``model.onnx``, all graph optimisations on."""

    def __init__(self, directory: str, tril_mask: bool, threads: int = 1, device: str = "cpu",
                 filename: str = ONNX, packs_texts: Optional[bool] = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # its warnings about unused initializers of the export are noise
        providers = onnx_providers(device.startswith("gpu"), ort.get_available_providers())
        try:
            self.session = ort.InferenceSession(os.path.join(directory, filename), options, providers=providers,
                                                disabled_optimizers=ONNX_DISABLED_OPTIMIZERS)
        except Exception as error:  # onnxruntime raises its own exception types for broken files
            raise CheckpointError(f"{directory}/{filename}: cannot load the ONNX model ({error})") from None
        self.input_names = [item.name for item in self.session.get_inputs()]
        super().__init__(tril_mask, self.session.get_inputs()[2].type == "tensor(int64)", packs_texts)

    def __call__(self, input_ids, token_text, span_text) -> np.ndarray:
        feed = self.feed(input_ids, token_text, span_text)
        return self.session.run(None, dict(zip(self.input_names, feed)))[0]


class OpenVinoModel(_ExportedModel):
    """An OpenVINO model on the CPU: ``model.int8.xml`` (INT8, quantized with calibration texts at
    export) or ``model.onnx``.  The float32 parts run in float32 even where the CPU offers bfloat16."""

    def __init__(self, directory: str, tril_mask: bool, threads: int = 1, device: str = "cpu",
                 filename: str = OPENVINO_INT8, packs_texts: Optional[bool] = None):
        import openvino

        try:
            self.compiled = openvino.Core().compile_model(
                os.path.join(directory, filename), "CPU",
                {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
        except Exception as error:  # OpenVINO raises RuntimeError for unreadable or broken files
            raise CheckpointError(f"{directory}/{filename}: cannot load the model in OpenVINO ({error})") from None
        self.input_names = [port.get_any_name() for port in self.compiled.inputs]
        # a request per thread: a request is not safe across threads, and making one per pass cost 5% of INT8's time
        self.requests = threading.local()
        super().__init__(tril_mask, self.compiled.inputs[2].get_element_type() == openvino.Type.i64, packs_texts)

    def __call__(self, input_ids, token_text, span_text) -> np.ndarray:
        if not hasattr(self.requests, "request"):
            self.requests.request = self.compiled.create_infer_request()
        # inputs shared, not copied (0.5 ms a pass): feed's arrays are not written while the pass runs; the
        # outputs are copied out of the request (share_outputs=False), so the next pass cannot change them
        feed = dict(zip(self.input_names, self.feed(input_ids, token_text, span_text)))
        return self.requests.request.infer(feed, share_inputs=True)[0]


class Settings(NamedTuple):
    """What building a backend needs besides the files of the directory it runs."""
    model: object  # a run config's model section (head, head_size, rope, tril_mask, loss, dropout)
    opened: object  # the model directory as opened (checkpoint.ModelDirectory): types, tokenizer, architecture
    threads: int
    device: str
    precision: str
    tensorrt: bool
    packs_texts: Optional[bool] = None  # what the program's export.json says (checkpoint.recorded_packing); None: silent


def _dynamic(directory: str, settings: Settings):
    opened = settings.opened
    return load_network(directory, settings.model, len(opened.trained_for.labels), opened.tokenizer,
                        opened.architecture, len(opened.trained_for.relations))[0]


def _of_model(exported: _ExportedModel, settings: Settings) -> _ExportedModel:
    """An exported program, told how many of its output planes are entity planes (a relation model's)."""
    trained_for = settings.opened.trained_for
    exported.entity_planes = len(trained_for.labels) if trained_for.relations else 0
    return exported


def _paddle_inference(directory: str, settings: Settings):
    return _of_model(PaddleInferenceModel(directory, settings.model.tril_mask, settings.threads, settings.device,
                                          settings.precision, settings.tensorrt, settings.packs_texts), settings)


def _onnxruntime(directory: str, settings: Settings):
    return _of_model(OnnxModel(directory, settings.model.tril_mask, settings.threads, settings.device,
                               model_files("onnxruntime", settings.precision)[0], settings.packs_texts), settings)


def _openvino(directory: str, settings: Settings):
    return _of_model(OpenVinoModel(directory, settings.model.tril_mask, settings.threads, settings.device,
                                   model_files("openvino", settings.precision)[0], settings.packs_texts), settings)


def _always() -> bool:
    return True


class Backend(NamedTuple):
    """A backend and its rules: ``choose_backend`` filters the table by them, and nothing else knows
    a backend's name."""
    runs_export: bool  # an export directory (globalpointer export); otherwise a checkpoint
    build: Callable[[str, Settings], Callable]  # (directory, settings) -> a network with decode and packs_texts
    files: Dict[str, Tuple[str, ...]]  # precision it runs -> the export's files it reads, graph first
    devices: Tuple[str, ...]  # "cpu", "gpu"
    installed: Callable[[], bool] = _always
    library: str = ""  # what ``installed`` looks for
    install: str = ""  # how to install it
    auto_for: Tuple[str, ...] = ("float32", "float16")  # precisions at which ``auto`` may take it, in table order


# In the order ``auto`` prefers them: OpenVINO for INT8 where the export has its IR (faster than ONNX
# Runtime's INT8), ONNX Runtime for float32 (the fastest on the CPU, docs/lab/PERFORMANCE.md), then
# Paddle Inference for an export and the dynamic graph for a checkpoint.
BACKENDS: Dict[str, Backend] = {
    "openvino": Backend(True, _openvino, {"float32": (ONNX,), "int8": (OPENVINO_INT8, OPENVINO_INT8_WEIGHTS)},
                        ("cpu",), openvino_available, "OpenVINO", "pip install 'globalpointer[openvino]', or pip "
                                                                  "install -r requirements-openvino.txt", ("int8",)),
    "onnxruntime": Backend(True, _onnxruntime, {"float32": (ONNX,), "int8": (ONNX_INT8,)}, ("cpu", "gpu"),
                           onnxruntime_available, "onnxruntime", "pip install onnxruntime, or onnxruntime-gpu for CUDA",
                           ("float32", "int8")),
    "paddle-inference": Backend(True, _paddle_inference, {"float32": (EXPORT_PROGRAM, PARAMS), "float16": (EXPORT_PROGRAM, PARAMS)},
                                ("cpu", "gpu")),
    "dynamic": Backend(False, _dynamic, {"float32": ()}, ("cpu", "gpu")),
}

# The flags of ``globalpointer export`` that write each file an export may lack
EXPORT_FLAGS = {EXPORT_PROGRAM: "", PARAMS: "", ONNX: " --onnx", ONNX_INT8: " --quantize int8",
                OPENVINO_INT8: " --quantize int8 --openvino-calibration TRAIN_FILE",
                OPENVINO_INT8_WEIGHTS: " --quantize int8 --openvino-calibration TRAIN_FILE"}
EXPORT_COMMAND = "globalpointer export --model CHECKPOINT --output EXPORT_DIR"


def model_files(backend: str, precision: str) -> List[str]:
    """The files of an export that ``backend`` reads at ``precision``, its graph first."""
    return list(BACKENDS[backend].files.get(precision, ()))


def int8_backends(directory: str) -> List[str]:
    """The backends that have an INT8 model in the export ``directory``, in the table's order (the one
    ``auto`` prefers first)."""
    return [name for name, backend in BACKENDS.items() if "int8" in backend.files
            and all(os.path.isfile(os.path.join(directory, f)) for f in backend.files["int8"])]


# The export.json key under which an export says, per backend, how its INT8 model was made ("scheme") and
# on which CPU --verify measured it ("verified": the integer kernels, cpu_math.int8_kernels, and both F1s)
INT8_RECORD = "int8"


def int8_measurement(row: dict, float32: dict, kernels: str, cpu: str, data: str, tolerance: float) -> dict:
    """One INT8 model's row of ``export --verify`` as export.json records it (under INT8_RECORD, the
    backend, then "verified" or "refused"): its F1 beside float32's row, the CPU's integer kernels
    (``cpu_math.int8_kernels``) and model, the file and tolerance; what ``int8_unfit`` and
    ``export.verification`` read."""
    return {**row, "float32": float32, "kernels": kernels, "cpu": cpu, "data": data, "tolerance": tolerance}


def int8_unfit(export_info: dict, backend: str, kernels: str) -> str:
    """Why the INT8 model ``backend`` runs from an export (its ``export_info``) is not known to keep its
    F1 on a CPU with ``kernels`` (``cpu_math.int8_kernels``); "" when it is, or was never verified (a
    scheme that cannot saturate, run as exported)."""
    record = export_info.get(INT8_RECORD) if isinstance(export_info, dict) else None
    record = record.get(backend) if isinstance(record, dict) else None
    record = record if isinstance(record, dict) else {}
    name = model_files(backend, "int8")[0]
    verified = record.get("verified")
    if isinstance(verified, dict):
        if verified.get("kernels") == kernels:
            return ""
        float32 = verified.get("float32") if isinstance(verified.get("float32"), dict) else {}
        return (f"{name} was verified on a CPU with {verified.get('kernels')} integer kernels (dev F1 "
                f"{verified.get('f1')} against float32's {float32.get('f1')}), and this one has {kernels}")
    if "scheme" not in record and kernels != "vnni":
        return (f"{name} was made by an earlier version, whose int8 weights saturate on a CPU without VNNI such as "
                f"this one ({kernels}: a model lost 47 F1 points so); export it again")
    return ""


def why_not(name: str, model, precision: str, device: str, installed: Callable[[str], bool]) -> str:
    """Why backend ``name`` cannot run ``model`` (a ``model_directory.opening.ModelDirectory``) at ``precision`` on
    ``device``; "" when it can."""
    backend, export, directory = BACKENDS[name], model.export, model.path
    if precision not in backend.files:
        takers = [other for other, entry in BACKENDS.items() if precision in entry.files]
        return f"inference.precision={precision} runs on {' or '.join(takers)}, not {name}"
    if backend.runs_export and not export:
        return (f"inference.backend={name} runs an export; {directory} is a checkpoint: {EXPORT_COMMAND}"
                f"{EXPORT_FLAGS.get(backend.files[precision][0], '')}")
    if export and not backend.runs_export:
        exporters = ", ".join(other for other, entry in BACKENDS.items() if entry.runs_export)
        return (f"inference.backend={name} needs a checkpoint directory; {directory} is an export (use "
                f"{exporters}, or point --model at RUN/best)")
    missing = [f for f in backend.files[precision] if not os.path.isfile(os.path.join(directory, f))]
    if missing:
        return (f"inference.backend={name} with inference.precision={precision}: {directory} has no {missing[0]}; "
                f"export again: {EXPORT_COMMAND}{EXPORT_FLAGS.get(missing[0], '')}")
    if device.split(":")[0] not in backend.devices:
        others = ", ".join(other for other, entry in BACKENDS.items() if device.split(":")[0] in entry.devices)
        return f"inference.backend={name} runs on the {' or '.join(backend.devices).upper()}; on {device} use {others}"
    if not installed(name):
        return f"inference.backend={name}: {backend.library} is not installed ({backend.install})"
    return ""


def choose_backend(requested: str, model, precision: str = "float32", device: str = "cpu",
                   installed: Optional[Callable[[str], bool]] = None) -> str:
    """The backend for ``model`` (a checkpoint or an export, as ``model_directory.opening.open_model`` opened it):
    ``requested`` if the table's rules
    allow it, for ``auto`` the first that they allow; otherwise a ConfigError with the reason.
    ``installed(name)``: whether a backend's library is installed (default: look)."""
    installed = installed or (lambda name: BACKENDS[name].installed())
    if requested != "auto":
        reason = why_not(requested, model, precision, device, installed)
        if reason:
            raise ConfigError(reason)
        return requested
    candidates = [name for name, backend in BACKENDS.items() if precision in backend.auto_for]
    reasons = [why_not(name, model, precision, device, installed) for name in candidates]
    for name, reason in zip(candidates, reasons):
        if not reason:
            return name
    if not candidates:
        raise ConfigError(f"inference.precision={precision}: no backend runs it")
    # the reason of the last one, the most general (ONNX Runtime for INT8, the dynamic graph for a checkpoint)
    fitting = [r for name, r in zip(candidates, reasons) if BACKENDS[name].runs_export == model.export]
    raise ConfigError(f"inference.backend=auto found no backend: {(fitting or reasons)[-1]}")
