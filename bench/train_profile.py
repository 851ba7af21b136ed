"""Where a training step's time goes, op by op (Paddle's profiler, CPU), on the quickstart checkpoint.

    python bench/train_profile.py --model RUN/best [--steps 5]

Batches of 16 CLUENER training windows, the project's optimizer; prints Paddle's operator summary.
"""
import argparse
from types import SimpleNamespace

import numpy as np
import globalpointer  # first: it quiets the warnings Paddle prints on import
import paddle
import paddle.profiler as profiler

from common import cluener_texts, real_batches
from globalpointer.training.step import build_optimizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a trained checkpoint (RUN/best)")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    ner = globalpointer.load(args.model, backend="dynamic")
    model = ner.extractor.model
    model.train()
    tokenizer = SimpleNamespace(tokenizer=ner.extractor.featurizer.tokenizer)
    batches, _ = real_batches(tokenizer, cluener_texts(16 * (args.steps + 1), "train"), 16)
    optimizer, _ = build_optimizer(model, ner.config, 1000)
    gold = paddle.to_tensor(np.full((16, 1, 3), -1, "int64"))

    def step(inputs):
        logits = model(**inputs)
        loss, _ = model.head.loss(logits, gold[:inputs["input_ids"].shape[0]], inputs["span_text"])
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    step(batches[0])  # warm-up
    recorder = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU])
    recorder.start()
    for inputs in batches[1:]:
        step(inputs)
        recorder.step()
    recorder.stop()
    recorder.summary(sorted_by=profiler.SortedKeys.CPUTotal, op_detail=False, thread_sep=False, time_unit="ms")


if __name__ == "__main__":
    main()
