"""Rotary position embedding (RoFormer), interleaved pairs.

For position m and pair i of a vector of size d, theta_i = base^(-2i/d) and the pair
(x_{2i}, x_{2i+1}) is rotated by the angle m * theta_i.  Then <R_m q, R_n k> depends only on
n - m, which is what lets GlobalPointer's span scores generalise across positions.
"""
import paddle
from paddle import nn


class RotaryPositionEmbedding(nn.Layer):
    """Rotates ``x`` of shape ``[..., seq_len, dim]``; the angles are computed on the fly, so any
    sequence length works (no precomputed table to run past)."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"RoPE needs a positive even dimension, got dim={dim}")
        self.dim = dim
        self.base = float(base)

    def angles(self, seq_len, offset: int = 0) -> paddle.Tensor:
        """``[seq_len, dim // 2]`` float32 angles m * theta_i for m = offset .. offset + seq_len - 1."""
        positions = paddle.arange(seq_len, dtype="float32") + offset
        exponents = paddle.arange(0, self.dim, 2, dtype="float32") / self.dim
        inv_freq = paddle.pow(paddle.to_tensor(self.base, dtype="float32"), -exponents)
        return positions.unsqueeze(-1) * inv_freq.unsqueeze(0)

    def forward(self, x: paddle.Tensor, offset: int = 0, scale: float = 1.0) -> paddle.Tensor:
        """``x`` rotated, times ``scale`` (folded into the cos/sin tables: no extra pass over x)."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"RoPE built for dim={self.dim} got a last axis of {x.shape[-1]}")
        # paddle.shape, not .shape: the length stays symbolic in an exported static graph
        angles = self.angles(paddle.shape(x)[-2], offset)
        # [L, dim] tables, each angle twice (stacked, not repeat_interleave: paddle2onnx cannot convert that)
        cos, sin = paddle.cos(angles) * scale, paddle.sin(angles) * scale
        cos = paddle.stack([cos, cos], axis=-1).flatten(-2)
        signed_sin = paddle.stack([-sin, sin], axis=-1).flatten(-2)
        # Rotate in float32 whatever the input dtype: cos/sin of large m*theta lose precision in float16.
        x32 = x.astype("float32")
        # (a, b) -> (a cos - b sin, b cos + a sin): x * cos plus the pair swapped, (b, a), times (-sin, sin).
        # Four passes over x, against ten for slicing out the even and odd halves and stacking them back.
        swapped = paddle.flip(x32.reshape([0] * (x.ndim - 1) + [self.dim // 2, 2]), axis=[-1])
        rotated = x32 * cos + swapped.reshape([0] * (x.ndim - 1) + [self.dim]) * signed_sin
        return rotated.astype(x.dtype)
