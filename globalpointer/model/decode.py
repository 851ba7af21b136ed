"""Logits -> spans.  Spans are ``(type, start, end, score)`` with token indices, end inclusive,
and score = sigmoid(logit).  A threshold is one logit for every type or a sequence of one per type."""
import bisect
import math
from typing import List, Sequence, Union

import numpy as np

from ..spans import Entity, TokenSpan
from .masks import span_mask_at

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


def best_in_groups(groups: np.ndarray, scores: np.ndarray, limit: int) -> np.ndarray:
    """``[K]`` bool: within each group of cells (equal ``groups`` values), the ``limit`` with the highest
    ``scores`` (ties: the first listed); every cell where ``limit`` is 0 or a group holds no more."""
    groups, scores = np.asarray(groups), np.asarray(scores)
    keep = np.ones(len(scores), dtype=bool)
    if not limit or len(scores) <= limit:
        return keep
    order = np.lexsort((-scores, groups))
    ordered = groups[order]
    firsts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    rank = np.arange(len(order)) - np.repeat(firsts, np.diff(np.r_[firsts, len(order)]))
    keep[order[rank >= limit]] = False
    return keep


def spans_from_hits(hits: np.ndarray, hit_logits: np.ndarray, batch_size: int) -> List[List[TokenSpan]]:
    """``hits`` ``[K, 4]`` rows (batch, type, start, end) of the cells above the threshold."""
    scores = sigmoid(np.asarray(hit_logits, dtype=np.float64))
    spans: List[List[TokenSpan]] = [[] for _ in range(batch_size)]
    for (batch_index, type_id, start, end), score in zip(np.asarray(hits).tolist(), scores.tolist()):
        if end >= start:
            spans[batch_index].append(TokenSpan(type_id, start, end, score))
    return spans


def spans_at_hits(hits: np.ndarray, hit_logits: np.ndarray, span_text: np.ndarray, tril_mask: bool,
                  batch_size: int) -> List[List[TokenSpan]]:
    """``spans_from_hits`` of the hits inside the span mask.  Masked cells hold score +
    MASKED_LOGIT, which a low threshold or a score above -MASKED_LOGIT (weights of a diverging run)
    still lets through: the mask itself decides, at the few cells above the threshold (over the whole
    ``[batch, types, L, L]`` tensor it took 6% of INT8's time)."""
    keep = span_mask_at(span_text, hits, tril_mask)
    return spans_from_hits(hits[keep], hit_logits[keep], batch_size)


def decode_logit_array(logits: np.ndarray, span_text: np.ndarray, tril_mask: bool,
                       threshold: Threshold) -> List[List[TokenSpan]]:
    """``heads.decode_span_logits`` for logits on the host (an exported model's output)."""
    # flatnonzero + unravel_index: 7x as fast as argwhere, which walks every dimension
    above = np.flatnonzero(logits > threshold_array(threshold).reshape(1, -1, 1, 1))
    hits = np.stack(np.unravel_index(above, logits.shape), axis=1)
    return spans_at_hits(hits, logits[tuple(hits.T)], span_text, tril_mask, logits.shape[0])


def select_flat(entities: Sequence[Entity]) -> List[Entity]:
    """Greedy by score: keep the best entity, drop every entity overlapping a kept one, repeat (the
    plain formula: ``reference.select_flat``).  Kept entities never overlap, so their starts and their
    ends sort alike, and a bisect finds the only two that could overlap a candidate: n log n, where
    testing every kept one grew with the square of a text's length (a 24,000-character text with many
    candidate spans took 36 s)."""
    starts: List[int] = []
    ends: List[int] = []
    kept: List[Entity] = []
    for entity in sorted(entities, key=lambda e: (-e.score, e.start, e.end)):
        at = bisect.bisect_right(starts, entity.start)
        if (at and ends[at - 1] > entity.start) or (at < len(starts) and starts[at] < entity.end):
            continue
        starts.insert(at, entity.start)
        ends.insert(at, entity.end)
        kept.append(entity)
    return sorted(kept, key=lambda e: (e.start, e.end, e.type))
