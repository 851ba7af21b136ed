"""This project's heads against PaddleNLP's own GlobalPointer layer, side by side in one run.

    python bench/vs_paddlenlp.py [--encoder m3e-small] [--texts 512] [--batch-size 16] [--repeats 3]

Same encoder weights, same CLUENER dev texts and windows, same batch size, same loss (the sparse
multilabel cross-entropy applied to either head's logits, each masked by its own head: the peer
subtracts 1e12 from padding and the lower triangle, ours adds -1e4 there and on special tokens).
Training: median seconds of a full optimizer step.  The three models are timed in turns.  Prediction: texts -> entities with character offsets, the peer decoded the way its
examples do (np.where over the logits, then a Python loop).  Untrained heads score about half of all
cells above 0, where a trained one finds a few spans per text; --threshold (the same for both) keeps
the decoded spans few, and the table shows how many were found.
"""
import argparse
import copy
import tempfile

import numpy as np
import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
import paddle

from common import Rows, cluener_texts, interleaved_medians, median_seconds, real_batches, setup, span_model
from globalpointer.model.backends import PaddleInferenceModel
from globalpointer.deploy.export import save_static
from globalpointer.inference.extractor import Extractor
from globalpointer.runtime import cpu_thread_count
from peer import Peer

NUM_TYPES = 10  # CLUENER's


def peer_extract(model, batches, featurizer, threshold=0.0):
    entities = []
    with paddle.no_grad():
        for inputs in batches:
            logits = model(**inputs).numpy()
            for b, t, start, end in zip(*np.where(logits > threshold)):
                if 0 < start <= end:
                    entities.append((b, t, start, end, float(logits[b, t, start, end])))
    return entities


def train_step(model, batches, optimizer):
    state = {"i": 0}

    def run():
        inputs, gold = batches[state["i"] % len(batches)]
        state["i"] += 1
        logits = model(**inputs)
        loss, _ = model.head.loss(logits, gold, inputs["span_text"])
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    return run


def extract(model, name, encoder, featurizer, texts, args):
    """texts -> entities, the way each side's users would do it; returns how many were found."""
    if name.startswith("ours"):
        extractor = Extractor(model, featurizer, [str(i) for i in range(NUM_TYPES)], threshold=args.threshold,
                              batch_size=args.batch_size)
        return lambda: sum(map(len, extractor.extract(texts)))
    return lambda: len(peer_extract(model, real_batches(encoder, texts, args.batch_size)[0], featurizer,
                                    args.threshold))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoder", default="m3e-small")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=8.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="CPU math threads (0: all cores)")
    parser.add_argument("--export", action="store_true",
                        help="also predict with the efficient head exported to Paddle Inference (timed last)")
    args = parser.parse_args()
    setup(args.device, args.threads)
    texts = cluener_texts(args.texts)
    encoder, ours_gp = span_model(args.encoder, "global_pointer", NUM_TYPES)
    _, ours_egp = span_model(args.encoder, "efficient_global_pointer", NUM_TYPES)
    ours_egp.encoder.set_state_dict(encoder.model.state_dict())
    peer = Peer(copy.deepcopy(encoder.model), NUM_TYPES)
    batches, featurizer = real_batches(encoder, texts, args.batch_size)
    rng = np.random.default_rng(0)
    train_batches = [(b, paddle.to_tensor(np.stack([[(rng.integers(NUM_TYPES), 1, 2)]] * b["input_ids"].shape[0])))
                     for b in batches[: args.train_steps]]

    models = {"ours global_pointer": ours_gp, "ours efficient_global_pointer": ours_egp,
              "paddlenlp GlobalPointer": peer}
    train = {name: train_step(model, train_batches, paddle.optimizer.AdamW(1e-5, parameters=model.parameters()))
             for name, model in models.items()}
    predict = {name: extract(model, name, encoder, featurizer, texts, args) for name, model in models.items()}
    for model in models.values():
        model.train()
    step = interleaved_medians(train, args.repeats * args.train_steps, warmup=2)
    for model in models.values():
        model.eval()
    seconds = interleaved_medians(predict, args.repeats, warmup=1)
    if args.export:
        # Timed after the others, not in turns: a Paddle Inference predictor's threads slow the
        # dynamic graph's ops that run between its calls (measured: -40% texts/s for all three).
        directory = tempfile.mkdtemp()
        save_static(ours_egp, directory)
        exported = PaddleInferenceModel(directory, tril_mask=True, threads=cpu_thread_count(args.threads, 1))
        name = "ours efficient_global_pointer, exported"
        predict[name] = extract(exported, "ours", encoder, featurizer, texts, args)
        seconds[name] = median_seconds(predict[name], args.repeats, warmup=1)
    rows = Rows()
    for name in predict:
        rows.add({"model": name, "train_steps_per_s": round(1 / step[name], 3) if name in step else "-",
                  "predict_texts_per_s": round(len(texts) / seconds[name], 1), "spans_found": predict[name]()})
    peer_row = next(row for row in rows.rows if row["model"] == "paddlenlp GlobalPointer")
    for row in rows.rows:
        row["train_vs_peer"] = (f"{row['train_steps_per_s'] / peer_row['train_steps_per_s']:.2f}x"
                                if row["train_steps_per_s"] != "-" else "-")
        row["predict_vs_peer"] = f"{row['predict_texts_per_s'] / peer_row['predict_texts_per_s']:.2f}x"
    rows.finish()


if __name__ == "__main__":
    main()
