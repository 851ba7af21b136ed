import numpy as np
import paddle
import pytest

from globalpointer.model.masks import span_mask, span_mask_bias
from globalpointer.model.loss import count_masked_gold, dense_span_loss, sparse_span_loss, symmetric_kl
from globalpointer.model.reference import multilabel_cross_entropy


def make_batch(seed=0, batch=3, types=4, length=9, scale=3.0):
    """Logits masked as the heads return them, the mask, dense labels and gold rows."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, scale, (batch, types, length, length)).astype("float32")
    lengths = [9, 6, 4]
    span_text = np.zeros((batch, length), bool)
    for b, n in enumerate(lengths):
        span_text[b, 1:n - 1] = True  # [CLS] and [SEP] are not text
    mask = span_mask(paddle.to_tensor(span_text)).numpy()
    logits = logits + span_mask_bias(paddle.to_tensor(span_text)).numpy()
    gold = [[(0, 1, 2), (0, 3, 3), (2, 1, 5), (3, 2, 2)], [(1, 1, 4), (1, 2, 2)], [(3, 1, 2)]]
    gold_array = -np.ones((batch, 4, 3), "int64")
    labels = np.zeros_like(logits)
    for b, rows in enumerate(gold):
        for g, (t, s, e) in enumerate(rows):
            gold_array[b, g] = (t, s, e)
            labels[b, t, s, e] = 1
    return logits, labels, mask, gold_array


def test_dense_matches_reference_formula():
    logits, labels, mask, _ = make_batch()
    loss = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(labels), paddle.to_tensor(mask))
    assert float(loss) == pytest.approx(multilabel_cross_entropy(logits, labels, mask), rel=1e-5)


def test_sparse_matches_dense():
    for seed in range(3):
        logits, labels, mask, gold = make_batch(seed)
        dense = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(labels), paddle.to_tensor(mask))
        sparse = sparse_span_loss(paddle.to_tensor(logits), paddle.to_tensor(gold), paddle.to_tensor(mask))
        assert float(sparse) == pytest.approx(float(dense), abs=1e-5)


def test_sparse_gradient_matches_dense():
    logits, labels, mask, gold = make_batch(5)
    grads = []
    for fn, target in ((dense_span_loss, labels), (sparse_span_loss, gold)):
        x = paddle.to_tensor(logits, stop_gradient=False)
        fn(x, paddle.to_tensor(target), paddle.to_tensor(mask)).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-6)
    assert np.abs(grads[0]).sum() > 0


def test_two_types_on_one_cell_are_both_positive():
    logits, labels, mask, gold = make_batch(7)
    gold[0, 1] = (1, 1, 2)  # same cell as gold row 0 (type 0), another type
    labels = np.zeros_like(labels)
    for b in range(gold.shape[0]):
        for t, s, e in gold[b]:
            if t >= 0:
                labels[b, t, s, e] = 1
    dense = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(labels), paddle.to_tensor(mask))
    sparse = sparse_span_loss(paddle.to_tensor(logits), paddle.to_tensor(gold), paddle.to_tensor(mask))
    assert float(sparse) == pytest.approx(float(dense), abs=1e-5)


def test_float16_logits_give_finite_loss_and_gradients():
    logits, labels, mask, gold = make_batch(1, scale=15.0)  # large scores: exp() of them overflows float16
    for fn, target in ((dense_span_loss, labels), (sparse_span_loss, gold)):
        x = paddle.to_tensor(logits).astype("float16")
        x.stop_gradient = False
        loss = fn(x, paddle.to_tensor(target), paddle.to_tensor(mask))
        loss.backward()
        assert np.isfinite(float(loss))
        assert np.isfinite(x.grad.astype("float32").numpy()).all()


def test_masked_gold_is_dropped_and_counted():
    logits, labels, mask, gold = make_batch(2)
    baseline = float(sparse_span_loss(paddle.to_tensor(logits), paddle.to_tensor(gold), paddle.to_tensor(mask)))
    with_bad = np.concatenate([gold, -np.ones((3, 3, 3), "int64")], axis=1)
    with_bad[0, 4] = (1, 5, 2)   # end before start: lower triangle
    with_bad[1, 4] = (0, 7, 7)   # padding of a 6-token example
    with_bad[2, 4] = (2, 0, 1)   # starts on [CLS]
    g, m = paddle.to_tensor(with_bad), paddle.to_tensor(mask)
    assert count_masked_gold(g, m) == 3
    assert count_masked_gold(paddle.to_tensor(gold), m) == 0
    loss = float(sparse_span_loss(paddle.to_tensor(logits), g, m))
    assert np.isfinite(loss) and loss == pytest.approx(baseline, abs=1e-6)
    # the dense form, with the same cells labelled, ignores them too
    bad_labels = labels.copy()
    bad_labels[0, 1, 5, 2] = bad_labels[1, 0, 7, 7] = bad_labels[2, 2, 0, 1] = 1
    dense = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(bad_labels), m)
    assert float(dense) == pytest.approx(baseline, abs=1e-5)


def test_no_gold_at_all():
    logits, labels, mask, _ = make_batch(3)
    empty = paddle.to_tensor(np.zeros((3, 0, 3), "int64"))
    sparse = sparse_span_loss(paddle.to_tensor(logits), empty, paddle.to_tensor(mask))
    dense = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(np.zeros_like(labels)), paddle.to_tensor(mask))
    assert float(sparse) == pytest.approx(float(dense), abs=1e-5)


def test_symmetric_kl_matches_the_two_bernoulli_divergences_on_open_cells():
    first, _, mask, _ = make_batch(seed=3)
    second, _, _, _ = make_batch(seed=4)
    p, q = 1 / (1 + np.exp(-first.astype("float64"))), 1 / (1 + np.exp(-second.astype("float64")))

    def kl(a, b):  # KL(Bernoulli(a) || Bernoulli(b)), from its definition
        return a * np.log(a / b) + (1 - a) * np.log((1 - a) / (1 - b))

    with np.errstate(divide="ignore", invalid="ignore"):
        cells = np.where(np.broadcast_to(mask, p.shape), kl(p, q) + kl(q, p), 0.0)  # masked cells: 0/0, left out
    expected = cells.reshape(p.shape[0], p.shape[1], -1).sum(-1).mean()
    got = symmetric_kl(paddle.to_tensor(first), paddle.to_tensor(second), paddle.to_tensor(mask))
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)
    assert float(symmetric_kl(paddle.to_tensor(first), paddle.to_tensor(first), paddle.to_tensor(mask))) == 0.0
