"""Files labelled for different types, merged (docs/results.md, "Files labelled for some types").

    python bench/partial_types.py --out runs/partial [--seeds 1,2] [--set train.epochs=3]

The quickstart's 1,000 training texts in two halves: the first keeps only its ``name`` entities, the
second only its ``address`` ones, as two files from two annotation projects would.  Trained twice with
the quickstart's settings: the files as data entries that declare their types (``declared``), and the
same texts merged into one plain file, which teaches every missing name and address as absent
(``merged``).  Both are scored on the quickstart's dev texts, on name and address (the other types'
entities left out of the dev file).  Prints one line per run, then the table: dev F1 per type and
micro, mean over the seeds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = ("name", "address")


def cluener_lines(path, keep):
    """CLUENER records of ``path`` with only the entity types ``keep``."""
    out = []
    for line in open(path, encoding="utf-8"):
        record = json.loads(line)
        record["label"] = {kind: spans for kind, spans in record.get("label", {}).items() if kind in keep}
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def write(path, lines):
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return path


def train_run(run, overrides, extra=(), config=os.path.join(ROOT, "configs", "quickstart.yaml"), splits=("dev",)):
    """``train.py`` with ``config`` (the quickstart's) and ``overrides`` (``--set`` items) into ``run``,
    its output in ``run``.log; the report of its best checkpoint on each of ``splits`` (dev, test) as
    ``evaluate.py`` loads it (a number from a model that every reader accepts, not from the training
    process): one report for one split, else a tuple in their order."""
    command = [sys.executable, os.path.join(ROOT, "train.py"), "--config", config,
               "--set", f"output_dir={run}", "--overwrite", *extra]
    for item in overrides:
        command += ["--set", item]
    reports = []
    with open(run + ".log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
        for split in splits:
            report = os.path.join(run, f"{split}_report.loaded.json")
            only = ["--set", "data.test="] if split == "dev" else []  # evaluate.py reads test, else dev
            subprocess.run([sys.executable, os.path.join(ROOT, "evaluate.py"), "--model", os.path.join(run, "best"),
                            *only, "--output", report], check=True, stdout=log, stderr=subprocess.STDOUT)
            reports.append(json.load(open(report)))
    return reports[0] if len(reports) == 1 else tuple(reports)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/partial")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--set", action="append", default=[])
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sample = os.path.join(ROOT, "data", "cluener-sample")
    first = cluener_lines(os.path.join(sample, "train.json"), {"name"})[:500]
    second = cluener_lines(os.path.join(sample, "train.json"), {"address"})[500:]
    names = write(os.path.join(args.out, "train-name.json"), first)
    addresses = write(os.path.join(args.out, "train-address.json"), second)
    merged = write(os.path.join(args.out, "train-merged.json"), first + second)
    dev = write(os.path.join(args.out, "dev.json"), cluener_lines(os.path.join(sample, "dev.json"), set(TYPES)))
    rows = {"declared": json.dumps([{"path": names, "types": ["name"]}, {"path": addresses, "types": ["address"]}]),
            "merged": merged}
    scores = {row: [] for row in rows}
    for seed in args.seeds.split(","):
        for row, train in rows.items():
            report = train_run(os.path.join(args.out, f"{row}-s{seed}"), [
                f"data.train={train}", f"data.dev={dev}", f"data.labels={json.dumps(list(TYPES))}",
                f"train.seed={seed}", *args.set])
            found = {kind: report["per_type"][kind]["f1"] * 100 for kind in TYPES}
            found["micro"] = report["micro"]["f1"] * 100
            scores[row].append(found)
            print(f"{row} seed {seed}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()), flush=True)
    print(f"\n| files | {' | '.join(TYPES)} | micro |\n|---|" + "---|" * (len(TYPES) + 1))
    for row, found in scores.items():
        means = [statistics.mean(f[k] for f in found) for k in (*TYPES, "micro")]
        print(f"| {row} | " + " | ".join(f"{m:.2f}" for m in means) + " |")


if __name__ == "__main__":
    main()
