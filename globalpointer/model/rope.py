"""Rotary position embedding (RoFormer), interleaved pairs.

For position m and pair i of a vector of size d, theta_i = base^(-2i/d) and the pair
(x_{2i}, x_{2i+1}) is rotated by the angle m * theta_i.  Then <R_m q, R_n k> depends only on
n - m, which is what lets GlobalPointer's span scores generalise across positions.
The plain formula, one pair at a time: ``reference.rope``.
"""
import numpy as np
import paddle
from paddle import nn
from paddle.autograd import PyLayer


def rotate_pairs(x, cos, sin, swap, positions_last: bool):
    """(a, b) -> (a cos - b sin, b cos + a sin) = x * cos + (-b, a) * sin, the pair swap as a matmul."""
    if positions_last:
        return x * cos + paddle.matmul(swap, x) * sin
    return x * cos + paddle.matmul(x, swap, transpose_y=True) * sin


class _Rotation(PyLayer):
    """The rotation's gradient is the rotation by the opposite angles (R^T = R(-angle)): one pass
    like the forward, where autograd's broadcast multiply and matmul gradients take 2x as long on CPU
    (bench/kernels.py)."""

    @staticmethod
    def forward(ctx, x, cos, sin, swap, positions_last):
        ctx.tables = (cos, sin, swap, positions_last)
        return rotate_pairs(x, cos, sin, swap, positions_last)

    @staticmethod
    def backward(ctx, grad):
        cos, sin, swap, positions_last = ctx.tables
        return rotate_pairs(grad, cos, -sin, swap, positions_last)


class RotaryPositionEmbedding(nn.Layer):
    """Rotates ``x`` of shape ``[..., seq_len, dim]`` (or ``[..., dim, seq_len]`` with
    ``positions_last``); the angles are computed on the fly, so any sequence length works (no
    precomputed table to run past)."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"RoPE needs a positive even dimension, got dim={dim}")
        self.dim = dim
        self.base = float(base)
        # (a, b) -> (-b, a) for every pair, as a matrix: a matmul does it in a third of the time of
        # paddle.flip over the pairs on CPU (bench/kernels.py); not persistable, so not in checkpoints
        swap = np.zeros((dim, dim), "float32")
        pairs = np.arange(0, dim, 2)
        swap[pairs, pairs + 1], swap[pairs + 1, pairs] = -1.0, 1.0
        self.register_buffer("swap", paddle.to_tensor(swap), persistable=False)

    def angles(self, seq_len, offset: int = 0) -> paddle.Tensor:
        """``[seq_len, dim // 2]`` float32 angles m * theta_i for m = offset .. offset + seq_len - 1."""
        positions = paddle.arange(seq_len, dtype="float32") + offset
        exponents = paddle.arange(0, self.dim, 2, dtype="float32") / self.dim
        inv_freq = paddle.pow(paddle.to_tensor(self.base, dtype="float32"), -exponents)
        return positions.unsqueeze(-1) * inv_freq.unsqueeze(0)

    def tables(self, seq_len, offset: int = 0, scale: float = 1.0, positions_last: bool = False):
        """``cos`` and ``sin`` times ``scale``, ``[seq_len, dim]`` (``[dim, seq_len]`` with ``positions_last``),
        each angle twice, for the two members of its pair."""
        angles = self.angles(seq_len, offset)
        cos, sin = paddle.cos(angles) * scale, paddle.sin(angles) * scale
        # stacked, not repeat_interleave: paddle2onnx cannot convert that
        cos, sin = paddle.stack([cos, cos], axis=-1).flatten(-2), paddle.stack([sin, sin], axis=-1).flatten(-2)
        return (cos.t(), sin.t()) if positions_last else (cos, sin)

    def forward(self, x: paddle.Tensor, offset: int = 0, scale: float = 1.0,
                positions_last: bool = False) -> paddle.Tensor:
        """``x`` rotated, times ``scale`` (folded into the cos/sin tables: no extra pass over x).
        ``positions_last``: ``x`` is ``[..., dim, seq_len]``, the layout in which GlobalPointer's
        query and key are ready for their matmul."""
        feature_axis, position_axis = (-2, -1) if positions_last else (-1, -2)
        if x.shape[feature_axis] != self.dim:
            raise ValueError(f"RoPE built for dim={self.dim} got {x.shape[feature_axis]} features (shape {x.shape})")
        # paddle.shape, not .shape: the length stays symbolic in an exported static graph
        cos, sin = self.tables(paddle.shape(x)[position_axis], offset, scale, positions_last)
        # Rotate in float32 whatever the input dtype: cos/sin of large m*theta lose precision in float16.
        x32 = x.astype("float32")
        if paddle.in_dynamic_mode():
            rotated = _Rotation.apply(x32, cos, sin, self.swap, positions_last)
        else:
            rotated = rotate_pairs(x32, cos, sin, self.swap, positions_last)
        return rotated.astype(x.dtype)
