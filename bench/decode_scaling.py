"""How a text's length costs when the model finds many candidate spans: one text against the same
characters as short texts, at several lengths.

    python bench/decode_scaling.py --model RUN/best [--min-score 0.000001] [--lengths 6000,12000,24000]

A low ``model.min_score`` makes any model propose many spans, as an undertrained one does; flat
decoding then keeps a non-overlapping set of them, and its cost must grow with the candidates, not
their square (``decode.select_flat``).  Texts: ``data/cluener-sample/raw.txt`` repeated.  Medians of
``--repeats`` runs; one text and short texts timed in turns.
"""
import argparse
import os

from common import interleaved_medians
import globalpointer
from globalpointer import cpu_math

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--min-score", type=float, default=1e-6)
    parser.add_argument("--lengths", default="6000,12000,24000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ner = globalpointer.load(args.model, [f"model.min_score={args.min_score}", "model.decode=flat"])
    pool = open(os.path.join(ROOT, "data", "cluener-sample", "raw.txt"), encoding="utf-8").read().replace("\n", "")
    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores; {args.model}, model.min_score={args.min_score}")
    print(f"{'characters':>10} {'entities':>9} {'one text s':>11} {'short texts s':>14} {'ratio':>6}")
    for length in map(int, args.lengths.split(",")):
        text = (pool * (length // len(pool) + 1))[:length]
        pieces = [text[i:i + 100] for i in range(0, length, 100)]
        found = ner(text)
        seconds = interleaved_medians({"one": lambda: ner(text), "short": lambda: list(ner.pipe(pieces))},
                                      args.repeats, warmup=1)
        print(f"{length:>10} {len(found):>9} {seconds['one']:>11.2f} {seconds['short']:>14.2f} "
              f"{seconds['one'] / seconds['short']:>6.2f}")


if __name__ == "__main__":
    main()
