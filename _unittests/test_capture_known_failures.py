"""Known torch.export failures: a patch of bypass_export_some_errors (applied automatically as a capture
strategy) gets past it, torch 2.13 already handles it (kept as a regression test with numerics), or the error
says what to change in the model with the model's line."""

import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_leaves

from experimental.torch_interpreter import ExportCaptureError, InferenceSession, bypass_export_some_errors, to_onnx
from experimental.torch_interpreter.onnx_export_errors import patch_table
from experimental.torch_interpreter.testing.check import check_model

# -- a control-flow body returning an input unchanged --------------------------------------------------------


class CondAlias(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x, lambda x: x * 2, (x,))


class ScanAlias(torch.nn.Module):
    def forward(self, x):
        def combine(carry, v):
            n = carry + v
            return n, n

        return torch._higher_order_ops.scan(combine, torch.zeros_like(x[0]), x)


class WhileAlias(torch.nn.Module):
    def forward(self, x, y):
        def cond_fn(i, a, b):
            return i < 3

        def body_fn(i, a, b):
            return i + 1, a * 2, b

        return torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), x, y))


ALIASING = [
    (CondAlias(), (torch.randn(3, 4),), (-torch.rand(5, 4),), ({0: "b"},)),
    (ScanAlias(), (torch.randn(3, 4),), (torch.rand(5, 4),), ({0: "b"},)),
    (WhileAlias(), (torch.randn(3, 4), torch.randn(2)), (torch.rand(5, 4), torch.randn(2)), ({0: "b"}, None)),
]


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
@pytest.mark.parametrize("case", ALIASING, ids=["cond", "scan", "while_loop"])
def test_aliasing_body_patched(case, strict):
    model, first, second, ds = case
    with pytest.raises(ExportCaptureError, match="aliasing"):
        to_onnx(model, first, dynamic_shapes=ds, strict=strict, capture_strategies=False)
    with bypass_export_some_errors():
        check_model(model, first, dynamic_shapes=ds, more_inputs=[(second, None)], strict=strict,
                    capture_strategies=False)
    assert not hasattr(torch.cond, "__aten2onnx_patch__")


@pytest.mark.parametrize("case", ALIASING, ids=["cond", "scan", "while_loop"])
def test_aliasing_body_automatic(case):
    """to_onnx retries with the patches by itself; eager scan/while_loop compile their bodies and fail the
    same way, so the expected values are computed under bypass_export_some_errors."""
    model, first, second, ds = case
    onx = to_onnx(model, first, dynamic_shapes=ds)
    sess = InferenceSession(onx)
    for inputs in (first, second):
        with bypass_export_some_errors():
            expected = [t for t in tree_leaves(model(*inputs)) if isinstance(t, torch.Tensor)]
        got = sess.run(None, {i.name: t for i, t in zip(onx.graph.input, inputs)})
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-5, atol=1e-6)
    meta = {p.key: p.value for p in onx.metadata_props}
    assert meta["aten2onnx.capture.strategies"] == "control_flow_aliasing"
    assert not hasattr(torch.cond, "__aten2onnx_patch__")


def test_patch_table_lists_control_flow_patches():
    table = patch_table()
    for name in ("torch.cond without aliasing", "while_loop without aliasing", "scan without aliasing"):
        assert f"* - {name}" in table


# -- while_loop carrying tensors whose shapes relate to the inputs ---------------------------------------


class WhileRelated(torch.nn.Module):
    def forward(self, x, y):
        def cond_fn(i, a, b):
            return i < 3

        def body_fn(i, a, b):
            return i + 1, a + b[: a.shape[0]], torch.cat([b[1:], b[:1]]) * 2

        return torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), x, y))[1:]


def test_while_loop_carried_shapes_related_to_inputs():
    check_model(
        WhileRelated(),
        (torch.randn(3, 2), torch.randn(5, 2)),
        dynamic_shapes=({0: "n"}, {0: "m"}),
        more_inputs=[((torch.randn(4, 2), torch.randn(7, 2)), None)],
    )


# -- nonzero-derived tensors as cond operands -----------------------------------------------------------


class NonzeroCond(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0)
        return torch.cond(idx.shape[0] > 2, lambda i: i.float().sum(0), lambda i: i.float().mean(0), (idx,))


class MaskedCond(torch.nn.Module):
    def forward(self, x):
        v = x[x > 0]
        return torch.cond(v.numel() > 0, lambda v: v.sum() + v.max(), lambda v: v.sum(), (v,))


def test_nonzero_operand_of_cond():
    torch.manual_seed(0)
    check_model(
        NonzeroCond(),
        (torch.randn(5, 3),),
        dynamic_shapes=({0: "n"},),
        more_inputs=[((torch.tensor([[1.0, -1, -1], [-1, -1, -1]]),), None)],
    )
    check_model(MaskedCond(), (torch.randn(5, 3),), dynamic_shapes=({0: "n"},),
                more_inputs=[((torch.randn(4, 3) - 5,), None)])


class NonzeroBranchOutput(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x > 0)
        return torch.cond(x.sum() > 0, lambda i: i * 2, lambda i: i + 1, (idx,))  # branch output of nonzero size


def test_nonzero_sized_branch_output_says_where():
    """torch cannot unify branch outputs of a data-dependent size: no sound patch, the error names the line."""
    with pytest.raises(ExportCaptureError, match=r"Model code: .*test_capture_known_failures.py:\d+ in forward: "
                                                 r"return torch.cond\(x.sum\(\) > 0"):
        to_onnx(NonzeroBranchOutput(), (torch.randn(5, 3),), dynamic_shapes=({0: "n"},))


# -- x[..., idx] = update with a broadcast update -------------------------------------------------------


class SetItem(torch.nn.Module):
    def forward(self, x, idx, update):
        x = x.clone()
        x[..., idx] = update
        return x


def test_setitem_ellipsis_broadcast_update():
    check_model(
        SetItem(),
        (torch.randn(2, 3, 4), torch.tensor([0, 2]), torch.randn(3, 1)),
        dynamic_shapes=({0: "b", 2: "c"}, {0: "k"}, None),
        more_inputs=[((torch.randn(5, 3, 6), torch.tensor([1, 3, 5]), torch.randn(3, 1)), None)],
    )
    check_model(
        SetItem(),
        (torch.randn(2, 3, 4), torch.tensor([0, 2]), torch.randn(1)),
        dynamic_shapes=({0: "b"}, None, None),
        more_inputs=[((torch.randn(5, 3, 4), torch.tensor([3, 1]), torch.randn(1)), None)],
    )


# -- list inputs: one spec for every element, None entries ----------------------------------------------


class CatList(torch.nn.Module):
    def forward(self, xs: list):
        return torch.cat([x for x in xs if x is not None], 0) * 2


@pytest.mark.parametrize(
    "spec",
    [({0: "a"},), (({0: "a"}, {0: "b"}),), ([{0: "a"}, {0: "b"}],)],
    ids=["one_dict_for_all", "tuple_for_list", "list"],
)
def test_list_input_specs(spec):
    onx = check_model(
        CatList(),
        ([torch.randn(2, 3), torch.randn(4, 3)],),
        dynamic_shapes=spec,
        more_inputs=[(([torch.randn(5, 3), torch.randn(1, 3)],), None)],
    )
    dims = [i.type.tensor_type.shape.dim[0].dim_param for i in onx.graph.input]
    assert dims[0] != dims[1] and all(dims)


def test_list_input_none_entries():
    check_model(
        CatList(),
        ([torch.randn(2, 3), None, torch.randn(4, 3)],),
        dynamic_shapes=([{0: "a"}, {0: "x"}, {0: "b"}],),  # a spec for the None entry is ignored
        more_inputs=[(([torch.randn(5, 3), None, torch.randn(3, 3)],), None)],
    )


# -- data-dependent Python control flow, torch's own exceptions -----------------------------------------


class DataDependentIf(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_data_dependent_if_names_the_line():
    with pytest.raises(ExportCaptureError, match=r"(?s)Model code: .*:\d+ in forward: if x.sum\(\) > 0:.*torch.cond"):
        to_onnx(DataDependentIf(), (torch.randn(3),), capture_strategies=False)


def test_data_dependent_if_short_story_first_and_no_graph_printed(capfd, tmp_path):
    """The message opens with torch's first line, the model's line and the advice for a branch (not the advice for
    a value-dependent size), torch's long text after; torch's partial graphs (printed at each try) are not shown
    but kept in the report."""
    with pytest.raises(ExportCaptureError) as info:
        to_onnx(DataDependentIf(), (torch.randn(3),), report=tmp_path / "r.md")
    lines = str(info.value).splitlines()
    assert lines[0].startswith("torch.export.export (non-strict) failed: GuardOnDataDependentSymNode: ")
    assert lines[1].startswith("Model code: ") and lines[1].endswith("in forward: if x.sum() > 0:")
    assert lines[2].startswith("What to try: this line branches in Python on a tensor's value"), lines[2]
    assert "the output shape depends on tensor values" not in str(info.value)
    assert lines[3] == "torch's message, continued:"
    out, err = capfd.readouterr()
    assert "def forward" not in out + err and "GraphModule" not in out + err, err
    assert "def forward" in (tmp_path / "r.md").read_text()


class TorchRaises(torch.nn.Module):
    def forward(self, x):
        _, spec = torch.utils._pytree.tree_flatten((x, x))
        torch.utils._pytree.tree_unflatten([x], spec)  # torch's own code raises
        return x + 1


def test_exception_inside_torch_names_the_line():
    with pytest.raises(ExportCaptureError, match=r"(?s)Model code: .*in forward: torch.utils._pytree.tree_unflatten"
                                                 r".*raised inside torch's own code \(utils/_pytree.py"):
        to_onnx(TorchRaises(), (torch.randn(3),), capture_strategies=False)


class ElifChain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:
            y = y * 2
            return y.relu()
        elif x.mean() < -0.5:
            return x - 1
        if x.shape[0] > 100:  # a Python (shape) condition: left to torch.export
            return x
        return y + x


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
@pytest.mark.parametrize("cls", [DataDependentIf, ElifChain])
def test_data_dependent_if_rewritten_into_cond(cls, strict):
    torch.manual_seed(0)
    model = cls()
    with pytest.raises(ExportCaptureError):
        to_onnx(model, (torch.randn(2, 3),), strict=strict, capture_strategies=False)
    original = cls.forward
    with bypass_export_some_errors(rewrite_control_flow=[cls]):
        onx = check_model(
            model,
            (torch.randn(2, 3),),
            dynamic_shapes=({0: "b"},),
            more_inputs=[((torch.randn(5, 3) - 2,), None), ((torch.randn(4, 3) + 3,), None)],
            strict=strict,
            capture_strategies=False,
        )
    assert cls.forward is original
    assert "If" in [n.op_type for n in onx.graph.node]


class NothingToRewrite(torch.nn.Module):
    def forward(self, x):
        return x + 1


def test_rewrite_refuses_a_forward_without_tensor_if():
    with pytest.raises(ValueError, match="nothing to rewrite"):
        with bypass_export_some_errors(rewrite_control_flow=[NothingToRewrite]):
            pass
    assert NothingToRewrite.forward.__name__ == "forward" and not hasattr(NothingToRewrite.forward, "__wrapped__")
