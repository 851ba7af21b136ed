"""The hand-written backward passes give the values and gradients of the autograd expressions they
replace (each written out here, run through Paddle's own autograd)."""
import numpy as np
import paddle
import pytest

from globalpointer.model.masks import MASKED_LOGIT, span_mask_bias
from globalpointer.model.span_autograd import broadcast_scores, logsumexp_, negatives_logsumexp_and_gold, pairwise_scores

RNG = np.random.default_rng(0)


def leaves(*arrays):
    return [paddle.to_tensor(a, stop_gradient=False) for a in arrays]


def backward_with(outputs, weights):
    """Backward of sum(output * weight): a gradient arriving from above that is not all ones."""
    total = sum((out * paddle.to_tensor(w)).sum() for out, w in zip(outputs, weights))
    total.backward()


def assert_same(ours, reference, ours_inputs, reference_inputs):
    for a, b in zip(ours, reference):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(ours_inputs, reference_inputs):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)
            assert np.abs(b.grad.numpy()).sum() > 0


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def test_logsumexp_matches_the_float64_formula_where_exp_overflows():
    x = random(3, 50) * 30
    x[0, :10] += 200.0  # exp() overflows float32 here: the maximum must come out first
    x[1, 5:] = MASKED_LOGIT  # masked cells vanish
    reference = np.log(np.exp(x.astype("float64") - 200).sum(axis=-1)) + 200
    np.testing.assert_allclose(logsumexp_(paddle.to_tensor(x)).numpy(), reference, rtol=1e-6, atol=1e-4)


def test_pairwise_scores():
    query, key = random(2, 3, 4, 6), random(2, 3, 4, 6)  # [batch, types, d, L]
    span_text = np.array([[0, 1, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], bool)
    mask_bias = span_mask_bias(paddle.to_tensor(span_text))
    weights = [random(2, 3, 6, 6)]
    ours_inputs, reference_inputs = leaves(query, key), leaves(query, key)
    ours = [pairwise_scores(*ours_inputs, mask_bias)]
    reference = [paddle.matmul(reference_inputs[0].transpose([0, 1, 3, 2]), reference_inputs[1]) + mask_bias]
    backward_with(ours, weights)
    backward_with(reference, weights)
    assert_same(ours, reference, ours_inputs, reference_inputs)


def test_broadcast_scores():
    arrays = random(2, 1, 6, 6), random(2, 3, 6, 1), random(2, 3, 1, 6)
    weights = [random(2, 3, 6, 6)]
    ours_inputs, reference_inputs = leaves(*arrays), leaves(*arrays)
    ours = [broadcast_scores(*ours_inputs)]
    shared, start, end = reference_inputs
    reference = [shared + start + end]
    backward_with(ours, weights)
    backward_with(reference, weights)
    assert ours[0].shape == [2, 3, 6, 6]
    assert_same(ours, reference, ours_inputs, reference_inputs)


def reference_negatives_and_gold(logits, cell, keep):
    scores = logits.reshape([logits.shape[0], -1])
    pushed = paddle.put_along_axis(scores, cell, keep.astype("float32") * MASKED_LOGIT, axis=1, reduce="add")
    lse = paddle.logsumexp(pushed.reshape([logits.shape[0], logits.shape[1], -1]), axis=-1)
    gold = paddle.take_along_axis(scores, cell, axis=1)
    return lse, paddle.where(keep, gold, paddle.zeros_like(gold))


@pytest.mark.parametrize("use_gold", [True, False])
def test_negatives_logsumexp_and_gold(use_gold):
    logits = random(2, 3, 5, 5) * 3
    # example 0: a dropped row pointing at cell 0 while a kept row holds cell 0 too
    cell = np.array([[0, 1 * 25 + 2 * 5 + 3, 0], [2 * 25 + 4 * 5 + 4, 7, 0]], "int64")
    keep = np.array([[True, True, False], [True, True, False]])
    weights = [random(2, 3), random(2, 3)]
    ours_inputs, reference_inputs = leaves(logits), leaves(logits)
    ours = negatives_logsumexp_and_gold(ours_inputs[0], paddle.to_tensor(cell), paddle.to_tensor(keep))
    reference = reference_negatives_and_gold(reference_inputs[0], paddle.to_tensor(cell), paddle.to_tensor(keep))
    used = 2 if use_gold else 1  # without the gold scores, their gradient arrives as None or zeros
    backward_with(ours[:used], weights[:used])
    backward_with(reference[:used], weights[:used])
    assert_same(ours, reference, ours_inputs, reference_inputs)


def test_negatives_logsumexp_with_no_kept_cell():
    logits = random(2, 3, 4, 4)
    cell, keep = paddle.zeros([2, 1], dtype="int64"), paddle.zeros([2, 1], dtype="bool")
    weights = [random(2, 3), random(2, 1)]
    ours_inputs, reference_inputs = leaves(logits), leaves(logits)
    ours = negatives_logsumexp_and_gold(ours_inputs[0], cell, keep)
    reference = reference_negatives_and_gold(reference_inputs[0], cell, keep)
    backward_with(ours, weights)
    backward_with(reference, weights)
    assert_same(ours, reference, ours_inputs, reference_inputs)
