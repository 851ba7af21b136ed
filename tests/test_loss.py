import numpy as np
import paddle
import pytest
from hypothesis import given, settings, strategies as st

from globalpointer.model.masks import span_mask, span_mask_bias
from globalpointer.model.loss import count_masked_gold, dense_span_loss, gold_to_dense, sparse_span_loss
from globalpointer.model.reference import (boundary_smoothed_targets, multilabel_cross_entropy,
                                           soft_multilabel_cross_entropy)
from globalpointer.model.smoothing import smoothed_targets


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


def smoothing_case(seed, epsilon, size):
    """A batch of ``make_batch`` with boundary-smoothed targets, as rows and as dense planes."""
    logits, labels, mask, gold = make_batch(seed)
    span_text = mask[:, 0].any(axis=1).astype("int64")  # the rows' text tokens (one text a row)
    rows, targets = smoothed_targets(gold, span_text, True, epsilon, size)
    return logits, mask, gold, rows, targets


@pytest.mark.parametrize("epsilon,size", [(0.2, 1), (0.3, 2), (0.0, 1)])
def test_smoothed_targets_match_the_plane_by_plane_formula(epsilon, size):
    logits, mask, gold, rows, targets = smoothing_case(0, epsilon, size)
    expected = boundary_smoothed_targets(gold, mask, logits.shape[1], epsilon, size)
    got = gold_to_dense(paddle.to_tensor(rows), logits.shape[1], logits.shape[-1], paddle.to_tensor(targets)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got[~np.broadcast_to(mask, got.shape)].max() == 0  # nothing outside the open cells
    if epsilon == 0:
        np.testing.assert_array_equal(got, make_batch(0)[1])


@pytest.mark.parametrize("epsilon,size", [(0.2, 1), (0.3, 2)])
def test_the_soft_loss_matches_its_formula_in_both_forms_and_their_gradients_agree(epsilon, size):
    for seed in range(3):
        logits, mask, _, rows, targets = smoothing_case(seed, epsilon, size)
        planes = np.random.default_rng(seed).integers(0, 2, logits.shape[:2]).astype("float32")
        planes[0, 0] = 1
        dense_targets = gold_to_dense(paddle.to_tensor(rows), logits.shape[1], logits.shape[-1],
                                      paddle.to_tensor(targets))
        expected = soft_multilabel_cross_entropy(logits, dense_targets.numpy(), mask, planes)
        values, grads = [], []
        for form in ("dense", "sparse"):
            x = paddle.to_tensor(logits, stop_gradient=False)
            if form == "dense":
                loss = dense_span_loss(x, dense_targets, paddle.to_tensor(mask), paddle.to_tensor(planes))
            else:
                loss = sparse_span_loss(x, paddle.to_tensor(rows), paddle.to_tensor(mask), paddle.to_tensor(planes),
                                        paddle.to_tensor(targets))
            loss.backward()
            values.append(float(loss))
            grads.append(x.grad.numpy())
        assert values[0] == pytest.approx(expected, rel=1e-5)
        assert values[1] == pytest.approx(expected, rel=1e-5)
        np.testing.assert_allclose(grads[0], grads[1], atol=1e-6)
        assert np.isfinite(grads[0]).all() and np.abs(grads[0]).sum() > 0


def test_the_soft_loss_is_the_hard_one_to_the_bit_for_targets_of_one():
    logits, labels, mask, gold = make_batch(3)
    hard = sparse_span_loss(paddle.to_tensor(logits), paddle.to_tensor(gold), paddle.to_tensor(mask))
    ones = paddle.to_tensor((gold[..., 0] >= 0).astype("float32"))
    soft = sparse_span_loss(paddle.to_tensor(logits), paddle.to_tensor(gold), paddle.to_tensor(mask), targets=ones)
    assert float(soft) == float(hard)
    dense = dense_span_loss(paddle.to_tensor(logits), paddle.to_tensor(labels), paddle.to_tensor(mask))
    assert float(dense) == pytest.approx(multilabel_cross_entropy(logits, labels, mask), rel=1e-5)


def test_smoothing_lowers_the_loss_of_scores_that_put_a_little_on_the_neighbours():
    """What it is for: with smoothing, raising the score of a gold span's neighbour costs less than
    with hard targets."""
    logits, mask, gold, rows, targets = smoothing_case(0, 0.2, 1)
    hard_rows, hard = gold, (gold[..., 0] >= 0).astype("float32")

    def loss(scores, which):
        r, t = which
        return float(sparse_span_loss(paddle.to_tensor(scores), paddle.to_tensor(r), paddle.to_tensor(mask),
                                      targets=paddle.to_tensor(t)))

    kind, start, end = gold[0, 2]  # (2, 1, 5): a neighbour (2, 1, 4) is open
    raised = logits.copy()
    raised[0, kind, start, end - 1] = 5.0
    assert loss(raised, (rows, targets)) - loss(logits, (rows, targets)) < \
        loss(raised, (hard_rows, hard)) - loss(logits, (hard_rows, hard))


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_smoothed_targets_match_the_formula_on_any_rows(data):
    """Rows holding one to three texts, gold spans anywhere (closed cells too, touching and repeated
    spans of one type), any epsilon and size: the rows agree with the plane-by-plane formula."""
    batch, length, types = data.draw(st.integers(1, 3)), data.draw(st.integers(3, 12)), data.draw(st.integers(1, 3))
    span_text = np.array([data.draw(st.lists(st.integers(0, 3), min_size=length, max_size=length))
                          for _ in range(batch)], dtype="int64")
    gold = np.array([[data.draw(st.tuples(st.integers(-1, types - 1), st.integers(0, length - 1),
                                          st.integers(0, length - 1))) for _ in range(4)] for _ in range(batch)])
    tril = data.draw(st.booleans())
    epsilon, size = data.draw(st.floats(0.0, 0.9, allow_subnormal=False)), data.draw(st.integers(1, 3))
    rows, targets = smoothed_targets(gold, span_text, tril, epsilon, size)
    cells = span_mask(paddle.to_tensor(span_text), tril).numpy()
    # gold rows are distinct within an example where the loss reads them
    distinct = [sorted({tuple(r) for r in gold[b] if r[0] >= 0}) for b in range(batch)]
    padded = -np.ones((batch, 4, 3), "int64")
    for b, found in enumerate(distinct):
        padded[b, :len(found)] = np.array(found, "int64").reshape(-1, 3)
    expected = boundary_smoothed_targets(padded, cells, types, epsilon, size)
    got = np.zeros_like(expected)
    for b in range(batch):
        for (kind, start, end), target in zip(rows[b], targets[b]):
            if kind >= 0:
                got[b, kind, start, end] = target
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert ((targets > 0) == (rows[..., 0] >= 0)).all()
