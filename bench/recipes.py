"""Training recipes side by side, several seeds each: dev F1 mean and spread, training time.

    python bench/recipes.py --config configs/cluener.yaml --seeds 1,2,3 --out runs/recipes \
        [--row baseline=train.adversarial=none] [--row fgm=train.adversarial=fgm] [--set train.epochs=4]

The score is the best dev F1, or the test F1 where the config has no dev file (MSRA).

A study of recipes as users meet them (issue #57): ``--train-texts N`` trains on the first N texts of
data.train, ``--dev-texts M`` selects (best checkpoint, early stopping) on the first M texts of
data.dev and scores the rest of data.dev, which no run's choice saw; ``--data-only`` starts every
row from the config's data section and encoder alone (what a user who sets only the data gets), and a
row ``NAME=@CONFIG[,KEY=VALUE...]`` takes the model and train sections of a shipped config:

    python bench/recipes.py --config configs/cluener.yaml --data-only --train-texts 1000 --dev-texts 200 \
        --out runs/study/cluener-1k --row default= --row shipped=@configs/cluener.yaml ...
Each row is a name and comma-separated config overrides added to ``--set``; every (row, seed) is one
``train.py`` run into OUT/ROW-sSEED (a finished run is read, not retrained, and a stopped one is
resumed from its last checkpoint, so an interrupted comparison continues where it stopped: stop it
with SIGTERM to the train.py process, which saves after the current step).  Prints one line per run
as it finishes, then the table:
mean +- sample standard deviation and min..max of the best dev F1 over the seeds, mean seconds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from globalpointer.config import RunConfig, flatten_config, load_config, yaml_scalar
from globalpointer.data.readers import read_records, write_jsonl_records
from globalpointer.training.run import can_resume
# without FGM spelled out: train.adversarial auto turns it on above train.large_training_set texts
DEFAULT_ROWS = ["baseline=train.adversarial=none", "fgm=train.adversarial=fgm"]


def run(config: str, settings, output_dir: str) -> dict:
    summary_path = os.path.join(output_dir, "summary.json")
    if not os.path.exists(summary_path):
        resume = can_resume(output_dir)  # a stopped run continues; anything else starts again
        command = [sys.executable, "train.py", "--config", config, "--resume" if resume else "--overwrite",
                   "--set", f"output_dir={output_dir}"]
        for setting in settings:
            command += ["--set", setting]
        with open(output_dir + ".log", "a" if resume else "w") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    with open(summary_path) as handle:
        return json.load(handle)


def scored_f1(summary: dict, output_dir: str, score_file: str = ""):
    """("dev", dev F1), or ("test", test F1) for a run without a dev file, or ("held-out", F1) on
    ``score_file``: of the best checkpoint as ``evaluate.py`` loads it (with the thresholds training
    fitted on the dev file, ``train.calibrate``: on dev, above what training reported for it)."""
    split = "held-out" if score_file else "dev" if summary.get("best_dev_f1") is not None else "test"
    report = os.path.join(output_dir, f"{split}_report.loaded.json")
    if not os.path.exists(report):
        data = ["--data", score_file] if score_file else ["--set", "data.test="] if split == "dev" else []
        with open(output_dir + ".log", "a") as log:
            subprocess.run([sys.executable, "evaluate.py", "--model", os.path.join(output_dir, "best"), *data,
                            "--output", report], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    with open(report) as handle:
        return split, json.load(handle)["micro"]["f1"]


def sliced_data(config: RunConfig, out: str, train_texts: int, dev_texts: int) -> dict:
    """Training and dev slices of ``config``'s files as JSON lines under OUT/data: {data key: value},
    and "score": the dev texts after the first ``dev_texts`` (held out from every choice a run makes)."""
    data, folder = config.data, os.path.join(out, "data")
    os.makedirs(folder, exist_ok=True)
    train = read_records(data.train, data.format)
    dev = read_records(data.dev, data.format)
    if train_texts > len(train) or dev_texts >= len(dev):
        raise SystemExit(f"{data.train} has {len(train)} texts, {data.dev} {len(dev)}: slices too large")
    files = {"data.train": (train[:train_texts or len(train)], f"train-{train_texts or len(train)}.jsonl"),
             "data.dev": (dev[:dev_texts], f"dev-first-{dev_texts}.jsonl"),
             "score": (dev[dev_texts:], f"dev-after-{dev_texts}.jsonl")}
    paths = {}
    for key, (records, name) in files.items():
        paths[key] = os.path.abspath(os.path.join(folder, name))
        write_jsonl_records(records, paths[key])
    return {**paths, "data.format": "jsonl", "data.test": ""}


def data_only_config(config_path: str, out: str, data: dict) -> str:
    """OUT/config.yaml: the data section of ``config_path`` (its files replaced by ``data``) and its
    encoder, nothing else: the config of a user who sets only their data."""
    flat = flatten_config(load_config(config_path))
    keep = {key: value for key, value in flat.items() if key.startswith("data.") or key == "model.encoder"}
    keep.update({key: value for key, value in data.items() if key != "score"})
    tree: dict = {}
    for key, value in keep.items():
        section, name = key.split(".", 1)
        tree.setdefault(section, {})[name] = value
    path = os.path.join(out, "config.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(tree, handle, allow_unicode=True)
    return path


def recipe_settings(config_path: str) -> list:
    """The model and train keys of ``config_path`` that differ from the defaults, as --set items (its
    encoder aside: a row's recipe, not its data)."""
    ours, defaults = flatten_config(load_config(config_path)), flatten_config(RunConfig())
    return [f"{key}={yaml_scalar(value)}" for key, value in ours.items()
            if key.split(".")[0] in ("model", "train") and key != "model.encoder" and value != defaults[key]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", required=True, help="directory for the runs")
    parser.add_argument("--row", action="append", help="NAME=KEY=VALUE,KEY=VALUE (default: baseline, fgm)")
    parser.add_argument("--set", action="append", default=[], help="an override for every run")
    parser.add_argument("--train-texts", type=int, default=0, help="train on the first N texts of data.train")
    parser.add_argument("--dev-texts", type=int, default=0,
                        help="select on the first N texts of data.dev, score on the rest of it")
    parser.add_argument("--data-only", action="store_true",
                        help="rows start from the config's data section and encoder alone; NAME=@CONFIG takes the "
                             "model and train sections of CONFIG")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    config, score_file, data = args.config, "", {}
    if args.train_texts or args.dev_texts:
        data = sliced_data(load_config(args.config), args.out, args.train_texts, args.dev_texts)
        score_file = data["score"]
    if args.data_only:
        config = data_only_config(args.config, args.out, data)
    data_settings = [] if args.data_only else [f"{key}={value}" for key, value in data.items() if key != "score"]
    rows = []
    for row in args.row or DEFAULT_ROWS:
        name, _, overrides = row.partition("=")
        items = [item for item in overrides.split(",") if item]
        recipe = recipe_settings(items.pop(0)[1:]) if items and items[0].startswith("@") else []
        settings = data_settings + args.set + recipe + items
        scores, seconds = [], []
        for seed in args.seeds.split(","):
            output_dir = os.path.join(args.out, f"{name}-s{seed}")
            summary = run(os.path.abspath(config), settings + [f"train.seed={seed}"], output_dir)
            split, f1 = scored_f1(summary, output_dir, score_file)
            scores.append(f1 * 100)
            seconds.append(summary["seconds"])
            print(f"{name} seed {seed}: {split} F1 {scores[-1]:.2f}, {seconds[-1]:.0f} s", flush=True)
        rows.append((name, scores, statistics.mean(seconds)))
    print(f"\n{'row':<28}{split + ' F1 mean':>12}{'+-sd':>7}{'min..max':>16}{'seconds':>11}{'vs first row':>14}")
    base = statistics.mean(rows[0][1])
    for name, scores, secs in rows:
        mean, spread = statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0
        span = f"{min(scores):.2f}..{max(scores):.2f}"
        print(f"{name:<28}{mean:>12.2f}{spread:>7.2f}{span:>16}{f'{secs:.0f}':>11}"
              f"{mean - base:>+14.2f}")


if __name__ == "__main__":
    main()
