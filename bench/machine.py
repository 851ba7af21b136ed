"""Speed against the machine: every prediction backend and training, next to this host's float32 GEMM rate.

    python bench/machine.py --model RUN/best --export RUN/export [--texts 512] [--repeats 3] [--train-steps 8]

In one run, timed in turns: numpy's and Paddle's 1024x1024 float32 matmul (GFLOP/s), then texts/s on
CLUENER dev texts for PaddleNLP's GlobalPointer layer (dynamic graph, as its users run it, same
encoder weights), this project's dynamic graph, Paddle Inference, ONNX Runtime float32, and where
the export has them, INT8 on ONNX Runtime (model.int8.onnx) and on OpenVINO (model.int8.xml), with
OpenVINO float32 beside them when OpenVINO is installed.  Each row's share of the limit is tokens/s x FLOPs per token
/ numpy's GEMM FLOP/s (FLOPs counted from the encoder's shape: the multiply-adds of its matmuls and
attention, and the head's).  Training: optimizer steps of batch 16 windows, windows/s and their share
of the limit at 3x the forward FLOPs.  The host (CPU model, SIMD flags, MKL path) is printed first:
compare numbers within one run only.  ``GLOBALPOINTER_MKL_DISPATCH=0`` runs it with MKL's own choice.
"""
import argparse
import os
import statistics
import time
from types import SimpleNamespace

import numpy as np
import globalpointer  # first: it quiets the warnings Paddle prints on import
from globalpointer import cpu_math
import paddle

from common import SHARED, Rows, cluener_texts, interleaved_medians, median_seconds, real_batches
from globalpointer.data.public_sets import DATA_ENV
from globalpointer.inference.extractor import Extractor
from globalpointer.model.backends import int8_backends, openvino_available
from globalpointer.model_directory.layout import ONNX
from globalpointer.training.step import build_optimizer
from peer import Peer

GEMM = 1024


def gemm_rates(repeats: int) -> dict:
    """Each library timed in a block of its own, not in turns: OpenBLAS's and Paddle's thread pools
    spin after their work, and interleaved they take each other's cores (numpy measured 97-193 GFLOP/s
    that way, in turns with Paddle)."""
    a, b = np.random.rand(GEMM, GEMM).astype("float32"), np.random.rand(GEMM, GEMM).astype("float32")
    pa, pb = paddle.to_tensor(a), paddle.to_tensor(b)
    rates = {}
    for name, fn in (("numpy", lambda: a @ b), ("paddle", lambda: paddle.matmul(pa, pb).numpy())):
        time.sleep(1.0)  # let the other library's threads go idle
        rates[name] = 2 * GEMM ** 3 / median_seconds(fn, repeats=max(20, repeats * 10), warmup=5) / 1e9
    return rates


def forward_flops_per_token(encoder_config, head, num_types: int, length: float) -> float:
    """2 x multiply-adds per token of one forward pass over windows of ``length`` tokens."""
    h, inner, layers = encoder_config.hidden_size, encoder_config.intermediate_size, encoder_config.num_hidden_layers
    per_layer = 4 * h * h + 2 * h * inner + 2 * length * h  # q, k, v, out; the feed-forward; scores and mixing
    d = head.head_size
    if type(head).__name__ == "GlobalPointer":
        head_macs = h * num_types * 2 * d + num_types * length * d
    else:  # efficient head and the peer: one shared q/k pair plus per-type biases
        head_macs = h * 2 * d + 2 * d * 2 * num_types + length * d
    return 2 * (layers * per_layer + head_macs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a trained checkpoint (RUN/best)")
    parser.add_argument("--export", required=True, help="its export with model.onnx (and model.int8.onnx, "
                                                         "model.int8.xml)")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--data", default=SHARED, help=f"the folder of the public sets, holding cluener/ (default "
                                                       f"${DATA_ENV}, else ../shared/data)")
    parser.add_argument("--batch-size", type=int, default=64, help="rows per forward pass in prediction")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=8, help="timed optimizer steps per repeat")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.export, ONNX)):
        parser.error(f"--export {args.export} has no {ONNX}: export with --onnx (globalpointer export --model "
                     f"{args.model} --output {args.export} --onnx [--quantize int8])")

    print(f"host: {cpu_math.CHOSEN}; {os.cpu_count()} cores")
    ours = globalpointer.load(args.model, backend="dynamic", window_batch_size=args.batch_size)
    rates = gemm_rates(args.repeats)
    print(f"float32 GEMM {GEMM}x{GEMM}: numpy {rates['numpy']:.1f} GFLOP/s, paddle {rates['paddle']:.1f} GFLOP/s "
          f"({rates['paddle'] / rates['numpy']:.2f} of numpy)")
    limit = rates["numpy"] * 1e9

    texts = cluener_texts(args.texts, folder=args.data)
    encoder = ours.extractor.featurizer
    lengths = [len(w.input_ids) for w in encoder.text_windows(texts)]
    tokens, mean_length = sum(lengths), statistics.mean(lengths)
    model = ours.extractor.model
    flops = forward_flops_per_token(model.encoder.config, model.head, len(ours.labels), mean_length)
    print(f"{len(texts)} CLUENER dev texts, {tokens} tokens (mean window {mean_length:.1f}); "
          f"{flops / 1e6:.1f} MFLOP per token forward")

    peer = Peer(model.encoder, len(ours.labels))
    peer.eval()
    # The peer's head is untrained: at threshold 0 it would put half of all cells above it, and the
    # table would time turning millions of cells into spans; at 8 it finds none, as a trained one finds few.
    extractors = {"PaddleNLP GlobalPointer layer (dynamic)": Extractor(peer, encoder, ours.labels, threshold=8.0,
                                                                       batch_size=args.batch_size)}
    extractors["ours, dynamic graph"] = ours.extractor
    extractors["ours, Paddle Inference"] = globalpointer.load(args.export, backend="paddle-inference",
                                                              window_batch_size=args.batch_size).extractor
    extractors["ours, ONNX Runtime float32"] = globalpointer.load(args.export, backend="onnxruntime",
                                                                  window_batch_size=args.batch_size).extractor
    if openvino_available():
        extractors["ours, OpenVINO float32"] = globalpointer.load(args.export, backend="openvino",
                                                                  window_batch_size=args.batch_size).extractor
    for backend in int8_backends(args.export):
        if backend == "onnxruntime" or openvino_available():
            name = "ONNX Runtime" if backend == "onnxruntime" else "OpenVINO"
            extractors[f"ours, {name} INT8"] = globalpointer.load(args.export, backend=backend,
                                                                  inference__precision="int8",
                                                                  window_batch_size=args.batch_size).extractor
    seconds = interleaved_medians({name: (lambda e=e: e.extract(texts)) for name, e in extractors.items()},
                                  args.repeats, warmup=1)
    rows = Rows()
    peer_rate = len(texts) / seconds["PaddleNLP GlobalPointer layer (dynamic)"]
    for name, value in seconds.items():
        rows.add({"predict": name, "texts/s": round(len(texts) / value, 1), "tokens/s": round(tokens / value),
                  "x peer": round(len(texts) / value / peer_rate, 2),
                  "share of float32 GEMM limit": f"{tokens / value * flops / limit:.0%}"})
    rows.finish()
    for name in ("ONNX Runtime", "OpenVINO"):
        if f"ours, {name} INT8" in seconds:
            ratio = seconds["ours, ONNX Runtime float32"] / seconds[f"ours, {name} INT8"]
            print(f"{name} INT8 / ONNX Runtime float32: {ratio:.2f}x the texts/s (target: 3x)")

    batches, _ = real_batches(SimpleNamespace(tokenizer=encoder.tokenizer), cluener_texts(args.train_steps * 16, "train", args.data),
                              16)
    train_rows = Rows()
    model.train()
    optimizer, _ = build_optimizer(model, ours.config, total_steps=1000)
    windows = sum(int(b["input_ids"].shape[0]) for b in batches)
    train_tokens = sum(int(b["input_ids"].shape[0] * b["input_ids"].shape[1]) for b in batches)
    gold = paddle.to_tensor(np.full((16, 1, 3), -1, "int64"))

    phases = {"forward + loss": 0.0, "backward": 0.0, "optimizer (clip, AdamW, clear)": 0.0}

    def epoch():
        for inputs in batches:
            started = time.perf_counter()
            logits = model(**inputs)
            loss, _ = model.head.loss(logits, gold[:inputs["input_ids"].shape[0]], inputs["span_text"])
            float(loss)  # CPU kernels are synchronous; this keeps the phases apart on a GPU too
            middle = time.perf_counter()
            loss.backward()
            after_backward = time.perf_counter()
            optimizer.step()
            optimizer.clear_grad()
            done = time.perf_counter()
            for name, seconds in zip(phases, (middle - started, after_backward - middle, done - after_backward)):
                phases[name] += seconds

    train_seconds = interleaved_medians({"train": epoch}, args.repeats, warmup=1)["train"]
    train_flops = 3 * forward_flops_per_token(model.encoder.config, model.head, len(ours.labels),
                                              train_tokens / windows)
    train_rows.add({"train": "ours, batch 16", "windows/s": round(windows / train_seconds, 2),
                    "tokens/s": round(train_tokens / train_seconds),
                    "share of GEMM limit": f"{train_tokens / train_seconds * train_flops / limit:.0%}"})
    total = sum(phases.values())
    print("where a training step's time goes: " + ", ".join(f"{name} {value / total:.0%}"
                                                            for name, value in phases.items()))

if __name__ == "__main__":
    started = time.time()
    main()
    print(f"({time.time() - started:.0f} s)")
