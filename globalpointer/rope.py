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

    def forward(self, x: paddle.Tensor, offset: int = 0) -> paddle.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"RoPE built for dim={self.dim} got a last axis of {x.shape[-1]}")
        # paddle.shape, not .shape: the length stays symbolic in an exported static graph
        angles = self.angles(paddle.shape(x)[-2], offset)
        cos, sin = paddle.cos(angles), paddle.sin(angles)
        # Rotate in float32 whatever the input dtype: cos/sin of large m*theta lose precision in float16.
        x32 = x.astype("float32")
        even, odd = x32[..., 0::2], x32[..., 1::2]
        rotated = paddle.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
        return paddle.flatten(rotated, start_axis=-2).astype(x.dtype)
