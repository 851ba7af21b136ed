"""The three commands.  train.py, evaluate.py and predict.py call these; the package does the work."""
import argparse
import errno
import json
import logging
import os
import sys
from typing import List, Optional

from .arguments import whole_number
from .config import BACKENDS, dump_config, load_config
from .errors import UserError
from .files import check_distinct, check_output_file
from .predictor import OUTPUT_FORMATS

log = logging.getLogger("globalpointer")


# A full disk, a file-size limit, a read-only or forbidden location: the user's to fix, not a bug.
FILE_SYSTEM_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)


def _config_arguments(parser: argparse.ArgumentParser, config_required: bool) -> None:
    parser.add_argument("--config", required=config_required, help="YAML run config (see configs/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set train.lr=3e-5 (repeatable)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config with every default and exit")


def run_command(main, argv: Optional[List[str]]) -> int:
    """The one error boundary of every command: a UserError is one line and exit 2, Ctrl-C exit 130."""
    setup_logging()
    try:
        return main(argv)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as error:
        print(f"stopped: {error}" if str(error) else "stopped", file=sys.stderr)
        return 130
    except OSError as error:
        if error.errno not in FILE_SYSTEM_FAULTS:
            raise
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}; free space, or choose a location that can be written, and "
              f"run again (no finished file was replaced by a part of one)", file=sys.stderr)
        return 2


def _train(argv):
    parser = argparse.ArgumentParser(prog="train.py", description="Train a GlobalPointer entity extractor.")
    _config_arguments(parser, config_required=True)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue from OUTPUT_DIR/last (same config)")
    mode.add_argument("--overwrite", action="store_true",
                      help="replace the run in OUTPUT_DIR (without it, a directory holding a run is an error)")
    parser.add_argument("--resume-anyway", action="store_true",
                        help="with --resume: continue although the config changed keys that shape training")
    args = parser.parse_args(argv)
    config = load_config(args.config, args.set)
    if args.print_config:
        sys.stdout.write(dump_config(config))
        return 0
    from .training import train

    summary = train(config, resume=args.resume, overwrite=args.overwrite, resume_anyway=args.resume_anyway,
                    config_file=args.config)
    print(json.dumps({k: v for k, v in summary.items() if k != "labels"}, indent=1))
    return 0


def load_for_inference(args):
    from .pipeline import load

    ner = load(args.model, args.set, backend=args.backend, window_batch_size=args.batch_size)
    log.info("%s: %s backend on %s", ner.directory, ner.backend, ner.runtime.device)
    return ner


def inference_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint directory (e.g. runs/quickstart/best) or an "
                                                       "export directory (python -m globalpointer.export)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the checkpoint's config, e.g. --set model.decode=flat")
    parser.add_argument("--batch-size", type=whole_number(1), default=0,
                        help="rows per forward pass (a row: one window, or several short ones; "
                             "default: train.eval_batch_size)")
    parser.add_argument("--backend", choices=BACKENDS, help="same as --set inference.backend=... (default: auto)")


def _evaluate(argv):
    parser = argparse.ArgumentParser(prog="evaluate.py", description="Span precision / recall / F1 of a checkpoint.")
    inference_arguments(parser)
    parser.add_argument("--data", help="labelled file in any supported format (default: the run's test, else dev file)")
    parser.add_argument("--format", help="format of --data (default: the run's data.format)")
    parser.add_argument("--output", help="write the JSON report here, and the predictions beside it as .predictions.jsonl")
    parser.add_argument("--html", help="write a page drawing every text with its gold and predicted entities, each "
                                       "error marked (one self-contained file)")
    args = parser.parse_args(argv)
    from .data.splits import check_types, load_split
    from .files import atomic_write_json, atomic_write_text
    from .metrics import error_summary, format_report, span_report
    from .report_html import render_page
    from .spans import Record

    if args.format:
        args.set.append(f"data.format={args.format}")
    ner = load_for_inference(args)
    config, labels, extractor = ner.config, ner.labels, ner.extractor
    path = args.data or config.data.test or config.data.dev
    if not path:
        raise UserError("no data to evaluate: pass --data FILE")
    outputs = {"--output": args.output, "--output (its .predictions.jsonl)": args.output and _predictions_path(args.output),
               "--html": args.html}
    check_distinct(outputs)
    for flag, output in outputs.items():
        if output:
            check_output_file(output, flag, [path, ner.directory])
    records = load_split(config, "data", path)
    check_types(records, labels)
    predicted = extractor.extract([r.text for r in records])
    gold = [r.entities for r in records]
    report = span_report(gold, predicted, labels)
    report["errors"] = error_summary(gold, predicted, labels)
    report["data"], report["model"] = path, args.model
    print(format_report(report))
    if args.html:
        micro = report["micro"]
        meta = (f"{args.model} on {path}: {len(records)} texts, precision {micro['precision'] * 100:.2f}, "
                f"recall {micro['recall'] * 100:.2f}, F1 {micro['f1'] * 100:.2f}")
        atomic_write_text(args.html, render_page("Evaluation", [r.text for r in records], predicted, labels, gold,
                                                 report["errors"], meta, [r.source for r in records]))
        log.info("wrote %s", args.html)
    if args.output:
        atomic_write_json(args.output, report)
        lines = [json.dumps({"text": r.text, "entities": Record(r.text, p).entity_dicts(with_score=True),
                             "gold": r.entity_dicts()}, ensure_ascii=False) for r, p in zip(records, predicted)]
        atomic_write_text(_predictions_path(args.output), "\n".join(lines) + "\n")
        log.info("wrote %s and %s", args.output, _predictions_path(args.output))
    return 0


def _predictions_path(report_path: str) -> str:
    stem = report_path[:-5] if report_path.endswith(".json") else report_path
    return stem + ".predictions.jsonl"


def _predict(argv):
    parser = argparse.ArgumentParser(prog="predict.py", description="Extract entities from every line of a file.")
    inference_arguments(parser)
    parser.add_argument("--input", default="-", help="text file (one text per line) or JSON lines with a text field; "
                                                     "- for standard input")
    parser.add_argument("--output", default="-", help="JSON lines out, one per input line; - for standard output")
    parser.add_argument("--input-format", default="auto", choices=("auto", "text", "jsonl"),
                        help="auto: JSON lines if the first line is a JSON object with a text field")
    parser.add_argument("--lines-per-chunk", type=whole_number(1), default=512, help="lines read and predicted at a time")
    parser.add_argument("--output-format", default="jsonl", choices=OUTPUT_FORMATS,
                        help="label-studio: a JSON array of tasks with the entities as pre-annotations (one task per "
                             "line), for Label Studio's import")
    parser.add_argument("--model-version", help="label-studio: the predictions' model_version (default: --model)")
    parser.add_argument("--html", help="also write a page drawing the entities of the first --html-texts lines")
    parser.add_argument("--html-texts", type=whole_number(1), default=1000, help="lines drawn by --html")
    args = parser.parse_args(argv)
    from .label_studio import labeling_config
    from .predictor import predict_file, predict_file_share

    if args.input != "-" and not os.path.isfile(args.input):
        raise UserError(f"--input: file not found: {args.input}")
    check_distinct({"--output": args.output, "--html": args.html})
    for flag, output in (("--output", args.output), ("--html", args.html)):
        if output and output != "-":
            check_output_file(output, flag, [args.input, args.model])
    ner = load_for_inference(args)
    extractor, runtime = ner.extractor, ner.runtime
    drawn: List[dict] = []  # for --html: rank 0's share holds the first lines of the file

    def draw(payload: dict) -> None:
        if len(drawn) < args.html_texts:
            drawn.append(payload)

    output = dict(output_format=args.output_format, model_version=args.model_version or os.path.normpath(args.model),
                  on_payload=draw if args.html else None)
    if args.output_format == "label-studio":
        log.info("Label Studio labeling config for these tasks:\n%s", labeling_config(ner.labels))
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
        _write_prediction_page(args.html, drawn, ner.labels, f"{args.model} on {args.input}: the first "
                                                             f"{len(drawn)} of {lines} lines")
    return 1 if failed else 0


def _write_prediction_page(path: str, payloads: List[dict], labels: List[str], meta: str) -> None:
    from .files import atomic_write_text
    from .report_html import render_page
    from .spans import Entity

    texts = [payload["text"] for payload in payloads]
    predicted = [[Entity(e["start"], e["end"], e["type"], e["score"]) for e in payload.get("entities", [])]
                 for payload in payloads]
    atomic_write_text(path, render_page("Predictions", texts, predicted, labels, meta=meta))
    log.info("wrote %s", path)


def train_main(argv=None) -> int:
    return run_command(_train, argv)


def evaluate_main(argv=None) -> int:
    return run_command(_evaluate, argv)


def predict_main(argv=None) -> int:
    return run_command(_predict, argv)
