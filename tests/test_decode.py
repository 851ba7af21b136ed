from hypothesis import strategies as st
from hypothesis import given, settings
import numpy as np

from globalpointer.model.decode import select_flat, sigmoid
from globalpointer.model.reference import decode_spans
from globalpointer.spans import Entity, TokenSpan


def test_nested_decoding_returns_every_span_above_threshold():
    logits = np.full((2, 2, 5, 5), -5.0, "float32")
    mask = np.ones((2, 1, 5, 5), bool)
    mask[:, :, 4, :] = mask[:, :, :, 4] = False  # position 4 is padding
    logits[0, 0, 1, 3] = 2.0   # outer span
    logits[0, 1, 2, 2] = 1.0   # nested inside it, other type
    logits[0, 0, 1, 4] = 9.0   # on padding: never returned
    logits[1, 1, 0, 0] = -0.5  # below threshold 0
    spans = decode_spans(logits, mask)
    assert spans[0] == [TokenSpan(0, 1, 3, float(sigmoid(np.float64(2.0)))), TokenSpan(1, 2, 2, float(sigmoid(np.float64(1.0))))]
    assert spans[1] == []
    assert [s.start for s in decode_spans(logits, mask, threshold=-1.0)[1]] == [0]


def test_flat_selection_keeps_best_non_overlapping():
    entities = [Entity(0, 4, "org", 0.9), Entity(2, 3, "loc", 0.95), Entity(4, 6, "per", 0.6),
                Entity(3, 5, "per", 0.7), Entity(7, 9, "loc", 0.51)]
    kept = select_flat(entities)
    # 2-3 wins, 0-4 overlaps it; 3-5 does not overlap 2-3 (end exclusive) and beats 4-6
    assert kept == [Entity(2, 3, "loc", 0.95), Entity(3, 5, "per", 0.7), Entity(7, 9, "loc", 0.51)]


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.sampled_from("ABC"),
                          st.floats(0.01, 1.0, allow_subnormal=False)), max_size=60))
@settings(max_examples=300, deadline=None)
def test_flat_selection_equals_the_plain_greedy(spans):
    from globalpointer.model.reference import select_flat as plain

    entities = [Entity(start, start + length, kind, score) for start, length, kind, score in spans]
    assert select_flat(entities) == plain(entities)


def test_flat_selection_grows_with_the_candidates_not_their_square():
    """100,000 candidates, 20,000 kept: the plain greedy compares each candidate with every kept one
    (about 10^9 comparisons, minutes); the fast path bisects.  CPU time of this process, so that other
    jobs on the cores do not count (wall time under a loaded machine took 24 s)."""
    import random
    import time

    rng = random.Random(0)
    entities = [Entity(5 * i, 5 * i + 3, "A", rng.random()) for i in range(20000)]
    entities += [Entity(5 * i + 1, 5 * i + 4 + rng.randrange(8), "B", rng.random() / 2) for i in range(80000)]
    begun = time.process_time()
    kept = select_flat(entities)
    assert time.process_time() - begun < 10
    assert kept and all(a.end <= b.start for a, b in zip(kept, kept[1:]))


def test_sigmoid_is_stable():
    assert sigmoid(np.array([-1000.0, 0.0, 1000.0])).tolist() == [0.0, 0.5, 1.0]


def test_device_and_host_decoding_equal_the_numpy_reference():
    """The dynamic graph decodes where its logits are, an export's runtime on the host."""
    import paddle

    from globalpointer.model.decode import decode_logit_array
    from globalpointer.model.heads import decode_span_logits
    from globalpointer.model.masks import span_mask, span_mask_bias

    rng = np.random.default_rng(0)
    raw = rng.normal(-2, 1.5, (3, 4, 9, 9)).astype("float32")
    one_text = np.zeros((3, 9), bool)
    one_text[0, 1:8], one_text[1, 1:5], one_text[2, 1:2] = True, True, True
    packed = np.array([[0, 1, 1, 1, 0, 2, 2, 3, 0], [0, 1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 0, 2, 2, 0, 0, 0, 0]])
    # -2e4: below the masked cells' scores too, so only the span mask keeps them out
    per_type = [-1.0, -3.0, 0.5, -2e4]
    for span_text, tril, threshold in ((one_text, True, -1.0), (one_text, False, -1.0), (one_text, True, -2e4),
                                       (packed, True, -1.0), (packed, False, -2e4), (packed, True, per_type)):
        mask = span_mask(paddle.to_tensor(span_text), tril).numpy()
        expected = decode_spans(raw, mask, threshold)
        logits = raw + span_mask_bias(paddle.to_tensor(span_text), tril).numpy()  # as the heads return them
        on_device = decode_span_logits(paddle.to_tensor(logits), paddle.to_tensor(span_text), tril, threshold)
        on_host = decode_logit_array(logits, span_text, tril, threshold)
        assert on_device == expected and on_host == expected and sum(map(len, expected)) > 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=12), st.integers(1, 3), st.booleans(), st.integers(0, 2**31))
def test_the_mask_at_some_cells_is_the_whole_mask_there(row, rows, tril, seed):
    """Rows that hold several texts (1, 2, 3) and padding (0), at random cells and at every cell."""
    import paddle

    from globalpointer.model.masks import span_mask, span_mask_at

    rng = np.random.default_rng(seed)
    span_text = np.array([rng.permutation(row) for _ in range(rows)], np.int64)
    whole = span_mask(paddle.to_tensor(span_text), tril).numpy()[:, 0]
    length = span_text.shape[1]
    every = np.array([(b, 0, i, j) for b in range(rows) for i in range(length) for j in range(length)], np.int64)
    some = every[rng.choice(len(every), size=min(len(every), 7), replace=False)]
    for cells in (every, some):
        assert span_mask_at(span_text, cells, tril).tolist() == whole[cells[:, 0], cells[:, 2], cells[:, 3]].tolist()


def test_scores_above_the_mask_never_decode_outside_the_text():
    """A diverging model (lr=5 on the quickstart) scores padding and [CLS] far above the additive
    mask; decoding them gave positions outside the text (an IndexError at the first evaluation)."""
    import paddle

    from globalpointer.model.heads import decode_span_logits

    span_text = paddle.to_tensor([[0, 1, 1, 0, 0]])  # [CLS], two text tokens, [SEP], padding
    logits = paddle.full([1, 2, 5, 5], 1e6)
    [spans] = decode_span_logits(logits, span_text, True, 0.0)
    assert sorted((s.type, s.start, s.end) for s in spans) == [(t, i, j) for t in (0, 1) for i, j in
                                                                ((1, 1), (1, 2), (2, 2))]
