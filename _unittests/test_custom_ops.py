"""Custom ops without a converter (torch.library.custom_op, triton_op) -> one com.microsoft::PythonOp node calling
``torch.ops.<ns>.<op>`` back, run by InferenceSession."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import torch

from experimental.torch_interpreter import (
    ConversionError,
    InferenceSession,
    MissingCustomOpError,
    UnsupportedOpError,
    register,
    to_onnx,
)
from experimental.torch_interpreter.python_op.custom_ops import Policy, is_custom_op
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types


# -- the ops: kernels leave torch (numpy), as a Triton or C++ kernel would -----------------------------------------
@torch.library.custom_op("a2o_test::numpy_tanh", mutates_args=())
def numpy_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.from_numpy(np.tanh(x.detach().cpu().numpy()) * scale).to(x.device)


@numpy_tanh.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("a2o_test::stats", mutates_args=())
def stats(
    x: torch.Tensor, k: int, eps: float, centered: bool, dims: list[int], mode: str = "max", w: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Several outputs (a float tensor, an int64 tensor of another rank) and scalar arguments of every kind."""
    a = x.detach().cpu().numpy().astype(np.float64)
    if centered:
        a = a - a.mean(axis=tuple(dims), keepdims=True)
    top = np.sort(a, axis=-1)[..., -k:] if mode == "max" else np.sort(a, axis=-1)[..., :k]
    if w is not None:
        top = top * w.numpy()[:k]
    return torch.from_numpy((top + eps).astype(np.float32)), torch.from_numpy(np.argmax(a, axis=-1).astype(np.int64))


@stats.register_fake
def _(x, k, eps, centered, dims, mode="max", w=None):
    return x.new_empty((*x.shape[:-1], k)), x.new_empty(x.shape[:-1], dtype=torch.int64)


@torch.library.custom_op("a2o_test::with_converter", mutates_args=())
def with_converter(x: torch.Tensor) -> torch.Tensor:
    return x.exp()


@with_converter.register_fake
def _(x):
    return torch.empty_like(x)


@register("a2o_test::with_converter.default")
def a2o_test_with_converter(ctx, x):
    return ctx.op("Exp", x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return numpy_tanh(self.lin(x), 0.5).relu()


def _python_ops(onx):
    return [n for n in onx.graph.node if n.op_type == "PythonOp"]


def _attrs(node):
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


# -- export and run -------------------------------------------------------------------------------------------------
def test_custom_op_becomes_python_op():
    onx = check_model(
        Model(),
        (torch.randn(3, 4),),
        dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.randn(7, 4),), None)],
        custom_ops="python_op",
    )
    assert op_types(onx) == ["Gemm", "PythonOp", "Relu"]
    (node,) = _python_ops(onx)
    attrs = _attrs(node)
    assert node.domain == "com.microsoft"
    assert attrs["func_name"] == "torch.ops.a2o_test.numpy_tanh.default"
    assert attrs["input_convention"] == "dc"
    assert attrs["input_float_scalars"] == [0.5] and attrs["input_float_scalar_positions"] == [1]
    assert attrs["output_tensor_types"] == [onnx.TensorProto.FLOAT] and attrs["output_tensor_ranks"] == [2]
    meta = json.loads(attrs["comment"])
    assert meta["custom_op"] == "a2o_test::numpy_tanh.default" and meta["module"] == __name__
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_several_outputs_and_scalar_arguments():
    def fn(x, w):
        values, index = stats(x * 2, 3, 0.1, True, [0, 1], "min", w)
        return values.sum(dim=-1), index + 1

    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    onx = check_model(
        Fn(fn),
        (torch.randn(2, 5, 6), w),
        dynamic_shapes=({0: "batch"}, None),
        more_inputs=[((torch.randn(4, 5, 6), w), None)],
        custom_ops="python_op",
    )
    attrs = _attrs(_python_ops(onx)[0])
    assert attrs["input_convention"] == "dcccccd"
    assert attrs["input_int_scalars"] == [3] and attrs["input_bool_scalars"] == [1]
    assert attrs["input_int_tuples"] == [0, 1] and attrs["input_pointer_scalar_positions"] == [5]
    assert attrs["output_tensor_types"] == [onnx.TensorProto.FLOAT, onnx.TensorProto.INT64]
    assert attrs["output_tensor_ranks"] == [3, 2]
    meta = json.loads(attrs["comment"])
    assert meta["objects"] == [{"str": "min"}]
    assert meta["floats"] == {"2": 0.1}  # full precision, input_float_scalars is float32


def test_defaults_and_none():
    def fn(x):
        values, index = stats(x, 2, 0.0, False, [1])  # mode and w left to their defaults
        return values, index

    onx = check_model(Fn(fn), (torch.randn(3, 5),), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(6, 5),), None)],
                      custom_ops="python_op")
    attrs = _attrs(_python_ops(onx)[0])
    assert attrs["input_convention"] == "dcccccc"
    assert json.loads(attrs["comment"])["objects"] == [{"default": True}, {"default": True}]


def test_same_op_twice_with_different_shapes():
    def fn(x, y):
        return numpy_tanh(x, 2.0), numpy_tanh(y.transpose(0, 1), 3.0).sum(dim=0)

    onx = check_model(
        Fn(fn),
        (torch.randn(2, 3), torch.randn(4, 5, 6)),
        dynamic_shapes=({0: "batch"}, {0: "n"}),
        more_inputs=[((torch.randn(5, 3), torch.randn(2, 5, 6)), None)],
        custom_ops="python_op",
    )
    nodes = _python_ops(onx)
    assert len(nodes) == 2
    assert [_attrs(n)["input_tensor_ranks"] for n in nodes] == [[2], [3]]
    assert [_attrs(n)["input_float_scalars"] for n in nodes] == [[2.0], [3.0]]


def test_strict_capture():
    onx = check_model(Model(), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), strict=True,
                      more_inputs=[((torch.randn(5, 4),), None)], custom_ops="python_op")
    assert "PythonOp" in op_types(onx)


def test_run_torch():
    model = Model().eval()
    sess = InferenceSession(to_onnx(model, (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), custom_ops="python_op"))
    for x in (torch.randn(3, 4), torch.randn(6, 4)):
        got = sess.run_torch(None, {sess.get_inputs()[0].name: x})[0]
        with torch.no_grad():
            torch.testing.assert_close(got, model(x))


# -- choosing: custom_ops=, registered converters ------------------------------------------------------------------
@pytest.mark.parametrize("custom_ops", [None, "error", {"a2o_test::stats": "python_op"}])
def test_error_mode_is_the_default_and_names_the_option(custom_ops):
    with pytest.raises(UnsupportedOpError, match="custom_ops='python_op'") as info:
        to_onnx(Model(), (torch.randn(3, 4),), custom_ops=custom_ops)
    assert list(info.value.missing) == ["a2o_test::numpy_tanh.default"]


def test_per_op_modes():
    def fn(x):
        return numpy_tanh(x, 2.0), stats(x, 2, 0.0, False, [1])[0]

    with pytest.raises(UnsupportedOpError, match="a2o_test::stats") as info:
        to_onnx(Fn(fn), (torch.randn(3, 5),), custom_ops={torch.ops.a2o_test.numpy_tanh: "python_op"})
    assert list(info.value.missing) == ["a2o_test::stats.default"]
    onx = check_model(Fn(fn), (torch.randn(3, 5),), custom_ops={numpy_tanh: "python_op", "a2o_test::stats.default": "python_op"})
    assert op_types(onx) == ["PythonOp", "PythonOp"]


def test_registered_converter_wins():
    for custom_ops in (None, "python_op", "error", {"a2o_test::with_converter": "python_op"}):
        onx = check_model(Fn(lambda x: with_converter(x) + 1), (torch.randn(2, 3),), custom_ops=custom_ops)
        assert op_types(onx) == ["Exp", "Add"]


def test_converter_given_in_custom_ops():
    def sigmoid_tanh(ctx, x, scale):  # not the op's semantics: shows the converter given here is the one used
        return ctx.op("Mul", ctx.op("Tanh", x), ctx.const(scale, ir.DataType.FLOAT))

    onx = check_model(Fn(lambda x: numpy_tanh(x, 2.0)), (torch.randn(2, 3),), custom_ops={numpy_tanh: sigmoid_tanh})
    assert op_types(onx) == ["Tanh", "Mul"]


def test_policy():
    assert Policy(None).resolve("a2o_test::numpy_tanh.default") == "error"
    assert Policy("python_op").resolve("a2o_test::numpy_tanh.default") == "python_op"
    policy = Policy({"a2o_test::numpy_tanh.default": "python_op"})
    assert policy.resolve("a2o_test::numpy_tanh.default") == "python_op"
    assert policy.resolve("a2o_test::stats.default") == "error"
    with pytest.raises(ValueError, match="custom_ops"):
        Policy("inline")
    with pytest.raises(TypeError, match="custom_ops"):
        Policy(3)
    assert is_custom_op(torch.ops.a2o_test.numpy_tanh.default)
    assert not is_custom_op(torch.ops.aten.add.Tensor)


def test_dynamic_scalar_argument_is_refused():
    with pytest.raises(ConversionError, match="dynamic value"):
        to_onnx(Fn(lambda x: stats(x, x.shape[0], 0.0, False, [0])[0]), (torch.randn(3, 5),),
                dynamic_shapes=({0: "batch"},), strict=True, custom_ops="python_op")


# -- a fresh process ------------------------------------------------------------------------------------------------
_MODULE = '''
import numpy as np
import torch


@torch.library.custom_op("a2o_fresh::cube", mutates_args=())
def cube(x: torch.Tensor, offset: float, mode: str) -> torch.Tensor:
    y = np.power(x.detach().numpy(), 3) + offset
    return torch.from_numpy(-y if mode == "neg" else y)


@cube.register_fake
def _(x, offset, mode):
    return torch.empty_like(x)
'''

_RUN = '''
import sys
import numpy as np
sys.path.insert(0, {root!r})
sys.path.insert(0, {tmp!r})
if {import_module!r}:
    import a2o_fresh_ops
from experimental.torch_interpreter import InferenceSession, MissingCustomOpError
try:
    sess = InferenceSession({model!r})
except MissingCustomOpError as e:
    print("MISSING:", e)
    sys.exit(0)
for i in range({count}):
    x = np.load(f"{tmp}/x{{i}}.npy")
    np.save(f"{tmp}/out{{i}}.npy", sess.run(None, {{sess.get_inputs()[0].name: x}})[0])
'''


def _run_fresh(tmp_path, path: str, import_module: bool, count: int) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = _RUN.format(root=root, tmp=str(tmp_path), import_module=import_module, model=path, count=count)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_fresh_process(tmp_path):
    """The op is defined in a module the test writes; a fresh process that imports it runs the model, one that
    does not gets an error naming the op and the module."""
    (tmp_path / "a2o_fresh_ops.py").write_text(_MODULE)
    spec = importlib.util.spec_from_file_location("a2o_fresh_ops", tmp_path / "a2o_fresh_ops.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["a2o_fresh_ops"] = module
    spec.loader.exec_module(module)
    model = Fn(lambda x: module.cube(x.abs(), 0.5, "neg") * 2)
    path = str(tmp_path / "model.onnx")
    to_onnx(model, (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},), filename=path, custom_ops="python_op")
    xs = [torch.randn(2, 3), torch.randn(5, 3)]
    for i, x in enumerate(xs):
        np.save(tmp_path / f"x{i}.npy", x.numpy())
    stdout = _run_fresh(tmp_path, path, True, len(xs))
    assert "MISSING" not in stdout, stdout
    for i, x in enumerate(xs):
        np.testing.assert_allclose(np.load(tmp_path / f"out{i}.npy"), model(x).numpy(), rtol=1e-5, atol=1e-6)
    stdout = _run_fresh(tmp_path, path, False, 0)
    assert "MISSING:" in stdout and "a2o_fresh::cube.default" in stdout
    assert "import a2o_fresh_ops" in stdout


def test_missing_op_message_without_module():
    from experimental.torch_interpreter.runtime.custom_op_calls import resolve_op

    with pytest.raises(MissingCustomOpError, match="a2o_nowhere::op.default.*torch.ops.load_library"):
        resolve_op("torch.ops.a2o_nowhere.op.default", json.dumps({"module": None}), "n0")
    with pytest.raises(MissingCustomOpError, match="__main__"):
        resolve_op("torch.ops.a2o_nowhere.op.default", json.dumps({"module": "__main__"}), "n0")


# -- triton ---------------------------------------------------------------------------------------------------------
def _triton_missing() -> str | None:
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    import onnxruntime as ort

    return None if "CUDAExecutionProvider" in ort.get_available_providers() else "onnxruntime has no CUDA provider"


@pytest.mark.skipif(_triton_missing() is not None, reason=f"triton_op test needs triton and a GPU: {_triton_missing()}")
def test_triton_op():  # pragma: no cover - runs where triton and a GPU exist
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offsets = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

    @torch.library.triton_op("a2o_triton::add", mutates_args=())
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = out.numel()
        torch.library.wrap_triton(add_kernel)[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        return out

    model = Fn(lambda x, y: add(x.relu(), y) * 2).cuda()
    x, y = torch.randn(8, 16, device="cuda"), torch.randn(8, 16, device="cuda")
    onx = to_onnx(model, (x, y), dynamic_shapes=({0: "batch"}, {0: "batch"}), custom_ops="python_op")
    assert "PythonOp" in op_types(onx), op_types(onx)
    sess = InferenceSession(onx)
    for x, y in [(x, y), (torch.randn(3, 16, device="cuda"), torch.randn(3, 16, device="cuda"))]:
        names = [i.name for i in sess.get_inputs()]
        got = sess.run_torch(None, dict(zip(names, (x, y))))[0]
        torch.testing.assert_close(got.to(x.device), model(x, y))


# -- control flow: the bodies holding PythonOp nodes run node by node ---------------------------------------------
class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class CondModel(torch.nn.Module):
    def forward(self, x):
        def then_fn(x):
            return numpy_tanh(x, 2.0) + 1

        def else_fn(x):
            return Double.apply(x.cos())

        return torch.cond(x.sum() > 0, then_fn, else_fn, (x,)).sigmoid()


def test_custom_op_and_function_in_cond():
    onx = check_model(
        CondModel(),
        (torch.ones(3, 4),),
        dynamic_shapes=({0: "batch"},),
        more_inputs=[((-torch.ones(5, 4),), None), ((torch.randn(2, 4),), None)],
        custom_ops="python_op",
    )
    assert "If" in op_types(onx)


class ScanModel(torch.nn.Module):
    def forward(self, init, xs):
        from torch._higher_order_ops.scan import scan

        def combine(carry, x):
            y = numpy_tanh(carry + x, 0.5)
            return y, y * 2

        last, ys = scan(combine, init, xs)
        return last, ys


def test_custom_op_in_scan():
    onx = check_model(
        ScanModel(),
        (torch.randn(3), torch.randn(4, 3)),
        dynamic_shapes=(None, {0: "steps"}),
        more_inputs=[((torch.randn(3), torch.randn(6, 3)), None)],
        custom_ops="python_op",
    )
    assert "Scan" in op_types(onx) or "Loop" in op_types(onx)


@torch.library.custom_op("a2o_test::scale_into", mutates_args=("out",))
def scale_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(x * 2)
    return x + 1


@scale_into.register_fake
def _(x, out):
    return torch.empty_like(x)


def test_mutating_op_is_refused():
    def fn(x):
        out = torch.zeros_like(x)
        y = scale_into(x, out)
        return y + out

    with pytest.raises(ConversionError, match="modifies its argument.*out"):
        to_onnx(Fn(fn), (torch.randn(3),), custom_ops="python_op")


@torch.library.custom_op("a2o_test::cast_parts", mutates_args=())
def cast_parts(x: torch.Tensor, parts: int, *, dtype: torch.dtype, scale: float = 1.0) -> list[torch.Tensor]:
    """Keyword-only arguments (a dtype among them) and a list of tensors returned."""
    return [(c * scale).to(dtype).clone() for c in x.chunk(parts, dim=-1)]


@cast_parts.register_fake
def _(x, parts, *, dtype, scale=1.0):
    return [c.to(dtype).clone() for c in x.chunk(parts, dim=-1)]


def test_keyword_only_arguments_and_list_output():
    def fn(x):
        a, b = cast_parts(x, 2, dtype=torch.float64, scale=3.0)
        (c,) = cast_parts(x, 1, dtype=torch.int64)
        return a + 1, b, c

    onx = check_model(
        Fn(fn),
        (torch.randn(3, 4) * 10,),
        dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.randn(5, 4) * 10,), None)],
        custom_ops="python_op",
    )
    first, second = [_attrs(n) for n in _python_ops(onx)]
    assert first["input_convention"] == "dccc" and first["output_tensor_types"] == [onnx.TensorProto.DOUBLE] * 2
    assert json.loads(first["comment"])["objects"] == [{"torch": "float64"}]
    assert json.loads(second["comment"])["objects"] == [{"torch": "int64"}, {"default": True}]
    assert second["output_tensor_types"] == [onnx.TensorProto.INT64]


class WhileModel(torch.nn.Module):
    def forward(self, x):
        from torch._higher_order_ops.while_loop import while_loop

        def cond_fn(i, y):
            return i < 3

        def body_fn(i, y):
            return i + 1, numpy_tanh(y, 1.5) + Double.apply(y)

        return while_loop(cond_fn, body_fn, (torch.tensor(0), x))[1]


def test_custom_op_and_function_in_while_loop():
    onx = check_model(
        WhileModel(),
        (torch.randn(2, 3),),
        dynamic_shapes=({0: "batch"},),
        more_inputs=[((torch.randn(4, 3),), None)],
        custom_ops="python_op",
    )
    assert "Loop" in op_types(onx)


@torch.library.custom_op("a2o_test::weighted_sum", mutates_args=())
def weighted_sum(xs: list[torch.Tensor], weights: list[float], bias: torch.Tensor) -> torch.Tensor:
    """A list of tensors among the arguments."""
    return sum(torch.from_numpy(x.numpy() * w) for x, w in zip(xs, weights)) + bias


@weighted_sum.register_fake
def _(xs, weights, bias):
    return torch.empty_like(xs[0])


def test_tensor_list_argument():
    def fn(x, y, b):
        return weighted_sum([x, y.sin(), x * y], [0.5, 2.0, -1.0], b)

    onx = check_model(
        Fn(fn),
        (torch.randn(2, 3), torch.randn(2, 3), torch.randn(3)),
        dynamic_shapes=({0: "batch"}, {0: "batch"}, None),
        more_inputs=[((torch.randn(5, 3), torch.randn(5, 3), torch.randn(3)), None)],
        custom_ops="python_op",
    )
    attrs = _attrs(_python_ops(onx)[0])
    assert attrs["input_convention"] == "dddcd" and attrs["input_float_tuple_positions"] == [3]
    assert json.loads(attrs["comment"])["tensor_lists"] == {"0": 3}
