import numpy as np

from globalpointer.decode import TokenSpan, decode_spans, select_flat, sigmoid
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
