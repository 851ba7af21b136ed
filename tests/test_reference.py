"""The fast paths (heads, span_autograd, sparse loss) against globalpointer/reference.py's plain
float64 expressions: every cell of every score tensor, the loss and its gradient."""
import numpy as np
import paddle
import pytest

from globalpointer.model import reference
from globalpointer.model.heads import EfficientGlobalPointer, GlobalPointer
from globalpointer.model.loss import dense_span_loss, sparse_span_loss
from globalpointer.model.masks import MASKED_LOGIT, span_mask, span_mask_bias


def batch(seed=0, size=3, length=10, hidden=24):
    rng = np.random.default_rng(seed)
    states = rng.standard_normal((size, length, hidden)).astype("float32")
    span_text = np.zeros((size, length), bool)
    for b, n in enumerate((10, 7, 4)[:size]):
        span_text[b, 1:n - 1] = True
    return states, span_text


def compare(ours: np.ndarray, expected: np.ndarray, span_text: np.ndarray, tril: bool):
    cells = np.broadcast_to(reference.open_cells(span_text, tril), expected.shape)
    np.testing.assert_allclose(ours[cells], expected[cells], atol=2e-5, rtol=1e-5)
    assert (ours[~cells] < MASKED_LOGIT / 2).all()  # masked cells: out of every comparison


def test_rope_is_the_rotation_of_the_roformer_formula():
    from globalpointer.model.rope import RotaryPositionEmbedding

    x = np.random.default_rng(1).standard_normal((2, 3, 9, 16)).astype("float32")
    np.testing.assert_allclose(RotaryPositionEmbedding(16)(paddle.to_tensor(x)).numpy(), reference.rope(x), atol=1e-5)
    # and the property it exists for: <R_m q, R_n k> depends on n - m only
    q, k = x[0, 0, 0], x[0, 0, 1]
    tiled = np.stack([np.tile(q, (9, 1)), np.tile(k, (9, 1))])
    rotated = reference.rope(tiled)
    assert rotated[0, 2] @ rotated[1, 5] == pytest.approx(rotated[0, 4] @ rotated[1, 7])


@pytest.mark.parametrize("use_rope", [True, False])
@pytest.mark.parametrize("tril", [True, False])
def test_global_pointer_scores_every_cell(use_rope, tril):
    states, span_text = batch()
    paddle.seed(3)
    head = GlobalPointer(24, num_types=3, head_size=8, rope=use_rope, tril_mask=tril)
    ours = head(paddle.to_tensor(states), paddle.to_tensor(span_text)).numpy()
    expected = reference.global_pointer_scores(states, head.dense.weight.numpy(), head.dense.bias.numpy(), 3, 8,
                                               use_rope, span_text, tril)
    compare(ours, expected, span_text, tril)


@pytest.mark.parametrize("use_rope", [True, False])
def test_efficient_global_pointer_scores_every_cell(use_rope):
    states, span_text = batch(seed=2)
    paddle.seed(4)
    head = EfficientGlobalPointer(24, num_types=4, head_size=8, rope=use_rope)
    ours = head(paddle.to_tensor(states), paddle.to_tensor(span_text)).numpy()
    expected = reference.efficient_global_pointer_scores(
        states, head.dense.weight.numpy(), head.dense.bias.numpy(), head.bias_dense.weight.numpy(),
        head.bias_dense.bias.numpy(), 4, 8, use_rope, span_text)
    compare(ours, expected, span_text, True)


@pytest.mark.parametrize("scale", [1.0, 30.0])  # 30: exp() of the scores overflows float32
def test_sparse_and_dense_loss_and_gradient(scale):
    rng = np.random.default_rng(5)
    _, span_text = batch()
    mask = span_mask(paddle.to_tensor(span_text)).numpy()
    scores = (rng.standard_normal((3, 4, 10, 10)) * scale).astype("float32")
    scores += span_mask_bias(paddle.to_tensor(span_text)).numpy()
    gold_rows = [[(0, 1, 3), (2, 2, 2), (3, 4, 8)], [(1, 1, 5)], [(0, 1, 2), (0, 2, 2)]]
    gold = -np.ones((3, 3, 3), "int64")
    labels = np.zeros(scores.shape, bool)
    for b, rows in enumerate(gold_rows):
        for g, (t, start, end) in enumerate(rows):
            gold[b, g] = (t, start, end)
            labels[b, t, start, end] = True
    expected = reference.multilabel_cross_entropy(scores, labels, mask)
    expected_grad = reference.multilabel_cross_entropy_gradient(scores, labels, mask)
    for name, loss_of in (("sparse", lambda x: sparse_span_loss(x, paddle.to_tensor(gold), paddle.to_tensor(mask))),
                          ("dense", lambda x: dense_span_loss(x, paddle.to_tensor(labels.astype("float32")),
                                                              paddle.to_tensor(mask)))):
        logits = paddle.to_tensor(scores, stop_gradient=False)
        loss = loss_of(logits)
        loss.backward()
        assert float(loss) == pytest.approx(expected, rel=1e-5), name
        np.testing.assert_allclose(logits.grad.numpy(), expected_grad, atol=1e-6, err_msg=name)
