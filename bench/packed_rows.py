"""Prediction with short texts side by side in shared rows (what prediction does), against a row per text.

    python bench/packed_rows.py --model RUN/best|EXPORT [--backend auto] [--calls 16,512] [--texts 1024]
        [--repeats 3]

For each call size (texts per ``pipe`` call: 16 as the service's micro-batches of 16 one-text clients
make them, 512 as predict.py's chunks), CLUENER dev texts are predicted in calls of that size with
and without shared rows, timed in turns.  ``padding`` is the share of the token slots of the forward
passes that hold no token, ``forward passes`` how many there were; ``ratio`` is texts/s with shared
rows over texts/s without.
The host and numpy's float32 GEMM rate are printed first: compare numbers within one run only.
"""
import argparse
import os

from common import Rows, cluener_texts, interleaved_medians
import globalpointer
from globalpointer import cpu_math
from globalpointer.data.batching import prediction_batches
from machine import gemm_rates


def batch_shapes(ner, texts, call: int):
    """(share of the forward passes' token slots that is padding, forward passes), as ``Extractor.extract`` batches."""
    extractor, slots, tokens, passes = ner.extractor, 0, 0, 0
    for start in range(0, len(texts), call):
        lengths = [len(w.input_ids) for w in extractor.featurizer.text_windows(texts[start:start + call])]
        for batch in prediction_batches(lengths, extractor.batch_size, extractor.pack_texts):
            slots += len(batch) * max(sum(lengths[i] for i in row) for row in batch)
            passes += 1
        tokens += sum(lengths)
    return 1 - tokens / slots, passes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint (RUN/best) or an export")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--calls", default="16,512", help="texts per pipe call")
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores")
    models = {packed: globalpointer.load(args.model, backend=args.backend) for packed in (False, True)}
    models[False].extractor.pack_texts = False
    rates = gemm_rates(args.repeats)  # after load, which gives Paddle its threads
    first = next(iter(models.values()))
    print(f"float32 GEMM: numpy {rates['numpy']:.1f} GFLOP/s, paddle {rates['paddle']:.1f} GFLOP/s; "
          f"{first.backend} backend, at most {first.extractor.batch_size} rows per forward pass")
    texts = cluener_texts(args.texts)

    def predict(ner, call):
        def run():
            for start in range(0, len(texts), call):
                list(ner.pipe(texts[start:start + call], batch_size=call))
        return run

    rows = Rows()
    for call in (int(c) for c in args.calls.split(",")):
        seconds = interleaved_medians({packed: predict(ner, call) for packed, ner in models.items()}, args.repeats,
                                      warmup=1)
        for packed, ner in models.items():
            padding, passes = batch_shapes(ner, texts, call)
            rows.add({"texts per call": call, "shared rows": "yes" if packed else "no",
                      "texts/s": f"{len(texts) / seconds[packed]:.1f}", "padding": f"{padding:.1%}",
                      "forward passes": passes, "ratio": f"{seconds[False] / seconds[packed]:.2f}"})
    rows.finish()


if __name__ == "__main__":
    main()
