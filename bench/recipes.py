"""Training recipes side by side, several seeds each: dev F1 mean and spread, training time.

    python bench/recipes.py --config configs/cluener.yaml --seeds 1,2,3 --out runs/recipes \
        [--row baseline=] [--row fgm=train.adversarial=fgm] [--row ema=train.ema_decay=0.999] \
        [--row both=train.adversarial=fgm,train.ema_decay=0.999] [--set train.epochs=4]

The score is the best dev F1, or the test F1 where the config has no dev file (MSRA).
Each row is a name and comma-separated config overrides added to ``--set``; every (row, seed) is one
``train.py`` run into OUT/ROW-sSEED (a finished run is read, not retrained, and a stopped one is
resumed from its last checkpoint, so an interrupted comparison continues where it stopped: stop it
with SIGTERM to the train.py process, which saves after the current step).  Prints one line per run
as it finishes, then the table:
mean +- sample standard deviation and min..max of the best dev F1 over the seeds, mean seconds.
A row with EMA also gives the row of its training without the average ("NAME (trained weights)":
the best dev F1 of the weights the run trained, which are those of the same seed's run without EMA),
so ``--row ema=train.ema_decay=0.999 --row fgm+ema=...`` measures four rows in two runs per seed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from globalpointer.training.run import TRAINER_STATE
DEFAULT_ROWS = ["baseline=", "fgm=train.adversarial=fgm", "ema=train.ema_decay=0.999",
                "fgm+ema=train.adversarial=fgm,train.ema_decay=0.999"]


def run(config: str, settings, output_dir: str) -> dict:
    summary_path = os.path.join(output_dir, "summary.json")
    if not os.path.exists(summary_path):
        # a run stopped with SIGINT / SIGTERM (or killed after a checkpoint) continues; anything else restarts
        resume = os.path.exists(os.path.join(output_dir, "last", TRAINER_STATE))
        command = [sys.executable, "train.py", "--config", config, "--resume" if resume else "--overwrite",
                   "--set", f"output_dir={output_dir}"]
        for setting in settings:
            command += ["--set", setting]
        with open(output_dir + ".log", "a" if resume else "w") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    with open(summary_path) as handle:
        return json.load(handle)


def scored_f1(summary: dict, output_dir: str):
    """("dev", dev F1), or ("test", test F1) for a run without a dev file: of the best checkpoint as
    ``evaluate.py`` loads it, which must agree with what training reported."""
    split = "dev" if summary.get("best_dev_f1") is not None else "test"
    report = os.path.join(output_dir, f"{split}_report.loaded.json")
    if not os.path.exists(report):
        with open(output_dir + ".log", "a") as log:
            subprocess.run([sys.executable, "evaluate.py", "--model", os.path.join(output_dir, "best"),
                            *(["--set", "data.test="] if split == "dev" else []), "--output", report],
                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    with open(report) as handle:
        return split, json.load(handle)["micro"]["f1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", required=True, help="directory for the runs")
    parser.add_argument("--row", action="append", help="NAME=KEY=VALUE,KEY=VALUE (default: baseline, fgm, ema, both)")
    parser.add_argument("--set", action="append", default=[], help="an override for every run")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for row in args.row or DEFAULT_ROWS:
        name, _, overrides = row.partition("=")
        settings = args.set + [item for item in overrides.split(",") if item]
        scores, trained, seconds = [], [], []
        for seed in args.seeds.split(","):
            output_dir = os.path.join(args.out, f"{name}-s{seed}")
            summary = run(args.config, settings + [f"train.seed={seed}"], output_dir)
            split, f1 = scored_f1(summary, output_dir)
            scores.append(f1 * 100)
            seconds.append(summary["seconds"])
            without = summary.get("best_dev_f1_without_average")
            if without is not None:
                trained.append(without * 100)
            print(f"{name} seed {seed}: {split} F1 {scores[-1]:.2f}"
                  f"{'' if without is None else f' ({without * 100:.2f} without the average)'}, {seconds[-1]:.0f} s",
                  flush=True)
        if len(trained) == len(scores):  # the same training without the average: its own row, first
            rows.append((f"{name} (trained weights)", trained, None))
        rows.append((name, scores, statistics.mean(seconds)))
    print(f"\n{'row':<28}{split + ' F1 mean':>12}{'+-sd':>7}{'min..max':>16}{'seconds':>11}{'vs first row':>14}")
    base = statistics.mean(rows[0][1])
    for name, scores, secs in rows:
        mean, spread = statistics.mean(scores), statistics.stdev(scores) if len(scores) > 1 else 0.0
        span = f"{min(scores):.2f}..{max(scores):.2f}"
        print(f"{name:<28}{mean:>12.2f}{spread:>7.2f}{span:>16}{'(same run)' if secs is None else f'{secs:.0f}':>11}"
              f"{mean - base:>+14.2f}")


if __name__ == "__main__":
    main()
