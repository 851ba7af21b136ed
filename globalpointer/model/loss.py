"""Multilabel categorical cross-entropy (Su, 2020) over span cells, dense and sparse.

For each (example, type):  L = log(1 + sum_{neg} e^{s}) + log(1 + sum_{pos} e^{-s}),
where the sums run over unmasked cells; the loss is their mean (over the (example, type) pairs whose
file annotates the type, when the files say: ``plane_mean``).  Both forms compute it in float32 with logsumexp; the plain
formula and its gradient are ``reference.multilabel_cross_entropy(_gradient)``.
With soft targets t in [0, 1] (boundary smoothing, ``smoothing.py``) it is Su's soft-label form,
L = log(1 + sum t e^{-s}) + log(1 + sum (1 - t) e^{s}) over every open cell, the first-order
expansion of each cell's binary cross-entropy inside the log; for 0/1 targets it is the loss above
(``reference.soft_multilabel_cross_entropy``).

The logits are the heads' output: masked cells already carry ``MASKED_LOGIT``, so they vanish from
the negative sums without another pass over ``[batch, types, L, L]``; the ``mask`` argument only
decides which gold labels count.  Gold spans are ``[batch, max_gold, 3]`` int64 rows
``(type, start, end)`` (token indices, end inclusive) padded with -1.  A gold span in a masked cell
(padding, special token, end before start) is left out of the loss rather than turned into an
infinite term; ``count_masked_gold`` tells how many were.  The sparse form's passes over the
``[batch, types, L, L]`` logits have a hand-written backward pass (``span_autograd``) that holds one
gradient of that size and no temporaries.
"""
from typing import Optional

import paddle
import paddle.nn.functional as F

from .masks import MASKED_LOGIT
from .span_autograd import negatives_logsumexp_and_gold


def _log1p_sum_exp(scores: paddle.Tensor) -> paddle.Tensor:
    """log(1 + sum(exp(scores))) along the last axis, as softplus(logsumexp): both stable, and no
    zero column to concatenate onto the scores."""
    return F.softplus(paddle.logsumexp(scores, axis=-1))


def plane_mean(per_plane: paddle.Tensor, planes: Optional[paddle.Tensor]) -> paddle.Tensor:
    """The mean of the ``[batch, types]`` losses; with ``planes`` (1 where the example's file annotates
    the type, data/sources.py) over the annotated ones only: the others add nothing and get no gradient."""
    if planes is None:
        return per_plane.mean()
    planes = planes.astype("float32")
    return (per_plane * planes).sum() / paddle.clip(planes.sum(), min=1.0)


def _log_target(targets: paddle.Tensor) -> paddle.Tensor:
    """log(t), finite where t is 0 (those cells are chosen away by the caller; 0 for t = 1 exactly)."""
    return paddle.log(paddle.clip(targets, min=1e-30))


def dense_span_loss(logits: paddle.Tensor, labels: paddle.Tensor, mask: paddle.Tensor,
                    planes: Optional[paddle.Tensor] = None) -> paddle.Tensor:
    """``logits`` (masked) and ``labels`` ``[batch, types, L, L]`` (0/1, or soft targets in [0, 1]);
    ``mask`` broadcastable to them (bool); ``planes``: see ``plane_mean``."""
    logits = logits.astype("float32")
    labels = labels.astype("float32")
    vanish = paddle.to_tensor(MASKED_LOGIT, dtype="float32")
    # a 0/1 label adds log(1) = 0 exactly: the hard loss's values to the bit
    neg = paddle.where(labels >= 1, vanish, logits + _log_target(1 - labels)).flatten(2)
    pos = paddle.where((labels > 0) & mask.astype("bool"), _log_target(labels) - logits, vanish).flatten(2)
    return plane_mean(_log1p_sum_exp(neg) + _log1p_sum_exp(pos), planes)


def _gold_parts(gold: paddle.Tensor, mask: paddle.Tensor, length: int):
    """Flat cell index ``start * L + end`` and a validity flag (real and unmasked) per gold row."""
    gold = gold.astype("int64")
    types, starts, ends = gold[..., 0], gold[..., 1], gold[..., 2]
    present = types >= 0
    flat = paddle.where(present, starts * length + ends, paddle.zeros_like(starts))
    cell_open = paddle.take_along_axis(mask[:, 0].astype("int32").flatten(1), flat, axis=1) > 0
    return types, flat, present, present & cell_open


def count_masked_gold(gold: paddle.Tensor, mask: paddle.Tensor) -> int:
    """How many gold rows fall into masked cells (and so are left out of the loss)."""
    if gold.shape[1] == 0:
        return 0
    _, _, present, valid = _gold_parts(gold, mask, mask.shape[-1])
    return int((present & ~valid).astype("int64").sum())


def sparse_span_loss(logits: paddle.Tensor, gold: paddle.Tensor, mask: paddle.Tensor,
                     planes: Optional[paddle.Tensor] = None, targets: Optional[paddle.Tensor] = None) -> paddle.Tensor:
    """Same value as ``dense_span_loss`` but the labels are the gold rows only, so label memory is
    ``batch x max_gold`` instead of ``batch x types x L x L``; gold rows within an example are distinct.
    ``targets`` ``[batch, max_gold]``: each row's soft target (``smoothing.smoothed_targets``); none: 1."""
    logits = logits.astype("float32")
    batch, num_types, length = logits.shape[0], logits.shape[1], logits.shape[2]
    if gold.shape[1] == 0:  # one padding row keeps the shapes non-empty
        gold = paddle.full([batch, 1, 3], -1, dtype="int64")
    types, flat, _, valid = _gold_parts(gold, mask, length)
    cell = paddle.where(valid, types * (length * length) + flat, paddle.zeros_like(flat))  # into types x L x L
    # negatives: every cell but the gold ones, which get MASKED_LOGIT added
    negatives_lse, gold_scores = negatives_logsumexp_and_gold(logits, cell, valid)
    type_ids = paddle.arange(num_types, dtype="int64").reshape([1, num_types, 1])
    is_gold = (types.unsqueeze(1) == type_ids) & valid.unsqueeze(1)  # [batch, types, max_gold]
    vanish = paddle.to_tensor(MASKED_LOGIT, dtype="float32")
    if targets is None:
        pos = paddle.where(is_gold, -gold_scores.unsqueeze(1), vanish)
        return plane_mean(F.softplus(negatives_lse) + _log1p_sum_exp(pos), planes)  # softplus(lse): as _log1p_sum_exp
    # The listed cells, left out of the negatives above, come back into them weighted by 1 - t.
    targets = targets.astype("float32").unsqueeze(1)  # [batch, 1, max_gold]
    scores = gold_scores.unsqueeze(1)
    pos = paddle.where(is_gold & (targets > 0), _log_target(targets) - scores, vanish)
    partial = paddle.where(is_gold & (targets < 1), scores + _log_target(1 - targets), vanish)
    negatives = paddle.logsumexp(paddle.concat([negatives_lse.unsqueeze(-1), partial], axis=-1), axis=-1)
    return plane_mean(F.softplus(negatives) + _log1p_sum_exp(pos), planes)


def gold_to_dense(gold: paddle.Tensor, num_types: int, length: int,
                  targets: Optional[paddle.Tensor] = None) -> paddle.Tensor:
    """``[batch, types, L, L]`` labels from gold rows (for the dense loss): 1 at each row's cell, or
    the row's soft target from ``targets`` ``[batch, max_gold]``."""
    gold = gold.astype("int64")
    batch = gold.shape[0]
    labels = paddle.zeros([batch * num_types * length * length], dtype="float32")
    if gold.shape[1]:
        rows = paddle.arange(batch, dtype="int64").unsqueeze(1).expand(gold.shape[:2])
        present = gold[..., 0] >= 0
        flat = ((rows * num_types + gold[..., 0]) * length + gold[..., 1]) * length + gold[..., 2]
        flat = paddle.masked_select(flat, present)
        if flat.shape[0]:
            values = (paddle.ones([flat.shape[0]], dtype="float32") if targets is None
                      else paddle.masked_select(targets.astype("float32"), present))
            labels = paddle.scatter(labels, flat, values)
    return labels.reshape([batch, num_types, length, length])
