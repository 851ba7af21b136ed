"""``globalpointer data``: the public datasets, listed and fetched."""
import argparse
import sys


def run(argv, prog) -> int:
    from ..data.public_sets import PUBLIC_SETS, describe_sets, fetch_set

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
