"""A text's certainty (inference/doubt.py), the margins it reads (Extractor.records(..., margins=True))
and the texts ``select`` picks (inference/selection.py)."""
import hashlib
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from globalpointer.data.features import Featurizer
from globalpointer.inference.doubt import MEASURES, NEAR, certainty, entropy, expected_errors, least_margin
from globalpointer.inference.extractor import Extractor
from globalpointer.inference.selection import Chosen, Selection, select_lines
from globalpointer.model.decode import decode_logit_array
from globalpointer.model.encoders import build_tiny
from globalpointer.spans import Record

margins = st.lists(st.floats(-NEAR + 1e-6, NEAR - 1e-6, allow_subnormal=False), max_size=30)


def probability(margin):
    return 1 / (1 + math.exp(-margin))


@given(margins)
def test_the_measures_are_their_formulas(cells):
    wrong = [min(probability(m), 1 - probability(m)) for m in cells]
    assert expected_errors(cells) == pytest.approx(1 / (1 + sum(wrong)))
    assert entropy(cells) == pytest.approx(1 / (1 - sum(w * math.log(w) + (1 - w) * math.log(1 - w) for w in wrong)))
    assert least_margin(cells) == pytest.approx(2 * probability(min((abs(m) for m in cells), default=NEAR)) - 1)


@given(margins, st.floats(-NEAR + 1e-6, NEAR - 1e-6, allow_subnormal=False))
def test_one_more_doubtful_cell_never_makes_a_text_more_certain(cells, more):
    for measure in MEASURES.values():
        assert 0 <= measure(cells + [more]) <= measure(cells) <= 1


def test_a_cell_on_its_threshold_is_the_most_doubt_one_cell_gives():
    assert expected_errors([0.0]) == pytest.approx(1 / 1.5)
    assert expected_errors([0.0]) < expected_errors([1.0]) < expected_errors([-3.0]) < expected_errors([]) == 1
    assert least_margin([0.0]) == 0
    with pytest.raises(ValueError, match="margins=True"):
        certainty(Record("text", []))


class LogitModel:
    """Scores every cell from the tokens at its two ends (the same window, the same scores), as an
    export's runtime: numpy in, numpy out."""
    reads_arrays = True
    packs_texts = True

    def __init__(self, types):
        self.types = types

    def __call__(self, input_ids, token_text, span_text):
        ids = np.asarray(input_ids, dtype=np.float64)
        start, end = ids[:, None, :, None], ids[:, None, None, :]
        kinds = np.arange(self.types, dtype=np.float64)[None, :, None, None]
        return (5 * np.sin(start * 0.37 + end * 0.11 + kinds * 1.3)).astype(np.float32)

    def decode(self, logits, span_text, threshold):
        return decode_logit_array(logits, span_text, True, threshold)


LABELS = ["A", "B", "C"]
texts = st.lists(st.text(alphabet="我在北京大学读书张三李四上海", min_size=1, max_size=30), min_size=1, max_size=6)


@pytest.fixture(scope="module")
def featurizer():
    return Featurizer(build_tiny().tokenizer, "char", max_length=12, window_overlap=4)


@settings(max_examples=40, deadline=None)
@given(texts, st.sampled_from([0.0, 1.5, [0.5, -1.0, 2.0]]), st.sampled_from(["nested", "flat"]), st.booleans())
def test_asking_for_margins_changes_no_entity(featurizer, batch, threshold, decode, pack):
    extractor = Extractor(LogitModel(len(LABELS)), featurizer, LABELS, decode, threshold, batch_size=3, pack_texts=pack)
    plain = extractor.records(batch)
    with_margins = extractor.records(batch, margins=True)
    assert [r.entities for r in with_margins] == [r.entities for r in plain]
    assert all(r.margins is None for r in plain)
    assert all(all(abs(m) < NEAR for m in r.margins) for r in with_margins)


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet="我在北京大学读书张三", min_size=1, max_size=10), st.sampled_from([0.0, [0.5, -1.0, 2.0]]))
def test_the_margins_are_every_span_cell_near_its_threshold(featurizer, text, threshold):
    """One window: every (type, start <= end) cell of the text's tokens within NEAR of its type's
    threshold, from the scores computed here."""
    extractor = Extractor(LogitModel(len(LABELS)), featurizer, LABELS, "nested", threshold)
    window = featurizer.text_windows([text])[0]
    logits = LogitModel(len(LABELS))(np.asarray([window.input_ids]), None, None)[0]
    limits = np.broadcast_to(np.asarray(threshold, dtype=np.float32), (len(LABELS),))
    n = len(window.input_ids) - 2
    expected = [float(logits[t, i, j]) - float(limits[t]) for t in range(len(LABELS))
                for i in range(1, n + 1) for j in range(i, n + 1)]
    expected = sorted(m for m in expected if abs(m) < NEAR)
    assert sorted(extractor.records([text], margins=True)[0].margins) == pytest.approx(expected, abs=1e-5)


def test_select_keeps_the_least_certain_and_one_of_each_near_identical_group():
    selection = Selection(3, max_similarity=0.8)
    offers = [("北京大学的张三今天去了上海开会", 0.9), ("北京大学的张三今天去了上海开会。", 0.2),  # near-identical twins
              ("李四在广州读书，喜欢打篮球和看电影", 0.5), ("中国银行发布了新一季度的财务报告", 0.1),
              ("北京大学的张三今天去了上海开会", 0.05), ("今天天气很好，我们去公园散步吧", 0.7),
              ("一个完全不同的句子，关于音乐与绘画", 0.95)]
    for order, (text, score) in enumerate(offers):
        selection.offer(text, Chosen(score, order, text.encode()))
    assert [(c.order, c.certainty) for c in selection.chosen()] == [(4, 0.05), (3, 0.1), (2, 0.5)]
    assert selection.twins == 2  # the first two copies of the twin, each replaced by a less certain one


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1, allow_subnormal=False), min_size=0, max_size=60), st.integers(1, 10))
def test_select_of_distinct_texts_is_the_lowest_certainties_in_order(scores, count):
    selection = Selection(count, max_similarity=0.8)
    for order, score in enumerate(scores):
        selection.offer(hashlib.sha1(str(order).encode()).hexdigest(), Chosen(score, order, b""))
    assert [(c.certainty, c.order) for c in selection.chosen()] == sorted((s, i) for i, s in enumerate(scores))[:count]


class ScoredExtractor:
    """Records whose one margin is read from the text: 'doubt 0.3' -> margin 0.3."""

    relations, events = [], False  # an entity model's

    def records(self, batch, margins=False):
        assert margins
        return [Record(text, [], margins=(float(text.split()[-1]),)) for text in batch]


def test_select_lines_streams_any_line_kind_and_returns_the_lines_as_read():
    lines = [json.dumps({"text": f"a text of its own, doubt {m}", "id": i}).encode() + b"\n"
             for i, m in enumerate([3.0, 0.1, 2.0, -0.5, 1.0])]
    chosen, read, twins = select_lines(ScoredExtractor(), io.BytesIO(b"".join(lines) + b"\n"), 2, 0.99,
                                       lines_per_chunk=2)
    assert read == 6 and twins == 0
    assert [item.line for item in chosen] == [lines[1].rstrip(b"\n"), lines[3].rstrip(b"\n")]
    assert chosen[0].certainty == certainty(Record("", [], margins=(0.1,)))


def test_select_refuses_a_pool_that_is_not_utf8_naming_the_file_and_line(tmp_path):
    from globalpointer.errors import DataError
    from globalpointer.inference.selection import select_file

    pool = tmp_path / "pool.txt"
    pool.write_bytes("张三在北京 doubt 0.1\n".encode("utf-8") + "李四去了广州 doubt 0.2\n".encode("gbk"))
    with pytest.raises(DataError, match=r"pool.txt:2: not UTF-8 at byte 0 of the line: the file must be UTF-8; "
                                        r"convert it \(iconv -f GBK -t UTF-8"):
        select_file(ScoredExtractor(), str(pool), str(tmp_path / "out.txt"), 1, 0.8, "text")
    assert not (tmp_path / "out.txt").exists()
