"""Deployable exports of a checkpoint: a Paddle Inference static model, and ONNX.

    globalpointer export --model RUN/best --output RUN/export [--onnx]

The export directory holds ``inference.json`` + ``inference.pdiparams`` (batch and length dynamic),
``model.onnx`` with ``--onnx``, ``model.int8.onnx`` with ``--quantize int8`` (and OpenVINO's
``model.int8.xml`` + ``.bin`` with ``--openvino-calibration``), and the checkpoint's config, labels
and tokenizer files, so that
``predict.py --model RUN/export`` and ``evaluate.py --model RUN/export`` run on it.
"""
import contextlib
import ctypes
import importlib.util
import itertools
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Optional

import paddle
from paddle.static import InputSpec

from ..model_directory.digests import remember_written
from ..model_directory.opening import load_checkpoint, open_model
from ..errors import UserError
from ..cpu_math import int8_kernels, read_cpu_info
from ..files import (MANIFEST_KEY, TEMPORARY_MARKER, check_writable_location, contains, directory_being_written,
                     replaceable, swap_in_directory, termination_deferred)
from ..model.backends import BACKENDS, INT8_RECORD, int8_backends, int8_measurement, model_files, openvino_available
from ..model_directory.layout import (CHECKED_DIGESTS, COMPILED_FROM, EXPORT_INFO, EXPORT_PROGRAM, FORMAT_VERSION, ONNX,
                                      ONNX_INT8, OPENVINO_INT8, PARAMS, THRESHOLDS, WEIGHTS, file_digests,
                                      model_file_names, read_export_info)
from ..model.network import INPUTS
from ..runtime import launch_position

log = logging.getLogger("globalpointer")

# Quantized: the encoder's MatMuls and attention blocks, and the embedding table (Gather); the head's
# projection is a Transpose+MatMul that the quantizer leaves alone, so the span scores stay float32.
INT8_OPS = ("MatMul", "Attention", "Gather")
# ONNX Runtime's dynamic quantization: per-channel weight scales (56.59 vs 55.81 dev F1 per-tensor,
# docs/lab/PERFORMANCE.md), and weights in 7 bits (reduce_range): on an x86 CPU without VNNI (AVX2, or
# AVX-512 without VNNI) the u8 x s8 products sum in pairs into saturating 16-bit lanes, and full-range
# weights lost 47 dev F1 points there; 7 bits cannot saturate (docs/performance.md, INT8 by CPU).
INT8_SCHEME = {"weight_type": "QInt8", "per_channel": True, "reduce_range": True}
# NNCF's answer to the same saturation (OverflowFix): weights in 7 bits in the first layer, its default.
# In every layer it was level in F1, with VNNI and without, and in speed (docs/performance.md)
OPENVINO_SCHEME = {"overflow_fix": "first_layer_only"}
# The dev F1 points an INT8 model may lose against float32 and be kept by export --verify
VERIFY_TOLERANCE = 1.0
# OpenVINO INT8 measures its activations' ranges on this many texts of --openvino-calibration: 256
# CLUENER training texts gave dev F1 78.54 against float32's 78.50, 120 gave 78.53 (docs/performance.md)
OPENVINO_CALIBRATION_TEXTS = 256
OPENVINO_MISSING = ("--openvino-calibration needs OpenVINO and NNCF: pip install 'globalpointer[openvino]' (or pip "
                    "install -r requirements-openvino.txt)")
# token_text and span_text number the texts of a row (masks.py); exports of earlier versions
# took a bool span_text and one text per row, and still run that way (backends: the program's input type).
INPUT_SPEC = [InputSpec([None, None], "int64", name) for name in INPUTS]


def paddle_writes_exports() -> bool:
    """Whether this Paddle saves programs as this project's exports are (PIR, ``inference.json``):
    Paddle 3; 2.x (PyPI's paddlepaddle-gpu 2.6.2) writes ``inference.pdmodel``.  A build from source
    says 0.0.0."""
    major = paddle.__version__.split(".")[0]
    return not major.isdigit() or int(major) >= 3 or paddle.__version__.startswith("0.0.0")


def check_paddle_exports() -> None:
    if not paddle_writes_exports():
        raise UserError(f"export writes Paddle 3's programs (inference.json), and this is Paddle {paddle.__version__}: "
                        f"install Paddle 3.3 (requirements.txt; on a GPU, requirements-gpu.txt from Paddle's own "
                        f"index) to export; the checkpoint itself predicts, evaluates and serves with this one")


def save_static(model: paddle.nn.Layer, directory: str) -> None:
    """The model's forward pass (logits) as a static program + parameters in ``directory``."""
    with termination_deferred():  # a SIGTERM unwinding through Paddle's C++ would crash, not clean up
        static = paddle.jit.to_static(model, input_spec=INPUT_SPEC, full_graph=True)
        with held_library_output():  # Paddle's warning about the static graph's "out" tensors, nothing to act on
            paddle.jit.save(static, os.path.join(directory, EXPORT_PROGRAM[:-len(".json")]))


def check_export_target(output: str, checkpoint: str, requested: str = "") -> None:
    """An export replaces only an earlier export whose manifest lists every file in it: never the
    checkpoint (as named, or the copy a kill left), a folder holding it, the current directory, nor a
    folder with anything else in it."""
    for what, path in (("the checkpoint", checkpoint), ("the checkpoint", requested), ("the current directory", ".")):
        if path and contains(output, path):
            raise UserError(f"--output {output} would replace {what} ({os.path.realpath(path)}); export into a new "
                            f"directory, e.g. --output RUN/export")
    if os.path.lexists(output):
        if not os.path.isdir(output) or os.path.islink(output):
            raise UserError(f"--output {output} is a file or a link; name a directory to create")
        if not replaceable(output, EXPORT_INFO, also=(THRESHOLDS,)):
            raise UserError(f"--output {output} exists and holds files that no export of this project wrote (an "
                            f"export lists its files in {EXPORT_INFO}); name a new directory, or remove it yourself")
    check_writable_location(os.path.join(output, EXPORT_INFO), "--output")


def copy_checkpoint_files(checkpoint: str, target: str) -> List[str]:
    """The checkpoint's files as its record lists them (``layout.model_file_names``), but its weights (the
    program has them).  A symbolic link is not followed: what it points to may be anything on this
    machine (a key, say), and an export is made to be shipped.  Returns the links left out."""
    for name in model_file_names(checkpoint):
        if name != WEIGHTS:
            shutil.copy(os.path.join(checkpoint, name), target)
    return sorted(name for name in os.listdir(checkpoint) if os.path.islink(os.path.join(checkpoint, name)))


def export_checkpoint(checkpoint: str, output: str, onnx: bool = False, opset: int = 17,
                      quantize: str = "none", requested: str = "", openvino_calibration: str = "",
                      compiled_from: str = "", verify: str = "", tolerance: float = VERIFY_TOLERANCE) -> List[str]:
    """``requested``: the --model path as given, when ``checkpoint`` is what it resolved to.
    ``openvino_calibration``: with ``quantize="int8"``, a file whose texts OpenVINO's INT8 model is
    calibrated on (``quantize_openvino``).  ``verify``: with ``quantize="int8"``, a labelled file on
    which each INT8 model is scored against float32 before the export is published
    (``verified_int8``): one that loses more than ``tolerance`` F1 points is not kept, and the
    export.json of the export says so (``refused_int8`` reads it).  ``compiled_from``: the checkpoint's digest, recorded in a
    compiled program of the cache (``model_directory.compiled.verified_program`` checks it before the program runs).
    ``checkpoint``: its path, or its ``model_directory.opening.ModelDirectory``; an export is refused."""
    model = open_model(checkpoint)
    if model.export:
        raise UserError(f"{requested or model.path} is an export already; export its checkpoint (RUN_DIR/best)")
    checkpoint = model.path
    check_paddle_exports()
    if openvino_calibration and quantize != "int8":
        raise UserError("--openvino-calibration makes OpenVINO's INT8 model: add --quantize int8")
    if verify and quantize != "int8":
        raise UserError("--verify compares float32 with int8: add --quantize int8")
    if verify and not os.path.isfile(verify):
        raise UserError(f"--verify {verify}: no such file")
    if openvino_calibration and contains(output, openvino_calibration):
        raise UserError(f"--openvino-calibration {openvino_calibration} is inside --output {output}, which the "
                        f"export replaces; keep the texts outside it")
    if openvino_calibration and not os.path.isfile(openvino_calibration):
        raise UserError(f"--openvino-calibration {openvino_calibration}: no such file")
    if openvino_calibration and not (openvino_available() and importlib.util.find_spec("nncf")):
        raise UserError(OPENVINO_MISSING)  # before the export's other steps, not after them
    output = os.path.normpath(output)
    check_export_target(output, checkpoint, requested)
    calibration_texts = calibration_texts_of(openvino_calibration) if openvino_calibration else []
    loaded = load_checkpoint(model)
    with directory_being_written(output) as partial:
        save_static(loaded.network, partial)
        links = copy_checkpoint_files(loaded.directory, partial)
        if links:
            log.warning("%s: symbolic links not copied into the export: %s", loaded.directory, ", ".join(links))
        if onnx or quantize == "int8":
            export_onnx(partial, opset)
        int8 = {}
        if quantize == "int8":
            quantize_onnx(partial)
            int8["onnxruntime"] = {"scheme": INT8_SCHEME}
        if openvino_calibration:
            quantize_openvino(partial, calibration_texts, openvino_calibration)
            int8["openvino"] = {"scheme": OPENVINO_SCHEME}
        info = {"format_version": FORMAT_VERSION, "packs_texts": loaded.network.packs_texts,
                **({INT8_RECORD: int8} if int8 else {}), **({COMPILED_FROM: compiled_from} if compiled_from else {})}
        digests = write_export_info(partial, info)
        if verify:
            for backend, verdict in verified_int8(partial, verify, tolerance).items():
                int8[backend].update(verdict)
            digests = write_export_info(partial, info)
        swap_in_directory(partial, output)  # an earlier export is swapped out, then removed
    remember_written(output, digests)
    return sorted(os.listdir(output))


def write_export_info(directory: str, info: dict) -> Dict[str, str]:
    """export.json: ``info`` and the manifest of the files beside it with their sizes and digests, which
    each open checks (``model_directory.layout.check_model_files``); returns the digests."""
    files = sorted(name for name in os.listdir(directory) if name not in (EXPORT_INFO, TEMPORARY_MARKER))
    sizes = {name: os.path.getsize(os.path.join(directory, name)) for name in files}
    digests = file_digests(directory, files)
    with open(os.path.join(directory, EXPORT_INFO), "w", encoding="utf-8") as out:
        json.dump({**info, MANIFEST_KEY: files, "sizes": sizes, CHECKED_DIGESTS: digests}, out, indent=1)
    return digests


def verified_int8(directory: str, data_path: str, tolerance: float) -> dict:
    """Each INT8 model of the export being written in ``directory`` scored against float32 on the
    labelled file ``data_path`` (``verify_int8``), on this CPU: per backend, ``{"verified": row}``
    where it lost at most ``tolerance`` dev F1 points, else ``{"refused": row}`` and its files removed.
    A row holds float32's row, the CPU's integer kernels (``cpu_math.int8_kernels``, which
    ``globalpointer.load`` compares with the CPU it runs on) and the file and tolerance."""
    rows = verify_int8(directory, data_path)
    verdicts = {}
    for row in rows[1:]:
        kept = row["f1"] >= rows[0]["f1"] - tolerance
        if not kept:
            for name in model_files(row["backend"], "int8"):
                os.remove(os.path.join(directory, name))
        verdicts[row["backend"]] = {"verified" if kept else "refused": int8_measurement(
            row, rows[0], int8_kernels(), read_cpu_info().model, os.path.abspath(data_path), tolerance)}
    return verdicts


def verification(directory: str) -> List[dict]:
    """What ``export --verify`` recorded in the export's export.json: float32's row, then each INT8
    model's with ``kept`` (false: refused, its files not in the export)."""
    rows, record = [], read_export_info(directory).get(INT8_RECORD, {})
    for entry in (record[backend] for backend in BACKENDS if backend in record):  # the table's order
        for verdict in ("verified", "refused"):
            if verdict in entry:
                row = entry[verdict]
                rows[:1] = [row["float32"]]
                rows.append({**{k: v for k, v in row.items() if k != "float32"}, "kept": verdict == "verified"})
    return rows


def compile_if_it_pays(model, overrides: List[str], backend: Optional[str], lines: int) -> None:
    """Before predict.py or evaluate.py reads ``lines`` input lines with a checkpoint (``model``: its
    path, or its ``model_directory.opening.ModelDirectory``, opened once by the command): from
    ``inference.compile_from_lines`` lines on (where the build's few seconds are repaid), compile the
    checkpoint into a cached Paddle Inference program, which ``globalpointer.load`` then runs.  One
    process of a data-parallel launch does not build (they would race); a cached program it uses.
    A cache that cannot be written skips the build with a warning: compiling is an optimisation."""
    from ..model_directory.compiled import compiled_program, prune_compiled, runs_compiled, verified_program

    opened = open_model(model)
    if opened.export or launch_position()[1] > 1 or not paddle_writes_exports():
        return
    checkpoint = opened.path
    config = opened.run_config(list(overrides) + ([("inference.backend", backend)] if backend else []))
    if not runs_compiled(opened, config) or not config.inference.compile_from_lines \
            or lines < config.inference.compile_from_lines:
        return
    entry = compiled_program(opened)
    if entry is None or verified_program(entry):
        return
    start = time.perf_counter()
    try:
        os.makedirs(os.path.dirname(entry.directory), exist_ok=True)
        export_checkpoint(opened, entry.directory, compiled_from=entry.digest)
    except (OSError, UserError) as error:
        log.warning("%s: not compiled, the cache cannot be written (%s); predicting with the checkpoint itself",
                    checkpoint, error)
        return
    log.info("%s: compiled into a Paddle Inference program in %.1f s, cached in %s (%d input lines >= "
             "inference.compile_from_lines)", checkpoint, time.perf_counter() - start, entry.directory, lines)
    prune_compiled(entry.directory, config.inference.compiled_cache_mb)


# What Paddle and paddle2onnx print while an export is built that no user can act on: a static-graph
# warning, progress lines, and the temporary folder the export is built in (it is renamed after)
LIBRARY_NOISE = re.compile(r"not support input out tensor|^\[Paddle2ONNX\]|ONNX model saved in ")


@contextlib.contextmanager
def held_library_output(noise: re.Pattern = LIBRARY_NOISE) -> Iterator[None]:
    """What a library prints on file descriptors 1 and 2 (from Python or from C++) is held back while
    the block runs, then passed on to standard error without the lines of ``noise``; all of it when
    the block fails (it may say why)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    failed = True
    with tempfile.TemporaryFile() as held, open(held.fileno(), "w", buffering=1, encoding="utf-8",
                                                   closefd=False) as held_text:
        try:
            os.dup2(held.fileno(), 1)
            os.dup2(held.fileno(), 2)
            with contextlib.redirect_stdout(held_text), contextlib.redirect_stderr(held_text):  # Python's print
                yield
            failed = False
        finally:
            ctypes.CDLL(None).fflush(None)  # C's buffered writes, before the descriptors are given back
            held_text.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for descriptor in saved:
                os.close(descriptor)
            held.seek(0)
            for line in held.read().decode("utf-8", "replace").splitlines():
                if failed or not noise.search(line):
                    print(line, file=sys.stderr)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """What a library prints to standard output, from Python or from C++ (paddle2onnx), goes to standard
    error: the command's standard output is its result (``--verify``'s rows)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C's buffered writes, before standard output is given back
        os.dup2(saved, 1)
        os.close(saved)


def export_onnx(directory: str, opset: int = 17) -> str:
    try:
        import paddle2onnx
    except ImportError:
        raise UserError("ONNX export needs paddle2onnx: pip install paddle2onnx") from None
    target = os.path.join(directory, ONNX)
    # optimize_tool=None: the default (polygraphy) tries to pip-install helpers at export time.
    with held_library_output():  # its progress lines, and the temporary folder it writes in
        paddle2onnx.export(os.path.join(directory, EXPORT_PROGRAM), os.path.join(directory, PARAMS), target,
                           opset_version=opset, enable_onnx_checker=True, optimize_tool="None")
    return target


def quantize_onnx(directory: str, scheme: Optional[dict] = None) -> str:
    """``model.onnx`` -> ``model.int8.onnx`` by ONNX Runtime's dynamic quantization: int8 weights for
    the MatMuls, the fused attention blocks and the embedding table, activations quantized per batch
    at run time (onnx_graph: why the graph is rewritten first).  ``scheme``: ``INT8_SCHEME``'s keys
    (bench/int8_cpus.py compares others)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from .onnx_graph import fuse_attention, plain_graph

    model = onnx.load(os.path.join(directory, ONNX))
    plain_graph(model)
    fused = fuse_attention(model)
    log.info("INT8: %d attention blocks fused", fused)
    target = os.path.join(directory, ONNX_INT8)
    with tempfile.TemporaryDirectory(dir=directory) as work:
        plain = os.path.join(work, "fused.onnx")
        onnx.save(model, plain)
        root, level = logging.getLogger(), logging.getLogger().level
        # the quantizer logs each tensor it passes over, and advises a pre-processing that cannot infer
        # this graph's shapes (its symbolic shape inference stops at the mask's Range)
        root.setLevel(logging.ERROR)
        try:
            # the fused op's outputs have no type that ONNX's shape inference knows: they are float32
            options = {**INT8_SCHEME, **(scheme or {})}
            quantize_dynamic(plain, target, weight_type=getattr(QuantType, options["weight_type"]),
                             op_types_to_quantize=list(INT8_OPS), per_channel=options["per_channel"],
                             reduce_range=options["reduce_range"],
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            root.setLevel(level)
    return target


def calibration_texts_of(calibration: str) -> List[str]:
    """The texts OpenVINO's INT8 model is calibrated on: the first OPENVINO_CALIBRATION_TEXTS of the file,
    read (no more of it than they take) and checked before the export does anything else."""
    from ..corpus import load_records
    from ..errors import DataError
    from ..inference.file_prediction import file_input_format, parse_line

    try:
        texts = [record.text for record in load_records(calibration, limit=OPENVINO_CALIBRATION_TEXTS) if record.text]
    except DataError as error:  # no labelled file: texts as predict reads them, one a line (or JSON lines)
        input_format = file_input_format(calibration, "auto")
        with open(calibration, "rb") as handle:
            lines = (parse_line(raw, input_format).text for raw in handle)
            texts = list(itertools.islice((text for text in lines if text and text.strip()), OPENVINO_CALIBRATION_TEXTS))
        log.info("--openvino-calibration %s: read as texts, one a line, as predict reads them (not labelled data: %s)",
                 calibration, str(error).splitlines()[0][:200])
    if not texts:
        raise UserError(f"--openvino-calibration {calibration}: no texts to calibrate on")
    return texts


def quantize_openvino(directory: str, texts: List[str], calibration: str, scheme: Optional[dict] = None) -> str:
    """``model.onnx`` -> OpenVINO's ``model.int8.xml`` + ``.bin``: NNCF's post-training quantization
    for transformers (SmoothQuant, int8 weights per channel, activations' ranges measured once on the
    forward passes of ``texts`` (``calibration_texts_of`` the file ``calibration``), as prediction
    batches them).  On 2 AMD EPYC cores it ran 1.11-1.18x as fast as ``model.int8.onnx``, with the
    dev F1 of float32 (docs/performance.md).  ``scheme``: ``OPENVINO_SCHEME``'s keys (bench/int8_cpus.py
    compares others)."""
    os.environ.setdefault("NNCF_CI", "1")  # else NNCF sends usage events to Google Analytics on import
    try:
        import nncf
        import openvino
    except ImportError:
        raise UserError(OPENVINO_MISSING) from None
    from ..inference.pipeline import load

    extractor = load(directory, ["inference.backend=onnxruntime", "inference.precision=float32"]).extractor
    windows = extractor.featurizer.text_windows(texts)
    feeds = [extractor.pass_inputs(windows, rows) for rows in extractor.passes(windows)]
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, OverflowFix

    nncf.set_log_level(logging.ERROR)
    with stdout_to_stderr():  # its progress bars
        model = nncf.quantize(openvino.Core().read_model(os.path.join(directory, ONNX)), nncf.Dataset(feeds),
                              model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds),
                              advanced_parameters=AdvancedQuantizationParameters(
                                  overflow_fix=OverflowFix({**OPENVINO_SCHEME, **(scheme or {})}["overflow_fix"])))
    target = os.path.join(directory, OPENVINO_INT8)
    openvino.save_model(model, target, compress_to_fp16=False)  # what stays float is float32, as in model.onnx
    log.info("OpenVINO INT8: calibrated on %d texts of %s (%d passes)", len(texts), calibration, len(feeds))
    return target


def verify_int8(directory: str, data_path: str) -> List[dict]:
    """Dev scores, agreement and speed of ``model.onnx`` (ONNX Runtime) and each INT8 model of the
    export (``model.int8.xml`` on OpenVINO, ``model.int8.onnx`` on ONNX Runtime) on one labelled file."""
    from ..evaluation.evaluate import evaluate_file
    from ..evaluation.relations import headline
    from ..inference.pipeline import load

    def run(precision: str, backend: str):
        ner = load(directory, [("inference.precision", precision), ("inference.backend", backend)])
        ner.extractor.extract(["北京大学的张三在上海", "Alice met Bob in Paris"] * 4)  # warm-up: a session's first run allocates
        records, found, report, seconds = evaluate_file(ner, data_path)
        size = sum(os.path.getsize(os.path.join(directory, name)) for name in model_files(backend, precision))
        return {"model": precision, "backend": backend, "f1": round(100 * headline(report)["f1"], 2),
                "texts_per_second": round(len(records) / seconds, 1), "megabytes": round(size / 1e6, 1)}, found

    row, float32 = run("float32", "onnxruntime")
    rows = [row]
    for engine in int8_backends(directory):
        row, found = run("int8", engine)
        same = sum([e.key for e in a] == [e.key for e in b] for a, b in zip(float32, found))
        rows.append({**row, "texts_with_identical_entities": f"{same} of {len(found)}"})
    return rows
