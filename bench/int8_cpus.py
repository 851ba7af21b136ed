"""INT8 quantization schemes on CPUs with and without VNNI: dev F1 of each, and texts/s on this host.

    python bench/int8_cpus.py --model RUN/best --data DEV_FILE [--calibration TRAIN_FILE] [--emulate EPYC-Rome]

Each scheme quantizes the same ``model.onnx`` (ONNX Runtime's dynamic quantization, the options of
``export.INT8_SCHEME``).  Its dev F1 is measured on this host, and on each ``--emulate`` CPU model
under QEMU's user-mode emulator (``qemu-x86_64 -cpu NAME``, Debian's package qemu-user): ONNX Runtime
picks its integer kernels by the CPUID the emulator reports, so an AVX2 CPU without VNNI (EPYC-Rome,
Haswell) runs the kernels such a host runs.  Under emulation only ONNX Runtime runs: the inputs of
every forward pass are recorded here, replayed there, and the outputs scored here.  Texts/s are this
host's alone (emulation is no measure of speed), timed in turns with float32.  With ``--calibration``
(the training file), OpenVINO's INT8 (``export.quantize_openvino``) too, the same way.
"""
import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SCHEMES = {  # name: (backend, options of export.quantize_onnx or export.quantize_openvino)
    "ONNX Runtime, s8 weights, full range (before)": ("onnxruntime", {"weight_type": "QInt8", "per_channel": True,
                                                                      "reduce_range": False}),
    "ONNX Runtime, s8 weights in 7 bits (reduce_range)": ("onnxruntime", {"weight_type": "QInt8", "per_channel": True,
                                                                          "reduce_range": True}),
    "ONNX Runtime, u8 weights (U8U8)": ("onnxruntime", {"weight_type": "QUInt8", "per_channel": True,
                                                        "reduce_range": False}),
    "OpenVINO, overflow fix in the first layer (NNCF's default)": ("openvino", {"overflow_fix": "first_layer_only"}),
    "OpenVINO, overflow fix in every layer": ("openvino", {"overflow_fix": "enable"}),
}


def replay(model_path: str, feeds_path: str, out_path: str) -> None:
    """Run in the emulator: the engine alone (ONNX Runtime for .onnx, OpenVINO for .xml) over the
    recorded inputs, one thread."""
    feeds = np.load(feeds_path)
    count = len([key for key in feeds.files if key.endswith("_0")])
    inputs = [[feeds[f"{index}_{position}"] for position in range(len(feeds.files) // count)]
              for index in range(count)]
    if model_path.endswith(".xml"):
        import openvino

        core = openvino.Core()
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": 1})
        request = core.compile_model(model_path, "CPU").create_infer_request()
        outputs = [request.infer(arrays)[0] for arrays in inputs]
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        names = [item.name for item in session.get_inputs()]
        outputs = [session.run(None, dict(zip(names, arrays)))[0] for arrays in inputs]
    np.savez(out_path, **{str(index): output for index, output in enumerate(outputs)})


class Recorder:
    """Stands in for an export's model (backends.OnnxModel, OpenVinoModel): records each pass's inputs
    and answers them, from the model or from a replay's outputs."""

    def __init__(self, model, answers=None):
        self.model, self.answers, self.feeds = model, answers, []

    def __call__(self, **inputs):
        self.feeds.append(self.model.feed(**inputs))
        if self.answers is not None:
            return self.answers[str(len(self.feeds) - 1)]
        return self.model(**inputs)

    def __getattr__(self, name):
        return getattr(self.model, name)


def scored(directory: str, data: str, precision: str, backend: str, answers=None):
    """Dev F1 of the export in ``directory``, its recorded inputs, and the pipeline."""
    from globalpointer.evaluation.evaluate import evaluate_file
    from globalpointer.inference.pipeline import load

    ner = load(directory, [("inference.precision", precision), ("inference.backend", backend),
                           ("inference.int8_unverified_cpu", "int8")])
    recorder = ner.extractor.model = Recorder(ner.extractor.model, answers)
    evaluation = evaluate_file(ner, data)
    return round(100 * evaluation.report["micro"]["f1"], 2), recorder.feeds, ner


def emulated_f1(directory: str, model_file: str, backend: str, data: str, feeds_path: str, cpu: str) -> float:
    out = os.path.join(directory, "replayed.npz")
    subprocess.run(["qemu-x86_64", "-cpu", cpu, sys.executable, os.path.abspath(__file__), "--model", "-",
                    "--data", "-", "--replay", os.path.join(directory, model_file), feeds_path, out], check=True,
                   stderr=subprocess.DEVNULL)  # QEMU's warnings of CPUID features TCG lacks
    with np.load(out) as answers:
        answers = dict(answers)
    os.remove(out)
    return scored(directory, data, "int8", backend, answers)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a checkpoint (RUN/best)")
    parser.add_argument("--data", required=True, help="labelled dev file")
    parser.add_argument("--calibration", default="", help="OpenVINO's calibration texts (the training file); "
                                                          "without it, no OpenVINO rows")
    parser.add_argument("--emulate", nargs="*", default=["EPYC-Rome"], help="QEMU CPU models (qemu-x86_64 -cpu help)")
    parser.add_argument("--schemes", nargs="*", default=list(SCHEMES), help="names of SCHEMES (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--replay", nargs=3, metavar=("MODEL", "FEEDS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        return replay(*args.replay)

    import globalpointer  # noqa: F401  (quiets Paddle's import warnings)
    from common import interleaved_medians
    from globalpointer.corpus import load_records
    from globalpointer.cpu_math import int8_kernels, read_cpu_info
    from globalpointer.deploy.export import (calibration_texts_of, export_checkpoint, quantize_onnx, quantize_openvino,
                                             write_export_info)
    from globalpointer.files import MANIFEST_KEY
    from globalpointer.model_directory.layout import CHECKED_DIGESTS, read_export_info
    from globalpointer.model.backends import model_files

    work = tempfile.mkdtemp(prefix="int8-cpus-")
    try:
        base = os.path.join(work, "export")
        export_checkpoint(args.model, base, onnx=True)
        float32_f1, feeds, float32_ner = scored(base, args.data, "float32", "onnxruntime")
        feeds_path = os.path.join(work, "feeds.npz")
        np.savez(feeds_path, **{f"{i}_{j}": array for i, arrays in enumerate(feeds) for j, array in enumerate(arrays)})
        texts = [record.text for record in load_records(args.data)]
        print(json.dumps({"host": read_cpu_info().describe(), "int8_kernels": int8_kernels(), "passes": len(feeds),
                          "float32_f1": float32_f1}), flush=True)
        for number, name in enumerate(args.schemes):
            backend, scheme = SCHEMES[name]
            if backend == "openvino" and not args.calibration:
                continue
            directory = os.path.join(work, str(number))
            shutil.copytree(base, directory)
            if backend == "openvino":
                quantize_openvino(directory, calibration_texts_of(args.calibration), args.calibration, scheme)
            else:
                quantize_onnx(directory, scheme)
            # the export's record written again for the model added beside it, its info kept
            write_export_info(directory, {key: value for key, value in read_export_info(directory).items()
                                          if key not in (MANIFEST_KEY, "sizes", CHECKED_DIGESTS)})
            f1, _, ner = scored(directory, args.data, "int8", backend)
            seconds = interleaved_medians({"float32": lambda: float32_ner.extractor.extract(texts),
                                           "int8": lambda: ner.extractor.extract(texts)}, args.repeats)
            print(json.dumps({"scheme": name, "host": "this", "f1": f1, "f1_float32": float32_f1,
                              "texts_per_second": round(len(texts) / seconds["int8"], 1),
                              "float32_texts_per_second": round(len(texts) / seconds["float32"], 1),
                              "speed_up": round(seconds["float32"] / seconds["int8"], 2)}), flush=True)
            for cpu in args.emulate:
                f1 = emulated_f1(directory, model_files(backend, "int8")[0], backend, args.data, feeds_path, cpu)
                print(json.dumps({"scheme": name, "host": f"qemu-x86_64 -cpu {cpu}", "f1": f1,
                                  "f1_float32": float32_f1}), flush=True)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
