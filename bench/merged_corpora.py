"""Two public corpora labelled for different types, merged (docs/results.md, "Merging CLUENER and MSRA").

    python bench/merged_corpora.py --out runs/merged-corpora [--msra 10000] [--set train.epochs=1]

CLUENER's training file (10 types) alone, against CLUENER's plus MSRA's first ``--msra`` training
sentences as a data entry declared for three types, ``PER``/``LOC``/``ORG`` renamed onto
``name``/``address``/``organization``.  Both with ``configs/cluener.yaml``'s model and rates and the
same ``--set`` budget; each run's test file is MSRA's test set, declared and renamed the same way.
Prints CLUENER dev F1 per type and micro, and MSRA test F1 per type and micro, for both runs.
"""
import argparse
import json
import os

from common import SHARED
from partial_types import train_run  # the same runner (bench/ is the script's folder, on sys.path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RENAME = {"PER": "name", "LOC": "address", "ORG": "organization"}


def first_sentences(path, count, out):
    """The first ``count`` blank-line-separated sentences of a one-character-per-line file."""
    kept, lines = 0, []
    for line in open(path, encoding="utf-8"):
        lines.append(line)
        if not line.strip():
            kept += 1
            if kept == count:
                break
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return out


def train(run, overrides):
    """(dev report, test report) of ``configs/cluener.yaml`` trained with ``overrides`` into ``run``."""
    return train_run(run, overrides, config=os.path.join(ROOT, "configs", "cluener.yaml"), splits=("dev", "test"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/merged-corpora")
    parser.add_argument("--msra", type=int, default=10000, help="MSRA training sentences to add")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--data", default=SHARED, help="folder holding cluener/ and msra/")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    types = sorted(RENAME.values())
    msra = {"format": "chars", "types": types, "rename": RENAME}
    msra_train = first_sentences(os.path.join(args.data, "msra", "msra_train_bio.txt"), args.msra,
                                 os.path.join(args.out, f"msra-train-{args.msra}.txt"))
    cluener = os.path.join(args.data, "cluener", "train.json")
    common = [f"data.dev={os.path.join(args.data, 'cluener', 'dev.json')}",
              f"data.test={json.dumps([{'path': os.path.join(args.data, 'msra', 'msra_test_bio.txt'), **msra}])}"]
    rows = {"CLUENER": cluener, f"CLUENER + MSRA {args.msra:,}": json.dumps([cluener, {"path": msra_train, **msra}])}
    reports = {}
    for number, (row, data) in enumerate(rows.items()):
        reports[row] = train(os.path.join(args.out, f"run-{number}"), [f"data.train={data}", *common, *args.set])
        dev, test = reports[row]
        print(f"{row}: CLUENER dev micro {dev['micro']['f1'] * 100:.2f}, MSRA test micro {test['micro']['f1'] * 100:.2f}",
              flush=True)
    labels = sorted(next(iter(reports.values()))[0]["per_type"])
    print("\nCLUENER dev F1\n\n| train | " + " | ".join(labels) + " | micro |\n|---|" + "---|" * (len(labels) + 1))
    for row, (dev, _) in reports.items():
        print(f"| {row} | " + " | ".join(f"{dev['per_type'][t]['f1'] * 100:.2f}" for t in labels)
              + f" | {dev['micro']['f1'] * 100:.2f} |")
    print("\nMSRA test F1 (PER, LOC, ORG as name, address, organization)\n\n| train | " + " | ".join(types)
          + " | micro |\n|---|" + "---|" * (len(types) + 1))
    for row, (_, test) in reports.items():
        print(f"| {row} | " + " | ".join(f"{test['per_type'][t]['f1'] * 100:.2f}" for t in types)
              + f" | {test['micro']['f1'] * 100:.2f} |")


if __name__ == "__main__":
    main()
