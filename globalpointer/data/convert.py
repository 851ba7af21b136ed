"""Convert any supported file to the canonical JSON lines, optionally a slice of its records.

    python -m globalpointer.data.convert INPUT OUTPUT [--format auto] [--skip N] [--take N]

e.g. the deterministic CMeEE split used in docs/RESULTS.md:
    python -m globalpointer.data.convert ../shared/data/cmeee/CMeEE_dev.json runs/data/cmeee_train.jsonl --take 4000
    python -m globalpointer.data.convert ../shared/data/cmeee/CMeEE_dev.json runs/data/cmeee_test.jsonl --skip 4000
"""
import argparse
import sys

from ..arguments import whole_number
from ..errors import DataError
from ..files import check_output_file
from .readers import read_records, write_jsonl_records


def _convert(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m globalpointer.data.convert", description=__doc__.split("\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--format", default="auto", help="input format (default: detected)")
    parser.add_argument("--skip", type=whole_number(0), default=0, help="leave out the first N records")
    parser.add_argument("--take", type=whole_number(0), default=0, help="keep at most N records after --skip (0: all)")
    args = parser.parse_args(argv)
    check_output_file(args.output, "OUTPUT", [args.input])
    records = read_records(args.input, args.format)
    if args.skip >= len(records):
        raise DataError(f"{args.input}: --skip {args.skip} leaves none of its {len(records)} records")
    records = records[args.skip:args.skip + args.take] if args.take else records[args.skip:]
    write_jsonl_records(records, args.output)
    print(f"{args.output}: {len(records)} texts, {sum(len(r.entities) for r in records)} entities", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    from ..cli import run_command

    return run_command(_convert, argv)


if __name__ == "__main__":
    sys.exit(main())
