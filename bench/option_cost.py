"""What a model option costs prediction: texts/s of two models per backend, timed in turns.

    python bench/option_cost.py --model RUN_A/best --export RUN_A/export \
        --baseline RUN_B/best --baseline-export RUN_B/export [--texts 512] [--repeats 5]

Each model's checkpoint runs on the dynamic graph and its export on ONNX Runtime (float32); the same
CLUENER dev texts go through ``ner.pipe``, the two models of a backend timed in turns (a, b, a, b),
so ``ratio`` (the model's texts/s over the baseline's) stays fair on a busy machine.  Issue #57: an
option may cost at most 15% of prediction's texts/s, or the docs say what it costs.
"""
import argparse
import os

from common import Rows, cluener_texts, interleaved_medians
import globalpointer
from globalpointer import cpu_math


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint with the option (RUN/best)")
    parser.add_argument("--export", required=True, help="its export (globalpointer export --onnx)")
    parser.add_argument("--baseline", required=True, help="a checkpoint without it")
    parser.add_argument("--baseline-export", required=True, help="the baseline's export")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores")
    texts = cluener_texts(args.texts)
    rows = Rows()
    for backend, model, baseline in (("dynamic", args.model, args.baseline),
                                     ("onnxruntime", args.export, args.baseline_export)):
        ours, theirs = globalpointer.load(model, backend=backend), globalpointer.load(baseline, backend=backend)
        seconds = interleaved_medians({"model": lambda: list(ours.pipe(texts)),
                                       "baseline": lambda: list(theirs.pipe(texts))}, args.repeats, warmup=1)
        rows.add({"backend": backend, "model texts/s": f"{len(texts) / seconds['model']:.1f}",
                  "baseline texts/s": f"{len(texts) / seconds['baseline']:.1f}",
                  "ratio": f"{seconds['baseline'] / seconds['model']:.3f}"})
    rows.finish()


if __name__ == "__main__":
    main()
