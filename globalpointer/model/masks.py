"""Which (start, end) cells can be spans, how the heads push the others out of reach, and which
tokens the encoder lets see each other when a row holds several texts."""
from typing import Tuple

import numpy as np
import paddle

# Added to a cell's score, this makes it lose every comparison and vanish under exp(), in float16
# and bfloat16 too: exp(-1e4 + s) underflows to 0 for any score of realistic size, and -1e4 is far
# inside float16's +-65504, whereas the usual `logits - mask * 1e12` overflows float16 to -inf and
# turns the loss into NaN.
MASKED_LOGIT = -1e4


def span_mask(span_text: paddle.Tensor, tril_mask: bool = True) -> paddle.Tensor:
    """``[batch, 1, L, L]`` bool: True where both ends are text tokens of the same text (and start <=
    end if ``tril_mask``).  ``span_text`` ``[batch, L]`` numbers the texts of a row (1, 2, ... for
    rows that hold several) and is 0 (False) on padding and special tokens; a bool mask is one text."""
    ids = span_text.astype("int64")
    mask = (ids.unsqueeze([1, 3]) == ids.unsqueeze([1, 2])) & (ids > 0).unsqueeze([1, 2])
    if tril_mask:
        # paddle.shape, not .shape: the length stays symbolic in an exported static graph
        positions = paddle.arange(paddle.shape(span_text)[1])
        mask = mask & (positions.unsqueeze(1) <= positions.unsqueeze(0))
    return mask


def span_mask_at(span_text: np.ndarray, cells: np.ndarray, tril_mask: bool = True) -> np.ndarray:
    """``span_mask`` at the given cells only: ``cells`` ``[K, 4]`` rows (batch, type, start, end);
    ``[K]`` bool.  For the few cells above a threshold, where the whole mask would cost more."""
    text = np.asarray(span_text).astype("int64")
    row, start, end = cells[:, 0], cells[:, 2], cells[:, 3]
    open_cells = (text[row, start] > 0) & (text[row, start] == text[row, end])
    return open_cells & (start <= end) if tril_mask else open_cells


def text_attention(token_text: paddle.Tensor) -> Tuple[paddle.Tensor, paddle.Tensor]:
    """What the encoder needs to read rows that hold several texts as if each were alone.

    ``token_text`` ``[batch, L]`` numbers the texts of a row (1, 2, ...; 0 on padding; a usual
    0/1 mask is one text).  Returns the additive attention bias ``[batch, 1, L, L]`` (0 where the key
    is a token of the query's text, ``MASKED_LOGIT`` elsewhere, as PaddleNLP's encoders add it) and
    ``position_ids`` ``[batch, L]``: each token's index within its text, so every text starts at 0."""
    ids = token_text.astype("int64")
    same = ids.unsqueeze(2) == ids.unsqueeze(1)  # [batch, L (query), L (key)]
    bias = (~(same & (ids > 0).unsqueeze(1))).astype("float32").unsqueeze(1) * MASKED_LOGIT
    positions = paddle.arange(paddle.shape(ids)[1])
    earlier = positions.unsqueeze(1) > positions.unsqueeze(0)  # key before query
    return bias, (same & earlier).astype("int64").sum(-1)


def span_mask_bias(span_text: paddle.Tensor, tril_mask: bool = True) -> paddle.Tensor:
    """``[batch, 1, L, L]`` float32: 0 on open cells, ``MASKED_LOGIT`` on the others.  Adding it
    masks the scores in one pass with nothing to do in the backward pass (measured: half the added
    cost of ``paddle.where`` with a filled tensor, forward and backward, at 4 x 50 x 256 x 256)."""
    return (~span_mask(span_text, tril_mask)).astype("float32") * MASKED_LOGIT
