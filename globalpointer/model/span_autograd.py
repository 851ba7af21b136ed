"""The ``[batch, types, L, L]`` computations of training, with hand-written backward passes.

Autograd's versions of these few lines keep several full-size temporaries alive at once (at
8 x 50 x 512 x 512 each is 420 MB; the broadcast addition of the efficient head's scores adds
three in its backward pass, the sparse loss's copy, logsumexp and gather two more).  Written out,
the efficient head's scores + loss + backward peak at two tensors of that size (the logits and one
copy or gradient) instead of five: measured, 2.1 against 5.1 times 420 MB.
Each function here computes exactly what the one-line autograd expression in its docstring does; the
tests hold them to it, values and gradients.  In a static graph (export) the plain expression runs.
The float64 formulas behind both: ``reference.py``.
"""
import paddle
from paddle.autograd import PyLayer

from .masks import MASKED_LOGIT


def add_per_example_(scores: paddle.Tensor, per_example: paddle.Tensor) -> paddle.Tensor:
    """``scores`` ``[batch, types, L, L]`` += ``per_example`` ``[batch, 1, L, L]``, in place, one
    example at a time: Paddle's CPU kernel is fast for ``[types, L, L] + [L, L]`` (the broadcast axis
    leads) and 8.7x slower for the same sum over ``[batch, ...]`` (at 8 x 50 x 128², bench/kernels.py)."""
    for b in range(scores.shape[0]):
        scores[b].add_(per_example[b, 0])
    return scores


def logsumexp_(x: paddle.Tensor) -> paddle.Tensor:
    """logsumexp over the last axis, overwriting ``x``: written out, as paddle.logsumexp takes 2.8x
    as long on CPU (bench/kernels.py)."""
    top = x.max(axis=-1, keepdim=True)
    return x.subtract_(top).exp_().sum(axis=-1).log() + top.squeeze(-1)


class _PairwiseScores(PyLayer):
    @staticmethod
    def forward(ctx, query, key, mask_bias):
        ctx.save_for_backward(query, key)
        return add_per_example_(paddle.matmul(query, key, transpose_x=True), mask_bias)

    @staticmethod
    def backward(ctx, grad):
        query, key = ctx.saved_tensor()
        # scores = q^T k: d(q) = k grad^T, d(k) = q grad; the matmuls read grad transposed in place
        return paddle.matmul(key, grad, transpose_y=True), paddle.matmul(query, grad), None


def pairwise_scores(query: paddle.Tensor, key: paddle.Tensor, mask_bias: paddle.Tensor) -> paddle.Tensor:
    """``matmul(query, key, transpose_x=True) + mask_bias``: query/key ``[batch, types, d, L]``
    (one column per position), ``mask_bias`` ``[batch, 1, L, L]`` (no gradient)."""
    if not paddle.in_dynamic_mode():
        return paddle.matmul(query, key, transpose_x=True) + mask_bias
    return _PairwiseScores.apply(query, key, mask_bias)


class _BroadcastScores(PyLayer):
    @staticmethod
    def forward(ctx, shared, start, end):
        # start_i + end_j as a matmul of inner size 2, [start_i, 1] . [1, end_j]: it writes the
        # [batch, types, L, L] output once, where broadcasting additions take 5.5x as long (bench/kernels.py)
        ones = paddle.ones_like(start)
        rows = paddle.concat([start, ones], axis=-1)
        columns = paddle.concat([ones, end.transpose([0, 1, 3, 2])], axis=-1)
        return add_per_example_(paddle.matmul(rows, columns, transpose_y=True), shared)

    @staticmethod
    def backward(ctx, grad):
        return grad.sum(axis=1, keepdim=True), grad.sum(axis=3, keepdim=True), grad.sum(axis=2, keepdim=True)


def broadcast_scores(shared: paddle.Tensor, start: paddle.Tensor, end: paddle.Tensor) -> paddle.Tensor:
    """``shared + start + end``: ``[batch, 1, L, L]``, ``[batch, types, L, 1]`` and
    ``[batch, types, 1, L]`` to ``[batch, types, L, L]``."""
    if not paddle.in_dynamic_mode():
        return shared + start + end
    return _BroadcastScores.apply(shared, start, end)


class _NegativesAndGold(PyLayer):
    @staticmethod
    def forward(ctx, logits, cell, keep):
        batch, num_types = logits.shape[0], logits.shape[1]
        scores = logits.reshape([batch, -1])  # a view, as is every reshape here
        gold_scores = paddle.take_along_axis(scores, cell, axis=1)
        gold_scores = paddle.where(keep, gold_scores, paddle.zeros_like(gold_scores))
        # kept cells as indices into the flat logits: scatter_ assigns in place, where
        # put_along_axis_(reduce="add") would make a full-size temporary copy (measured)
        offsets = paddle.arange(batch, dtype="int64").unsqueeze(1) * scores.shape[1]
        kept = paddle.masked_select(cell + offsets, keep)
        kept_scores = paddle.masked_select(gold_scores, keep)
        negatives = logits.flatten().clone()
        if kept.shape[0]:
            negatives.scatter_(kept, kept_scores + MASKED_LOGIT, overwrite=True)
        lse = logsumexp_(negatives.reshape([batch, num_types, -1]))
        del negatives
        ctx.save_for_backward(logits, keep, kept, kept_scores, lse)
        return lse, gold_scores

    @staticmethod
    def backward(ctx, d_lse, d_gold):
        logits, keep, kept, kept_scores, lse = ctx.saved_tensor()
        batch, num_types = lse.shape
        # d logsumexp(x) / dx = exp(x - logsumexp(x)), built in place in one new tensor
        grad = logits.reshape([batch, num_types, -1]) - lse.unsqueeze(-1)
        grad.exp_()
        grad.multiply_(d_lse.unsqueeze(-1))
        if kept.shape[0]:  # the kept gold cells: pushed down among the negatives, and gathered
            rows = kept // grad.shape[-1]
            values = paddle.exp(kept_scores + MASKED_LOGIT - lse.flatten()[rows]) * d_lse.flatten()[rows]
            if d_gold is not None:
                values = values + paddle.masked_select(d_gold, keep)
            grad.reshape([-1]).scatter_(kept, values, overwrite=True)
        return grad.reshape(logits.shape), None, None


def negatives_logsumexp_and_gold(logits: paddle.Tensor, cell: paddle.Tensor, keep: paddle.Tensor):
    """For ``logits`` ``[batch, types, L, L]`` (float32) and gold cells ``cell`` ``[batch, G]``
    (int64 indices into each example's ``types * L * L`` scores) with ``keep`` ``[batch, G]``
    (bool: False for a row to ignore), returns

    - ``logsumexp`` over each ``[L, L]`` with ``MASKED_LOGIT`` added to the kept gold cells:
      ``logsumexp(put_along_axis(scores, cell, keep * MASKED_LOGIT, reduce="add"))``, ``[batch, types]``;
    - the kept gold cells' scores, ``where(keep, take_along_axis(scores, cell), 0)``, ``[batch, G]``.

    Kept cells must be distinct within an example (the readers deduplicate entities)."""
    return _NegativesAndGold.apply(logits, cell, keep)
