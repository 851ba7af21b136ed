import numpy as np
import paddle
import pytest

from globalpointer.model.rope import RotaryPositionEmbedding


def rotation_matrix(m, dim, base=10000.0):
    """Block-diagonal R_m written out from the RoFormer formula, independently of the layer."""
    R = np.zeros((dim, dim))
    for i in range(dim // 2):
        theta = base ** (-2.0 * i / dim)
        c, s = np.cos(m * theta), np.sin(m * theta)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return R


def rope(x, offset=0):
    return RotaryPositionEmbedding(x.shape[-1])(paddle.to_tensor(x), offset=offset).numpy()


def test_equals_block_diagonal_rotation():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 16)).astype("float32")
    out = rope(x)
    for m in range(7):
        expected = x[:, m] @ rotation_matrix(m, 16).T
        np.testing.assert_allclose(out[:, m], expected, atol=1e-5)


def test_equals_complex_multiplication():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 8)).astype("float32")
    as_complex = x[:, 0::2] + 1j * x[:, 1::2]
    theta = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    rotated = as_complex * np.exp(1j * np.arange(5)[:, None] * theta[None])
    out = rope(x)
    np.testing.assert_allclose(out[:, 0::2], rotated.real, atol=1e-5)
    np.testing.assert_allclose(out[:, 1::2], rotated.imag, atol=1e-5)


def test_preserves_norm_shape_and_dtype():
    x = np.random.default_rng(2).standard_normal((3, 4, 11, 32)).astype("float32")
    out = rope(x)
    assert out.shape == x.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    half = RotaryPositionEmbedding(32)(paddle.to_tensor(x).astype("float16"))
    assert half.dtype == paddle.float16


def test_score_depends_only_on_relative_position():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 64)).astype("float32")
    layer = RotaryPositionEmbedding(64)
    seq = np.stack([q, k] * 1000)  # rows at positions 0..1999

    def score(m, n):
        rq = layer(paddle.to_tensor(q[None]), offset=m).numpy()[0]
        rk = layer(paddle.to_tensor(k[None]), offset=n).numpy()[0]
        return float(rq @ rk)

    base = score(3, 10)
    for shift in (1, 57, 1000, 3000):
        assert score(3 + shift, 10 + shift) == pytest.approx(base, abs=2e-3)
    # and it really does change with the distance (so the check above is not vacuous)
    assert abs(score(3, 11) - base) > 1e-3
    # the offset argument is the same as slicing a longer sequence
    full = layer(paddle.to_tensor(seq)).numpy()
    np.testing.assert_allclose(layer(paddle.to_tensor(seq[100:110]), offset=100).numpy(), full[100:110], atol=1e-4)


def test_long_sequences_beyond_512():
    length, dim = 4096, 64
    x = np.random.default_rng(4).standard_normal((length, dim)).astype("float32")
    out = rope(x)
    for m in (0, 511, 512, 4095):
        np.testing.assert_allclose(out[m], x[m] @ rotation_matrix(m, dim).T, atol=2e-3)


def test_rejects_odd_dimension():
    with pytest.raises(ValueError, match="even"):
        RotaryPositionEmbedding(7)


def test_scale_multiplies_the_rotated_vector():
    x = paddle.randn([2, 7, 8])
    rope = RotaryPositionEmbedding(8)
    np.testing.assert_allclose(rope(x, scale=0.25).numpy(), 0.25 * rope(x).numpy(), rtol=1e-6, atol=1e-6)


def test_positions_last_layout_rotates_the_same_vectors():
    """``[..., dim, L]`` input (GlobalPointer's matmul-ready layout), checked against the formula."""
    x = np.random.default_rng(5).standard_normal((3, 2, 16, 9)).astype("float32")  # positions on the last axis
    layer = RotaryPositionEmbedding(16)
    out = layer(paddle.to_tensor(x), offset=4, scale=0.5, positions_last=True).numpy()
    for m in range(9):
        np.testing.assert_allclose(out[..., m], 0.5 * x[..., m] @ rotation_matrix(m + 4, 16).T, atol=1e-5)
    with pytest.raises(ValueError, match="dim=16"):
        layer(paddle.to_tensor(x).transpose([0, 1, 3, 2]), positions_last=True)


@pytest.mark.parametrize("positions_last", [False, True])
def test_gradient_is_the_transposed_rotation(positions_last):
    """d/dx sum(w * scale * R_m x) = scale * R_m^T w, position by position (the layer's backward is
    hand-written, so it is checked against the formula, not against autograd)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 9, 16)).astype("float32")
    w = rng.standard_normal((2, 9, 16)).astype("float32")
    if positions_last:
        x, w = x.transpose(0, 2, 1), w.transpose(0, 2, 1)
    x_t = paddle.to_tensor(x, stop_gradient=False)
    out = RotaryPositionEmbedding(16)(x_t, offset=3, scale=0.5, positions_last=positions_last)
    (out * paddle.to_tensor(w)).sum().backward()
    grad = x_t.grad.numpy()
    for m in range(9):
        w_m, grad_m = (w[..., m], grad[..., m]) if positions_last else (w[:, m], grad[:, m])
        np.testing.assert_allclose(grad_m, 0.5 * w_m @ rotation_matrix(m + 3, 16), atol=1e-5)
