"""The peer a PaddlePaddle user has today: PaddleNLP's GlobalPointer layer over the same encoder.

PaddleNLP's ``GlobalPointer`` is the efficient variant (one shared query/key projection plus
per-type start and end biases), so this project's efficient_global_pointer is its like-for-like.
"""
from typing import List

import globalpointer  # noqa: F401  first: it quiets the warnings Paddle prints on import
from paddle import nn
from paddlenlp.layers.globalpointer import GlobalPointer

from globalpointer.model.heads import decode_span_logits
from globalpointer.spans import TokenSpan
from globalpointer.model.loss import count_masked_gold, sparse_span_loss
from globalpointer.model.masks import span_mask


class PeerHead(GlobalPointer):
    """PaddleNLP's layer as it is, plus the ``loss`` and ``decode`` this project's training loop
    and Extractor call: the same sparse loss and threshold decoding as ours.  Its logits mask
    padding and the lower triangle (-1e12) but not [CLS]/[SEP], so decoding masks those."""

    def loss(self, logits, gold, span_text):
        mask = span_mask(span_text)
        return sparse_span_loss(logits, gold, mask), count_masked_gold(gold, mask)

    def decode(self, logits, span_text, threshold: float) -> List[List[TokenSpan]]:
        return decode_span_logits(logits, span_text, True, threshold)


class Peer(nn.Layer):
    """``paddlenlp.layers.GlobalPointerForEntityExtraction`` (whose forward is these two lines)
    with this project's call signature, a ``head`` attribute and ``decode``."""

    def __init__(self, encoder: nn.Layer, num_types: int, head_size: int = 64):
        super().__init__()
        self.encoder = encoder
        self.head = PeerHead(encoder.config["hidden_size"], num_types, head_size=head_size)

    def forward(self, input_ids, token_text, span_text):
        hidden = self.encoder(input_ids, attention_mask=token_text)[0]
        return self.head(hidden, token_text)

    def decode(self, logits, span_text, threshold: float) -> List[List[TokenSpan]]:
        return self.head.decode(logits, span_text, threshold)


def build_peer(settings, encoder, num_types: int) -> Peer:
    """``training.train``'s ``build`` for the peer (``settings``: the config's model section)."""
    return Peer(encoder.model, num_types, settings.head_size)
