"""What the head, loss and decode add to the encoder's time.

    python bench/overhead.py [--encoder m3e-small] [--batch-size 8] [--repeats 5]

Prediction: encoder forward alone vs model forward + decode.  Training: encoder forward + backward
alone vs model forward + loss + backward.  Same batch for both, timed in turns; medians;
ratio = full / encoder.
Untrained heads score about half of all cells above 0; --threshold keeps the decoded spans as few as
a trained model's (the spans column shows how many).
"""
import argparse

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
import paddle

from common import Rows, interleaved_medians, setup, span_model, synthetic_batch


def encoder_only(model, inputs, train: bool):
    def run():
        hidden = model.encoder(input_ids=inputs["input_ids"], attention_mask=inputs["token_text"])[0]
        if train:
            hidden.mean().backward()
            model.clear_gradients()
    return run


def full(model, inputs, gold, train: bool, threshold: float = 8.0):
    def run():
        logits = model(**inputs)
        if train:
            loss, _ = model.head.loss(logits, gold, inputs["span_text"])
            loss.backward()
            model.clear_gradients()
        else:
            return model.head.decode(logits, inputs["span_text"], threshold)
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="m3e-small")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--types", default="10,50")
    parser.add_argument("--threshold", type=float, default=8.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="CPU math threads (0: all cores)")
    args = parser.parse_args()
    setup(args.device, args.threads)
    rows = Rows()
    for head in ("global_pointer", "efficient_global_pointer"):
        for num_types in map(int, args.types.split(",")):
            encoder, model = span_model(args.encoder, head, num_types)
            for length in map(int, args.lengths.split(",")):
                inputs, gold = synthetic_batch(encoder, args.batch_size, length, num_types)
                row = {"head": head, "types": num_types, "length": length}
                for mode, train in (("predict", False), ("train", True)):
                    model.train() if train else model.eval()
                    with paddle.set_grad_enabled(train):
                        seconds = interleaved_medians({"encoder": encoder_only(model, inputs, train),
                                                       "full": full(model, inputs, gold, train, args.threshold)},
                                                      args.repeats)
                    base, total = seconds["encoder"], seconds["full"]
                    row[f"{mode}_encoder_s"] = f"{base:.3f}"
                    row[f"{mode}_full_s"] = f"{total:.3f}"
                    row[f"{mode}_ratio"] = f"{total / base:.3f}"
                with paddle.no_grad():
                    model.eval()
                    row["spans"] = sum(map(len, full(model, inputs, gold, False, args.threshold)()))
                rows.add(row)
    rows.finish()


if __name__ == "__main__":
    main()
