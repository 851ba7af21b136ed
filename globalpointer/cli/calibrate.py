"""``globalpointer calibrate``: minimum scores fitted on held-out labelled data."""
import argparse

from .arguments import inference_arguments, load_for_inference


def run(argv, prog) -> int:
    from ..evaluation.calibrate import KINDS, calibrate, format_calibration

    parser = argparse.ArgumentParser(prog=prog, description="Thresholds fitted on held-out labelled data, "
                                                             "written into the model directory's thresholds.json.")
    inference_arguments(parser)
    parser.add_argument("--data", required=True, help="labelled file to calibrate on (not the file you report F1 on)")
    parser.add_argument("--format", help="format of --data (default: the run's data.format)")
    parser.add_argument("--thresholds", choices=KINDS, default="per_type",
                        help="per_type: each type's own minimum score (the best F1 of each type); shared: one for "
                             "every type (the best micro F1; what training fits on its dev file, train.calibrate)")
    args = parser.parse_args(argv)
    if args.format:
        args.set.append(("data.format", args.format))
    print(format_calibration(calibrate(load_for_inference(args), args.data, args.thresholds)))
    return 0
