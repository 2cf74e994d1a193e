"""plot_graph: an ONNX graph drawn with matplotlib, one box per node, inputs and outputs marked."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx_ir as ir  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from experimental.torch_interpreter import ArgumentError, plot_graph, to_onnx  # noqa: E402
from experimental.torch_interpreter.investigate.plot_graph import NOTES_GID, _isotonic  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def boxes(ax, kind: str) -> list[str]:
    return sorted(p.get_gid()[len(kind) + 1:] for p in ax.patches if (p.get_gid() or "").startswith(kind + ":"))


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts if t.get_gid() != NOTES_GID]


def notes(ax) -> str:
    """The notes under the drawing, on one line."""
    return " ".join(t.get_text().replace("\n", " ") for t in ax.texts if t.get_gid() == NOTES_GID)


def mlp_model() -> onnx.ModelProto:
    weight = onnx.numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "weight")
    nodes = [
        helper.make_node("MatMul", ["x", "weight"], ["h"], name="matmul"),
        helper.make_node("Constant", [], ["half"], name="half", value=onnx.numpy_helper.from_array(np.array(0.5, dtype=np.float32))),
        helper.make_node("Mul", ["h", "half"], ["m"], name="mul"),
        helper.make_node("Relu", ["m"], ["r"], name="relu"),
        helper.make_node("Sigmoid", ["m"], ["s"], name="sigmoid"),
        helper.make_node("Add", ["r", "s"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def if_model() -> onnx.ModelProto:
    then = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"], name="then_add")], "then", [],
                             [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])])
    other = helper.make_graph(
        [helper.make_node("Sub", ["x", "y"], ["d"], name="else_sub"), helper.make_node("Neg", ["d"], ["w"], name="else_neg")],
        "else", [], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])],
    )
    zero = onnx.numpy_helper.from_array(np.array(0, dtype=np.float32), "zero")
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["a"], ["x"], name="relu"),
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"], name="greater"),
            helper.make_node("If", ["c"], ["o"], name="branch", then_branch=then, else_branch=other),
        ],
        "with_if",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [3])],
        initializer=[zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def loop_model() -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "step"], ["acc_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "start"], ["final"], name="loop", body=body)],
        "with_loop",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []), helper.make_tensor_value_info("start", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("step", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("final", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def test_one_box_per_node_inputs_and_outputs_marked():
    model = mlp_model()
    ax = plot_graph(model, title="mlp")
    assert isinstance(ax, matplotlib.axes.Axes)
    # the Constant is written inside the box of the node reading it, not drawn as a box
    assert boxes(ax, "node") == ["add", "matmul", "mul", "relu", "sigmoid"]
    assert boxes(ax, "input") == ["x"] and boxes(ax, "output") == ["y"]
    shown = texts(ax)
    for op in ("MatMul", "Mul", "Relu", "Sigmoid", "Add"):
        assert op in shown
    assert "weight [4, 3]" in shown  # the initializer, in the MatMul box
    assert "0.5" in shown  # the constant, in the Mul box
    assert "FLOAT [batch, 4]" in shown
    # one arrow per edge: x->MatMul, MatMul->Mul, Mul->Relu, Mul->Sigmoid, Relu->Add, Sigmoid->Add, Add->y
    arrows = [p for p in ax.patches if isinstance(p, matplotlib.patches.FancyArrowPatch)]
    assert len(arrows) == 7
    assert ax.get_title() == "mlp"
    assert notes(ax) == ""  # nothing to note
    ax.figure.canvas.draw()


@pytest.mark.parametrize("direction", ["TB", "LR", "auto"])
def test_directions_and_a_given_axes(direction):
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 4))
    ax = plot_graph(mlp_model(), right, direction=direction)
    assert ax is right and fig.axes == [left, right]
    assert len(boxes(ax, "node")) == 5
    centers = {p.get_gid(): (p.get_x() + p.get_width() / 2, p.get_y() + p.get_height() / 2)
               for p in ax.patches if p.get_gid()}
    x, y = centers["input:x"], centers["output:y"]
    if direction == "TB":
        assert y[1] < x[1]  # the output below the input
    elif direction == "LR":
        assert y[0] > x[0]  # the output right of the input
    fig.canvas.draw()


def test_accepts_ir_model_program_and_path(tmp_path):
    model = mlp_model()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    for given in (ir.from_proto(model), str(path), path, model.graph):
        assert boxes(plot_graph(given), "node") == ["add", "matmul", "mul", "relu", "sigmoid"]


def test_exported_model():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    onx = to_onnx(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},))
    ax = plot_graph(onx)
    assert len(boxes(ax, "node")) == len([n for n in onx.graph.node if n.op_type != "Constant"])
    assert "FLOAT [batch, 4]" in texts(ax)


def test_if_is_one_box_with_a_note():
    ax = plot_graph(if_model())
    assert boxes(ax, "node") == ["branch", "greater", "relu", "sum"]  # not the nodes of the branches
    shown = texts(ax)
    assert "If" in shown and "then_branch: 1 nodes" in shown and "else_branch: 2 nodes" in shown
    assert "If: 1 node(s) with subgraphs, each drawn as one box" in notes(ax)
    # the branches read x (made by Relu) and y (an input): two dashed edges into the If box
    dashed = [p for p in ax.patches if isinstance(p, matplotlib.patches.FancyArrowPatch) and p.get_linestyle() != "-"]
    assert len(dashed) == 2
    ax.figure.canvas.draw()


def test_a_subgraph_draws_with_the_outer_values_as_inputs():
    model = ir.from_proto(if_model())
    branch = next(n for n in model.graph if n.op_type == "If")
    ax = plot_graph(branch.attributes["else_branch"].value)
    assert boxes(ax, "node") == ["else_neg", "else_sub"]
    assert boxes(ax, "input") == ["x", "y"]
    assert "outer scope" in texts(ax)


def test_loop_is_one_box():
    ax = plot_graph(loop_model())
    assert boxes(ax, "node") == ["loop"]
    assert "body: 2 nodes" in texts(ax)
    assert "Loop: 1 node(s) with subgraphs" in notes(ax)


def test_a_large_graph_is_truncated_with_a_note():
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"relu{i}") for i in range(150)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("v150", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph)
    ax = plot_graph(model, max_nodes=40)
    assert len(boxes(ax, "node")) == 40
    assert "the first 40 of 150 nodes are drawn" in notes(ax)
    assert boxes(ax, "output") == []  # computed by a node not drawn
    # all of them: drawn, shrunk to fit the largest figure, and said so
    ax = plot_graph(model, max_nodes=1000)
    assert len(boxes(ax, "node")) == 150
    assert "shrunk to fit" in notes(ax)


def test_not_a_model_is_refused_clearly(tmp_path):
    with pytest.raises(ArgumentError, match=r"plot_graph draws an ONNX model.*torch.nn.modules.linear.Linear.*to_onnx"):
        plot_graph(torch.nn.Linear(2, 2))
    with pytest.raises(ArgumentError, match="not builtins.int"):
        plot_graph(3)
    with pytest.raises(TypeError):  # ArgumentError is a TypeError too
        plot_graph({"graph": None})
    with pytest.raises(FileNotFoundError, match="no ONNX file"):
        plot_graph(str(tmp_path / "missing.onnx"))
    with pytest.raises(ArgumentError, match="direction"):
        plot_graph(mlp_model(), direction="up")
    with pytest.raises(ArgumentError, match="max_nodes"):
        plot_graph(mlp_model(), max_nodes=0)


def test_isotonic():
    assert _isotonic([1.0, 3.0, 2.0, 4.0]) == [1.0, 2.5, 2.5, 4.0]
    assert _isotonic([]) == []
