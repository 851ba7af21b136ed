"""The command line: ``globalpointer COMMAND ...`` (or ``python -m globalpointer COMMAND ...``), a module
per command, each a parser and its calls of the package, and one error boundary for all
(``boundary.run_command``).  train.py, evaluate.py and predict.py at the checkout's top are the same
commands."""
import difflib
import sys
from typing import Callable, Dict, List, Optional, Tuple

from . import calibrate, convert, data, evaluate, export, label_studio_backend, plot, predict, select, serve, train
from .boundary import MEMORY_ADVICE, run_command

__all__ = ["COMMANDS", "MEMORY_ADVICE", "evaluate_main", "main", "predict_main", "run_command", "train_main"]


# name -> (command, what it does): the console script's table
COMMANDS: Dict[str, Tuple[Callable, str]] = {
    "train": (train.run, "train an extractor from a YAML config (configs/)"),
    "evaluate": (evaluate.run, "span precision / recall / F1 of a model on a labelled file"),
    "predict": (predict.run, "entities of every line of a text or JSON-lines file"),
    "export": (export.run, "a deployable export: Paddle Inference, ONNX, INT8"),
    "select": (select.run, "the unlabelled texts the model is least certain of, to label next"),
    "calibrate": (calibrate.run, "thresholds fitted on held-out labelled data"),
    "serve": (serve.run, "the HTTP service"),
    "label-studio-backend": (label_studio_backend.run, "the model as a Label Studio ML backend (pre-annotation, "
                                                       "retraining)"),
    "convert": (convert.run, "any supported data file as canonical JSON lines"),
    "data": (data.run, "the public datasets: list them, fetch one into data/"),
    "plot": (plot.run, "learning curves of a run"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items())
    return (f"usage: globalpointer COMMAND [ARGS]  (globalpointer COMMAND --help for a command's arguments)\n\n"
            f"Named-entity recognition with a GlobalPointer head on PaddlePaddle.\n\ncommands:\n{rows}")


def main(argv: Optional[List[str]] = None) -> int:
    """The ``globalpointer`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name = argv[0]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        print(f"error: unknown command {name!r}{hint}\n{usage()}", file=sys.stderr)
        return 2
    return run_command(COMMANDS[name][0], argv[1:], f"globalpointer {name}")


def train_main(argv=None) -> int:
    return run_command(train.run, argv, "train.py")


def evaluate_main(argv=None) -> int:
    return run_command(evaluate.run, argv, "evaluate.py")


def predict_main(argv=None) -> int:
    return run_command(predict.run, argv, "predict.py")
