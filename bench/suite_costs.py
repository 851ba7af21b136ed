"""Where the test suite's time goes (docs/performance.md, "The test suite"), from pytest's own timings.

    python -m pytest -q --durations=0 tests > suite.log 2>&1
    python bench/suite_costs.py suite.log [--vs before.log] [--top 25]

Reads the ``--durations=0`` table of one run (and of another with ``--vs``, side by side) and prints
the seconds per test file (setup, call and teardown summed: a module's fixtures are charged to the
test that first needs them) and the slowest single phases, each a fixture's setup or a test's call.
"""
import argparse
import re
import sys
from collections import defaultdict
from typing import Dict, List, Tuple

from common import table

LINE = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)(?:::(\S.*))?$")


def phases(path: str) -> List[Tuple[float, str, str, str]]:
    """(seconds, phase, file, test) of each line of a ``--durations`` table."""
    found = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = LINE.match(line.rstrip("\n"))
            if match:
                seconds, phase, where, test = match.groups()
                found.append((float(seconds), phase, where, test or ""))
    if not found:
        raise SystemExit(f"{path}: no --durations table (run pytest with --durations=0)")
    return found


def by_file(rows) -> Dict[str, float]:
    totals: Dict[str, float] = defaultdict(float)
    for seconds, _, where, _ in rows:
        totals[where] += seconds
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the output of pytest --durations=0")
    parser.add_argument("--vs", help="another run's output, shown beside (before -> after)")
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    args = parser.parse_args()
    rows = phases(args.log)
    files = by_file(rows)
    before = by_file(phases(args.vs)) if args.vs else {}
    names = sorted(set(files) | set(before), key=lambda n: -max(files.get(n, 0), before.get(n, 0)))
    file_rows = []
    for name in names[:args.top]:
        row = {"file": name}
        if args.vs:
            row["before s"] = f"{before.get(name, 0):.0f}"
        row["seconds"] = f"{files.get(name, 0):.0f}"
        file_rows.append(row)
    total = {"file": "all", **({"before s": f"{sum(before.values()):.0f}"} if args.vs else {}),
             "seconds": f"{sum(files.values()):.0f}"}
    print(table(file_rows + [total]))
    print()
    slowest = sorted(rows, reverse=True)[:args.top]
    print(table([{"seconds": f"{s:.1f}", "phase": p, "test": f"{w}::{t}"} for s, p, w, t in slowest]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
