"""``to_onnx(..., providers=...)``: the guards a provider does not need are left out, the model says which providers
it is for, and :class:`InferenceSession` warns when it runs a model on another one.

A model for one provider is checked numerically on that provider: "cpu" on the CPU provider, "cuda" on the CPU
provider rewritten as CUDA's kernels behave (``imitate_cuda`` of ``test_cuda_edge_values``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from test_cuda_edge_values import _float_outputs, imitate_cuda

from experimental.torch_interpreter import InferenceSession, ProviderError, ProviderWarning, to_onnx
from experimental.torch_interpreter.metadata import PROVIDERS, read
from experimental.torch_interpreter.providers import QUIRKS, check_providers, needs_guard
from experimental.torch_interpreter.testing.check import Fn

INF = math.inf


def _cpu(onx, *inputs: torch.Tensor) -> list[np.ndarray]:
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), inputs)})


def _op_types(onx) -> list[str]:
    return [n.op_type for n in onx.graph.node]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("any", ("cpu", "cuda")),
        (None, ("cpu", "cuda")),
        ("cpu", ("cpu",)),
        ("CUDA", ("cuda",)),
        ("CUDAExecutionProvider", ("cuda",)),
        (["CUDAExecutionProvider", "CPUExecutionProvider"], ("cpu", "cuda")),
    ],
)
def test_names_understood(value, expected):
    assert check_providers(value) == expected


@pytest.mark.parametrize("value", ["TensorrtExecutionProvider", ["cpu", "rocm"], [], 3])
def test_unknown_provider_refused(value):
    with pytest.raises(ProviderError, match="use 'any'"):
        check_providers(value)


def test_refused_before_capture():
    with pytest.raises(ProviderError, match="'DmlExecutionProvider' is not a provider whose kernels were compared"):
        to_onnx(torch.nn.ReLU(), (torch.randn(2),), providers="DmlExecutionProvider")


def test_one_vocabulary_for_to_onnx_the_session_and_the_backend():
    """``providers=`` takes the same words in ``to_onnx``, ``InferenceSession`` and the ``torch.compile`` backend
    ("cpu", "cuda", "any", onnxruntime's names), and refuses the same unknown word with a ProviderError."""
    from experimental.torch_interpreter.providers import session_providers
    from experimental.torch_interpreter.training import BackendOptions

    onx = to_onnx(torch.nn.ReLU(), (torch.randn(3),), providers="cpu")
    x = torch.tensor([-1.0, 0.0, 2.0])
    for value in ("cpu", "CPU", "CPUExecutionProvider", ["cpu"], ("cpu", "CPUExecutionProvider")):
        assert session_providers(value) == ["CPUExecutionProvider"]
        sess = InferenceSession(onx, providers=value)
        assert sess.get_providers() == ["CPUExecutionProvider"]
        np.testing.assert_array_equal(sess.run(None, {"input": x})[0], torch.relu(x).numpy())
        assert BackendOptions(providers=value).provider_for("cpu") == "cpu"
        assert check_providers(value) == ("cpu",)
    assert session_providers("any") is None and session_providers(None) is None
    assert session_providers([("CPUExecutionProvider", {})]) == [("CPUExecutionProvider", {})]
    assert BackendOptions(providers="any").provider_for("cuda") == "cuda"
    assert BackendOptions(providers=("cpu", "cuda")).provider_for("cuda") == "cuda"
    with pytest.raises(ProviderError, match="inputs are on cuda"):
        BackendOptions(providers="CPUExecutionProvider").provider_for("cuda")
    for refuse in (lambda: InferenceSession(onx, providers="gpu"), lambda: BackendOptions(providers="gpu"),
                   lambda: to_onnx(torch.nn.ReLU(), (x,), providers="gpu")):
        with pytest.raises(ProviderError, match="'gpu'"):
            refuse()


def test_every_quirk_names_known_providers():
    for name, (text, providers) in QUIRKS.items():
        assert text and providers and providers <= {"cpu", "cuda"}, name


@pytest.mark.parametrize(("providers", "stored"), [("any", "cpu,cuda"), ("cuda", "cuda"), (["cpu"], "cpu")])
def test_choice_stored_in_the_model(providers, stored):
    onx = to_onnx(torch.nn.ReLU(), (torch.randn(2),), providers=providers)
    assert read(onx)[PROVIDERS] == stored


# -- the guards follow the choice ---------------------------------------------------------------------------
ROWS = torch.tensor([[-INF, -INF, -INF], [1.0, -INF, 2.0], [math.nan, 0.0, 1.0]])


def test_cpu_model_leaves_out_the_cuda_infinity_flag():
    """amax of a row of -inf: the CPU's ReduceMax gives -inf, a model for the CPU needs no 'all infinity' flag
    (one uint8 reduction less) and still matches eager there, NaN rows included."""
    model = Fn(lambda x: torch.amax(x, 1))
    both, cpu = (to_onnx(model, (ROWS,), providers=p) for p in ("any", "cpu"))
    assert _op_types(both).count("ReduceMin") == 1 and "ReduceMin" not in _op_types(cpu)
    expected = model(ROWS).numpy()
    for onx in (both, cpu):
        np.testing.assert_array_equal(_cpu(onx, ROWS)[0], expected)


def test_cuda_model_keeps_the_infinity_flag_and_matches_on_the_imitation():
    model = Fn(lambda x: torch.amax(x, 1))
    onx = to_onnx(model, (ROWS,), providers="cuda")
    cuda, count = imitate_cuda(onx)
    assert count.get("ReduceMax"), "the imitation rewrote no ReduceMax: the check proves nothing"
    np.testing.assert_array_equal(_cpu(cuda, ROWS)[0], model(ROWS).numpy())


def test_cpu_model_without_the_flag_would_be_wrong_on_cuda():
    """The flag a CPU model leaves out is the one CUDA needs: the imitation shows the lowest float32 there."""
    onx = to_onnx(Fn(lambda x: torch.amax(x, 1)), (ROWS,), providers="cpu")
    got = _cpu(imitate_cuda(onx)[0], ROWS)[0]
    assert got[0] == np.finfo(np.float32).min


def test_cuda_model_leaves_out_the_float16_rounding():
    """float16 arithmetic read in float32: rounded explicitly for the CPU (which computes it in float32), not for
    CUDA (float16 kernels)."""
    model = Fn(lambda x, y: (x * y).float())
    args = (torch.randn(8).half(), torch.randn(8).half())
    both, cuda = (to_onnx(model, args, providers=p) for p in ("any", "cuda"))
    assert _op_types(both).count("Cast") == 4 and _op_types(cuda) == ["Mul", "Cast"]
    np.testing.assert_array_equal(_cpu(both, *args)[0], model(*args).numpy())
    assert not needs_guard(("cuda",), "half_computed_in_float")


# -- the runtime warns when a model runs elsewhere ----------------------------------------------------------
def test_session_warns_on_a_provider_the_model_was_not_made_for():
    onx = to_onnx(torch.nn.MaxPool2d(2), (torch.randn(1, 1, 4, 4),), providers="cuda")
    with pytest.warns(ProviderWarning, match="made for cuda .* runs on cpu: the guards cpu needs were left out") as w:
        InferenceSession(onx, providers=["CPUExecutionProvider"])
    message = str(w[0].message)
    assert "MaxPool returns the largest number of a window holding a NaN (PyTorch: NaN)" in message, message
    # what the user reads: the differences in words, not the internal names, and no speed remark
    assert not [name for name in QUIRKS if name in message] and "slower" not in message, message


@pytest.mark.parametrize("providers", ["any", "cpu"])
def test_session_silent_on_the_providers_made_for(providers):
    onx = to_onnx(torch.nn.MaxPool2d(2), (torch.randn(1, 1, 4, 4),), providers=providers)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderWarning)
        InferenceSession(onx, providers=["CPUExecutionProvider"])


def test_cuda_model_keeps_the_fused_skip_norms():
    """A residual + RMSNorm fusion whose sum is read again is given back as Add + norm for the CPU (its fused
    kernel is the slower there); a model for CUDA keeps the four of a 2-layer Llama; the same numbers."""
    from test_optimize import _family

    torch.manual_seed(0)
    model, make_inputs, dynamic = _family("llama")
    inputs = make_inputs(2, 8)
    kinds = {}
    for providers in ("any", "cuda"):
        onx = to_onnx(model.eval(), (), inputs, dynamic_shapes=dynamic, optimize="onnxruntime", providers=providers)
        kinds[providers] = _op_types(onx).count("SkipSimplifiedLayerNormalization")
        sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0]
        with torch.no_grad():
            np.testing.assert_allclose(got, model(**inputs).logits.numpy(), atol=1e-4, rtol=1e-4)
    assert kinds == {"any": 1, "cuda": 4}


# -- a model for CUDA computes in bfloat16 where CUDA has the kernel ----------------------------------------
def _cuda_bfloat16_kernels_on_the_cpu(onx):
    """``onx`` rewritten so that the CPU runs it as CUDA would: each node of an op with a bfloat16 CUDA kernel
    computes in float32 and rounds its bfloat16 outputs once (what CUDA's bfloat16 kernels do); the CPU has no
    bfloat16 kernel for them."""
    import onnx_ir as ir

    from experimental.torch_interpreter.ops._common.kernels import CUDA_BFLOAT16

    model = ir.from_proto(onx)
    bf16, f32 = ir.DataType.BFLOAT16, ir.DataType.FLOAT
    count = 0
    for node in list(model.graph):
        if node.op_type not in CUDA_BFLOAT16 or not any(v is not None and v.dtype == bf16 for v in node.outputs):
            continue
        count += 1
        for i, v in enumerate(node.inputs):
            if v is not None and v.dtype == bf16:
                up = ir.node("Cast", [v], {"to": f32})
                up.outputs[0].dtype = f32
                model.graph.insert_before(node, up)
                node.replace_input_with(i, up.outputs[0])
        for out in node.outputs:
            if out.dtype != bf16:
                continue
            users, name = list(out.uses()), out.name
            out.dtype, out.name = f32, f"{name}__f32"
            down = ir.node("Cast", [out], {"to": bf16})
            down.outputs[0].dtype, down.outputs[0].name = bf16, name
            model.graph.insert_after(node, down)
            for user, index in users:
                user.replace_input_with(index, down.outputs[0])
            model.graph.outputs[:] = [down.outputs[0] if o is out else o for o in model.graph.outputs]
    return _float_outputs(ir.to_proto(model)), count  # numpy has no bfloat16: the outputs read as float32


@pytest.mark.parametrize("optimize", [True, "onnxruntime"])
def test_cuda_bfloat16_model_computes_in_bfloat16_and_matches(optimize):
    """A bfloat16 Llama made for CUDA keeps its arithmetic in bfloat16 where CUDA has the kernel (the CPU has none:
    the model for any provider casts around each op); run as CUDA would, it matches eager within bfloat16's
    tolerance, the padded rows included."""
    from test_optimize import _family

    torch.manual_seed(0)
    model, make_inputs, dynamic = _family("llama")
    model = model.eval().to(torch.bfloat16)
    inputs = make_inputs(2, 8)
    both, cuda = (to_onnx(model, (), inputs, dynamic_shapes=dynamic, optimize=optimize, providers=p)
                  for p in ("any", "cuda"))
    assert _op_types(cuda).count("Cast") * 4 < _op_types(both).count("Cast"), (
        _op_types(cuda).count("Cast"), _op_types(both).count("Cast"))
    imitated, count = _cuda_bfloat16_kernels_on_the_cpu(cuda)
    assert count > 10, count
    sess = ort.InferenceSession(imitated.SerializeToString(), providers=["CPUExecutionProvider"])
    got = torch.from_numpy(sess.run(None, {k: v.numpy() for k, v in inputs.items()})[0])
    with torch.no_grad():
        expected = model(**inputs).logits.float()
    assert float((got - expected).abs().max() / expected.abs().max()) < 1e-2


def test_sign_guard_only_where_the_cpu_runs_the_model():
    """Sign(NaN): NaN on the CPU, 0 on CUDA and in PyTorch. A model for CUDA leaves the IsNaN guard out and gives
    0 on the CUDA imitation; the default model gives 0 on both."""
    model, x = Fn(torch.sign), torch.tensor([math.nan, -0.0, -2.0, INF])
    both, cuda = (to_onnx(model, (x,), providers=p) for p in ("any", "cuda"))
    assert "IsNaN" in _op_types(both) and _op_types(cuda) == ["Sign"]
    expected = model(x).numpy()
    np.testing.assert_array_equal(_cpu(both, x)[0], expected)
    imitated, count = imitate_cuda(cuda)
    assert count.get("Sign"), count
    np.testing.assert_array_equal(_cpu(imitated, x)[0], expected)


def test_nodes_without_cuda_kernel_reads_types_and_combinations():
    """The static check of a model made for CUDA: an int64 ArgMax (CUDA has float ones only), a bfloat16 input
    normalized with a float32 scale (no such CUDA kernel) and an op the table does not list are reported; the same
    ops in the types CUDA takes are not."""
    from onnx import TensorProto, helper

    from experimental.torch_interpreter.testing.check import nodes_without_cuda_kernel

    def model(x_type, scale_type, op="ArgMax"):
        nodes = [helper.make_node(op, ["x"], ["i"], keepdims=0),
                 helper.make_node("SimplifiedLayerNormalization", ["x", "s"], ["y"], epsilon=1e-6)]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, [2, 4]),
                                               helper.make_tensor_value_info("s", scale_type, [4])],
                                  [helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
                                   helper.make_tensor_value_info("y", scale_type, [2, 4])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])

    assert nodes_without_cuda_kernel(model(TensorProto.FLOAT16, TensorProto.FLOAT)) == set()
    assert nodes_without_cuda_kernel(model(TensorProto.BFLOAT16, TensorProto.BFLOAT16, op="ReduceMax")) == {
        ("", "ReduceMax", "BFLOAT16")}
    assert nodes_without_cuda_kernel(model(TensorProto.INT64, TensorProto.FLOAT)) == {
        ("", "ArgMax", "INT64"), ("", "SimplifiedLayerNormalization", "INT64, FLOAT")}
    assert nodes_without_cuda_kernel(model(TensorProto.BFLOAT16, TensorProto.FLOAT, op="Hardmax")) == {
        ("", "Hardmax", "BFLOAT16"), ("", "SimplifiedLayerNormalization", "BFLOAT16, FLOAT")}
