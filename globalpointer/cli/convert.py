"""``globalpointer convert``: any supported data file as canonical JSON lines."""
import argparse
import sys

from .arguments import whole_number


def run(argv, prog) -> int:
    from ..data.convert import convert_file

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
