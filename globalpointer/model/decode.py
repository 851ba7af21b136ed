"""Logits -> spans.  Spans are ``(type, start, end, score)`` with token indices, end inclusive,
and score = sigmoid(logit).  A threshold is one logit for every type or a sequence of one per type."""
import math
from typing import List, Sequence, Union

import numpy as np

from ..spans import Entity, TokenSpan

Threshold = Union[float, Sequence[float]]


def threshold_array(threshold: Threshold) -> np.ndarray:
    """float32 limits: shape [1] for one threshold, [types] for one per type."""
    return np.atleast_1d(np.asarray(threshold, dtype=np.float32))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow warning for large |x|


def score_logit(min_score: float) -> float:
    """The logit whose sigmoid is ``min_score``: a span scores above ``min_score`` exactly when its
    logit is above this (0.5 -> 0.0)."""
    return math.log(min_score) - math.log1p(-min_score)


def spans_from_hits(hits: np.ndarray, hit_logits: np.ndarray, batch_size: int) -> List[List[TokenSpan]]:
    """``hits`` ``[K, 4]`` rows (batch, type, start, end) of the cells above the threshold."""
    scores = sigmoid(np.asarray(hit_logits, dtype=np.float64))
    spans: List[List[TokenSpan]] = [[] for _ in range(batch_size)]
    for (batch_index, type_id, start, end), score in zip(np.asarray(hits).tolist(), scores.tolist()):
        if end >= start:
            spans[batch_index].append(TokenSpan(type_id, start, end, score))
    return spans


def select_flat(entities: Sequence[Entity]) -> List[Entity]:
    """Greedy by score: keep the best entity, drop every entity overlapping a kept one, repeat."""
    kept: List[Entity] = []
    for entity in sorted(entities, key=lambda e: (-e.score, e.start, e.end)):
        if all(entity.end <= k.start or entity.start >= k.end for k in kept):
            kept.append(entity)
    return sorted(kept, key=lambda e: (e.start, e.end, e.type))
