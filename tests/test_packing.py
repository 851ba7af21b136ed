"""Rows that hold several texts: each text is encoded, scored and decoded as if it were alone."""
import json
import os

import numpy as np
import paddle
import pytest

import globalpointer
from globalpointer.config import ModelConfig
from globalpointer.data.batching import (PACKED_ROW_TOKENS, collate, collate_rows, pack_rows, prediction_batches,
                                        split_row)
from globalpointer.data.features import Featurizer
from globalpointer.model.encoders import build_tiny
from globalpointer.model.network import model_inputs
from globalpointer.model.masks import MASKED_LOGIT, span_mask, text_attention
from globalpointer.model.network import build_network
from globalpointer.model.reference import open_cells
from globalpointer.spans import TokenSpan

TEXT_IDS = [[1, 1, 1, 2, 2, 0, 0], [1, 1, 1, 1, 1, 1, 1], [1, 2, 3, 3, 3, 0, 0]]


def test_text_attention_lets_a_token_see_its_own_text_only_and_counts_positions_within_it():
    bias, positions = text_attention(paddle.to_tensor(TEXT_IDS))
    for b, row in enumerate(TEXT_IDS):
        for i, query in enumerate(row):
            for j, key in enumerate(row):
                assert bias[b, 0, i, j].item() == (0.0 if key == query and key > 0 else MASKED_LOGIT)
            if query > 0:
                assert positions[b, i].item() == i - row.index(query)
    # a usual 0/1 mask: every key of the text is open, positions count from 0
    bias, positions = text_attention(paddle.to_tensor([[1, 1, 1, 0]]))
    assert (bias[0, 0, :3, :3].numpy() == 0).all() and positions[0, :3].tolist() == [0, 1, 2]


@pytest.mark.parametrize("tril", [True, False])
def test_span_mask_keeps_spans_inside_one_text(tril):
    token_ids = np.array([[0, 1, 1, 0, 0, 2, 2, 0], [0, 1, 1, 1, 1, 1, 0, 0]])
    got = span_mask(paddle.to_tensor(token_ids), tril).numpy()
    for b, row in enumerate(token_ids):
        for i in range(len(row)):
            for j in range(len(row)):
                assert got[b, 0, i, j] == (row[i] > 0 and row[i] == row[j] and (i <= j or not tril))
    # one text per row, as a bool mask: the cells of the independent formula (reference.py)
    flags = token_ids > 0
    np.testing.assert_array_equal(span_mask(paddle.to_tensor(flags), tril).numpy(), open_cells(flags, tril))


def test_pack_rows_puts_every_window_in_one_row_within_the_budget():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=200).tolist() + [150]
    rows = pack_rows(lengths, 64)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 64 or len(row) == 1 for row in rows)
    assert [200] in rows  # longer than a row: alone
    assert len(rows) < 0.7 * len(lengths)  # short windows do share rows
    assert pack_rows([30, 20, 40, 10], 50) == [[2, 3], [0, 1]]  # first fit, longest first


def test_a_call_with_one_long_window_shares_rows_of_64_tokens_at_most():
    """Rows as long as the longest window (125 tokens) cost 0.80x on CoNLL04: the cap holds whatever it is."""
    lengths = [125, 40, 30, 30, 20, 20, 10]
    rows = [row for batch in prediction_batches(lengths, 64, True) for row in batch]
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert [0] in rows and all(sum(lengths[i] for i in row) <= PACKED_ROW_TOKENS for row in rows if row != [0])
    assert any(len(row) > 1 for row in rows)
    assert sorted(row for batch in prediction_batches([20, 10, 10], 64, True) for row in batch) == [[0], [1, 2]]
    assert [len(row) for batch in prediction_batches(lengths, 64, False) for row in batch] == [1] * len(lengths)


def test_split_row_gives_each_window_its_spans_over_its_own_positions():
    spans = [TokenSpan(0, 1, 2, 0.9), TokenSpan(1, 6, 6, 0.8), TokenSpan(0, 11, 12, 0.7)]
    assert split_row(spans, [5, 4, 6]) == [[TokenSpan(0, 1, 2, 0.9)], [TokenSpan(1, 1, 1, 0.8)],
                                            [TokenSpan(0, 2, 3, 0.7)]]


@pytest.mark.parametrize("head", ["global_pointer", "efficient_global_pointer"])
def test_a_row_of_three_texts_scores_each_text_as_if_it_were_alone(head):
    paddle.seed(3)
    encoder = build_tiny()
    model = build_network(ModelConfig(head=head, head_size=16), encoder, 3)
    model.eval()
    assert model.packs_texts
    featurizer = Featurizer(encoder.tokenizer, "char", 32, 8)
    windows = featurizer.text_windows(["北京欢迎你", "张三在上海读书", "好"])
    alone = model(**model_inputs(collate(windows, featurizer.pad_id))).numpy()
    packed_inputs = model_inputs(collate_rows([windows], featurizer.pad_id))
    packed = model(**packed_inputs).numpy()
    assert packed.shape[0] == 1 and packed_inputs["token_text"].numpy().max() == 3
    start = 0
    for i, window in enumerate(windows):
        n = len(window.input_ids)
        open_ = open_cells(collate([window], featurizer.pad_id)["span_text"] > 0)[0]
        block = packed[0][:, start:start + n, start:start + n]
        np.testing.assert_allclose(np.where(open_, block, 0), np.where(open_, alone[i][:, :n, :n], 0), atol=2e-5)
        start += n
    # a cell across two texts is never a span
    assert (packed[0][:, :len(windows[0].input_ids), len(windows[0].input_ids):] <= MASKED_LOGIT / 2).all()


@pytest.mark.parametrize("backend", ["dynamic", "paddle-inference", "onnxruntime"])
def test_packed_rows_predict_what_a_row_per_text_predicts(trained, backend):
    from globalpointer.deploy.export import export_checkpoint

    pytest.importorskip("onnxruntime")
    model = str(trained / "run" / "best")
    if backend != "dynamic":
        model = str(trained / "export-packing")
        if not os.path.isdir(model):
            export_checkpoint(str(trained / "run" / "best"), model, onnx=True)
    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")]
    packed = globalpointer.load(model, backend=backend)
    assert packed.extractor.pack_texts
    texts_per_row, row_lengths = [], []
    network = packed.extractor.model

    def counting(**inputs):
        texts_per_row.append(int(inputs["token_text"].numpy().max()))
        row_lengths.append(inputs["input_ids"].shape[1])
        return network(**inputs)
    packed.extractor.model = type("Counted", (), {"__call__": staticmethod(counting), "packs_texts": True,
                                                  "decode": staticmethod(network.decode)})()
    one_per_row = globalpointer.load(model, backend=backend)
    one_per_row.extractor.pack_texts = False
    with_packing, without = list(packed.pipe(texts)), list(one_per_row.pipe(texts))
    assert max(texts_per_row) > 1  # rows did hold several texts
    longest = max(len(w.input_ids) for w in packed.extractor.featurizer.text_windows(texts))
    assert max(row_lengths) == longest  # and none is longer than a row of one text
    assert [[(e["start"], e["end"], e["type"]) for e in found] for found in with_packing] == \
        [[(e["start"], e["end"], e["type"]) for e in found] for found in without]
    assert sum(map(len, without)) > 0
    np.testing.assert_allclose([e["score"] for found in with_packing for e in found],
                               [e["score"] for found in without for e in found], atol=1e-4)


def test_an_export_of_an_earlier_version_reads_one_text_per_row(trained, tmp_path):
    """Exports made before rows could hold several texts take a bool span_text and have no export.json."""
    import shutil

    from globalpointer.model_directory.layout import EXPORT_INFO, EXPORT_PROGRAM as PROGRAM
    from globalpointer.deploy.export import INPUT_SPEC
    from globalpointer.model_directory.opening import load_checkpoint

    checkpoint = trained / "run" / "best"

    class EarlierExport(paddle.nn.Layer):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, token_text, span_text):
            return self.model(input_ids, token_text, span_text.astype("int64"))

    spec = INPUT_SPEC[:2] + [paddle.static.InputSpec([None, None], "bool", "span_text")]
    static = paddle.jit.to_static(EarlierExport(load_checkpoint(str(checkpoint)).network), input_spec=spec, full_graph=True)
    paddle.jit.save(static, str(tmp_path / "earlier" / PROGRAM[:-len(".json")]))
    for name in os.listdir(checkpoint):
        if name.endswith((".json", ".yaml", ".txt")):
            shutil.copy(checkpoint / name, tmp_path / "earlier")
    assert not (tmp_path / "earlier" / EXPORT_INFO).exists()
    earlier = globalpointer.load(str(tmp_path / "earlier"), backend="paddle-inference")
    assert not earlier.extractor.model.packs_texts and not earlier.extractor.pack_texts
    texts = [json.loads(line)["text"] for line in open(trained / "dev.jsonl", encoding="utf-8")]
    dynamic = globalpointer.load(str(checkpoint), backend="dynamic")
    assert [[(e["start"], e["end"], e["type"]) for e in found] for found in earlier.pipe(texts)] == \
        [[(e["start"], e["end"], e["type"]) for e in found] for found in dynamic.pipe(texts)]
