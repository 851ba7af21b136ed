"""Linear-chain CRF: negative log-likelihood (forward algorithm in log space) and Viterbi decoding.

Written here rather than taken from PaddleNLP because ``paddlenlp.layers.LinearChainCrfLoss``
(2.8.1) scores the normaliser with ``transitions[to, from]`` and the gold path with
``transitions[from, to]``, so its loss is not a likelihood once transitions are asymmetric (as BIO
needs: O -> I- is forbidden).  Here ``transitions[i, j]`` is the score of tag i followed by tag j.
Sequences are left-aligned: ``mask[b, :n_b]`` is True.
"""
import numpy as np
import paddle
from paddle import nn


class LinearChainCRF(nn.Layer):
    def __init__(self, num_tags: int):
        super().__init__()
        self.num_tags = num_tags
        init = nn.initializer.Uniform(-0.1, 0.1)
        self.transitions = self.create_parameter([num_tags, num_tags], default_initializer=init)
        self.start = self.create_parameter([num_tags], default_initializer=init)
        self.end = self.create_parameter([num_tags], default_initializer=init)

    def log_partition(self, emissions: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
        """log Z per sequence: logsumexp over every tag path of its score.  ``emissions`` [B, L, N]."""
        alpha = self.start.unsqueeze(0) + emissions[:, 0]
        for i in range(1, emissions.shape[1]):
            step = paddle.logsumexp(alpha.unsqueeze(2) + self.transitions.unsqueeze(0), axis=1) + emissions[:, i]
            alpha = paddle.where(mask[:, i:i + 1], step, alpha)
        return paddle.logsumexp(alpha + self.end.unsqueeze(0), axis=1)

    def path_score(self, emissions: paddle.Tensor, tags: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
        """Score of the given tag path (tags on masked positions are ignored)."""
        maskf = mask.astype(emissions.dtype)
        tags = paddle.where(mask, tags, paddle.zeros_like(tags))
        emitted = paddle.take_along_axis(emissions, tags.unsqueeze(2), axis=2).squeeze(2)
        score = (emitted * maskf).sum(1) + paddle.gather(self.start, tags[:, 0])
        pair = tags[:, :-1] * self.num_tags + tags[:, 1:]
        moved = paddle.gather(self.transitions.flatten(), pair.flatten()).reshape(pair.shape)
        score = score + (moved * maskf[:, 1:]).sum(1)
        last = paddle.take_along_axis(tags, (mask.astype("int64").sum(1, keepdim=True) - 1), axis=1).squeeze(1)
        return score + paddle.gather(self.end, last)

    def nll(self, emissions: paddle.Tensor, tags: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
        """Mean negative log-likelihood over the sequences that have at least one position."""
        has_tokens = mask[:, 0]
        loss = self.log_partition(emissions, mask) - self.path_score(emissions, tags, mask)
        return (loss * has_tokens.astype(loss.dtype)).sum() / paddle.clip(has_tokens.astype(loss.dtype).sum(), min=1.0)

    def viterbi(self, emissions: np.ndarray, lengths: np.ndarray) -> list:
        """Best tag path per sequence (numpy, vectorised over the batch)."""
        transitions, start, end = self.transitions.numpy(), self.start.numpy(), self.end.numpy()
        batch, length, _ = emissions.shape
        score = start[None] + emissions[:, 0]
        history = np.zeros((batch, length, self.num_tags), dtype=np.int64)
        for i in range(1, length):
            candidates = score[:, :, None] + transitions[None]
            history[:, i] = candidates.argmax(1)
            step = candidates.max(1) + emissions[:, i]
            score = np.where((i < lengths)[:, None], step, score)
        paths = []
        for b in range(batch):
            n = int(lengths[b])
            if n == 0:
                paths.append([])
                continue
            tag = int((score[b] + end).argmax())
            path = [tag]
            for i in range(n - 1, 0, -1):
                tag = int(history[b, i, tag])
                path.append(tag)
            paths.append(path[::-1])
        return paths
