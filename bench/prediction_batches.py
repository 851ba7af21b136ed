"""Prediction's window batches: cut where padding costs more than a forward pass, against fixed chunks.

    python bench/prediction_batches.py --model RUN/best|EXPORT [--backend auto] [--calls 1,16,512] [--texts 512]

For each call size (texts per ``pipe`` call, as the service's micro-batches or predict.py's 512-line
chunks make them), CLUENER dev texts are predicted two ways, timed in turns: the project's
``padding_aware_batches`` and the length-sorted chunks of ``inference.batch_size`` windows it
replaced.  ``ratio`` = fixed seconds / padding-aware seconds (above 1: the project's is faster).
The host and numpy's float32 GEMM rate are printed first: compare numbers within one run only.
"""
import argparse
import os

from common import Rows, cluener_texts, interleaved_medians
import globalpointer
from globalpointer import cpu_math
import globalpointer.data.batching
from globalpointer.data.batching import length_grouped_batches, padding_aware_batches
from machine import gemm_rates


def fixed_chunks(lengths, batch_size):
    return length_grouped_batches(lengths, batch_size, shuffle=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint (RUN/best) or an export")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--calls", default="1,16,512", help="texts per pipe call")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores")
    ner = globalpointer.load(args.model, backend=args.backend)
    rates = gemm_rates(args.repeats)  # after load, which gives Paddle its threads
    print(f"float32 GEMM: numpy {rates['numpy']:.1f} GFLOP/s, paddle {rates['paddle']:.1f} GFLOP/s; "
          f"{ner.backend} backend, at most {ner.extractor.batch_size} rows per forward pass")
    texts = cluener_texts(args.texts)

    def predict_with(batching, call):
        def run():
            globalpointer.data.batching.padding_aware_batches = batching  # the name prediction_batches calls
            for start in range(0, len(texts), call):
                list(ner.pipe(texts[start:start + call], batch_size=call))
        return run

    rows = Rows()
    for call in (int(c) for c in args.calls.split(",")):
        seconds = interleaved_medians({"padding-aware": predict_with(padding_aware_batches, call),
                                       "fixed": predict_with(fixed_chunks, call)}, args.repeats, warmup=1)
        rows.add({"texts per call": call, "padding-aware texts/s": f"{len(texts) / seconds['padding-aware']:.1f}",
                  "fixed chunks texts/s": f"{len(texts) / seconds['fixed']:.1f}",
                  "ratio": f"{seconds['fixed'] / seconds['padding-aware']:.2f}"})
    globalpointer.data.batching.padding_aware_batches = padding_aware_batches
    rows.finish()


if __name__ == "__main__":
    main()
