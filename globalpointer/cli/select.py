"""``globalpointer select``: the texts of an unlabelled file most worth labelling next."""
import argparse
import logging
import os

from ..errors import UserError
from ..files import check_output_files
from .arguments import inference_arguments, load_for_inference, whole_number

log = logging.getLogger("globalpointer")


def similarity(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {value:g}")
    return value


def run(argv, prog):
    parser = argparse.ArgumentParser(prog=prog, description="Pick the texts of an unlabelled file that the model is "
                                                            "least certain of, for the next round of labelling.")
    inference_arguments(parser)
    parser.add_argument("--input", required=True, help="the unlabelled texts: a text file (one text per line) or JSON "
                                                       "lines with a text field, as predict reads them")
    parser.add_argument("--count", type=whole_number(1), required=True, help="how many lines to pick")
    parser.add_argument("--output", required=True, help="the picked lines, as they are in --input, the least certain "
                                                        "first")
    parser.add_argument("--max-similarity", type=similarity, default=0.8,
                        help="two texts whose character 3-grams overlap this much (Jaccard, estimated) are "
                             "near-identical: only the less certain is picked")
    parser.add_argument("--input-format", default="auto", choices=("auto", "text", "jsonl"),
                        help="auto: JSON lines if the first line is a JSON object with a text field")
    parser.add_argument("--lines-per-chunk", type=whole_number(1), default=512, help="lines read and scored at a time")
    args = parser.parse_args(argv)
    from ..inference.selection import select_file
    from ..model_directory.opening import open_model

    if not os.path.isfile(args.input):
        raise UserError(f"--input: file not found: {args.input}")
    check_output_files({"--output": args.output}, [args.input, args.model])
    ner = load_for_inference(args, open_model(args.model))
    select_file(ner.extractor, args.input, args.output, args.count, args.max_similarity, args.input_format,
                args.lines_per_chunk)
    return 0
