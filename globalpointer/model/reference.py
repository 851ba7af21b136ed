"""GlobalPointer's math as plain float64 numpy expressions, in one place.

The heads, the loss and the hand-written backward passes (``span_autograd.py``) compute these
faster and with less memory; this module says what they compute, and the tests hold the fast paths
to it (``tests/test_reference.py``).  Nothing in training or prediction calls it.

Shapes: ``hidden`` ``[batch, L, hidden]``; ``span_text`` ``[batch, L]`` bool (False on padding and
special tokens); scores ``[batch, types, L, L]`` with cell ``(i, j)`` the span from token i to token j.
"""
from typing import List, Optional

import numpy as np

from ..spans import Entity, TokenSpan
from .decode import Threshold, spans_from_hits, threshold_array
from .masks import MASKED_LOGIT


def rope(x: np.ndarray) -> np.ndarray:
    """RoFormer's rotary embedding over the positions of axis -2: the pair (x_2i, x_2i+1) at
    position m is rotated by the angle m * theta_i, theta_i = 10000^(-2i/d)."""
    length, dim = x.shape[-2], x.shape[-1]
    theta = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
    angle = np.arange(length)[:, None] * theta[None, :]  # [L, d/2]
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty(x.shape, dtype=np.float64)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def open_cells(span_text: np.ndarray, tril_mask: bool = True) -> np.ndarray:
    """``[batch, 1, L, L]``: both ends are text tokens (and start <= end)."""
    cells = span_text[:, None, :, None] & span_text[:, None, None, :]
    if tril_mask:
        cells = cells & np.triu(np.ones(cells.shape[-2:], dtype=bool))
    return cells


def global_pointer_scores(hidden, weight, bias, num_types: int, head_size: int, use_rope: bool = True,
                          span_text=None, tril_mask: bool = True) -> np.ndarray:
    """s_a(i, j) = q_a,i . k_a,j / sqrt(head_size), with [q_a; k_a] the type's slice of
    hidden @ weight + bias (query first), both rotated by RoPE; masked cells get MASKED_LOGIT added."""
    batch, length, _ = hidden.shape
    projected = (hidden.astype(np.float64) @ weight + bias).reshape(batch, length, num_types, 2 * head_size)
    query, key = projected[..., :head_size], projected[..., head_size:]  # [batch, L, types, d]
    query, key = query.transpose(0, 2, 1, 3), key.transpose(0, 2, 1, 3)  # [batch, types, L, d]
    if use_rope:
        query, key = rope(query), rope(key)
    scores = query @ key.transpose(0, 1, 3, 2) / np.sqrt(head_size)
    return _masked(scores, span_text, tril_mask)


def efficient_global_pointer_scores(hidden, weight, bias, bias_weight, bias_bias, num_types: int, head_size: int,
                                    use_rope: bool = True, span_text=None, tril_mask: bool = True) -> np.ndarray:
    """Su's Efficient GlobalPointer: one shared projection p = hidden @ weight + bias (query = its
    even columns, key = its odd ones, RoPE on both), and per type a start and an end bias from
    (p @ bias_weight + bias_bias) / 2 (column 2a + 1 at the start, 2a at the end):
    s_a(i, j) = q_i . k_j / sqrt(head_size) + start_a(i) + end_a(j)."""
    projected = hidden.astype(np.float64) @ weight + bias  # [batch, L, 2 * head_size]
    query, key = projected[..., 0::2], projected[..., 1::2]
    if use_rope:
        query, key = rope(query), rope(key)
    shared = query @ key.transpose(0, 2, 1) / np.sqrt(head_size)  # [batch, L, L]
    per_type = (projected @ bias_weight + bias_bias) / 2  # [batch, L, 2 * types]
    start, end = per_type[..., 1::2], per_type[..., 0::2]  # [batch, L, types]
    scores = (shared[:, None] + start.transpose(0, 2, 1)[:, :, :, None] + end.transpose(0, 2, 1)[:, :, None, :])
    return _masked(scores, span_text, tril_mask)


def _masked(scores: np.ndarray, span_text, tril_mask: bool) -> np.ndarray:
    if span_text is None:
        return scores
    return scores + np.where(open_cells(span_text, tril_mask), 0.0, MASKED_LOGIT)


def multilabel_cross_entropy(scores: np.ndarray, labels: np.ndarray, cells: np.ndarray,
                             planes: Optional[np.ndarray] = None) -> float:
    """Su's multilabel categorical cross-entropy, mean over (example, type):
    log(1 + sum_{negative cells} e^s) + log(1 + sum_{positive cells} e^-s), the sums over open
    ``cells`` (``[batch, 1, L, L]`` bool) only, each log(1 + sum e^x) as logaddexp(0, logsumexp(x)).
    With ``planes`` (``[batch, types]``, 1 where the example's file annotates the type), the mean is
    over the annotated pairs alone."""
    def log1p_sum_exp(values: np.ndarray) -> float:
        if values.size == 0:
            return 0.0
        top = values.max()
        return float(np.logaddexp(0.0, top + np.log(np.exp(values - top).sum())))

    total = []
    for b in range(scores.shape[0]):
        for t in range(scores.shape[1]):
            if planes is not None and not planes[b, t]:
                continue
            open_ = cells[b, 0]
            s = scores[b, t][open_].astype(np.float64)
            y = labels[b, t][open_].astype(bool)
            total.append(log1p_sum_exp(s[~y]) + log1p_sum_exp(-s[y]))
    return float(np.mean(total))


def multilabel_cross_entropy_gradient(scores: np.ndarray, labels: np.ndarray, cells: np.ndarray,
                                      planes: Optional[np.ndarray] = None) -> np.ndarray:
    """d loss / d scores of ``multilabel_cross_entropy``: on a negative cell e^s / (1 + sum_neg e^s),
    on a positive one -e^-s / (1 + sum_pos e^-s), each divided by the number of (example, type)
    pairs (annotated ones, with ``planes``); 0 on closed cells and on pairs not annotated."""
    grad = np.zeros(scores.shape, dtype=np.float64)
    pairs = scores.shape[0] * scores.shape[1] if planes is None else max(int(np.count_nonzero(planes)), 1)
    for b in range(scores.shape[0]):
        for t in range(scores.shape[1]):
            if planes is not None and not planes[b, t]:
                continue
            s = scores[b, t].astype(np.float64)
            negative = cells[b, 0] & ~labels[b, t].astype(bool)
            positive = cells[b, 0] & labels[b, t].astype(bool)
            for chosen, sign in ((negative, 1.0), (positive, -1.0)):
                if chosen.any():
                    x = sign * s[chosen]  # d log(1 + sum e^x) / dx = e^x / (1 + sum e^x), shifted by top
                    top = max(0.0, x.max())
                    grad[b, t][chosen] = sign * np.exp(x - top) / (np.exp(-top) + np.exp(x - top).sum())
    return grad / pairs


def soft_multilabel_cross_entropy(scores: np.ndarray, targets: np.ndarray, cells: np.ndarray,
                                  planes: Optional[np.ndarray] = None) -> float:
    """Su's soft-label form, mean over (example, type): log(1 + sum t e^-s) + log(1 + sum (1 - t) e^s)
    over the open ``cells``, ``targets`` ``[batch, types, L, L]`` in [0, 1] (0/1 targets: the hard loss)."""
    total = []
    for b in range(scores.shape[0]):
        for t in range(scores.shape[1]):
            if planes is not None and not planes[b, t]:
                continue
            s = scores[b, t][cells[b, 0]].astype(np.float64)
            y = targets[b, t][cells[b, 0]].astype(np.float64)
            total.append(np.log1p((y * np.exp(-s)).sum()) + np.log1p(((1 - y) * np.exp(s)).sum()))
    return float(np.mean(total))


def boundary_smoothed_targets(gold: np.ndarray, cells: np.ndarray, num_types: int, epsilon: float,
                              size: int) -> np.ndarray:
    """Boundary smoothing's targets ``[batch, types, L, L]``, cell by cell over each plane: for each
    d = 1..size the open ``cells`` at Manhattan distance d from a gold span share epsilon / size;
    targets add up, capped at 1, and a gold span's is 1."""
    batch, length = cells.shape[0], cells.shape[-1]
    targets = np.zeros((batch, num_types, length, length))
    starts, ends = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")
    for b in range(batch):
        for kind, start, end in gold[b]:
            if kind < 0 or not cells[b, 0, start, end]:
                continue
            distance = np.abs(starts - start) + np.abs(ends - end)
            for d in range(1, size + 1):
                ring = (distance == d) & cells[b, 0]
                if ring.any():
                    targets[b, kind][ring] += epsilon / size / ring.sum()
    targets = np.minimum(targets, 1.0)
    for b in range(batch):
        for kind, start, end in gold[b]:
            if kind >= 0 and cells[b, 0, start, end]:
                targets[b, kind, start, end] = 1.0
    return targets


def decode_spans(logits: np.ndarray, mask: np.ndarray, threshold: Threshold = 0.0) -> List[List[TokenSpan]]:
    """Every unmasked cell with logit > its type's threshold, for each example of the batch (nested output):
    what ``heads.decode_span_logits`` computes where the logits are.

    ``logits`` ``[batch, types, L, L]``; ``mask`` broadcastable to it, False on padding, special
    tokens and (with a tril mask) end < start.  One vectorised pass over the batch."""
    limits = threshold_array(threshold)
    hits = np.argwhere((logits > limits.reshape(1, -1, 1, 1)) & mask)
    return spans_from_hits(hits, logits[tuple(hits.T)], logits.shape[0])


def select_flat(entities: List[Entity]) -> List[Entity]:
    """Flat entities, as plainly as it can be said: the best-scored entity is kept, every entity
    overlapping a kept one is dropped, and so on down the scores (``decode.select_flat`` is the fast path)."""
    kept: List[Entity] = []
    for entity in sorted(entities, key=lambda e: (-e.score, e.start, e.end)):
        if all(entity.end <= k.start or entity.start >= k.end for k in kept):
            kept.append(entity)
    return sorted(kept, key=lambda e: (e.start, e.end, e.type))


def decode_relations(spans: List[TokenSpan], starts: np.ndarray, ends: np.ndarray,
                     threshold: float = 0.0) -> List[tuple]:
    """GPLinker's decoding, cell by cell: ``starts`` and ``ends`` ``[relations, L, L]`` pair logits of one
    text; (relation, head span, tail span) for every ordered pair of distinct decoded ``spans`` whose
    (head start, tail start) and (head end, tail end) cells are both above ``threshold``."""
    found = []
    for r in range(starts.shape[0]):
        for head in spans:
            for tail in spans:
                if head != tail and starts[r, head.start, tail.start] > threshold \
                        and ends[r, head.end, tail.end] > threshold:
                    found.append((r, head, tail))
    return found
