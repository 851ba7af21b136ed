"""``globalpointer predict`` (predict.py): the entities of every line of a file."""
import argparse
import logging
import os
from typing import List

from ..errors import UserError
from ..files import check_output_files
from ..inference.file_prediction import OUTPUT_FORMATS
from .arguments import inference_arguments, load_for_inference, whole_number

log = logging.getLogger("globalpointer")


def run(argv, prog):
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
                             "{\"text\", \"label\": [[start, end, type]]} (a relation model: {\"text\", \"entities\", "
                             "\"relations\"}, its relation-extraction import)")
    parser.add_argument("--label-config", metavar="FILE",
                        help="also write the Label Studio labeling interface for the model's types here (paste it "
                             "into the project's Labeling Interface, or pass it as label_config through the API)")
    parser.add_argument("--model-version", help="label-studio and doccano: the predictions' model_version (doccano: "
                                                "a field of each line, shown as metadata; default: --model)")
    parser.add_argument("--certainty", action="store_true",
                        help="also write each text's certainty in [0, 1], lowest first worth labelling first (the "
                             "score Label Studio's uncertainty sampling sorts by, as the label-studio output and "
                             "the backend give it; docs/annotation.md)")
    parser.add_argument("--html", help="also write a page drawing the entities of the first --html-texts lines")
    parser.add_argument("--html-texts", type=whole_number(1), default=1000, help="lines drawn by --html")
    args = parser.parse_args(argv)
    from ..model_directory.opening import open_model
    from ..deploy.export import compile_if_it_pays
    from ..evaluation.report_html import write_prediction_page
    from ..inference.file_prediction import count_lines, predict_file, predict_file_share
    from ..inference.label_studio import offer_labeling_config

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
                  on_payload=draw if args.html else None, certainty=args.certainty)
    if runtime.rank == 0:
        offer_labeling_config(ner.labels, args.label_config, OUTPUT_FORMATS[args.output_format].needs_interface,
                              ner.relations)
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
