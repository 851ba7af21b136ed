"""The arguments several commands share: a whole number, a run config with --set, a model to run."""
import argparse
from typing import Callable

from ..config import InferenceConfig, ServeConfig, backend_names


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    return parse


def config_arguments(parser: argparse.ArgumentParser, config_required: bool) -> None:
    parser.add_argument("--config", required=config_required, help="YAML run config (see configs/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set train.lr=3e-5 (repeatable)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config with every default and exit")


def load_for_inference(args, model=None):
    """The pipeline of ``--model`` (or of ``model``, the directory opened already)."""
    from ..inference.pipeline import load

    return load(model or args.model, args.set, backend=args.backend, window_batch_size=args.batch_size)


def inference_arguments(parser, service: bool = False):
    """What every command that runs a model takes.  ``--batch-size`` is inference.batch_size; a
    service's passes are serve.rows_per_pass (requests take turns pass by pass): ``--rows-per-pass``."""
    parser.add_argument("--model", required=True, help="checkpoint directory (e.g. runs/quickstart/best) or an "
                                                       "export directory (globalpointer export)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the checkpoint's config, e.g. --set model.decode=flat")
    if service:
        parser.add_argument("--rows-per-pass", type=whole_number(1),
                            help="same as --set serve.rows_per_pass=...: rows of one forward pass, which concurrent "
                                 f"requests take turns at (default {ServeConfig.rows_per_pass})")
    else:
        parser.add_argument("--batch-size", type=whole_number(1), default=0,
                            help="same as --set inference.batch_size=...: rows per forward pass (a row: one window, "
                                 f"or several short ones; default {InferenceConfig.batch_size})")
    parser.add_argument("--backend", choices=backend_names(), help="same as --set inference.backend=... (default: auto)")
