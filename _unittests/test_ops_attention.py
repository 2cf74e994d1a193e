import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.check import Fn, check_model, op_types

OPSETS = [18, 23]


def sdpa(**kw):
    return Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw))


def sdpa_mask(**kw):
    return Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw))


class Sdpa(torch.nn.Module):
    """Named inputs, for dynamic_shapes (Fn takes ``*args``)."""

    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **self.kw)


def qkv(b=2, h=4, lq=5, s=6, e=8, hk=None, dtype=torch.float32):
    hk = hk or h
    return (
        torch.randn(b, h, lq, e, dtype=dtype),
        torch.randn(b, hk, s, e, dtype=dtype),
        torch.randn(b, hk, s, e, dtype=dtype),
    )


def check_family(onx, opset):
    """One ONNX Attention at opset 23, the decomposed form (one Softmax) below."""
    types = op_types(onx)
    if opset >= 23:
        assert types.count("Attention") == 1 and "Softmax" not in types, types
    else:
        assert types.count("Softmax") == 1 and "Attention" not in types, types


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("kw", [{}, {"scale": 0.3}], ids=["default_scale", "scale"])
def test_no_mask(opset, kw):
    torch.manual_seed(0)
    onx = check_model(sdpa(**kw), qkv(), target_opset=opset)
    check_family(onx, opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "mask_shape",
    [(5, 6), (2, 1, 5, 6), (2, 4, 5, 6), (4, 5, 6), (2, 1, 1, 6), (1, 6)],
    ids=["2d", "4d", "4d_full", "3d_heads", "padding", "row"],
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_mask(opset, mask_shape, kind):
    torch.manual_seed(0)
    mask = torch.rand(*mask_shape) > 0.3 if kind == "bool" else torch.randn(*mask_shape)
    onx = check_model(sdpa_mask(), (*qkv(), mask), target_opset=opset)
    check_family(onx, opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_are_zero(opset, kind):
    # PyTorch (CPU) returns 0, not NaN, for a query row whose keys are all masked; so do we.
    torch.manual_seed(0)
    keep = torch.rand(2, 1, 5, 6) > 0.3
    keep[0, 0, 1] = False
    keep[1, 0, 4] = False
    mask = keep if kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    args = (*qkv(), mask)
    expected = sdpa_mask()(*args)
    assert (expected[0, :, 1] == 0).all() and (expected[1, :, 4] == 0).all()
    check_model(sdpa_mask(), args, target_opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("lq,s", [(6, 6), (4, 7), (7, 4)], ids=["L==S", "L<S", "L>S"])
def test_causal(opset, lq, s):
    torch.manual_seed(0)
    onx = check_model(sdpa(is_causal=True), qkv(lq=lq, s=s), target_opset=opset)
    check_family(onx, opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.25}], ids=["plain", "causal", "scale"])
def test_gqa(opset, kw):
    torch.manual_seed(0)
    onx = check_model(sdpa(enable_gqa=True, **kw), qkv(h=6, hk=2, lq=5, s=5), target_opset=opset)
    check_family(onx, opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_gqa_mask_and_value_dim(opset):
    torch.manual_seed(0)
    q, k, _ = qkv(h=4, hk=2)
    v = torch.randn(2, 2, 6, 3)  # value head size differs from the query's
    check_model(sdpa_mask(enable_gqa=True), (q, k, v, torch.rand(4, 5, 6) > 0.3), target_opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", ["plain", "bool_mask", "float_mask", "causal", "gqa"])
def test_float16(opset, case):
    torch.manual_seed(0)
    args = qkv(dtype=torch.float16, hk=2 if case == "gqa" else None)
    if case == "plain":
        model = sdpa()
    elif case == "causal":
        model = sdpa(is_causal=True)
    elif case == "gqa":
        model = sdpa(enable_gqa=True)
    else:
        model = sdpa_mask()
        mask = torch.rand(5, 6) > 0.3
        args = (*args, mask if case == "bool_mask" else torch.randn(5, 6).half())
    onx = check_model(model, args, target_opset=opset, atol=1e-2, rtol=1e-2)
    check_family(onx, opset)
    assert onx.graph.output[0].type.tensor_type.elem_type == 10  # FLOAT16


@pytest.mark.parametrize("opset", OPSETS)
def test_float64(opset):
    torch.manual_seed(0)
    args = (*qkv(dtype=torch.float64), torch.rand(5, 6) > 0.3)
    check_model(sdpa_mask(), args, target_opset=opset, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("opset", OPSETS)
def test_bfloat16(opset):
    # bfloat16 is computed in float and cast back (onnxruntime CPU has no bfloat16 kernels for it);
    # the casts live in the model because the test runtime is fed float tensors.
    def fn(q, k, v, m):
        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m).float()

    torch.manual_seed(0)
    check_model(Fn(fn), (*qkv(), torch.rand(5, 6) > 0.3), target_opset=opset, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask_2d", "float_mask_4d", "padding_mask", "gqa"])
def test_dynamic_batch_and_sequence(opset, case):
    torch.manual_seed(0)
    hk = 2 if case == "gqa" else None
    q_dims, kv_dims = {0: "batch", 2: "L"}, {0: "batch", 2: "S"}
    args, args2 = qkv(lq=5, s=6, hk=hk), qkv(b=3, lq=7, s=4, hk=hk)
    dyn = (q_dims, kv_dims, kv_dims)
    kw = {"causal": {"is_causal": True}, "gqa": {"enable_gqa": True}}.get(case, {})
    model = Sdpa(**kw)
    if "mask" in case:
        if case == "bool_mask_2d":
            masks, mdims = (torch.rand(5, 6) > 0.3, torch.rand(7, 4) > 0.3), {0: "L", 1: "S"}
        elif case == "float_mask_4d":
            masks, mdims = (torch.randn(2, 1, 5, 6), torch.randn(3, 1, 7, 4)), {0: "batch", 2: "L", 3: "S"}
        else:
            masks, mdims = (torch.rand(2, 1, 1, 6) > 0.3, torch.rand(3, 1, 1, 4) > 0.3), {0: "batch", 3: "S"}
        args, args2, dyn = (*args, masks[0]), (*args2, masks[1]), (*dyn, mdims)
    onx = check_model(model, args, dynamic_shapes=dyn, more_inputs=[(args2, None)], target_opset=opset)
    check_family(onx, opset)
    out_dims = [d.dim_param or d.dim_value for d in onx.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims[0] == "batch" and out_dims[2] == "L", out_dims


@pytest.mark.parametrize("opset", OPSETS)
def test_dynamic_head_size_and_heads(opset):
    torch.manual_seed(0)
    d = {0: "batch", 3: "E"}  # default scale 1/sqrt(E) computed at runtime
    check_model(Sdpa(), qkv(), dynamic_shapes=(d, d, d), more_inputs=[(qkv(e=16), None)], target_opset=opset)
    dq, dk = {1: "H"}, {1: "Hk"}  # GQA with a dynamic number of groups
    args, args2 = qkv(h=6, hk=2), qkv(h=8, hk=4)
    check_model(Sdpa(enable_gqa=True), args, dynamic_shapes=(dq, dk, dk), more_inputs=[(args2, None)], target_opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("rank", [3, 5])
def test_other_ranks_decomposed(opset, rank):
    # ONNX Attention takes 4-D inputs only: other ranks keep the decomposed form at opset 23.
    torch.manual_seed(0)
    shape = {3: (3, 5, 8), 5: (2, 2, 3, 5, 8)}[rank]
    q, k, v = (torch.randn(*shape) for _ in range(3))
    onx = check_model(sdpa_mask(), (q, k, v, torch.rand(5, 5) > 0.3), target_opset=opset)
    assert "Attention" not in op_types(onx)
    check_model(sdpa(is_causal=True), (q, k, v), target_opset=opset)


def test_dropout_raises():
    """The message leads to the usual cause, a model left in training mode."""
    with pytest.raises(ConversionError, match="dropout_p=0.1") as info:
        to_onnx(sdpa(dropout_p=0.1), qkv())
    assert "call model.eval() before to_onnx" in str(info.value)
