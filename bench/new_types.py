"""New types without forgetting (docs/results.md, "Adding types to a trained model").

    python bench/new_types.py --out runs/new-types [--new game,book] [--set train.epochs=3]
    python bench/new_types.py --config configs/cluener.yaml --data ../shared/data/cluener --out runs/new-types-cluener

On the quickstart's texts and settings (or ``--config`` and the ``train.json`` and ``dev.json`` of
``--data``): a model trained on every type but ``--new`` (``base``, scored
on the dev texts with the new types' entities left out), then
``train --init-from`` it with the same texts declared for the new types only (``new only``; and with
the encoder frozen, ``train.lr=0``, so that only the head learns), and with them plus the base's
training file declared for the old types (``new + old``).  The quickstart's own
config trains all the types together (``all together``, on the dev texts of ``--data``).  Prints dev F1 of the old types (micro over
them) and of each new type, for every run.
"""
import argparse
import json
import os

from partial_types import cluener_lines, train_run as train, write  # the same runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LABELS = ["address", "book", "company", "game", "government", "movie", "name", "organization", "position", "scene"]


def old_types_f1(report, old):
    rows = [report["per_type"][t] for t in old]
    correct, predicted, support = (sum(r[k] for r in rows) for k in ("correct", "predicted", "support"))
    precision, recall = correct / max(predicted, 1), correct / max(support, 1)
    return 200 * precision * recall / max(precision + recall, 1e-12)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/new-types")
    parser.add_argument("--new", default="game,book")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "quickstart.yaml"))
    parser.add_argument("--data", default=os.path.join(ROOT, "data", "cluener-sample"),
                        help="a folder with CLUENER's train.json and dev.json")
    args = parser.parse_args()
    new = args.new.split(",")
    old = [t for t in LABELS if t not in new]
    os.makedirs(args.out, exist_ok=True)
    sample = args.data
    old_file = write(os.path.join(args.out, "train-old.json"), cluener_lines(os.path.join(sample, "train.json"), set(old)))
    new_file = write(os.path.join(args.out, "train-new.json"), cluener_lines(os.path.join(sample, "train.json"), set(new)))
    old_dev = write(os.path.join(args.out, "dev-old.json"), cluener_lines(os.path.join(sample, "dev.json"), set(old)))
    base = os.path.join(args.out, "base")
    dev = os.path.join(sample, "dev.json")

    def train_with(run, overrides, extra=()):
        return train(run, [f"data.dev={dev}", *overrides], extra, args.config)

    reports = {"base": train_with(base, [f"data.train={old_file}", f"data.dev={old_dev}",
                                         f"data.labels={json.dumps(old)}", *args.set])}
    new_entry = {"path": new_file, "types": new}
    rows = (("new only", [new_entry], []), ("new only, encoder frozen", [new_entry], ["train.lr=0"]),
            ("new + old", [new_entry, {"path": old_file, "types": old}], []))
    for number, (row, entries, settings) in enumerate(rows):
        reports[row] = train_with(os.path.join(args.out, f"init-{number}"),
                                  [f"data.train={json.dumps(entries)}", f"data.labels={json.dumps(LABELS)}", *settings,
                                   *args.set], ["--init-from", os.path.join(base, "best")])
    reports["all together"] = train_with(os.path.join(args.out, "all"),
                                         [f"data.train={os.path.join(sample, 'train.json')}", *args.set])
    print(f"| run | old types ({len(old)}) | " + " | ".join(new) + " |\n|---|---|" + "---|" * len(new))
    for row, report in reports.items():
        cells = [f"{report['per_type'][t]['f1'] * 100:.2f}" if t in report["per_type"] else "-" for t in new]
        print(f"| {row} | {old_types_f1(report, old):.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
