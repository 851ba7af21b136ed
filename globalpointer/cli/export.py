"""``globalpointer export``: a deployable export of a checkpoint, and INT8 verified on this CPU."""
import argparse
import json
import logging
import sys

log = logging.getLogger("globalpointer")


def run(argv, prog) -> int:
    from ..deploy.export import OPENVINO_CALIBRATION_TEXTS, VERIFY_TOLERANCE, export_checkpoint, verification

    parser = argparse.ArgumentParser(prog=prog, description="A deployable export of a checkpoint: Paddle Inference, "
                                                             "ONNX, INT8.")
    parser.add_argument("--model", required=True, help="checkpoint directory, e.g. runs/cluener-gp/best")
    parser.add_argument("--output", required=True, help="export directory to create (an earlier export there is "
                                                        "replaced; anything else is refused)")
    parser.add_argument("--onnx", action="store_true", help="also write model.onnx with paddle2onnx")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version (default 17)")
    parser.add_argument("--quantize", choices=("none", "int8"), default="none",
                        help="int8: also write model.int8.onnx (implies --onnx); predict with "
                             "--set inference.precision=int8")
    parser.add_argument("--openvino-calibration", metavar="TRAIN_FILE", default="",
                        help="with --quantize int8: also write OpenVINO's model.int8.xml, its activations' ranges "
                             f"measured on the first {OPENVINO_CALIBRATION_TEXTS} texts of this file (training data; "
                             "any format the readers take); faster than model.int8.onnx, and run instead of it where "
                             "OpenVINO is installed")
    parser.add_argument("--verify", metavar="DEV_FILE", help="with --quantize int8: dev F1, identical texts and "
                                                             "texts/s of float32 and each int8 model on this labelled "
                                                             "file, on this CPU; an int8 model that loses more than "
                                                             "--verify-tolerance is not kept (exit 1), and one kept "
                                                             "runs as int8 on CPUs with the same integer kernels")
    parser.add_argument("--verify-tolerance", type=float, default=VERIFY_TOLERANCE, metavar="POINTS",
                        help=f"dev F1 points an int8 model may lose against float32 (default {VERIFY_TOLERANCE:g})")
    args = parser.parse_args(argv)
    files = export_checkpoint(args.model, args.output, args.onnx, args.opset, args.quantize,
                              requested=args.model, openvino_calibration=args.openvino_calibration,
                              verify=args.verify or "", tolerance=args.verify_tolerance)
    print(f"{args.output}: {', '.join(files)}", file=sys.stderr)
    if args.verify:
        rows = verification(args.output)
        for row in rows:
            print(json.dumps(row))
        for row in rows[1:]:
            if not row["kept"]:
                log.error("--verify: %s's INT8 model scored dev F1 %.2f against float32's %.2f on %s (this CPU: %s "
                          "integer kernels), more than --verify-tolerance %g points lower: not kept; %s holds the "
                          "float32 export", row["backend"], row["f1"], rows[0]["f1"], args.verify, row["kernels"],
                          args.verify_tolerance, args.output)
        if not all(row["kept"] for row in rows[1:]):
            return 1
    return 0
