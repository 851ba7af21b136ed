"""Token-classification baselines over the same encoder: BIO tags with a softmax or a CRF.

Tags: 0 is O, 1 + 2t is B-type_t, 2 + 2t is I-type_t.  A tagger cannot represent overlapping
entities: of overlapping gold spans the longest is kept and the rest are counted as dropped.
"""
from typing import List, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from ..spans import CLS_POSITIONS, TokenSpan
from .crf import LinearChainCRF


def gold_to_tags(gold: np.ndarray, length: int) -> Tuple[np.ndarray, int]:
    """BIO tag ids ``[batch, L]`` from gold rows (type, start, end); returns the dropped count."""
    tags = np.zeros((gold.shape[0], length), dtype=np.int64)
    dropped = 0
    for b, rows in enumerate(gold):
        taken = np.zeros(length, dtype=bool)
        for t, s, e in sorted((tuple(r) for r in rows if r[0] >= 0), key=lambda r: (r[1] - r[2], r[1])):
            if taken[s:e + 1].any():
                dropped += 1
                continue
            taken[s:e + 1] = True
            tags[b, s] = 1 + 2 * t
            tags[b, s + 1:e + 1] = 2 + 2 * t
    return tags, dropped


def tags_to_token_spans(tags: List[int], probabilities: np.ndarray, offset: int = 0) -> List[TokenSpan]:
    """Lenient BIO decoding (an I- that does not continue its type starts an entity); the score is
    the mean probability of the span's tags.  Positions are shifted by ``offset``."""
    spans, start, open_type = [], None, None

    def close(end):
        if start is not None:
            score = float(np.mean([probabilities[i, tags[i]] for i in range(start, end + 1)]))
            spans.append(TokenSpan(open_type, start + offset, end + offset, score))

    for i, tag in enumerate(tags):
        entity_type = (tag - 1) // 2 if tag else None
        if tag == 0:
            close(i - 1)
            start, open_type = None, None
        elif tag % 2 == 1 or open_type != entity_type:  # B-, or an I- of another type
            close(i - 1)
            start, open_type = i, entity_type
    close(len(tags) - 1)
    return spans


class TokenTagger(nn.Layer):
    packs_texts = False  # one text per row: tags (and a CRF's transitions) would run across texts
    smooths_boundaries = False  # a tag per token: no span targets to smooth (train.boundary_smoothing)

    def __init__(self, hidden_size: int, num_types: int, crf: bool = False):
        super().__init__()
        self.num_types = num_types
        self.num_tags = 1 + 2 * num_types
        self.classifier = nn.Linear(hidden_size, self.num_tags)
        self.crf = LinearChainCRF(self.num_tags) if crf else None

    def forward(self, hidden: paddle.Tensor, span_text: paddle.Tensor) -> paddle.Tensor:
        with paddle.amp.auto_cast(enable=False):
            return self.classifier(hidden.astype("float32"))

    @staticmethod
    def _text_part(emissions, span_text):
        """The text tokens' columns: from input positions to text tokens."""
        return emissions[:, CLS_POSITIONS:], span_text[:, CLS_POSITIONS:].astype("bool")

    def loss(self, emissions: paddle.Tensor, gold: paddle.Tensor, span_text: paddle.Tensor, planes=None, soft=None):
        if planes is not None:  # training refuses such data first (training/loop.py)
            raise ValueError("a token tagger learns every type at every token; it cannot leave types out")
        if soft is not None:  # the loop passes none (smooths_boundaries)
            raise ValueError("a token tagger has no span targets to smooth")
        tags, dropped = gold_to_tags(gold.numpy(), emissions.shape[1])
        emissions, mask = self._text_part(emissions, span_text)
        tags = paddle.to_tensor(tags[:, CLS_POSITIONS:])
        if self.crf is not None:
            return self.crf.nll(emissions, tags, mask), dropped
        per_token = F.cross_entropy(emissions, tags.unsqueeze(-1), reduction="none").squeeze(-1)
        maskf = mask.astype("float32")
        return (per_token * maskf).sum() / paddle.clip(maskf.sum(), min=1.0), dropped

    def decode(self, emissions: paddle.Tensor, span_text: paddle.Tensor, threshold: float = 0.0) -> List[List[TokenSpan]]:
        emissions, mask = self._text_part(emissions, span_text)
        probabilities = F.softmax(emissions, axis=-1).numpy()
        lengths = mask.astype("int64").sum(1).numpy()
        if self.crf is not None:
            paths = self.crf.viterbi(emissions.numpy(), lengths)
        else:
            paths = [row[:n].tolist() for row, n in zip(probabilities.argmax(-1), lengths)]
        return [tags_to_token_spans(path, probabilities[b], offset=CLS_POSITIONS) for b, path in enumerate(paths)]
