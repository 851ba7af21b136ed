"""``globalpointer convert``: any supported data file as canonical JSON lines, or as an annotation tool imports it."""
import argparse
import logging
import sys

from .arguments import whole_number


def run(argv, prog) -> int:
    from ..data.convert import convert_file
    from ..inference.file_prediction import OUTPUT_FORMATS, write_records
    from ..spans import overlapping_spans

    parser = argparse.ArgumentParser(prog=prog, description="Any supported file as canonical JSON lines (or as an "
                                                             "annotation tool imports it), or a slice of its records.")
    parser.add_argument("input", help="a data file in any supported format (docs/data-formats.md)")
    parser.add_argument("output", help="the file to write: JSON lines, {\"text\", \"entities\"} per record (and "
                                       "\"relations\"), unless --output-format")
    parser.add_argument("--format", default="auto", help="input format (default: detected)")
    parser.add_argument("--skip", type=whole_number(0), default=0, help="leave out the first N records")
    parser.add_argument("--take", type=whole_number(0), default=0, help="keep at most N records after --skip (0: all)")
    parser.add_argument("--output-format", choices=list(OUTPUT_FORMATS), default="jsonl",
                        help="label-studio: tasks whose annotation is the record's labelling (a JSON array); "
                             "doccano: its import lines (a relation project's where the records have relations)")
    parser.add_argument("--label-config", metavar="FILE",
                        help="also write the Label Studio labeling interface for the file's entity (and relation) "
                             "types here: paste it into the project's Labeling Interface before importing the tasks")
    args = parser.parse_args(argv)
    from ..files import check_output_files
    from ..inference.label_studio import offer_labeling_config

    check_output_files({"output": args.output, "--label-config": args.label_config}, [args.input])
    tool = {} if args.output_format == "jsonl" else \
        {"write": lambda chosen, path: write_records(chosen, path, args.output_format)}
    records = convert_file(args.input, args.output, args.format, args.skip, args.take, **tool)
    offer_labeling_config(sorted({e.type for r in records for e in r.entities}), args.label_config,
                          args.output_format == "label-studio",
                          sorted({relation.type for r in records for relation in r.relations}))
    events = sum(len(r.events) for r in records)
    relations = 0 if events else sum(len(r.relations) for r in records)  # an event file's encode its events
    overlapping = sum(bool(overlapping_spans([e.key for e in r.entities])) for r in records)
    if args.output_format == "doccano" and overlapping:
        logging.getLogger("globalpointer").warning(
            "%s: %d texts have entities that share characters (nested, or one span of two types): import it into "
            "a doccano project with 'Allow overlapping spans' ticked, or doccano drops them (and fails on a "
            "relation to one)", args.output, overlapping)
    print(f"{args.output}: {len(records)} texts, {sum(len(r.entities) for r in records)} entities"
          + (f", {relations} relations" if relations else "") + (f", {events} events" if events else ""), file=sys.stderr)
    return 0
