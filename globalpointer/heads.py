"""Span-scoring heads: every (start, end) token pair gets one logit per entity type.

Both heads return float32 logits of shape ``[batch, num_types, seq_len, seq_len]`` in which cells
that can never be a span (padding, special tokens, end before start) hold ``MASKED_LOGIT``.
"""
import math

import paddle
from paddle import nn

from .rope import RotaryPositionEmbedding

# A masked cell must lose every comparison and vanish under exp(), in float16 and bfloat16 too:
# -1e4 does both (exp underflows to 0, and it is far inside float16's +-65504), whereas the
# usual `logits - mask * 1e12` overflows float16 to -inf and turns the loss into NaN.
MASKED_LOGIT = -1e4

HEADS = ("global_pointer", "efficient_global_pointer")


def span_mask(token_mask: paddle.Tensor, tril_mask: bool = True) -> paddle.Tensor:
    """``[batch, 1, L, L]`` bool: True where both ends are text tokens (and start <= end if
    ``tril_mask``).  ``token_mask`` is ``[batch, L]`` bool, False on padding and special tokens."""
    token_mask = token_mask.astype("bool")
    mask = token_mask.unsqueeze([1, 3]) & token_mask.unsqueeze([1, 2])
    if tril_mask:
        length = token_mask.shape[1]
        ones = paddle.ones([length, length], dtype="int32")
        mask = mask & paddle.triu(ones).astype("bool")
    return mask


def mask_logits(logits: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
    return paddle.where(mask, logits, paddle.full_like(logits, MASKED_LOGIT))


class _SpanHead(nn.Layer):
    def __init__(self, num_types: int, head_size: int, rope: bool, tril_mask: bool):
        super().__init__()
        self.num_types = num_types
        self.head_size = head_size
        self.tril_mask = tril_mask
        self.rope = RotaryPositionEmbedding(head_size) if rope else None

    def rotate(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.rope(x) if self.rope is not None else x

    def forward(self, hidden: paddle.Tensor, token_mask: paddle.Tensor) -> paddle.Tensor:
        # The head and its logits stay float32 even when the encoder runs under AMP.
        with paddle.amp.auto_cast(enable=False):
            logits = self.score(hidden.astype("float32"))
            return mask_logits(logits, span_mask(token_mask, self.tril_mask))

    def score(self, hidden: paddle.Tensor) -> paddle.Tensor:
        raise NotImplementedError


class GlobalPointer(_SpanHead):
    """Per-type query/key projections: s_a(i, j) = q_{a,i} . k_{a,j} / sqrt(head_size)."""

    def __init__(self, hidden_size: int, num_types: int, head_size: int = 64, rope: bool = True,
                 tril_mask: bool = True):
        super().__init__(num_types, head_size, rope, tril_mask)
        self.dense = nn.Linear(hidden_size, num_types * 2 * head_size)

    def score(self, hidden):
        proj = self.dense(hidden).reshape([0, 0, self.num_types, 2 * self.head_size])
        proj = proj.transpose([0, 2, 1, 3])  # [batch, types, L, 2 * head_size]
        query = self.rotate(proj[..., : self.head_size])
        key = self.rotate(proj[..., self.head_size:])
        return paddle.matmul(query, key, transpose_y=True) / math.sqrt(self.head_size)


class EfficientGlobalPointer(_SpanHead):
    """One shared q/k projection plus per-type start and end biases (Su, Efficient GlobalPointer):
    s_a(i, j) = q_i . k_j / sqrt(head_size) + start_a(i) + end_a(j)."""

    def __init__(self, hidden_size: int, num_types: int, head_size: int = 64, rope: bool = True,
                 tril_mask: bool = True):
        super().__init__(num_types, head_size, rope, tril_mask)
        self.dense = nn.Linear(hidden_size, 2 * head_size)
        self.bias_dense = nn.Linear(2 * head_size, 2 * num_types)

    def score(self, hidden):
        proj = self.dense(hidden)  # [batch, L, 2 * head_size]
        query = self.rotate(proj[..., 0::2])
        key = self.rotate(proj[..., 1::2])
        shared = paddle.matmul(query, key, transpose_y=True) / math.sqrt(self.head_size)
        # Biases come from the pre-RoPE projection, halved as in the published head.
        bias = self.bias_dense(proj).transpose([0, 2, 1]) / 2  # [batch, 2 * types, L]
        end_bias = bias[:, 0::2].unsqueeze(2)  # [batch, types, 1, L]: varies with the end j
        start_bias = bias[:, 1::2].unsqueeze(3)  # [batch, types, L, 1]: varies with the start i
        return shared.unsqueeze(1) + start_bias + end_bias


def build_head(name: str, hidden_size: int, num_types: int, head_size: int, rope: bool,
               tril_mask: bool) -> _SpanHead:
    classes = {"global_pointer": GlobalPointer, "efficient_global_pointer": EfficientGlobalPointer}
    if name not in classes:
        raise ValueError(f"unknown head {name!r}; choose one of {', '.join(HEADS)}")
    return classes[name](hidden_size, num_types, head_size=head_size, rope=rope, tril_mask=tril_mask)
