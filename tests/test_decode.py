import numpy as np

from globalpointer.model.decode import select_flat, sigmoid
from globalpointer.model.reference import decode_spans
from globalpointer.spans import TokenSpan
from globalpointer.spans import Entity


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


def test_sigmoid_is_stable():
    assert sigmoid(np.array([-1000.0, 0.0, 1000.0])).tolist() == [0.0, 0.5, 1.0]


def test_device_side_decoding_equals_the_numpy_reference():
    import paddle

    from globalpointer.model.heads import decode_span_logits
    from globalpointer.model.masks import span_mask, span_mask_bias

    rng = np.random.default_rng(0)
    raw = rng.normal(-2, 1.5, (3, 4, 9, 9)).astype("float32")
    span_text = np.zeros((3, 9), bool)
    span_text[0, 1:8], span_text[1, 1:5], span_text[2, 1:2] = True, True, True
    # -2e4: below the masked cells' scores too, so only the span mask keeps them out
    for tril, threshold in ((True, -1.0), (False, -1.0), (True, -2e4)):
        mask = span_mask(paddle.to_tensor(span_text), tril).numpy()
        expected = decode_spans(raw, mask, threshold)
        logits = raw + span_mask_bias(paddle.to_tensor(span_text), tril).numpy()  # as the heads return them
        got = decode_span_logits(paddle.to_tensor(logits), paddle.to_tensor(span_text), tril, threshold)
        assert got == expected and sum(map(len, expected)) > 5
