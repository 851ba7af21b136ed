"""Deployable exports of a checkpoint: a Paddle Inference static model, and ONNX.

    python -m globalpointer.export --model RUN/best --output RUN/export [--onnx]

The export directory holds ``inference.json`` + ``inference.pdiparams`` (batch and length dynamic),
``model.onnx`` with ``--onnx``, ``model.int8.onnx`` with ``--quantize int8``, and the checkpoint's config, labels and tokenizer files, so that
``predict.py --model RUN/export`` and ``evaluate.py --model RUN/export`` run on it.  Span heads only:
the tagger baselines decode with Python code (Viterbi) that no static graph carries.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import List

import paddle
from paddle.static import InputSpec

from .backends import EXPORT_INFO, ONNX, ONNX_INT8, PARAMS, PROGRAM, is_export, onnx_file
from .errors import UserError
from .files import swap_in_directory
from .heads import HEADS, span_head_names
from .model import LEGACY_WEIGHTS, WEIGHTS, load_checkpoint, resolve_checkpoint

# Quantized: the encoder's MatMuls and the embedding table (Gather); the head's projection is a
# Transpose+MatMul that the quantizer leaves alone, so the span scores stay float32.
INT8_OPS = ("MatMul", "Gather")
INT8_PER_CHANNEL = True  # per-channel scales: 56.59 vs 55.81 dev F1 per-tensor (quickstart model, docs/PERFORMANCE.md)
# attention_mask and token_mask number the texts of a row (masks.py); exports of earlier versions
# took a bool token_mask and one text per row, and still run that way (backends.export_packs_texts)
INPUT_SPEC = [InputSpec([None, None], "int64", "input_ids"), InputSpec([None, None], "int64", "attention_mask"),
              InputSpec([None, None], "int64", "token_mask")]


def save_static(model: paddle.nn.Layer, directory: str) -> None:
    """The model's forward pass (logits) as a static program + parameters in ``directory``, and
    ``export.json``: whether the program reads rows of several texts."""
    static = paddle.jit.to_static(model, input_spec=INPUT_SPEC, full_graph=True)
    paddle.jit.save(static, os.path.join(directory, PROGRAM[:-len(".json")]))
    with open(os.path.join(directory, EXPORT_INFO), "w", encoding="utf-8") as out:
        json.dump({"packs_texts": model.packs_texts}, out)


def check_export_target(output: str, checkpoint: str) -> None:
    """An export replaces only an earlier export: never the checkpoint, a folder holding it or the
    current directory, nor a folder with anything else in it."""
    target = os.path.realpath(output)
    for what, path in (("the checkpoint", os.path.realpath(checkpoint)), ("the current directory", os.getcwd())):
        if path == target or path.startswith(target.rstrip(os.sep) + os.sep):
            raise UserError(f"--output {output} would replace {what} ({path}); export into a new directory, "
                            f"e.g. --output RUN/export")
    if os.path.exists(output):
        if not os.path.isdir(output):
            raise UserError(f"--output {output} is a file; name a directory to create")
        if os.listdir(output) and not is_export(output):
            raise UserError(f"--output {output} exists and holds files that are not an export; name a new directory "
                            f"(an earlier export there would be replaced, anything else is left alone)")


def export_checkpoint(checkpoint: str, output: str, onnx: bool = False, opset: int = 17,
                      quantize: str = "none") -> List[str]:
    output = os.path.normpath(output)
    check_export_target(output, checkpoint)
    loaded = load_checkpoint(checkpoint)
    if not HEADS[loaded.config.model.head].span_scores:
        raise UserError(f"{checkpoint}: model.head={loaded.config.model.head} cannot be exported; "
                        f"export supports {' and '.join(span_head_names())}")
    partial = output + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    save_static(loaded.model, partial)
    for name in os.listdir(loaded.directory):
        if name not in (WEIGHTS, LEGACY_WEIGHTS) and os.path.isfile(os.path.join(loaded.directory, name)):
            shutil.copy(os.path.join(loaded.directory, name), partial)
    if onnx or quantize == "int8":
        export_onnx(partial, opset)
    if quantize == "int8":
        quantize_onnx(partial)
    swap_in_directory(partial, output)  # an earlier export is swapped out, then removed
    return sorted(os.listdir(output))


def export_onnx(directory: str, opset: int = 17) -> str:
    try:
        import paddle2onnx
    except ImportError:
        raise UserError("ONNX export needs paddle2onnx: pip install paddle2onnx") from None
    target = os.path.join(directory, ONNX)
    # optimize_tool=None: the default (polygraphy) tries to pip-install helpers at export time.
    paddle2onnx.export(os.path.join(directory, PROGRAM), os.path.join(directory, PARAMS), target,
                       opset_version=opset, enable_onnx_checker=True, optimize_tool="None")
    return target


def quantize_onnx(directory: str) -> str:
    """``model.onnx`` -> ``model.int8.onnx`` by ONNX Runtime's dynamic quantization: int8 weights for
    the MatMuls and the embedding table, activations quantized per batch at run time.  paddle2onnx
    writes every weight as a Constant node, which the quantizer passes over (it quantized nothing),
    so constants become initializers first."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(os.path.join(directory, ONNX))
    kept = []
    for node in model.graph.node:
        if node.op_type == "Constant" and [attribute.name for attribute in node.attribute] == ["value"]:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            model.graph.initializer.append(tensor)
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    target = os.path.join(directory, ONNX_INT8)
    with tempfile.TemporaryDirectory(dir=directory) as work:
        plain = os.path.join(work, "initializers.onnx")
        onnx.save(model, plain)
        quantize_dynamic(plain, target, weight_type=QuantType.QInt8, op_types_to_quantize=list(INT8_OPS),
                         per_channel=INT8_PER_CHANNEL)
    return target


def verify_int8(directory: str, data_path: str) -> List[dict]:
    """Dev scores, agreement and speed of ``model.onnx`` and ``model.int8.onnx`` on one labelled file."""
    from .data.splits import load_split
    from .metrics import span_report
    from .pipeline import load

    rows, found, records = [], {}, None
    for precision in ("float32", "int8"):
        ner = load(directory, [f"inference.precision={precision}", "inference.backend=onnxruntime"])
        records = records or load_split(ner.config, "data", data_path)
        texts = [record.text for record in records]
        ner.extractor.extract(texts[:8])  # warm-up: the first run of a session allocates
        started = time.perf_counter()
        found[precision] = ner.extractor.extract(texts)
        seconds = time.perf_counter() - started
        micro = span_report([record.entities for record in records], found[precision], ner.labels)["micro"]
        rows.append({"model": precision, "f1": round(100 * micro["f1"], 2), "texts_per_second": round(len(texts) / seconds, 1),
                     "megabytes": round(os.path.getsize(os.path.join(directory, onnx_file(precision))) / 1e6, 1)})
    same = sum([e.key for e in a] == [e.key for e in b] for a, b in zip(found["float32"], found["int8"]))
    rows[1]["texts_with_identical_entities"] = f"{same} of {len(found['int8'])}"
    return rows


def _export(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m globalpointer.export", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="checkpoint directory, e.g. runs/cluener-gp/best")
    parser.add_argument("--output", required=True, help="export directory to create (an earlier export there is replaced; "
                                                            "anything else is refused)")
    parser.add_argument("--onnx", action="store_true", help="also write model.onnx with paddle2onnx")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    parser.add_argument("--quantize", choices=("none", "int8"), default="none",
                        help="int8: also write model.int8.onnx (implies --onnx); predict with "
                             "--set inference.precision=int8")
    parser.add_argument("--verify", metavar="DEV_FILE", help="with --quantize int8: dev F1, identical texts and "
                                                             "texts/s of float32 and int8 on this labelled file")
    args = parser.parse_args(argv)
    if args.verify and args.quantize != "int8":
        raise UserError("--verify compares float32 with int8: add --quantize int8")
    files = export_checkpoint(resolve_checkpoint(args.model), args.output, args.onnx, args.opset, args.quantize)
    print(f"{args.output}: {', '.join(files)}", file=sys.stderr)
    if args.verify:
        for row in verify_int8(args.output, args.verify):
            print(json.dumps(row))
    return 0


def main(argv=None) -> int:
    from .cli import run_command

    return run_command(_export, argv)


if __name__ == "__main__":
    sys.exit(main())
