"""The command line: ``globalpointer COMMAND ...`` (or ``python -m globalpointer COMMAND ...``), one
parser per command and one error boundary for all (``run_command``).  train.py, evaluate.py and
predict.py at the checkout's top are the same commands.  Each command turns its arguments into calls of
the package; the work is done there."""
import argparse
import difflib
import errno
import json
import logging
import os
import signal
import sys
from typing import Callable, Dict, List, Optional, Tuple

from .config import InferenceConfig, ServeConfig, backend_names, dump_config, load_config, override_key
from .errors import UserError, memory_detail, setup_logging
from .files import TERMINATION, Terminated, check_output_files, stop_on_sigterm
from .inference.file_prediction import OUTPUT_FORMATS
from .model_directory.layout import CONFIG
from .runtime import launch_position

log = logging.getLogger("globalpointer")


# A full disk, a file-size limit, a read-only or forbidden location, a file where a folder should be: the
# user's to fix, not a bug; each with what fixes it
SPACE = "free space, or choose another location"
FILE_SYSTEM_FAULTS = {errno.ENOSPC: SPACE, errno.EDQUOT: SPACE, errno.EFBIG: SPACE,
                      errno.EROFS: "choose a location that can be written", errno.EACCES: "choose a location "
                      "that can be written", errno.EPERM: "choose a location that can be written",
                      errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
                      errno.EISDIR: "name a file, not a folder"}


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


def _config_arguments(parser: argparse.ArgumentParser, config_required: bool) -> None:
    parser.add_argument("--config", required=config_required, help="YAML run config (see configs/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set train.lr=3e-5 (repeatable)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config with every default and exit")


# What to lower when a command runs out of memory: its own settings, not another command's
PREDICTION_MEMORY = ("predict fewer rows a forward pass (--batch-size, inference.batch_size) or shorter windows "
                     "(--set data.max_length=...), or run it on a machine with more memory")
MEMORY_ADVICE = {
    "train": "train fewer windows a step (train.batch_size; train.grad_accum_steps keeps the step's size) or shorter "
             "windows (data.max_length), or run it on a machine with more memory",
    "evaluate": PREDICTION_MEMORY, "predict": PREDICTION_MEMORY, "calibrate": PREDICTION_MEMORY,
    "serve": "run fewer worker processes (--workers, serve.workers: each holds the model) or fewer rows a forward pass "
             "(--rows-per-pass, serve.rows_per_pass), or on a machine with more memory",
    "label-studio-backend": "serve fewer rows a forward pass (--rows-per-pass, serve.rows_per_pass); a round trains "
                            "in this process too: lower train.batch_size in --base-config",
    "export": "export on a machine with more memory (the checkpoint is loaded and traced whole; INT8 quantizes it "
              "in memory)",
    "convert": "a file is read whole: split it into parts and convert each",
    "data": "the set's archive is read whole: download it with a browser and pass it with --from on a machine with "
            "more memory",
}


def run_command(main, argv: Optional[List[str]], prog: str) -> int:
    """The one error boundary of every command: a UserError is one line and exit 2, Ctrl-C exit 130.
    A process of a data-parallel launch ends here (``end_data_parallel_process``)."""
    code = _run(main, argv, prog)
    if launch_position()[1] > 1:
        end_data_parallel_process(code)
    return code


def end_data_parallel_process(code: int) -> None:
    """Exit without tearing down Paddle's communication objects: torn down at interpreter exit, once
    the other processes have gone, they abort a process whose work is done now and then (SIGABRT:
    1 run in 8 of a 2-process training on CPU), and the launcher then reports the run as failed.
    Every file is closed by now; only the standard streams and the log need flushing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(main, argv: Optional[List[str]], prog: str) -> int:
    setup_logging()
    stop_on_sigterm()
    try:
        return main(argv, prog)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        # a SIGTERM that Paddle's to_static re-raised with its own trace in the message: the plain words
        if TERMINATION.is_set() and (not isinstance(error, Terminated) or "\n" in str(error)):
            error = Terminated("terminated (SIGTERM)")
        print(f"stopped: {error}" if str(error) else "stopped", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(error, Terminated) else 130
    except OSError as error:
        if error.errno not in FILE_SYSTEM_FAULTS:
            raise
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}; {FILE_SYSTEM_FAULTS[error.errno]}, and run again (no "
              f"finished file was replaced by a part of one)", file=sys.stderr)
        return 2
    except MemoryError as error:  # Python's, and Paddle's ResourceExhausted (a MemoryError too)
        advice = MEMORY_ADVICE.get(prog.split()[-1].removesuffix(".py"), "run it on a machine with more memory")
        print(f"error: out of memory ({memory_detail(error)}); {advice}", file=sys.stderr)
        return 2
    except Exception:
        if not TERMINATION.is_set():  # SIGTERM turned into another error inside Paddle's C++ code
            raise
        print("stopped: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM


def _train(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Train a GlobalPointer entity extractor.")
    _config_arguments(parser, config_required=False)  # required to train, not to --print-config the defaults
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
    from .training.loop import train

    summary = train(config, resume=args.resume, overwrite=args.overwrite, resume_anyway=args.resume_anyway,
                    config_file=args.config)
    print(json.dumps({k: v for k, v in summary.items() if k != "labels"}, indent=1))
    return 0


def load_for_inference(args, model=None):
    """The pipeline of ``--model`` (or of ``model``, the directory opened already)."""
    from .inference.pipeline import load

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


def _evaluate(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Span precision / recall / F1 of a checkpoint.")
    inference_arguments(parser)
    parser.add_argument("--data", help="labelled file in any supported format (default: the run's test, else dev file)")
    parser.add_argument("--format", help="format of --data (default: the run's data.format)")
    parser.add_argument("--output", help="write the JSON report here, and the predictions beside it as .predictions.jsonl")
    parser.add_argument("--html", help="write a page drawing every text with its gold and predicted entities, each "
                                       "error marked (one self-contained file)")
    args = parser.parse_args(argv)
    from .model_directory.opening import open_model
    from .data.sources import source_paths
    from .deploy.export import compile_if_it_pays
    from .evaluation.evaluate import evaluate_file, predictions_path, write_evaluation
    from .evaluation.metrics import format_report
    from .evaluation.report_html import write_evaluation_page
    from .inference.file_prediction import count_lines

    if args.format:
        args.set.append(("data.format", args.format))
    model = open_model(args.model)
    if args.data and os.path.isfile(args.data):
        compile_if_it_pays(model, args.set, args.backend, count_lines(args.data))
    ner = load_for_inference(args, model)
    config, labels = ner.config, ner.labels
    path = args.data or config.data.test or config.data.dev
    if not path:
        raise UserError("no data to evaluate: pass --data FILE")
    check_output_files({"--output": args.output, "--html": args.html,
                        "--output (its .predictions.jsonl)": args.output and predictions_path(args.output)},
                       [*source_paths(path), ner.directory])
    records, predicted, report, _ = evaluate_file(ner, path)
    report["data"] = path if isinstance(path, str) else [source.name for source in path]
    report["model"] = args.model
    print(format_report(report))
    if args.html:
        write_evaluation_page(args.html, records, predicted, labels, report)
    if args.output:
        write_evaluation(args.output, report, records, predicted)
    return 0


def _predict(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Extract entities from every line of a file.")
    inference_arguments(parser)
    parser.add_argument("--input", default="-", help="text file (one text per line) or JSON lines with a text field; "
                                                     "- for standard input")
    parser.add_argument("--output", default="-", help="JSON lines out, one per input line; - for standard output")
    parser.add_argument("--input-format", default="auto", choices=("auto", "text", "jsonl"),
                        help="auto: JSON lines if the first line is a JSON object with a text field")
    parser.add_argument("--lines-per-chunk", type=whole_number(1), default=512, help="lines read and predicted at a time")
    parser.add_argument("--output-format", default="jsonl", choices=OUTPUT_FORMATS,
                        help="label-studio: a JSON array of tasks with the entities as pre-annotations (one task per "
                             "line), for Label Studio's import; doccano: one doccano import line per input line, "
                             "{\"text\", \"label\": [[start, end, type]]}")
    parser.add_argument("--label-config", metavar="FILE",
                        help="also write the Label Studio labeling interface for the model's types here (paste it "
                             "into the project's Labeling Interface, or pass it as label_config through the API)")
    parser.add_argument("--model-version", help="label-studio and doccano: the predictions' model_version (doccano: "
                                                "a field of each line, shown as metadata; default: --model)")
    parser.add_argument("--html", help="also write a page drawing the entities of the first --html-texts lines")
    parser.add_argument("--html-texts", type=whole_number(1), default=1000, help="lines drawn by --html")
    args = parser.parse_args(argv)
    from .model_directory.opening import open_model
    from .deploy.export import compile_if_it_pays
    from .evaluation.report_html import write_prediction_page
    from .inference.file_prediction import count_lines, predict_file, predict_file_share
    from .inference.label_studio import offer_labeling_config

    if args.input != "-" and not os.path.isfile(args.input):
        raise UserError(f"--input: file not found: {args.input}")
    check_output_files({"--output": args.output, "--html": args.html, "--label-config": args.label_config},
                       [args.input, args.model])
    model = open_model(args.model)
    if args.input != "-":
        compile_if_it_pays(model, args.set, args.backend, count_lines(args.input))
    ner = load_for_inference(args, model)
    extractor, runtime = ner.extractor, ner.runtime
    drawn: List[dict] = []  # for --html: rank 0's share holds the first lines of the file

    def draw(payload: dict) -> None:
        if len(drawn) < args.html_texts:
            drawn.append(payload)

    output = dict(output_format=args.output_format, model_version=args.model_version or os.path.normpath(args.model),
                  on_payload=draw if args.html else None)
    if runtime.rank == 0:
        offer_labeling_config(ner.labels, args.label_config, OUTPUT_FORMATS[args.output_format].needs_interface)
    if runtime.world_size > 1:  # python -m paddle.distributed.launch --nproc_per_node N predict.py ...
        import paddle.distributed

        lines, failed = predict_file_share(extractor, args.input, args.output, args.input_format,
                                           args.lines_per_chunk, runtime.rank, runtime.world_size,
                                           paddle.distributed.barrier, **output)
    else:
        lines, failed = predict_file(extractor, args.input, args.output, args.input_format, args.lines_per_chunk,
                                     **output)
    log.info("%d lines, %d with an error field", lines, failed)
    if args.html and runtime.rank == 0:
        write_prediction_page(args.html, drawn, ner.labels, f"{args.model} on {args.input}: the first "
                                                            f"{len(drawn)} of {lines} lines")
    return 1 if failed else 0


def _export(argv, prog) -> int:
    from .deploy.export import OPENVINO_CALIBRATION_TEXTS, VERIFY_TOLERANCE, export_checkpoint, verification

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


def _calibrate(argv, prog) -> int:
    from .evaluation.calibrate import KINDS, calibrate, format_calibration

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


def _serve(argv, prog) -> int:
    from .deploy.serve import run_service

    parser = argparse.ArgumentParser(prog=prog, description="The HTTP service: POST /v1/extract, GET /v1/labels, "
                                                             "GET /health, GET /docs.")
    inference_arguments(parser, service=True)
    parser.add_argument("--host", help=f"same as --set serve.host=... (default {ServeConfig.host})")
    parser.add_argument("--port", type=int, help=f"same as --set serve.port=... (default {ServeConfig.port})")
    parser.add_argument("--workers", type=int, help="same as --set serve.workers=... (default 0: one per CPU core; "
                                                    "1 on a GPU)")
    args = parser.parse_args(argv)
    settings = (("host", args.host), ("port", args.port), ("workers", args.workers),
                ("rows_per_pass", args.rows_per_pass))
    run_service(args.model, args.set + [(f"serve.{key}", value) for key, value in settings if value is not None],
                args.backend)
    return 0


LABEL_STUDIO_PORT = 9090


def _label_studio_backend(argv, prog) -> int:
    from .deploy.label_studio_backend import run_backend
    from .files import check_not_input

    parser = argparse.ArgumentParser(prog=prog, description="The model as a Label Studio ML backend: "
                                                             "pre-annotations for every task opened, retraining on "
                                                             "the project's annotations (docs/annotation.md).")
    inference_arguments(parser, service=True)
    parser.add_argument("--host", help=f"same as --set serve.host=... (default {ServeConfig.host}; another address needs "
                                       "basic authentication or --allow-unauthenticated)")
    parser.add_argument("--port", type=int, help=f"same as --set serve.port=... (default {LABEL_STUDIO_PORT}, the "
                                                 f"port of Label Studio's examples)")
    parser.add_argument("--allow-unauthenticated", action="store_true",
                        help="listen beyond loopback without BASIC_AUTH_USER / BASIC_AUTH_PASS: whoever reaches the "
                             "port gets predictions and can start training rounds")
    parser.add_argument("--work-dir", default="runs/label-studio",
                        help="where each training round writes its data, config, log and model (round-001, ...)")
    parser.add_argument("--base-config", help="the config a round trains with, its training and dev texts added to "
                                              "the project's annotations (default: the model's own config.yaml)")
    parser.add_argument("--label-studio-url", default=os.environ.get("LABEL_STUDIO_URL", ""),
                        help="Label Studio's address (http or https) for fetching annotations (default: "
                             "$LABEL_STUDIO_URL); its token is $LABEL_STUDIO_API_KEY.  Without them, only a backend "
                             "with basic authentication takes both from Label Studio's /setup")
    args = parser.parse_args(argv)
    check_not_input(args.work_dir, "--work-dir", [args.model])
    if args.port is None and not any(override_key(item) == "serve.port" for item in args.set):
        args.port = LABEL_STUDIO_PORT
    settings = (("serve.host", args.host), ("serve.port", args.port), ("inference.backend", args.backend),
                ("serve.rows_per_pass", args.rows_per_pass))
    run_backend(args.model, args.set + [(key, value) for key, value in settings if value is not None],
                args.work_dir, args.base_config or os.path.join(args.model, CONFIG), args.label_studio_url,
                os.environ.get("LABEL_STUDIO_API_KEY", ""), args.allow_unauthenticated)
    return 0


def _convert(argv, prog) -> int:
    from .data.convert import convert_file

    parser = argparse.ArgumentParser(prog=prog, description="Any supported file as canonical JSON lines, or a "
                                                             "slice of its records.")
    parser.add_argument("input", help="a data file in any supported format (docs/data-formats.md)")
    parser.add_argument("output", help="the JSON lines file to write ({\"text\", \"entities\"} per record)")
    parser.add_argument("--format", default="auto", help="input format (default: detected)")
    parser.add_argument("--skip", type=whole_number(0), default=0, help="leave out the first N records")
    parser.add_argument("--take", type=whole_number(0), default=0, help="keep at most N records after --skip (0: all)")
    args = parser.parse_args(argv)
    records = convert_file(args.input, args.output, args.format, args.skip, args.take)
    print(f"{args.output}: {len(records)} texts, {sum(len(r.entities) for r in records)} entities", file=sys.stderr)
    return 0


def _data(argv, prog) -> int:
    from .data.public_sets import PUBLIC_SETS, describe_sets, fetch_set

    parser = argparse.ArgumentParser(prog=prog, description="The public datasets the shipped configs read "
                                                             "(docs/data-formats.md#public-datasets).")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="each set, where it comes from, and whether fetch gets it")
    fetch = actions.add_parser("fetch", help="download a set, check it, and lay it out in DIR/SET/")
    fetch.add_argument("set", choices=sorted(PUBLIC_SETS), metavar="SET", help=", ".join(PUBLIC_SETS))
    fetch.add_argument("--to", default="data", metavar="DIR",
                       help="the folder the sets go in (default data, which the shipped configs read)")
    fetch.add_argument("--from", dest="location", metavar="URL_OR_FILE",
                       help="a mirror's URL, or the archive downloaded already (default: the set's source); "
                            "the same checksums apply")
    args = parser.parse_args(argv)
    if args.action == "list":
        print(describe_sets())
        return 0
    paths = fetch_set(args.set, args.to, args.location)
    print(f"{args.set}: {', '.join(paths)}", file=sys.stderr)
    return 0


def _plot(argv, prog) -> int:
    from .evaluation.plot import plot_run

    parser = argparse.ArgumentParser(prog=prog, description="Learning curves of a run: RUN_DIR/metrics.png.")
    parser.add_argument("run_dir", help="a run directory (output_dir of train) holding metrics.csv")
    args = parser.parse_args(argv)
    print(plot_run(args.run_dir))
    return 0


# name -> (command, what it does): the console script's table
COMMANDS: Dict[str, Tuple[Callable, str]] = {
    "train": (_train, "train an extractor from a YAML config (configs/)"),
    "evaluate": (_evaluate, "span precision / recall / F1 of a model on a labelled file"),
    "predict": (_predict, "entities of every line of a text or JSON-lines file"),
    "export": (_export, "a deployable export: Paddle Inference, ONNX, INT8"),
    "calibrate": (_calibrate, "thresholds fitted on held-out labelled data"),
    "serve": (_serve, "the HTTP service"),
    "label-studio-backend": (_label_studio_backend, "the model as a Label Studio ML backend (pre-annotation, "
                                                    "retraining)"),
    "convert": (_convert, "any supported data file as canonical JSON lines"),
    "data": (_data, "the public datasets: list them, fetch one into data/"),
    "plot": (_plot, "learning curves of a run"),
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
    return run_command(_train, argv, "train.py")


def evaluate_main(argv=None) -> int:
    return run_command(_evaluate, argv, "evaluate.py")


def predict_main(argv=None) -> int:
    return run_command(_predict, argv, "predict.py")
