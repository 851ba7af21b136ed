"""Span-scoring heads: every (start, end) token pair gets one logit per entity type.

Both heads return float32 logits of shape ``[batch, num_types, seq_len, seq_len]`` in which cells
that can never be a span (padding, special tokens, end before start) have ``MASKED_LOGIT`` added,
which sends them far below any threshold and makes them vanish under exp() in the loss.
Every head also owns its training loss and its decoding, so the loop and the predictor need not know
which head they drive.
The plain float64 formulas they are tested against: ``reference.global_pointer_scores`` and
``reference.efficient_global_pointer_scores``.
"""
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import paddle
from paddle import nn

from ..spans import TokenSpan
from .decode import Threshold, spans_at_hits, threshold_array
from .loss import count_masked_gold, dense_span_loss, gold_to_dense, sparse_span_loss
from .masks import span_mask, span_mask_bias
from .relation_head import build_relation_head
from .rope import RotaryPositionEmbedding
from .span_autograd import broadcast_scores, pairwise_scores


def decode_span_logits(logits: paddle.Tensor, span_text: paddle.Tensor, tril_mask: bool,
                       threshold: Threshold) -> List[List[TokenSpan]]:
    """Logits -> token spans: every cell of the span mask above its type's threshold (the plain
    formula: ``reference.decode_spans``).  The threshold is applied where the logits are (GPU or
    CPU): only the cells above it are copied out, not the whole ``[batch, types, L, L]`` tensor."""
    limits = threshold_array(threshold)
    hits = paddle.nonzero(logits > (float(limits[0]) if limits.size == 1
                                    else paddle.to_tensor(limits.reshape(1, -1, 1, 1))))
    if hits.shape[0] == 0:
        return [[] for _ in range(logits.shape[0])]
    values = paddle.gather_nd(logits, hits).numpy()
    return spans_at_hits(hits.numpy(), values, span_text.numpy(), tril_mask, logits.shape[0])


class _SpanHead(nn.Layer):
    smooths_boundaries = True  # its loss takes soft span targets (train.boundary_smoothing)

    def __init__(self, num_types: int, head_size: int, rope: bool, tril_mask: bool, loss: str = "sparse"):
        super().__init__()
        self.num_types = num_types
        self.head_size = head_size
        self.tril_mask = tril_mask
        self.loss_kind = loss
        self.rope = RotaryPositionEmbedding(head_size) if rope else None

    def rotate(self, x: paddle.Tensor, scale: float = 1.0, positions_last: bool = False) -> paddle.Tensor:
        if self.rope is not None:
            return self.rope(x, scale=scale, positions_last=positions_last)
        return x * scale if scale != 1.0 else x

    def forward(self, hidden: paddle.Tensor, span_text: paddle.Tensor) -> paddle.Tensor:
        # The head and its logits stay float32 even when the encoder runs under AMP.
        with paddle.amp.auto_cast(enable=False):
            return self.score(hidden.astype("float32"), span_mask_bias(span_text, self.tril_mask))

    def score(self, hidden: paddle.Tensor, mask_bias: paddle.Tensor) -> paddle.Tensor:
        """Masked logits; ``mask_bias`` ``[batch, 1, L, L]`` is added where it costs least."""
        raise NotImplementedError

    def loss(self, logits: paddle.Tensor, gold: paddle.Tensor, span_text: paddle.Tensor,
             planes: Optional[paddle.Tensor] = None,
             soft: Optional[Tuple[paddle.Tensor, paddle.Tensor]] = None) -> Tuple[paddle.Tensor, int]:
        """The loss and how many gold rows fell into masked cells (left out of it); ``planes``
        ``[batch, types]``: the types each example's file annotates (``loss.plane_mean``); ``soft``:
        (rows, targets) that replace the gold rows' targets of 1 (``smoothing.smoothed_targets``)."""
        mask = span_mask(span_text, self.tril_mask)
        rows, targets = soft if soft is not None else (gold, None)
        if self.loss_kind == "dense":
            value = dense_span_loss(logits, gold_to_dense(rows, self.num_types, logits.shape[-1], targets), mask, planes)
        else:
            value = sparse_span_loss(logits, rows, mask, planes, targets)
        return value, count_masked_gold(gold, mask)

    def decode(self, logits: paddle.Tensor, span_text: paddle.Tensor, threshold: Threshold) -> List[List[TokenSpan]]:
        return decode_span_logits(logits, span_text, self.tril_mask, threshold)


class GlobalPointer(_SpanHead):
    """Per-type query/key projections: s_a(i, j) = q_{a,i} . k_{a,j} / sqrt(head_size)."""

    def __init__(self, hidden_size: int, num_types: int, head_size: int = 64, rope: bool = True,
                 tril_mask: bool = True, loss: str = "sparse"):
        super().__init__(num_types, head_size, rope, tril_mask, loss)
        self.dense = nn.Linear(hidden_size, num_types * 2 * head_size)

    def score(self, hidden, mask_bias):
        # The projection is made as [batch, types * 2 * head_size, L] (the weight and hidden read
        # transposed by the matmul): each type's query and key are then [head_size, L] blocks, ready
        # for the scores' matmul; nn.Linear's [batch, L, types, ...] would need a transposed copy
        # (projection + RoPE 1.22x as long with it at 50 types, bench/kernels.py).
        proj = paddle.matmul(self.dense.weight, hidden, transpose_x=True, transpose_y=True)
        proj = (proj + self.dense.bias.unsqueeze(-1)).reshape([0, self.num_types, 2, self.head_size, -1])
        # query and key rotated in one pass; each scaled by head_size^-1/4 makes 1/sqrt(head_size) in q.k
        proj = self.rotate(proj, scale=self.head_size ** -0.25, positions_last=True)
        # unbind, not two slices: its gradient is one stack, a slice's a zero-filled copy each
        query, key = paddle.unbind(proj, axis=2)
        return pairwise_scores(query, key, mask_bias)


class EfficientGlobalPointer(_SpanHead):
    """One shared q/k projection plus per-type start and end biases (Su, Efficient GlobalPointer):
    s_a(i, j) = q_i . k_j / sqrt(head_size) + start_a(i) + end_a(j)."""

    def __init__(self, hidden_size: int, num_types: int, head_size: int = 64, rope: bool = True,
                 tril_mask: bool = True, loss: str = "sparse"):
        super().__init__(num_types, head_size, rope, tril_mask, loss)
        self.dense = nn.Linear(hidden_size, 2 * head_size)
        self.bias_dense = nn.Linear(2 * head_size, 2 * num_types)

    def score(self, hidden, mask_bias):
        proj = self.dense(hidden)  # [batch, L, 2 * head_size]
        query = self.rotate(proj[..., 0::2], scale=1 / math.sqrt(self.head_size))
        key = self.rotate(proj[..., 1::2])
        # masked while the scores are shared by all types: no pass over [batch, types, L, L] for it
        shared = paddle.matmul(query, key, transpose_y=True).unsqueeze(1) + mask_bias
        # Biases come from the pre-RoPE projection, halved as in the published head.
        bias = self.bias_dense(proj).transpose([0, 2, 1]) / 2  # [batch, 2 * types, L]
        end_bias = bias[:, 0::2].unsqueeze(2)  # [batch, types, 1, L]: varies with the end j
        start_bias = bias[:, 1::2].unsqueeze(3)  # [batch, types, L, 1]: varies with the start i
        return broadcast_scores(shared, start_bias, end_bias)


class HeadSpec(NamedTuple):
    """A head by name: how to build it, and whether part of every type's score is one term all types share."""
    build: Callable[..., nn.Layer]  # (hidden_size, num_types, head_size=, rope=, tril_mask=, loss=)
    shared_scores: bool = False


# The one list of heads: config/schema.py's model.head choices and every check by kind come from it.
HEADS: Dict[str, HeadSpec] = {
    "global_pointer": HeadSpec(GlobalPointer),
    "efficient_global_pointer": HeadSpec(EfficientGlobalPointer, shared_scores=True),
}


def build_head(name: str, hidden_size: int, num_types: int, head_size: int = 64, rope: bool = True,
               tril_mask: bool = True, loss: str = "sparse", relations: int = 0) -> nn.Layer:
    """The head ``name`` of ``HEADS`` (the config's ``model.head``) with the model's span settings; with
    ``relations`` types, GPLinker's relation head over it (``relation_head``; ``rope`` in its pair heads
    too)."""
    if name not in HEADS:
        raise ValueError(f"unknown head {name!r}; choose one of {', '.join(HEADS)}")
    head = HEADS[name].build(hidden_size, num_types, head_size=head_size, rope=rope, tril_mask=tril_mask, loss=loss)
    return (build_relation_head(head, EfficientGlobalPointer, hidden_size, relations, head_size, rope)
            if relations else head)
