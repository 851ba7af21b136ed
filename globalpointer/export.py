"""Deployable exports of a checkpoint: a Paddle Inference static model, and ONNX.

    python -m globalpointer.export --model RUN/best --output RUN/export [--onnx]

The export directory holds ``inference.json`` + ``inference.pdiparams`` (batch and length dynamic),
``model.onnx`` with ``--onnx``, and the checkpoint's config, labels and tokenizer files, so that
``predict.py --model RUN/export`` and ``evaluate.py --model RUN/export`` run on it.  Span heads only:
the tagger baselines decode with Python code (Viterbi) that no static graph carries.
"""
import argparse
import os
import shutil
import sys
from typing import List

import paddle
from paddle.static import InputSpec

from .backends import ONNX, PARAMS, PROGRAM, is_export
from .errors import UserError
from .heads import _SpanHead
from .model import LEGACY_WEIGHTS, WEIGHTS, load_checkpoint, resolve_checkpoint

INPUT_SPEC = [InputSpec([None, None], "int64", "input_ids"), InputSpec([None, None], "int64", "attention_mask"),
              InputSpec([None, None], "bool", "token_mask")]


def save_static(model: paddle.nn.Layer, directory: str) -> None:
    """The model's forward pass (logits) as a static program + parameters in ``directory``."""
    static = paddle.jit.to_static(model, input_spec=INPUT_SPEC, full_graph=True)
    paddle.jit.save(static, os.path.join(directory, PROGRAM[:-len(".json")]))


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


def export_checkpoint(checkpoint: str, output: str, onnx: bool = False, opset: int = 17) -> List[str]:
    output = os.path.normpath(output)
    check_export_target(output, checkpoint)
    loaded = load_checkpoint(checkpoint)
    if not isinstance(loaded.model.head, _SpanHead):
        raise UserError(f"{checkpoint}: model.head={loaded.config.model.head} cannot be exported; "
                        f"export supports global_pointer and efficient_global_pointer")
    partial = output + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    save_static(loaded.model, partial)
    for name in os.listdir(loaded.directory):
        if name not in (WEIGHTS, LEGACY_WEIGHTS) and os.path.isfile(os.path.join(loaded.directory, name)):
            shutil.copy(os.path.join(loaded.directory, name), partial)
    if onnx:
        export_onnx(partial, opset)
    previous = output + ".previous"
    if os.path.isdir(output):  # an earlier export: swapped out, then removed
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(output, previous)
    os.replace(partial, output)
    shutil.rmtree(previous, ignore_errors=True)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m globalpointer.export", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="checkpoint directory, e.g. runs/cluener-gp/best")
    parser.add_argument("--output", required=True, help="export directory to create (an earlier export there is replaced; "
                                                            "anything else is refused)")
    parser.add_argument("--onnx", action="store_true", help="also write model.onnx with paddle2onnx")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    args = parser.parse_args(argv)
    try:
        files = export_checkpoint(resolve_checkpoint(args.model), args.output, args.onnx, args.opset)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.output}: {', '.join(files)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
