
import numpy as np
import paddle
import pytest

from globalpointer.model.heads import EfficientGlobalPointer, GlobalPointer, build_head
from globalpointer.model.masks import MASKED_LOGIT, span_mask
from globalpointer.model.rope import RotaryPositionEmbedding


def inputs(batch=2, length=8, hidden=16, seed=0):
    paddle.seed(seed)
    hidden_states = paddle.randn([batch, length, hidden])
    span_text = np.zeros((batch, length), bool)
    span_text[0, 1:7] = True
    span_text[1, 1:4] = True  # shorter example: the rest is padding
    return hidden_states, paddle.to_tensor(span_text)


@pytest.mark.parametrize("head_cls", [GlobalPointer, EfficientGlobalPointer])
@pytest.mark.parametrize("rope", [True, False])
def test_shapes_and_masks(head_cls, rope):
    hidden, span_text = inputs()
    head = head_cls(16, num_types=3, head_size=8, rope=rope)
    logits = head(hidden, span_text).numpy()
    assert logits.shape == (2, 3, 8, 8) and logits.dtype == np.float32
    tm = span_text.numpy()
    for b in range(2):
        for i in range(8):
            for j in range(8):
                open_cell = tm[b, i] and tm[b, j] and j >= i
                assert (logits[b, :, i, j] > MASKED_LOGIT / 2).all() == open_cell
                assert (logits[b, :, i, j] < MASKED_LOGIT / 2).all() == (not open_cell)


def test_without_tril_mask_lower_triangle_is_scored():
    hidden, span_text = inputs()
    logits = GlobalPointer(16, 2, 8, tril_mask=False)(hidden, span_text).numpy()
    assert (logits[0, :, 5, 2] > MASKED_LOGIT / 2).all()
    assert (logits[1, :, 5, 2] < MASKED_LOGIT / 2).all()  # still padding


def test_global_pointer_score_formula():
    hidden, span_text = inputs()
    head = GlobalPointer(16, num_types=2, head_size=4)
    logits = head(hidden, span_text).numpy()
    proj = (hidden.numpy() @ head.dense.weight.numpy() + head.dense.bias.numpy()).reshape(2, 8, 2, 8)
    rope = RotaryPositionEmbedding(4)
    b, t, i, j = 0, 1, 2, 5
    q = rope(paddle.to_tensor(proj[b, :, t, :4])).numpy()[i]
    k = rope(paddle.to_tensor(proj[b, :, t, 4:])).numpy()[j]
    assert logits[b, t, i, j] == pytest.approx(float(q @ k) / 2.0, abs=1e-4)


def test_efficient_global_pointer_score_formula():
    hidden, span_text = inputs()
    head = EfficientGlobalPointer(16, num_types=3, head_size=4)
    logits = head(hidden, span_text).numpy()
    proj = hidden.numpy() @ head.dense.weight.numpy() + head.dense.bias.numpy()
    bias = (proj @ head.bias_dense.weight.numpy() + head.bias_dense.bias.numpy()) / 2
    rope = RotaryPositionEmbedding(4)
    b, t, i, j = 0, 2, 1, 4
    q = rope(paddle.to_tensor(proj[b, :, 0::2])).numpy()[i]
    k = rope(paddle.to_tensor(proj[b, :, 1::2])).numpy()[j]
    expected = q @ k / 2.0 + bias[b, i, 2 * t + 1] + bias[b, j, 2 * t]
    assert logits[b, t, i, j] == pytest.approx(float(expected), abs=1e-4)


def test_rope_scores_depend_on_content_and_relative_offset_only():
    """With RoPE, a span's score depends on its tokens and their relative offset: the same content at
    another offset scores the same, the same token pair at another distance scores differently.
    Without RoPE the head sees no position at all: a shift changes nothing (trivially), and neither
    does distance, which is why GlobalPointer without RoPE collapses on flat NER."""
    paddle.seed(3)
    content = paddle.randn([1, 4, 16])
    pad = paddle.zeros([1, 3, 16])
    early = paddle.concat([content, pad], axis=1)
    late = paddle.concat([pad, content], axis=1)
    mask = paddle.ones([1, 7], dtype="bool")
    same = paddle.concat([content[:, :1]] * 5, axis=1)  # one token repeated: only positions differ
    for rope in (True, False):
        head = GlobalPointer(16, 1, 8, rope=rope)
        a = head(early, mask).numpy()[0, 0, :4, :4]
        b = head(late, mask).numpy()[0, 0, 3:, 3:]
        np.testing.assert_allclose(a, b, atol=1e-4)
        scores = head(same, paddle.ones([1, 5], dtype="bool")).numpy()[0, 0]
        np.testing.assert_allclose(scores[0, 1], scores[2, 3], atol=1e-4)  # same distance, same score
        assert np.isclose(scores[0, 1], scores[0, 4], atol=1e-4) == (not rope)  # distance matters with RoPE only


def test_efficient_head_has_far_fewer_parameters():
    count = lambda layer: sum(int(np.prod(p.shape)) for p in layer.parameters())
    gp, egp = GlobalPointer(768, 10, 64), EfficientGlobalPointer(768, 10, 64)
    assert count(egp) * 5 < count(gp)


def test_head_is_float32_under_float16_hidden_states():
    hidden, span_text = inputs()
    logits = EfficientGlobalPointer(16, 2, 8)(hidden.astype("float16"), span_text)
    assert logits.dtype == paddle.float32


def test_build_head_names():
    from globalpointer.config import load_config
    from globalpointer.model.heads import HEADS

    model = load_config(overrides=["model.head=efficient_global_pointer", "model.head_size=8"]).model
    head = build_head(model.head, 16, 2, head_size=model.head_size)
    assert isinstance(head, EfficientGlobalPointer) and head.head_size == 8
    for name, spec in HEADS.items():  # every registered head builds, and says truly whether its types share a term
        assert spec.shared_scores == isinstance(build_head(name, 16, 2, head_size=8), EfficientGlobalPointer)
    with pytest.raises(ValueError, match="global_pointer"):
        build_head("globalpointer", 16, 2)


def test_span_mask_upper_triangle():
    mask = span_mask(paddle.to_tensor([[False, True, True, False]])).numpy()[0, 0]
    expected = np.array([[0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]], bool)
    assert (mask == expected).all()


def test_efficient_head_scores_as_paddlenlp_layer_with_the_same_weights():
    """PaddleNLP's GlobalPointer is an independent implementation of the same efficient head (its own
    RoPE tables, einsum, bias layout); given our weights it must give our logits on every open cell."""
    from paddlenlp.layers.globalpointer import GlobalPointer as PaddleNLPGlobalPointer

    hidden, span_text = inputs(length=8)
    ours = EfficientGlobalPointer(16, num_types=3, head_size=8)
    theirs = PaddleNLPGlobalPointer(16, 3, head_size=8)
    theirs.dense1.set_state_dict(ours.dense.state_dict())
    theirs.dense2.set_state_dict(ours.bias_dense.state_dict())
    open_cells = span_mask(span_text).numpy()[:, 0]  # [batch, L, L]
    expected = theirs(hidden, span_text.astype("float32")).numpy().transpose(0, 2, 3, 1)[open_cells]
    got = ours(hidden, span_text).numpy().transpose(0, 2, 3, 1)[open_cells]
    assert open_cells.sum() == 21 + 6
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
