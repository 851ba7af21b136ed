import itertools

import numpy as np
import paddle
import pytest

from globalpointer.model.crf import LinearChainCRF
from globalpointer.spans import TokenSpan
from globalpointer.model.taggers import TokenTagger, gold_to_tags, tags_to_token_spans


def brute_force(emissions, transitions, start, end, n):
    """Every tag path of length n, scored from the CRF definition."""
    def score(path):
        return (start[path[0]] + sum(emissions[i, path[i]] for i in range(n))
                + sum(transitions[path[i - 1], path[i]] for i in range(1, n)) + end[path[-1]])
    paths = list(itertools.product(range(emissions.shape[1]), repeat=n))
    scores = np.array([score(p) for p in paths])
    return paths, scores


@pytest.fixture
def crf_case():
    paddle.seed(0)
    crf = LinearChainCRF(3)
    crf.transitions.set_value(paddle.randn([3, 3]))  # asymmetric on purpose
    emissions = paddle.randn([2, 4, 3])
    mask = paddle.to_tensor([[True] * 4, [True, True, False, False]])
    tags = paddle.to_tensor([[0, 1, 2, 1], [2, 0, 0, 0]], dtype="int64")
    return crf, emissions, mask, tags


def test_crf_nll_equals_brute_force(crf_case):
    crf, emissions, mask, tags = crf_case
    T, s, e, E = crf.transitions.numpy(), crf.start.numpy(), crf.end.numpy(), emissions.numpy()
    expected = []
    for b, n in enumerate((4, 2)):
        paths, scores = brute_force(E[b], T, s, e, n)
        log_z = np.log(np.exp(scores).sum())
        expected.append(log_z - scores[paths.index(tuple(tags.numpy()[b, :n]))])
    assert float(crf.nll(emissions, tags, mask)) == pytest.approx(np.mean(expected), rel=1e-5)


def test_crf_viterbi_equals_brute_force(crf_case):
    crf, emissions, mask, _ = crf_case
    T, s, e, E = crf.transitions.numpy(), crf.start.numpy(), crf.end.numpy(), emissions.numpy()
    decoded = crf.viterbi(E, np.array([4, 2]))
    for b, n in enumerate((4, 2)):
        paths, scores = brute_force(E[b], T, s, e, n)
        assert decoded[b] == list(paths[int(scores.argmax())])


def test_gold_to_tags_keeps_longest_of_overlapping():
    gold = np.array([[[0, 1, 4], [1, 1, 2], [1, 6, 6]], [[-1, -1, -1]] * 3])
    tags, dropped = gold_to_tags(gold, 8)
    assert dropped == 1
    assert tags[0].tolist() == [0, 1, 2, 2, 2, 0, 3, 0] and tags[1].tolist() == [0] * 8


def test_lenient_bio_decoding():
    tags = [0, 1, 2, 4, 3, 0, 2, 2]  # B-0 I-0 | I-1 starts type 1 | B-1 | O | I-0 I-0
    probabilities = np.full((8, 5), 0.5)
    spans = tags_to_token_spans(tags, probabilities, offset=1)
    assert spans == [TokenSpan(0, 2, 3, 0.5), TokenSpan(1, 4, 4, 0.5), TokenSpan(1, 5, 5, 0.5), TokenSpan(0, 7, 8, 0.5)]


@pytest.mark.parametrize("crf", [False, True])
def test_tagger_learns_a_fixed_pattern(crf):
    paddle.seed(1)
    tagger = TokenTagger(32, num_types=2, crf=crf)
    hidden = paddle.randn([4, 7, 32])  # wide enough for the 20 token vectors to be separable
    span_text = paddle.to_tensor([[False] + [True] * 5 + [False]] * 4)
    gold = paddle.to_tensor([[[0, 1, 2], [1, 4, 5]]] * 4, dtype="int64")
    optimizer = paddle.optimizer.Adam(0.05, parameters=tagger.parameters())
    initial = float(tagger.loss(tagger(hidden, span_text), gold, span_text)[0])
    for _ in range(300):
        loss, dropped = tagger.loss(tagger(hidden, span_text), gold, span_text)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    assert dropped == 0 and float(loss) < initial / 10
    decoded = tagger.decode(tagger(hidden, span_text), span_text)
    assert [(s.type, s.start, s.end) for s in decoded[0]] == [(0, 1, 2), (1, 4, 5)]
