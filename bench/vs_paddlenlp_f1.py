"""Dev F1 of this project's heads and PaddleNLP's GlobalPointer layer, trained by the same loop.

    python bench/vs_paddlenlp_f1.py --config configs/quickstart.yaml [--set KEY=VALUE ...] [--seeds 0,1]

Every model is trained by ``globalpointer.training.loop.train`` from the one config: the same encoder
weights, windows, batches and their order, optimizer, learning rates, schedule, loss (the sparse
multilabel cross-entropy) and evaluation (Extractor + span_report); only the model differs.  The
peer is PaddleNLP's layer as it is (no dropout on the encoder output, 1e12 masks).  Runs go one
after another, so their seconds (training only; evaluation apart) are indicative;
bench/vs_paddlenlp.py times steps in turns.
"""
import argparse
import logging
import shutil
import statistics
import tempfile

from common import Rows, chosen_models, table
from globalpointer.config import load_config
from globalpointer.model.network import build_network
from globalpointer.training.loop import train
from peer import build_peer

MODELS = {"ours global_pointer": ("global_pointer", build_network),
          "ours efficient_global_pointer": ("efficient_global_pointer", build_network),
          "paddlenlp GlobalPointer": ("efficient_global_pointer", build_peer)}  # the peer is the efficient variant


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    parser.add_argument("--seeds", default="0", help="comma-separated train.seed values; each model runs once per seed")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of: {', '.join(MODELS)}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    names = chosen_models(parser, args.models, MODELS)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    work = tempfile.mkdtemp(prefix="vs_paddlenlp_f1-")
    rows, f1s, rates = Rows(), {name: [] for name in names}, {name: [] for name in names}
    try:
        for seed in seeds:
            for name in names:
                head, build = MODELS[name]
                config = load_config(args.config, args.set + [f"model.head={head}", f"train.seed={seed}",
                                                             f"output_dir={work}/{len(rows.rows)}"])
                summary = train(config, build=build)
                f1s[name].append(100 * summary["best_dev_f1"])
                training = round(summary["seconds"] - summary["eval_seconds"], 1)
                rates[name].append(summary["steps"] / training)
                rows.add({"model": name, "seed": seed, "dev_f1": round(f1s[name][-1], 2), "train_seconds": training,
                          "eval_seconds": summary["eval_seconds"], "steps_per_s": round(rates[name][-1], 3)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows.finish()
    summary = []
    peer = "paddlenlp GlobalPointer"
    for name in names:
        row = {"model": name, "runs": len(f1s[name]), "mean_dev_f1": round(statistics.mean(f1s[name]), 2),
               "min_f1": round(min(f1s[name]), 2), "max_f1": round(max(f1s[name]), 2),
               "median_steps_per_s": round(statistics.median(rates[name]), 3)}
        if peer in names:
            row["f1_minus_peer"] = f"{statistics.mean(f1s[name]) - statistics.mean(f1s[peer]):+.2f}"
        summary.append(row)
    print()
    print(table(summary))


if __name__ == "__main__":
    main()
