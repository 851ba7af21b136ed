"""The INT8 export's graph rewrite: the fused attention computes what the exported graph computes."""
import inspect

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from globalpointer.deploy.export import export_checkpoint  # noqa: E402
from globalpointer.deploy.onnx_graph import fuse_attention, plain_graph  # noqa: E402
from globalpointer.model.encoders import build_tiny  # noqa: E402

TINY_LAYERS = inspect.signature(build_tiny).parameters["layers"].default


@pytest.fixture(scope="module")
def graph(trained, tmp_path_factory):
    directory = tmp_path_factory.mktemp("onnx-graph") / "export"
    export_checkpoint(str(trained / "run" / "best"), str(directory), onnx=True)
    model = onnx.load(str(directory / "model.onnx"))
    return model


def run(model, feed):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


def packed_feed(model):
    """Two rows: one with two texts side by side and padding, one with a single text."""
    vocabulary = next(tensor.dims[0] for tensor in model.graph.initializer if "embedding" in tensor.name)
    token_text = np.array([[1, 1, 1, 1, 2, 2, 2, 0, 0], [1] * 9], np.int64)
    input_ids = np.random.default_rng(0).integers(1, vocabulary, token_text.shape).astype(np.int64)
    return {"input_ids": input_ids * (token_text > 0), "token_text": token_text, "span_text": token_text}


def test_every_attention_block_is_fused_and_scores_the_same(graph):
    """Also the proof that the encoder runs without a key/value cache: its concatenation sits between
    the projections and the scores, and no block would match."""
    plain = onnx.ModelProto()
    plain.CopyFrom(graph)
    plain_graph(plain)
    fused = onnx.ModelProto()
    fused.CopyFrom(plain)
    assert fuse_attention(fused) == TINY_LAYERS
    assert not [node for node in fused.graph.node if node.op_type == "Softmax"]
    feed = packed_feed(plain)
    expected, found = run(plain, feed), run(fused, feed)
    open_cells = expected > -1e3  # masked cells are about MASKED_LOGIT in both; compare the ones that decode
    assert np.array_equal(open_cells, found > -1e3)
    np.testing.assert_allclose(found[open_cells], expected[open_cells], rtol=1e-4, atol=1e-4)


def test_a_block_whose_inner_value_is_read_elsewhere_is_left_alone(graph):
    model = onnx.ModelProto()
    model.CopyFrom(graph)
    plain_graph(model)
    softmax = [node for node in model.graph.node if node.op_type == "Softmax"]
    model.graph.output.append(onnx.helper.make_tensor_value_info(softmax[0].output[0], onnx.TensorProto.FLOAT, None))
    assert fuse_attention(model) == TINY_LAYERS - 1
    assert len(run(model, packed_feed(model))) == 2
