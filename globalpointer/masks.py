"""Which (start, end) cells can be spans, and the value a masked cell holds."""
import paddle

# A masked cell must lose every comparison and vanish under exp(), in float16 and bfloat16 too:
# -1e4 does both (exp underflows to 0, and it is far inside float16's +-65504), whereas the
# usual `logits - mask * 1e12` overflows float16 to -inf and turns the loss into NaN.
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


def mask_logits(logits: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
    return paddle.where(mask, logits, paddle.full_like(logits, MASKED_LOGIT))
