"""Rewrites of the exported ONNX graph before quantization, for ONNX Runtime.

paddle2onnx writes every weight as a ``Constant`` node and leaves ``Identity`` nodes between ops;
the quantizer passes over both (it quantized nothing), so ``plain_graph`` turns the constants into
initializers and drops the identities.  ``fuse_attention`` then replaces each self-attention block
of a PaddleNLP encoder (three projections, scaled scores, additive mask, softmax, context) by ONNX
Runtime's ``Attention`` op, which the quantizer makes a ``QAttention``: one int8 GEMM for Q, K and V
and the attention itself in one kernel.  Only ``model.int8.onnx`` is rewritten this way (it runs on
ONNX Runtime alone); ``model.onnx`` stays standard ONNX for any runtime.
"""
from collections import defaultdict
from typing import Dict, List, NamedTuple, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..model.masks import MASKED_LOGIT

MICROSOFT = "com.microsoft"


def plain_graph(model: onnx.ModelProto) -> None:
    """Constants become initializers; an ``Identity``'s readers read its input (graph outputs stay)."""
    graph = model.graph
    kept = []
    for node in graph.node:
        if node.op_type == "Constant" and [attribute.name for attribute in node.attribute] == ["value"]:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            kept.append(node)
    outputs = {output.name for output in graph.output}
    alias: Dict[str, str] = {}
    for node in kept:
        if node.op_type == "Identity" and node.output[0] not in outputs:
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
    kept = [node for node in kept if not (node.op_type == "Identity" and node.output[0] in alias)]
    for node in kept:
        for index, name in enumerate(node.input):
            node.input[index] = alias.get(name, name)
    del graph.node[:]
    graph.node.extend(kept)


class _Graph:
    def __init__(self, graph: onnx.GraphProto):
        named = set()
        for index, node in enumerate(graph.node):  # the rewrite removes nodes by name
            if not node.name or node.name in named:
                node.name = f"{node.op_type}.{index}"
            named.add(node.name)
        self.constants = {tensor.name: tensor for tensor in graph.initializer}
        self.producer = {name: node for node in graph.node for name in node.output}
        self.outputs = {output.name for output in graph.output}
        self.readers = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self.readers[name].append(node)

    def parent(self, node, index: int, op_type: str):
        found = self.producer.get(node.input[index]) if len(node.input) > index else None
        return found if found is not None and found.op_type == op_type else None

    def only_reader(self, node, op_type: str):
        readers = self.readers[node.output[0]]
        return readers[0] if len(readers) == 1 and readers[0].op_type == op_type else None

    def constant(self, name: str) -> Optional[np.ndarray]:
        return numpy_helper.to_array(self.constants[name]) if name in self.constants else None


def _permutation(node) -> List[int]:
    return [value for attribute in node.attribute if attribute.name == "perm" for value in attribute.ints]


class _Projection(NamedTuple):
    source: str  # the tensor projected (the block's input)
    weight: np.ndarray
    bias: np.ndarray
    heads: int
    nodes: list


def _projection(g: _Graph, transpose) -> Optional[_Projection]:
    """``Transpose(0,2,1,3) <- Reshape([0,0,heads,size]) <- Add(bias) <- MatMul(x, W)``, or None."""
    if transpose is None or _permutation(transpose) != [0, 2, 1, 3]:
        return None
    reshape = g.parent(transpose, 0, "Reshape")
    add = reshape and g.parent(reshape, 0, "Add")
    matmul = add and g.parent(add, 0, "MatMul")
    if matmul is None:
        return None
    weight, bias, shape = g.constant(matmul.input[1]), g.constant(add.input[1]), g.constant(reshape.input[1])
    if weight is None or bias is None or shape is None or weight.ndim != 2 or shape.tolist()[:2] != [0, 0] \
            or len(shape) != 4:
        return None
    return _Projection(matmul.input[0], weight, bias, int(shape[2]), [transpose, reshape, add, matmul])


def fuse_attention(model: onnx.ModelProto) -> int:
    """Replaces each self-attention block by ``com.microsoft.Attention``; returns how many.  The mask
    is the additive one the network builds (``[batch, 1, L, L]``, 0 where a token may attend,
    MASKED_LOGIT where not), handed over as the op's 3-D 0/1 mask with MASKED_LOGIT as its filter value."""
    g = _Graph(model.graph)
    removed, added, masks, fused = set(), [], {}, 0
    for softmax in [node for node in model.graph.node if node.op_type == "Softmax"]:
        mask_add = g.parent(softmax, 0, "Add")
        scores = mask_add and g.parent(mask_add, 0, "MatMul")
        context = g.only_reader(softmax, "MatMul")
        merge = context and g.only_reader(context, "Transpose")
        output = merge and g.only_reader(merge, "Reshape")
        shift = scores and g.parent(scores, 0, "Add")  # paddle's scale op: q * scale + 0
        scale = shift and g.parent(shift, 0, "Mul")
        key_transpose = scores and g.parent(scores, 1, "Transpose")
        if None in (output, scale, key_transpose) or _permutation(merge) != [0, 2, 1, 3] \
                or _permutation(key_transpose) != [0, 1, 3, 2] or g.constant(shift.input[1]) is None \
                or np.any(g.constant(shift.input[1]) != 0) or g.constant(scale.input[1]) is None:
            continue
        query, key, value = parts = [_projection(g, g.parent(scale, 0, "Transpose")),
                                     _projection(g, g.parent(key_transpose, 0, "Transpose")),
                                     _projection(g, g.parent(context, 1, "Transpose"))]
        if None in parts or len({part.source for part in parts}) != 1 or len({part.heads for part in parts}) != 1:
            continue
        if not np.allclose(g.constant(scale.input[1]), (query.weight.shape[1] // query.heads) ** -0.5):
            continue
        block = [node for part in parts for node in part.nodes] + [scale, shift, key_transpose, scores, mask_add,
                                                                   softmax, context, merge, output]
        inside = {node.name for node in block}
        if any(name in g.outputs or any(reader.name not in inside for reader in g.readers[name])
               for node in block[:-1] for name in node.output):
            continue  # a value inside the block is read elsewhere too
        mask = mask_add.input[1]
        if mask not in masks:
            masks[mask] = f"{mask}.attend"
            model.graph.initializer.extend([
                numpy_helper.from_array(np.array([1], np.int64), f"{mask}.head_axis"),
                numpy_helper.from_array(np.array(MASKED_LOGIT / 2, np.float32), f"{mask}.half")])
            added += [helper.make_node("Squeeze", [mask, f"{mask}.head_axis"], [f"{mask}.rows"]),
                      helper.make_node("Greater", [f"{mask}.rows", f"{mask}.half"], [f"{mask}.open"]),
                      helper.make_node("Cast", [f"{mask}.open"], [masks[mask]], to=onnx.TensorProto.INT32)]
        name = f"attention_{fused}"
        model.graph.initializer.extend([
            numpy_helper.from_array(np.concatenate([part.weight for part in parts], axis=1), f"{name}.qkv_weight"),
            numpy_helper.from_array(np.concatenate([part.bias for part in parts]), f"{name}.qkv_bias")])
        added.append(helper.make_node("Attention", [query.source, f"{name}.qkv_weight", f"{name}.qkv_bias",
                                                    masks[mask]], [output.output[0]], name=name, domain=MICROSOFT,
                                      num_heads=query.heads, mask_filter_value=float(MASKED_LOGIT)))
        removed.update(inside)
        fused += 1
    if not fused:
        return 0
    _sort_topologically(model.graph, [node for node in model.graph.node if node.name not in removed] + added)
    if not any(opset.domain == MICROSOFT for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    return fused


def _sort_topologically(graph: onnx.GraphProto, nodes: list) -> None:
    known = {item.name for item in graph.input} | {tensor.name for tensor in graph.initializer} | {""}
    ordered, pending = [], nodes
    while pending:
        waiting = []
        for node in pending:
            if all(name in known for name in node.input):
                ordered.append(node)
                known.update(node.output)
            else:
                waiting.append(node)
        if len(waiting) == len(pending):
            raise ValueError(f"the rewritten graph has a cycle or a missing input at {waiting[0].name}")
        pending = waiting
    del graph.node[:]
    graph.node.extend(ordered)
