"""Models the user did not export: InferenceSession imports and calls nothing the user did not allow.

Each crafted model names code through a ``com.microsoft::PythonOp`` node (an autograd.Function's module, a custom
op, the module recorded for it) or holds malformed attributes; the session refuses it when it is created, with a
project error naming the node, the module or op and the option, before anything is imported (checked with
``sys.modules`` and planted modules that write a file when imported) or run. The options make legitimate models
run in a fresh process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from experimental.torch_interpreter import (
    InferenceSession,
    MalformedModelError,
    MissingCustomOpError,
    MissingFunctionError,
    TorchInterpreterError,
    UntrustedCodeError,
    to_onnx,
)
from experimental.torch_interpreter.metadata import CONSTANT_INPUTS, SHAPE_GUARDS
from experimental.torch_interpreter.provenance import TORCH_NAMESPACES, is_torch_namespace
from experimental.torch_interpreter.python_op.table import register_function
from experimental.torch_interpreter.runtime import python_op_session
from experimental.torch_interpreter.runtime.guards import SizeChecks, evaluate
from experimental.torch_interpreter.runtime.trust import TrustPolicy
from experimental.torch_interpreter.testing.check import Fn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- crafted models -------------------------------------------------------------------------------------------------
def _python_op(func_name="a2o_untrusted.Fn", inputs=("x",), outputs=("ctx", "y"), name="crafted", **attributes):
    attributes.setdefault("input_convention", "d" * len(inputs))
    attributes.setdefault("output_tensor_types", [TensorProto.FLOAT] * (len(outputs) - 1))
    attributes.setdefault("output_tensor_ranks", [1] * (len(outputs) - 1))
    if func_name is not None:
        attributes["func_name"] = func_name
    return helper.make_node("PythonOp", list(inputs), list(outputs), name=name, domain="com.microsoft", **attributes)


def _model(*nodes, functions=()):
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x0"], ["x"]), *nodes],
        "crafted",
        [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions))


class Twice(torch.autograd.Function):
    """Registered under a name no module has: what a process that registers its classes runs."""

    @staticmethod
    def forward(ctx, x):
        return x * 2


register_function(Twice, "a2o_untrusted_registered.Twice")

_PLANTED = '''
import torch
with open({marker!r}, "w") as f:
    f.write("imported")


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x
'''
_COUNTER = iter(range(10**6))


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A module on sys.path that writes a file when imported: returns (module name, marker path)."""

    def plant(folder=None):
        name = f"a2o_planted_{os.getpid()}_{next(_COUNTER)}"
        marker = tmp_path / f"{name}.imported"
        where = folder or tmp_path
        (where / f"{name}.py").write_text(_PLANTED.format(marker=str(marker)))
        if folder is None:
            monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()
        return name, marker

    return plant


def _not_imported(name, marker):
    assert name not in sys.modules, f"{name} was imported"
    assert not marker.exists(), f"{name} ran its code"


# -- autograd.Function: nothing imported unless allowed -------------------------------------------------------------
def test_function_module_with_side_effect_is_not_imported(planted):
    name, marker = planted()
    with pytest.raises(UntrustedCodeError) as info:
        InferenceSession(_model(_python_op(f"{name}.Fn")))
    message = str(info.value)
    assert "'crafted'" in message and repr(name) in message  # the node and the module
    assert "trusted_modules=" in message and "trust_python_code=True" in message and "register_function" in message
    _not_imported(name, marker)
    assert isinstance(info.value, TorchInterpreterError) and isinstance(info.value, LookupError)


def test_zen_of_python_is_not_imported(capsys):
    already = "this" in sys.modules
    with pytest.raises(UntrustedCodeError, match="'this'"):
        InferenceSession(_model(_python_op("this.Zen")))
    assert already or "this" not in sys.modules
    assert "Beautiful is better" not in capsys.readouterr().out


def test_module_planted_in_the_working_directory(planted, tmp_path, monkeypatch):
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend("")  # as `python -c` or an interactive session put it
    name, marker = planted(folder)
    with pytest.raises(UntrustedCodeError):
        InferenceSession(_model(_python_op(f"{name}.Fn")))
    comment = json.dumps({"module": name, "custom_op": "a2o_planted_ns::op"})
    with pytest.raises(MissingCustomOpError, match="trusted_modules"):
        InferenceSession(_model(_python_op("torch.ops.a2o_planted_ns.op.default", comment=comment)))
    _not_imported(name, marker)


def test_prefix_allows_submodules_only(planted):
    name, marker = planted()
    with pytest.raises(UntrustedCodeError):  # a longer name sharing the prefix is another module
        InferenceSession(_model(_python_op(f"{name}.Fn")), trusted_modules=(name[:-1],))
    _not_imported(name, marker)
    policy = TrustPolicy.create(["mypkg"])
    assert policy.allows("mypkg") and policy.allows("mypkg.sub.mod") and not policy.allows("mypkg_x")


def test_allowed_module_is_imported(planted):
    name, marker = planted()
    sess = InferenceSession(_model(_python_op(f"{name}.Fn")), trusted_modules=name)
    assert marker.exists() and name in sys.modules
    np.testing.assert_allclose(sess.run(None, {"x0": np.array([1.0, -2.0, 3.0], dtype=np.float32)})[0], [-1, 2, -3])


def test_missing_module():
    with pytest.raises(UntrustedCodeError, match="a2o_missing_module"):
        InferenceSession(_model(_python_op("a2o_missing_module.Fn")))
    with pytest.raises(MissingFunctionError, match="a2o_missing_module.Fn"):
        InferenceSession(_model(_python_op("a2o_missing_module.Fn")), trusted_modules=["a2o_missing_module"])
    assert "a2o_missing_module" not in sys.modules


def test_allowed_module_without_the_class():
    with pytest.raises(MissingFunctionError, match="json.NoSuchFunction"):
        InferenceSession(_model(_python_op("json.NoSuchFunction")), trusted_modules=["json"])
    with pytest.raises(MissingFunctionError):  # not an autograd.Function
        InferenceSession(_model(_python_op("json.JSONDecoder")), trust_python_code=True)


def test_registered_function_runs_without_options():
    sess = InferenceSession(_model(_python_op("a2o_untrusted_registered.Twice")))
    np.testing.assert_allclose(sess.run(None, {"x0": np.array([1.0, 2.0, 3.0], dtype=np.float32)})[0], [-2, -4, -6])


def test_refused_before_any_onnxruntime_session(planted, monkeypatch):
    name, marker = planted()

    def no_session(*args, **kwargs):
        raise AssertionError("an onnxruntime session was created before the refusal")

    monkeypatch.setattr(python_op_session, "OrtSession", no_session)
    with pytest.raises(UntrustedCodeError):
        InferenceSession(_model(_python_op(f"{name}.Fn")))
    _not_imported(name, marker)


def test_control_flow_body_and_local_function_are_checked(planted):
    name, marker = planted()
    body = helper.make_graph(
        [_python_op(f"{name}.Fn", outputs=("c", "b"), name="in_body")],
        "then",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
    )
    cond = helper.make_node("Constant", [], ["cond"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True]))
    if_node = helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)
    model = _model(cond, if_node)
    with pytest.raises(UntrustedCodeError, match="'in_body'"):
        InferenceSession(model)
    function = helper.make_function(
        "local", "evil", ["a"], ["b"], [_python_op(f"{name}.Fn", inputs=("a",), outputs=("c", "b"), name="in_fn")],
        [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
    )
    model = _model(_python_op("a2o_untrusted_registered.Twice"), functions=[function])
    with pytest.raises(UntrustedCodeError, match="'in_fn'"):
        InferenceSession(model)
    _not_imported(name, marker)


# -- custom ops: registered ones only, never torch's own ---------------------------------------------------------
@torch.library.custom_op("a2o_untrusted::scale", mutates_args=())
def scale(x: torch.Tensor, alpha: float, dtype: torch.dtype | None = None) -> torch.Tensor:
    return (x * alpha).to(dtype or x.dtype)


@scale.register_fake
def _(x, alpha, dtype=None):
    return torch.empty_like(x, dtype=dtype or x.dtype)


def _custom(func_name="torch.ops.a2o_untrusted.scale.default", comment=None, **attributes):
    attributes.setdefault("input_convention", "dcc")
    attributes.setdefault("input_float_scalars", [2.0])
    attributes.setdefault("input_float_scalar_positions", [1])
    attributes.setdefault("input_pointer_scalars", [0])
    attributes.setdefault("input_pointer_scalar_positions", [2])
    if comment is None:
        comment = {"objects": [None], "floats": {"1": 2.0}, "module": __name__, "custom_op": "a2o_untrusted::scale"}
    text = comment if isinstance(comment, str) else json.dumps(comment)
    return _model(_python_op(func_name, comment=text, **attributes))


def test_registered_custom_op_runs():
    sess = InferenceSession(_custom())
    np.testing.assert_allclose(sess.run(None, {"x0": np.array([1.0, 2.0, 3.0], dtype=np.float32)})[0], [-2, -4, -6])


@pytest.mark.parametrize(
    "func_name",
    [
        "torch.ops.aten.add.Tensor",
        "torch.ops.aten.from_file.default",
        "torch.ops.prims.add.default",
        "torch.ops.aten2onnx.python_op.default",
        "torch.ops._c10d_functional.all_reduce.default",
        "torch.ops.profiler._record_function_enter.default",
    ],
)
@pytest.mark.parametrize("options", [{}, {"trust_python_code": True}])
def test_builtin_op_named_as_custom_op_is_refused(func_name, options, monkeypatch):
    called = []
    monkeypatch.setattr(python_op_session.PythonOpSession, "_call", lambda *a: called.append(a))
    with pytest.raises(UntrustedCodeError, match="torch's own namespace") as info:
        InferenceSession(_custom(func_name, comment={"module": "torch"}), **options)
    assert "'crafted'" in str(info.value) and func_name.split(".")[2] in str(info.value)
    assert not called


@pytest.mark.parametrize(
    "func_name", ["torch.ops.import_module.x.y", "torch.ops.load_library.__call__.x", "torch.ops.a2o_untrusted.scale"]
)
def test_torch_ops_attributes_are_not_ops(func_name):
    with pytest.raises((MalformedModelError, MissingCustomOpError)):
        InferenceSession(_custom(func_name, comment={"module": None}), trust_python_code=True)


def test_custom_op_module_imported_only_when_allowed(planted):
    name, marker = planted()
    model = _custom("torch.ops.a2o_nowhere.op.default", comment={"module": name})
    with pytest.raises(MissingCustomOpError) as info:
        InferenceSession(model)
    assert f"import {name}" in str(info.value) and f"trusted_modules=({name!r},)" in str(info.value)
    _not_imported(name, marker)
    with pytest.raises(MissingCustomOpError, match="did not register it"):
        InferenceSession(model, trusted_modules=[name])
    assert marker.exists()  # allowed: imported, but it defines no such op


def test_every_namespace_of_torch_is_torchs():
    """The namespaces a bare ``import torch`` registers are all torch's: the export gives none of their ops a
    PythonOp, and the runtime refuses to call one through a PythonOp node."""
    script = (
        "import json, torch; "
        "print(json.dumps(sorted({n.split('::')[0] for n in torch._C._dispatch_get_all_op_names()})))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    namespaces = json.loads(done.stdout)
    assert [n for n in namespaces if not is_torch_namespace(n)] == []
    assert "aten" in TORCH_NAMESPACES and not is_torch_namespace("a2o_untrusted")


# -- malformed and oversized attributes --------------------------------------------------------------------------
def _wrong_type_func_name():
    node = _python_op(None)
    node.attribute.append(helper.make_attribute("func_name", [1, 2]))
    return _model(node)


@pytest.mark.parametrize(
    "model, match",
    [
        (lambda: _model(_python_op(output_tensor_ranks=[10**12])), "output_tensor_ranks"),
        (lambda: _model(_python_op(output_tensor_ranks=[-1])), "output_tensor_ranks"),
        (lambda: _model(_python_op(output_tensor_types=[999])), "output_tensor_types"),
        (lambda: _model(_python_op(output_tensor_types=[1, 1])), "output_tensor_types"),
        (lambda: _model(_python_op(input_convention="dd")), "input_convention"),
        (lambda: _model(_python_op(input_convention="dx")), "input_convention"),
        (lambda: _model(_python_op(None)), "func_name"),
        (_wrong_type_func_name, "func_name"),
        (lambda: _model(_python_op("a" * 100_000 + ".Fn")), "func_name"),
        (lambda: _model(_python_op("os.path.__class__")), "func_name"),
        (lambda: _model(_python_op("a2o_untrusted.Fn", comment="[" * 200_000)), "nests too deeply"),
        (lambda: _model(_python_op("a2o_untrusted.Fn", comment="x" * (2 << 20))), "comment"),
        (lambda: _custom(comment={"objects": [{"torch": "load"}], "floats": {"1": 2.0}}), "load"),
        (lambda: _custom(comment={"objects": [{"torch": "onnx"}]}), "onnx"),
        (lambda: _custom(comment={"objects": [[1, 2]]}), "crafted"),
        (lambda: _custom(comment={"objects": [None], "floats": {"0": "x"}}), "float"),
        (lambda: _custom(comment={"objects": [None], "tensor_lists": {"0": 10**9}}), "crafted"),
        (lambda: _custom(input_pointer_scalars=[10**9]), "constant index"),
        (lambda: _custom(input_convention="dccc", input_int_scalars=[1], input_int_scalar_positions=[3]), "takes 3"),
        (lambda: _custom(input_float_scalar_positions=[0]), "constant positions"),
    ],
)
def test_malformed_attributes(model, match, monkeypatch):
    monkeypatch.setattr(python_op_session, "value_infos", lambda *a, **k: pytest.fail("allocated before checking"))
    begin = time.perf_counter()
    with pytest.raises(MalformedModelError, match=match):
        InferenceSession(model(), trust_python_code=True)
    assert time.perf_counter() - begin < 30


def test_unknown_argument_by_reference():
    node = _python_op(
        "a2o_untrusted_registered.Twice",
        input_convention="dc",
        input_pointer_scalars=[id(object())],
        input_pointer_scalar_positions=[1],
    )
    model = _model(node)
    with pytest.raises(MissingFunctionError, match="by reference"):
        InferenceSession(model)


class Takes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, how):
        return x.relu() if how == "relu" else x


def test_argument_by_reference_goes_to_its_own_class_only():
    """An object passed by reference at export is handed back to the class that received it, not to another."""
    onx = to_onnx(Fn(lambda x: Takes.apply(x, "relu")), (torch.randn(3),))
    node = next(n for n in onx.graph.node if n.op_type == "PythonOp")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["input_pointer_scalar_positions"] == [1]  # "relu", by reference
    feeds = {onx.graph.input[0].name: np.array([-1.0, 2.0, -3.0], np.float32)}
    np.testing.assert_allclose(InferenceSession(onx).run(None, feeds)[0], [0, 2, 0])
    stolen = _model(
        _python_op(
            "a2o_untrusted_registered.Twice",
            input_convention="dc",
            input_pointer_scalars=attrs["input_pointer_scalars"],
            input_pointer_scalar_positions=[1],
        )
    )
    with pytest.raises(MissingFunctionError, match="by reference"):
        InferenceSession(stolen)


# -- metadata: bounded, never code ------------------------------------------------------------------------------
def test_size_conditions_are_bounded(caplog):
    begin = time.perf_counter()
    texts = ["10**10**10 == 1", "(2**4000)**4000 == 1", "(3 ** -1) ** -4000 > 1", "(" * 100_000 + "1" + ")" * 100_000]
    for text in [*texts, "x" * 20_000]:
        with pytest.raises(ValueError):
            evaluate(text, {})
    checks = SizeChecks({SHAPE_GUARDS: json.dumps([{"check": "10**10**10 == 1"}, 3, {"check": 5}]),
                         "aten2onnx.range_constraints": json.dumps([{"input": "x", "axis": "0", "narrowed": 1}])})
    assert len(checks.guards) == 1 and checks.ranges == []
    checks.check({"x": (2,)})  # unreadable: not checked, a warning
    SizeChecks({SHAPE_GUARDS: "[" * 100_000})
    assert time.perf_counter() - begin < 30


def test_metadata_of_a_crafted_model():
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])]),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    onnx.helper.set_model_props(model, {SHAPE_GUARDS: json.dumps([{"check": "9**9**9 > 0"}]),
                                        CONSTANT_INPUTS: "[" * 50_000 + "]" * 50_000})
    sess = InferenceSession(model, providers=["CPUExecutionProvider"])
    with pytest.raises(TorchInterpreterError, match="unknown"):
        sess.run(None, {"x": np.zeros(3, np.float32), "alpha": np.zeros(1)})
    begin = time.perf_counter()
    np.testing.assert_allclose(sess.run(None, {"x": np.array([-1.0, 0.0, 2.0], np.float32)})[0], [0, 0, 2])
    assert time.perf_counter() - begin < 30  # the power is refused, not computed


def test_trusted_modules_are_module_names():
    for wrong in ("", ".", "my pkg", ("ok", "")):
        with pytest.raises(ValueError, match="trusted_modules"):
            InferenceSession(_custom(), trusted_modules=wrong)
    with pytest.raises(TypeError):
        InferenceSession(_custom(), trust_python_code="yes")


# -- legitimate models in a fresh process, with the option -----------------------------------------------------
_FUNCTION_MODULE = '''
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offset):
        return x ** 3 + offset
'''

_OP_MODULE = '''
import torch


@torch.library.custom_op("{ns}::cube", mutates_args=())
def cube(x: torch.Tensor, offset: float) -> torch.Tensor:
    return x ** 3 + offset


@cube.register_fake
def _(x, offset):
    return torch.empty_like(x)
'''

_FRESH = '''
import sys
import numpy as np
sys.path.insert(0, {root!r})
sys.path.insert(0, {tmp!r})
from experimental.torch_interpreter import InferenceSession, MissingCustomOpError, UntrustedCodeError
try:
    InferenceSession({model!r})
except (UntrustedCodeError, MissingCustomOpError) as e:
    print("REFUSED", type(e).__name__, {module!r} in sys.modules)
x = np.load({tmp!r} + "/x.npy")
for options in ({{"trusted_modules": ({module!r},)}}, {{"trust_python_code": True}}):
    sess = InferenceSession({model!r}, **options)
    np.save({tmp!r} + "/out.npy", sess.run(None, {{sess.get_inputs()[0].name: x}})[0])
    print("RAN", {module!r} in sys.modules)
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fresh(tmp_path, model_path, module):
    script = _FRESH.format(root=ROOT, tmp=str(tmp_path), model=model_path, module=module)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split("\n")


@pytest.mark.parametrize("kind", ["function", "custom_op"])
def test_fresh_process_runs_with_the_option(tmp_path, kind):
    """A model exported here runs in a fresh process with trusted_modules or trust_python_code, and is refused
    without, its module not imported."""
    module_name = f"a2o_fresh_{kind}_{os.getpid()}"
    source = _FUNCTION_MODULE if kind == "function" else _OP_MODULE.format(ns=module_name)
    (tmp_path / f"{module_name}.py").write_text(source)
    module = _load(tmp_path / f"{module_name}.py", module_name)
    if kind == "function":
        model, options = Fn(lambda x: module.Cube.apply(x.abs(), 0.5) * 2), {}
    else:
        model, options = Fn(lambda x: module.cube(x.abs(), 0.5) * 2), {"custom_ops": "python_op"}
    path = str(tmp_path / "model.onnx")
    to_onnx(model, (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},), filename=path, **options)
    x = torch.randn(4, 3)
    np.save(tmp_path / "x.npy", x.numpy())
    lines = _fresh(tmp_path, path, module_name)
    expected = "UntrustedCodeError" if kind == "function" else "MissingCustomOpError"
    assert f"REFUSED {expected} False" in lines, lines
    assert lines.count("RAN True") == 2, lines
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), model(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options", [{}, {"trust_python_code": True}, {"trusted_modules": ("torchvision",)}])
def test_compiled_library_op_is_refused_unless_named(options):
    """transformers imports torchvision with any model class, so its compiled ops are registered: a crafted node
    calling ``torchvision::roi_align`` (a kernel that reads memory as the boxes' batch index says) or its private
    backward (which writes out of bounds) is refused whatever the module options; naming the op in ``trusted_ops``
    lets the session resolve it (this node's layout then fails the op's schema: MalformedModelError)."""
    pytest.importorskip("torchvision")
    if not hasattr(torch.ops.torchvision, "roi_align"):
        pytest.skip("torchvision is installed but its compiled ops do not load (see ../shared/vision/README.md)")
    def comment(op):
        return {"objects": [None], "floats": {"1": 2.0}, "module": "torchvision", "custom_op": f"torchvision::{op}"}

    for op in ("roi_align", "_roi_align_backward"):
        model = _custom(f"torch.ops.torchvision.{op}.default", comment=comment(op))
        with pytest.raises(UntrustedCodeError, match=rf"trusted_ops=\('torchvision::{op}',\)"):
            InferenceSession(model, **options)
    with pytest.raises(MalformedModelError, match="roi_align"):
        InferenceSession(_custom("torch.ops.torchvision.roi_align.default", comment=comment("roi_align")),
                         trusted_ops="torchvision::*")
    with pytest.raises(ValueError, match="trusted_ops holds names"):
        InferenceSession(_custom(), trusted_ops="roi_align")
