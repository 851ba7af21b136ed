"""Relation models on sets nobody tuned on (docs/results.md, "Relations on small and new sets").

    python bench/small_relations.py --sets hand,conll04:30,conll04:100 --out runs/small-relations
    python bench/small_relations.py --sets conll04:30 --set train.head_lr=3e-3 --out runs/small-relations-lr

Each set is trained with a config that sets only its data (as a user's first config does), and any
``--set``: ``hand`` is ``data/hand-relations`` (24 sentences written for it), ``SET:N`` the first N
texts of a public relation set's training file (``conll04``, ``scierc``, ``duie2-subset``) with the
first ``--dev`` texts of its dev file that name only types those N teach.  Prints, per run, the best
dev strict triple F1, then with the minimum scores ``train.calibrate`` fits on the dev file, the dev
triples whose two entities the best checkpoint found (at the default scores), the evaluation the best
was reached at, the evaluations run, and the dev triple F1 at each.
"""
import argparse
import csv
import json
import os
import sys
import time

import yaml

from common import SHARED, Rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV_FILES = {"conll04": "valid.json", "scierc": "dev.json", "duie2-subset": "dev.json"}


def records_of(path: str):
    """A relation file's records as the readers give them (JSON lines or a JSON array)."""
    text = open(path, encoding="utf-8").read()
    return json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines()
                                                                   if line.strip()]


def type_names(record: dict) -> set:
    """The entity and relation types a record names, as the project's readers read them (a DuIE
    complex object's slots are relation types PREDICATE@SLOT of their own)."""
    from globalpointer.data.json_formats import parse_record, record_format

    read = parse_record(record, record_format(record) or "jsonl", "a slice's record")
    return {e.type for e in read.entities} | {r.type for r in read.relations}


def slice_file(records, count: int, target: str) -> str:
    with open(target, "w", encoding="utf-8") as out:
        for record in records[:count]:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return target


def set_files(name: str, out: str, dev_count: int):
    """(train, dev) of a set named on the command line."""
    if name == "hand":
        folder = os.path.join(ROOT, "data", "hand-relations")
        return os.path.join(folder, "train.json"), os.path.join(folder, "dev.json")
    corpus, count = name.split(":")
    folder = os.path.join(SHARED, "relations", corpus)
    train_records = records_of(os.path.join(folder, "train.json"))[:int(count)]
    known = set().union(*map(type_names, train_records))
    # dev texts whose types the slice teaches: a dev file naming another type is refused, as a user's would be
    dev_records = [r for r in records_of(os.path.join(folder, DEV_FILES[corpus])) if type_names(r) <= known]
    return (slice_file(train_records, int(count), os.path.join(out, f"{corpus}-{count}.train.json")),
            slice_file(dev_records, dev_count, os.path.join(out, f"{corpus}-{count}.dev.json")))


def train_run(run: str, train: str, dev: str, overrides) -> dict:
    from globalpointer.cli import train_main

    config = os.path.join(run + ".yaml")
    with open(config, "w", encoding="utf-8") as out:
        yaml.safe_dump({"data": {"train": train, "dev": dev}, "output_dir": run}, out)
    started = time.perf_counter()
    arguments = ["--config", config, "--overwrite"] + [part for o in overrides for part in ("--set", o)]
    if train_main(arguments) != 0:
        raise SystemExit(f"{run}: training failed")
    summary = json.load(open(os.path.join(run, "summary.json"), encoding="utf-8"))
    with open(os.path.join(run, "metrics.csv"), encoding="utf-8") as metrics:
        curve = [round(100 * float(row["f1"]), 2) for row in csv.DictReader(metrics)]
    relations = json.load(open(os.path.join(run, "dev_report.json"), encoding="utf-8"))["relations"]
    fitted = json.load(open(os.path.join(run, "best", "thresholds.json"), encoding="utf-8"))  # train.calibrate's
    return {"best": round(100 * summary["best_dev_f1"], 2), "fitted": round(100 * fitted["micro_f1"]["after"], 2),
            "entities_found": f"{relations['entities_found']}/{relations['micro']['support']}",
            "best_eval": curve.index(max(curve)) + 1 if curve else 0,
            "evals": len(curve), "steps": summary["steps"], "seconds": round(time.perf_counter() - started),
            "curve": " ".join(map(str, curve))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="hand,conll04:30,conll04:100")
    parser.add_argument("--dev", type=int, default=100, help="dev texts of a public set")
    parser.add_argument("--set", action="append", default=[], help="a config override for every run")
    parser.add_argument("--out", default="runs/small-relations")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = Rows()
    for name in args.sets.split(","):
        train, dev = set_files(name, args.out, args.dev)
        run = os.path.join(args.out, name.replace(":", "-"))
        rows.add({"set": name, "settings": " ".join(args.set) or "defaults", **train_run(run, train, dev, args.set)})
    rows.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
