"""genai/one_row_weights: float32 weights stored as [1, K, N] (onnxruntime's matrix-vector kernel for one row), a
weight tied to the embedding stored once, transposed; onnxruntime gives the numbers it gave before."""

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from experimental.torch_interpreter.genai.one_row_weights import one_row_weights

HIDDEN, VOCAB, INNER = 8, 11, 6


def _decoder():
    """ids -> Gather(table) -> MatMul(w) -> FusedMatMul(table, transB=1) (a head tied to the embedding), plus a
    weight used both ways (left as it is) and a rank-2 product (left as it is)."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    w = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)
    both = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32)
    flat = rng.standard_normal((HIDDEN, INNER)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"]),
        helper.make_node("MatMul", ["emb", "w"], ["h"]),
        helper.make_node("MatMul", ["h", "both"], ["h2"]),
        helper.make_node("FusedMatMul", ["h2", "both"], ["h3"], domain="com.microsoft", transB=1),
        helper.make_node("FusedMatMul", ["h3", "table"], ["logits"], domain="com.microsoft", transB=1, alpha=1.0),
        helper.make_node("Reshape", ["h3", "two_d"], ["rows"]),
        helper.make_node("MatMul", ["rows", "flat"], ["side"]),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((table, "table"), (w, "w"), (both, "both"), (flat, "flat"))]
    inits.append(numpy_helper.from_array(np.array([-1, HIDDEN], dtype=np.int64), "two_d"))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", VOCAB]),
         helper.make_tensor_value_info("side", TensorProto.FLOAT, [None, INNER])], inits)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    # the shape the exporter gives the contrib op's output (onnx's shape inference does not know FusedMatMul)
    graph.value_info.append(helper.make_tensor_value_info("h3", TensorProto.FLOAT, ["batch", "seq", HIDDEN]))
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    return ir.from_proto(onnx.shape_inference.infer_shapes(model))


def _run(model: ir.Model, ids: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": ids})


def test_weights_become_one_row_and_numbers_stay():
    model = _decoder()
    ids = np.array([[1, 4, 10], [0, 3, 3]], dtype=np.int64)
    before = _run(model, ids)
    assert one_row_weights(model) == 2
    shapes = {name: tuple(model.graph.initializers[name].shape) for name in ("table", "w", "both", "flat")}
    # the tied table stored once, transposed; 'both' (two orientations) and 'flat' (a rank-2 product) unchanged
    assert shapes == {"table": (1, HIDDEN, VOCAB), "w": (1, HIDDEN, HIDDEN), "both": (HIDDEN, HIDDEN),
                      "flat": (HIDDEN, INNER)}
    ops = [n.op_type for n in model.graph]
    # the values the rewrite replaced keep their names, types and shapes
    emb, logits = (next(o for n in model.graph for o in n.outputs if o.name == name) for name in ("emb", "logits"))
    assert (emb.dtype, str(emb.shape)) == (ir.DataType.FLOAT, "[batch,seq,8]"), (emb.dtype, emb.shape)
    assert logits.dtype == ir.DataType.FLOAT and str(logits.shape) == f"[batch,seq,{VOCAB}]", logits.shape
    assert ops.count("FusedMatMul") == 1 and "Transpose" in ops
    after = _run(model, ids)
    for expected, got in zip(before, after):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # one row, one token: the decoding step
    np.testing.assert_allclose(_run(model, ids[:1, :1])[0], before[0][:1, :1], rtol=1e-5, atol=1e-5)
