"""Which (start, end) cells can be spans, and how the heads push the others out of reach."""
import paddle

# Added to a cell's score, this makes it lose every comparison and vanish under exp(), in float16
# and bfloat16 too: exp(-1e4 + s) underflows to 0 for any score of realistic size, and -1e4 is far
# inside float16's +-65504, whereas the usual `logits - mask * 1e12` overflows float16 to -inf and
# turns the loss into NaN.
MASKED_LOGIT = -1e4


def span_mask(token_mask: paddle.Tensor, tril_mask: bool = True) -> paddle.Tensor:
    """``[batch, 1, L, L]`` bool: True where both ends are text tokens (and start <= end if
    ``tril_mask``).  ``token_mask`` is ``[batch, L]`` bool, False on padding and special tokens."""
    token_mask = token_mask.astype("bool")
    mask = token_mask.unsqueeze([1, 3]) & token_mask.unsqueeze([1, 2])
    if tril_mask:
        # paddle.shape, not .shape: the length stays symbolic in an exported static graph
        positions = paddle.arange(paddle.shape(token_mask)[1])
        mask = mask & (positions.unsqueeze(1) <= positions.unsqueeze(0))
    return mask


def span_mask_bias(token_mask: paddle.Tensor, tril_mask: bool = True) -> paddle.Tensor:
    """``[batch, 1, L, L]`` float32: 0 on open cells, ``MASKED_LOGIT`` on the others.  Adding it
    masks the scores in one pass with nothing to do in the backward pass (measured: half the added
    cost of ``paddle.where`` with a filled tensor, forward and backward, at 4 x 50 x 256 x 256)."""
    return (~span_mask(token_mask, tril_mask)).astype("float32") * MASKED_LOGIT
