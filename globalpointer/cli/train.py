"""``globalpointer train`` (train.py): train an extractor from a YAML config."""
import argparse
import json
import sys

from ..config import dump_config, load_config
from .arguments import config_arguments


def run(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Train a GlobalPointer entity extractor.")
    config_arguments(parser, config_required=False)  # required to train, not to --print-config the defaults
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue from OUTPUT_DIR/last (same config)")
    mode.add_argument("--overwrite", action="store_true",
                      help="replace the run in OUTPUT_DIR (without it, a directory holding a run is an error)")
    parser.add_argument("--resume-anyway", action="store_true",
                        help="with --resume: continue although the config changed keys that shape training")
    parser.add_argument("--init-from", metavar="MODEL_DIR",
                        help="same as --set train.init_from=...: start from a trained model, adding the new types of "
                             "data.labels")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.set + ([("train.init_from", args.init_from)] if args.init_from else []))
    if args.print_config:
        sys.stdout.write(dump_config(config))
        return 0
    if not args.config:
        parser.error("the following arguments are required: --config (or --print-config to see every default)")
    from ..training.loop import train

    summary = train(config, resume=args.resume, overwrite=args.overwrite, resume_anyway=args.resume_anyway,
                    config_file=args.config)
    print(json.dumps({k: v for k, v in summary.items() if k != "labels"}, indent=1))
    return 0
