"""The kernel choices behind globalpointer/span_autograd.py, timed against the plain expressions.

    python bench/kernels.py [--batch-size 8] [--types 50] [--length 128] [--device auto]

Each row computes one value two ways: the way the project does it and the obvious expression;
``ratio`` = plain / ours (above 1: ours is faster).  The first three work on ``[batch, types, L, L]``
scores, the fourth makes GlobalPointer's query and key from 512-wide hidden states, the fifth is
RoPE's pair swap over ``[batch, types, L, 64]``; the last two are timed forward + backward, as in
training.  The choices were made on this project's CPU; rerun this on other hardware before
trusting them there.
"""
import argparse

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
import paddle

from common import Rows, interleaved_medians, setup
from globalpointer.model.rope import RotaryPositionEmbedding, rotate_pairs
from globalpointer.model.span_autograd import add_per_example_, broadcast_scores, logsumexp_

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
    hidden, weight, bias = paddle.randn([b, n, 512]), paddle.randn([512, t * 2 * HEAD_SIZE]), paddle.randn([t * 2 * HEAD_SIZE])
    queries = paddle.randn([b, t, n, HEAD_SIZE])

    def query_key_columns():  # GlobalPointer.score: the projection made as [batch, types, q | k, d, L]
        proj = paddle.matmul(weight, hidden, transpose_x=True, transpose_y=True) + bias.unsqueeze(-1)
        return rope(proj.reshape([b, t, 2, HEAD_SIZE, n]), positions_last=True)

    def query_key_rows():  # the projection as nn.Linear makes it, [batch, L, types, q | k], seen per type
        proj = (paddle.matmul(hidden, weight) + bias).reshape([b, n, t, 2 * HEAD_SIZE])
        proj = proj.transpose([0, 2, 1, 3]).contiguous()
        return rope(proj[..., :HEAD_SIZE]), rope(proj[..., HEAD_SIZE:])

    # GlobalPointer's projection, [batch, types, q | k, d, L], and the gradient that reaches it
    packed = paddle.randn([b, t, 2, HEAD_SIZE, n])
    packed.stop_gradient = False
    packed_grad = paddle.randn([b, t, 2, HEAD_SIZE, n])
    cos, sin = rope.tables(n, positions_last=True)

    def backward_through(make):
        def run():
            paddle.autograd.backward(make(), packed_grad)
            packed.clear_gradient()
        return run

    def query_key_by_slices():
        return paddle.stack([packed[:, :, 0], packed[:, :, 1]], axis=2)

    def pair_swap_by_flip():
        return paddle.flip(queries.reshape([b, t, n, HEAD_SIZE // 2, 2]), axis=[-1]).reshape([b, t, n, HEAD_SIZE])

    cases = {
        "scores += [batch, 1, L, L]": (lambda: add_per_example_(scores, per_example),
                                        lambda: scores.add_(per_example)),
        "shared + start + end": (lambda: broadcast_scores(per_example, start, end),
                                 lambda: per_example + start + end),
        "logsumexp over L x L (with a copy)": (lambda: logsumexp_(flat.clone()),
                                               lambda: paddle.logsumexp(flat, axis=-1)),
        "GlobalPointer's projection + RoPE: [.., d, L] made by the matmul vs a transposed copy": (
            query_key_columns, query_key_rows),
        "RoPE's pair swap (a, b) -> (-b, a): matmul vs flip (sign apart)": (
            lambda: paddle.matmul(queries, rope.swap, transpose_y=True), pair_swap_by_flip),
    }
    training_cases = {
        "RoPE's gradient: the opposite rotation (rope.py) vs autograd's": (
            backward_through(lambda: rope(packed, positions_last=True)),
            backward_through(lambda: rotate_pairs(packed, cos, sin, rope.swap, positions_last=True))),
        "query and key out of the projection: unbind vs two slices": (
            backward_through(lambda: paddle.stack(paddle.unbind(packed, axis=2), axis=2)),
            backward_through(query_key_by_slices)),
    }
    rows = Rows()

    def time_cases(named):
        for name, (ours, plain) in named.items():
            seconds = interleaved_medians({"ours": ours, "plain": plain}, args.repeats)
            rows.add({"operation": name, "shape": f"{b}x{t}x{n}x{n}", "ours_ms": f"{seconds['ours'] * 1000:.1f}",
                      "plain_ms": f"{seconds['plain'] * 1000:.1f}", "ratio": f"{seconds['plain'] / seconds['ours']:.2f}"})

    with paddle.no_grad():
        time_cases(cases)
    time_cases(training_cases)
    rows.finish()


if __name__ == "__main__":
    main()
