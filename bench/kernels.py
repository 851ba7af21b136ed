"""The kernel choices behind globalpointer/span_autograd.py, timed against the plain expressions.

    python bench/kernels.py [--batch-size 8] [--types 50] [--length 128] [--device auto]

Each row computes one value two ways over ``[batch, types, L, L]`` tensors (the last over
GlobalPointer's ``[batch, types, L, 2 x 64]`` projection): the way the project does it and the
obvious one-line expression; ``ratio`` = plain / ours (above 1: ours is faster).  The
choices were made on this project's CPU; rerun this on other hardware before trusting them there.
"""
import argparse

import paddle

from common import Rows, interleaved_medians, setup
from globalpointer.rope import RotaryPositionEmbedding
from globalpointer.span_autograd import add_per_example_, broadcast_scores, logsumexp_

HEAD_SIZE = 64


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--types", type=int, default=50)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    setup(args.device)
    b, t, n = args.batch_size, args.types, args.length
    scores, per_example = paddle.randn([b, t, n, n]), paddle.randn([b, 1, n, n])
    start, end = paddle.randn([b, t, n, 1]), paddle.randn([b, t, 1, n])
    flat = scores.reshape([b, t, -1])
    rope = RotaryPositionEmbedding(HEAD_SIZE)
    # GlobalPointer's projection, [batch, L, types, query | key], to be seen as [batch, types, L, ...]
    projection = paddle.randn([b, n, t, 2 * HEAD_SIZE])

    def rotate_halves(contiguous: bool):
        # a new view each call: Paddle makes a strided view contiguous in place on its first use
        proj = projection.transpose([0, 2, 1, 3])
        if contiguous:
            proj = proj.contiguous()
        return rope(proj[..., :HEAD_SIZE]), rope(proj[..., HEAD_SIZE:])

    cases = {
        "scores += [batch, 1, L, L]": (lambda: add_per_example_(scores, per_example),
                                        lambda: scores.add_(per_example)),
        "shared + start + end": (lambda: broadcast_scores(per_example, start, end),
                                 lambda: per_example + start + end),
        "logsumexp over L x L (with a copy)": (lambda: logsumexp_(flat.clone()),
                                               lambda: paddle.logsumexp(flat, axis=-1)),
        "RoPE on query, key of a transposed projection": (lambda: rotate_halves(True),
                                                         lambda: rotate_halves(False)),
    }
    rows = Rows()
    with paddle.no_grad():
        for name, (ours, plain) in cases.items():
            seconds = interleaved_medians({"ours": ours, "plain": plain}, args.repeats)
            rows.add({"operation": name, "shape": f"{b}x{t}x{n}x{n}", "ours_ms": f"{seconds['ours'] * 1000:.1f}",
                      "plain_ms": f"{seconds['plain'] * 1000:.1f}", "ratio": f"{seconds['plain'] / seconds['ours']:.2f}"})
    rows.finish()


if __name__ == "__main__":
    main()
