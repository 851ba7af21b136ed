"""Prediction with short texts side by side in shared rows (``inference.row_tokens``), against a row per text.

    python bench/packed_rows.py --model RUN/best|EXPORT [--backend auto] [--row-tokens 0,64,128,256]
        [--calls 16,512] [--texts 1024] [--repeats 3]

For each call size (texts per ``pipe`` call: 16 as the service's micro-batches of 16 one-text clients
make them, 512 as predict.py's chunks) and each ``row_tokens``, CLUENER dev texts are predicted in
calls of that size, every setting timed in turns.  ``padding`` is the share of the token slots of
the forward passes that hold no token; ``vs 0`` is the setting's texts/s over a row per text's.
The host and numpy's float32 GEMM rate are printed first: compare numbers within one run only.
"""
import argparse
import os

from common import Rows, cluener_texts, interleaved_medians
import globalpointer
from globalpointer.data.batching import pack_rows, padding_aware_batches
from machine import gemm_rates


def padding_share(ner, texts, call: int) -> float:
    """Of the token slots of every forward pass, the share that is padding, as ``Extractor.extract`` batches."""
    extractor, slots, tokens = ner.extractor, 0, 0
    for start in range(0, len(texts), call):
        windows = [w for i, text in enumerate(texts[start:start + call])
                   for w in extractor.text_encoder.windows(i, extractor.text_encoder.tokenize(text))]
        lengths = [len(w.input_ids) for w in windows]
        rows = pack_rows(lengths, extractor.row_tokens) if extractor.row_tokens else [[i] for i in range(len(lengths))]
        row_lengths = [sum(lengths[i] for i in row) for row in rows]
        for batch in padding_aware_batches(row_lengths, extractor.batch_size):
            slots += len(batch) * max(row_lengths[r] for r in batch)
        tokens += sum(lengths)
    return 1 - tokens / slots


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint (RUN/best) or an export")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--row-tokens", default="0,64,128,256")
    parser.add_argument("--calls", default="16,512", help="texts per pipe call")
    parser.add_argument("--texts", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"host: {globalpointer.MATH_LIBRARY}; {os.cpu_count()} cores")
    models = {int(n): globalpointer.load(args.model, backend=args.backend, inference__row_tokens=int(n))
              for n in args.row_tokens.split(",")}
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
        seconds = interleaved_medians({n: predict(ner, call) for n, ner in models.items()}, args.repeats, warmup=1)
        base = seconds.get(0)
        for n, ner in models.items():
            rows.add({"texts per call": call, "row_tokens": n, "texts/s": f"{len(texts) / seconds[n]:.1f}",
                      "padding": f"{padding_share(ner, texts, call):.1%}",
                      "vs 0": "-" if base is None else f"{base / seconds[n]:.2f}"})
    rows.finish()


if __name__ == "__main__":
    main()
