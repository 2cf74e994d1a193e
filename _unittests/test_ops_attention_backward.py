"""The fused attention kernels of AOTAutograd's graphs and their backward (``ops/attention_backward.py``).

onnxruntime against the aten op in eager where it runs (``_scaled_dot_product_flash_attention_for_cpu``), and for
every form against ``F.scaled_dot_product_attention`` in float64 and its ``torch.autograd.grad``; the CUDA forms
are exported on the CPU (their meta kernels suffice) and checked against that reference only.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

from experimental.torch_interpreter import InferenceSession, to_onnx
from experimental.torch_interpreter.errors import ConversionError
from experimental.torch_interpreter.testing.aot import aot_graphs
from experimental.torch_interpreter.testing.check import Fn, check_model

aten = torch.ops.aten
FWD = aten._scaled_dot_product_flash_attention_for_cpu.default
BWD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
EFF = aten._scaled_dot_product_efficient_attention.default
EFF_BWD = aten._scaled_dot_product_efficient_attention_backward.default
FLASH = aten._scaled_dot_product_flash_attention.default
FLASH_BWD = aten._scaled_dot_product_flash_attention_backward.default

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}

#: name -> (sizes, keyword arguments of the op, mask)
CASES = {
    "plain": ({}, {}, None),
    "scale": ({}, {"scale": 0.3}, None),
    "causal": ({"lq": 6, "s": 6}, {"is_causal": True}, None),
    "causal_L<S": ({"lq": 4, "s": 7}, {"is_causal": True}, None),
    "causal_L>S": ({"lq": 7, "s": 4}, {"is_causal": True}, None),
    "mask_2d": ({}, {}, "2d"),
    "mask_4d": ({}, {}, "4d"),
    "mask_and_causal": ({}, {"is_causal": True}, "4d"),
    "masked_rows": ({}, {}, "masked_rows"),
    "gqa": ({"hk": 2}, {}, None),
}


def qkv(b=2, h=4, hk=None, lq=5, s=6, e=8, dtype=torch.float32):
    hk = hk or h
    return (
        torch.randn(b, h, lq, e).to(dtype),
        torch.randn(b, hk, s, e).to(dtype),
        torch.randn(b, hk, s, e).to(dtype),
    )


def make_mask(kind, b, h, lq, s, dtype):
    """A float mask added to the scores; ``masked_rows``: rows that mask every key, others some."""
    if kind is None:
        return None
    if kind == "2d":
        return torch.randn(lq, s).to(dtype)
    if kind == "full":
        return torch.randn(b, h, lq, s).to(dtype)
    mask = torch.randn(b, 1, lq, s)
    if kind == "masked_rows":
        mask[0, 0, 1] = -math.inf
        mask[1, 0, 3] = -math.inf
        mask[1, 0, 0, :4] = -math.inf
    return mask.to(dtype)


def case(name, dtype=torch.float32, mask_kind=None):
    """(q, k, v, mask, op keyword arguments) of case ``name``."""
    torch.manual_seed(0)
    sizes, kw, kind = CASES[name]
    q, k, v = qkv(dtype=dtype, **sizes)
    b, h, lq, _ = q.shape
    return q, k, v, make_mask(mask_kind or kind, b, h, lq, k.shape[2], dtype), kw


def reference(q, k, v, g, mask=None, is_causal=False, scale=None, lower_right=False, hidden_lse=0.0):
    """Output, logsumexp and the gradients of q, k, v (and of ``mask``): ``F.scaled_dot_product_attention``
    and ``torch.autograd.grad`` in float64; causal from the top left, or the bottom right with ``lower_right``."""
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    lq, s = q.shape[2], k.shape[2]
    bias = None if mask is None else mask.double().requires_grad_()
    full = bias
    if is_causal:
        keep = torch.ones(lq, s, dtype=torch.bool).tril(s - lq if lower_right else 0)
        hide = torch.zeros(lq, s, dtype=torch.float64).masked_fill(~keep, -math.inf)
        full = hide if bias is None else bias + hide
    gqa = q.shape[1] != k.shape[1]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=full, scale=scale, enable_gqa=gqa)
    inputs = (q, k, v) if bias is None else (q, k, v, bias)
    grads = torch.autograd.grad(out, inputs, g.double())
    kk = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    scores = q @ kk.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if full is not None:
        scores = scores + full
    lse = torch.logsumexp(scores, -1)
    lse = torch.where(torch.isneginf(lse), hidden_lse, lse)
    return [t.detach().numpy() for t in (out, lse, *grads)]


def run_onnx(model, args, **kwargs):
    """onnxruntime's outputs of ``model`` exported on ``args`` (for the CUDA ops: eager cannot run them)."""
    onx = to_onnx(model, args, **kwargs)
    onnx.checker.check_model(onx, full_check=True)
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in onx.graph.input], args))
    return [g.astype(np.float32) if g.dtype.name == "bfloat16" else g for g in sess.run(None, feeds)]


def assert_close(got, expected, tol):
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert not np.isnan(got).any() and not np.isnan(expected).any()
    np.testing.assert_allclose(got.astype(np.float64), expected, atol=tol, rtol=tol)


# -- _scaled_dot_product_flash_attention_for_cpu: against the aten op and autograd ------------------------------
def cpu_forward(**kw):
    return Fn(lambda q, k, v, m=None: FWD(q, k, v, 0.0, kw.get("is_causal", False), attn_mask=m, scale=kw.get("scale")))


def cpu_step(**kw):
    """Forward then backward, as a training step's graphs chain them."""
    causal, scale = kw.get("is_causal", False), kw.get("scale")

    def step(g, q, k, v, m=None):
        out, lse = FWD(q, k, v, 0.0, causal, attn_mask=m, scale=scale)
        return (out, lse, *BWD(g, q, k, v, out, lse, 0.0, causal, attn_mask=m, scale=scale))

    return Fn(step)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_forward(name, dtype):
    q, k, v, mask, kw = case(name, dtype)
    args = (q, k, v) if mask is None else (q, k, v, mask)
    onx = check_model(cpu_forward(**kw), args, atol=TOL[dtype], rtol=TOL[dtype])
    assert onx.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # logsumexp: float32
    if name == "masked_rows":  # 0, not NaN, and a logsumexp of 0, as the kernel
        out, lse = FWD(*args[:3], attn_mask=mask)
        assert (out[0, :, 1] == 0).all() and (lse[0, :, 1] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_backward(name, dtype):
    q, k, v, mask, kw = case(name, dtype)
    causal, scale = kw.get("is_causal", False), kw.get("scale")
    out, lse = FWD(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    g = torch.randn(out.shape).to(dtype)

    def bwd(g, q, k, v, out, lse, m=None):
        return BWD(g, q, k, v, out, lse, 0.0, causal, attn_mask=m, scale=scale)

    args = (g, q, k, v, out, lse) if mask is None else (g, q, k, v, out, lse, mask)
    check_model(Fn(bwd), args, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_step_matches_autograd(name, dtype):
    q, k, v, mask, kw = case(name, dtype)
    g = torch.randn(q.shape).to(dtype)
    args = (g, q, k, v) if mask is None else (g, q, k, v, mask)
    got = run_onnx(cpu_step(**kw), args)
    expected = reference(q, k, v, g, mask, **kw)
    assert len(got) == 5
    for a, e in zip(got, expected):
        assert_close(a, e, TOL[dtype])


def test_cpu_float32_mask_of_float16_query():
    # the kernel takes a float32 mask with a float16 query (it computes in float32)
    q, k, v, _, _ = case("plain", torch.float16)
    check_model(cpu_forward(), (q, k, v, torch.randn(5, 6)), atol=1e-2, rtol=1e-2)


def test_cpu_float64():
    q, k, v, mask, _ = case("masked_rows", torch.float64)
    onx = check_model(cpu_forward(), (q, k, v, mask), atol=1e-10, rtol=1e-10)
    assert onx.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    g = torch.randn(q.shape, dtype=torch.float64)
    got = run_onnx(cpu_step(), (g, q, k, v, mask))
    for a, e in zip(got, reference(q, k, v, g, mask)):
        assert_close(a, e, 1e-10)


@pytest.mark.parametrize("name", ["causal", "mask_4d", "gqa"])
def test_cpu_step_dynamic(name):
    q, k, v, mask, kw = case(name)
    g = torch.randn(q.shape)
    q2, k2, v2 = qkv(b=3, lq=7, s=4, hk=k.shape[1])
    g2 = torch.randn(q2.shape)
    dq, dkv = {0: "batch", 2: "L"}, {0: "batch", 2: "S"}
    args, args2, dyn = (g, q, k, v), (g2, q2, k2, v2), (dq, dq, dkv, dkv)
    mask2 = None if mask is None else torch.randn(3, 1, 7, 4)
    if mask is not None:
        args, args2 = (*args, mask), (*args2, mask2)
        dyn = (*dyn, {0: "batch", 2: "L", 3: "S"})
    onx = check_model(cpu_step(**kw), args, dynamic_shapes=dyn, more_inputs=[(args2, None)], atol=1e-4, rtol=1e-4)
    dims = [d.dim_param for d in onx.graph.output[1].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2] == "L", dims
    for a, e in zip(run_onnx(cpu_step(**kw), args2, dynamic_shapes=dyn), reference(q2, k2, v2, g2, mask2, **kw)):
        assert_close(a, e, 1e-4)


def test_cpu_step_dynamic_head_size():
    # the default scale 1/sqrt(E) computed at run time
    q, k, v, _, _ = case("plain")
    q2, k2, v2 = qkv(e=16)
    d = {0: "batch", 3: "E"}
    check_model(
        cpu_step(), (torch.randn(q.shape), q, k, v), dynamic_shapes=(d, d, d, d),
        more_inputs=[((torch.randn(q2.shape), q2, k2, v2), None)], atol=1e-4, rtol=1e-4,
    )


@pytest.mark.parametrize(
    "kw",
    [{"is_causal": True}, {"enable_gqa": True, "mask": True}, {"scale": 0.5}],
    ids=["causal", "gqa_mask", "scale"],
)
def test_aot_autograd_graphs(kw):
    """The graphs torch.compile hands a backend for SDPA on the CPU hold these ops; both convert."""
    kw = dict(kw)
    torch.manual_seed(0)
    q, k, v = (t.requires_grad_() for t in qkv(hk=2 if kw.get("enable_gqa") else None))
    masks = (torch.randn(2, 1, 5, 6),) if kw.pop("mask", False) else ()
    graphs = aot_graphs(lambda q, k, v, *m: F.scaled_dot_product_attention(q, k, v, *m, **kw), q, k, v, *masks)
    backward, inputs = graphs["backward"]
    assert any(n.target is BWD for n in backward.graph.nodes)
    for gm, inputs in graphs.values():
        check_model(gm, inputs, atol=1e-4, rtol=1e-4)


# -- the CUDA kernels, exported on the CPU: against autograd ---------------------------------------------------
EFF_CASES = ["plain", "scale", "causal", "causal_L<S", "causal_L>S", "mask_4d", "mask_full", "mask_and_causal",
             "masked_rows"]


def efficient_step(causal, scale=None, with_bias=True):
    def step(g, q, k, v, b=None):
        out, lse, seed, offset = EFF(q, k, v, b, True, 0.0, causal, scale=scale)
        grads = EFF_BWD(g, q, k, v, b, out, lse, seed, offset, 0.0, [True, True, True, with_bias], causal, scale=scale)
        return (out, lse, *grads[:3]) + ((grads[3],) if with_bias else ())

    return Fn(step)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", EFF_CASES)
def test_efficient(name, dtype):
    base = "mask_4d" if name == "mask_full" else name
    q, k, v, mask, kw = case(base, dtype, mask_kind="full" if name == "mask_full" else None)
    g = torch.randn(q.shape).to(dtype)
    causal, scale = kw.get("is_causal", False), kw.get("scale")
    args = (g, q, k, v) if mask is None else (g, q, k, v, mask)
    got = run_onnx(efficient_step(causal, scale, mask is not None), args)
    expected = reference(q, k, v, g, mask, causal, scale)
    lq = q.shape[2]
    assert got[1].shape == (*q.shape[:2], 32)  # padded to a multiple of 32 rows, with +inf
    assert np.isposinf(got[1][..., lq:]).all()
    got[1] = got[1][..., :lq]
    assert len(got) == len(expected)
    for a, e in zip(got, expected):
        assert_close(a, e, TOL[dtype])


def test_efficient_logsumexp_padding_dynamic():
    q, k, v, _, _ = case("plain")
    dq = {0: "batch", 2: "L"}
    model = Fn(lambda q, k, v: EFF(q, k, v, None, True, 0.0, False)[:2])
    onx = to_onnx(model, (q, k, v), dynamic_shapes=(dq, {0: "batch"}, {0: "batch"}))
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    for lq in (5, 32, 33):
        q2 = torch.randn(3, 4, lq, 8)
        k2, v2 = torch.randn(3, 4, 6, 8), torch.randn(3, 4, 6, 8)
        out, lse = sess.run(None, dict(zip([i.name for i in onx.graph.input], (q2, k2, v2))))
        assert lse.shape == (3, 4, -(-lq // 32) * 32) and np.isposinf(lse[..., lq:]).all()
        expected = reference(q2, k2, v2, torch.zeros(q2.shape))
        assert_close(out, expected[0], 1e-4)
        assert_close(lse[..., :lq], expected[1], 1e-4)


def test_efficient_without_logsumexp():
    q, k, v, _, _ = case("plain")
    out, lse = run_onnx(Fn(lambda q, k, v: EFF(q, k, v, None, False)[:2]), (q, k, v))
    assert lse.shape == (2, 4, 0)
    assert_close(out, reference(q, k, v, torch.zeros(q.shape))[0], 1e-4)


def test_efficient_bias_gradient_not_asked():
    q, k, v, mask, _ = case("mask_4d")
    g = torch.randn(q.shape)
    got = run_onnx(efficient_step(False, with_bias=False), (g, q, k, v, mask))
    got[1] = got[1][..., :5]
    assert len(got) == 5  # no gradient of the bias
    for a, e in zip(got, reference(q, k, v, g, mask)):
        assert_close(a, e, 1e-4)


def test_efficient_rejects_gqa():
    q, k, v, _, _ = case("gqa")
    with pytest.raises(ConversionError, match="same number of heads"):
        to_onnx(Fn(lambda q, k, v: EFF(q, k, v, None, True)[0]), (q, k, v))


FLASH_CASES = ["plain", "scale", "causal", "causal_L<S", "causal_L>S", "gqa"]


def flash_step(causal, scale=None):
    def step(g, q, k, v):
        r = FLASH(q, k, v, 0.0, causal, scale=scale)
        grads = FLASH_BWD(g, q, k, v, r[0], r[1], r[2], r[3], r[4], r[5], 0.0, causal, r[6], r[7], scale=scale)
        return (r[0], r[1], *grads)

    return Fn(step)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", FLASH_CASES)
def test_flash(name, dtype):
    """Causal from the bottom right (flash-attention 2): with L > S the first rows see no key, give 0 and a
    logsumexp of +inf."""
    q, k, v, _, kw = case(name, dtype)
    g = torch.randn(q.shape).to(dtype)
    causal, scale = kw.get("is_causal", False), kw.get("scale")
    got = run_onnx(flash_step(causal, scale), (g, q, k, v))
    expected = reference(q, k, v, g, None, causal, scale, lower_right=True, hidden_lse=math.inf)
    for a, e in zip(got, expected):
        assert_close(a, e, TOL[dtype])
    if name == "causal_L>S":
        assert (got[0][:, :, :3] == 0).all() and np.isposinf(got[1][:, :, :3]).all()
        assert (got[2][:, :, :3] == 0).all()


def test_flash_dynamic():
    q, k, v, _, _ = case("causal_L<S")
    g = torch.randn(q.shape)
    dq, dkv = {0: "batch", 2: "L"}, {0: "batch", 2: "S"}
    onx = to_onnx(flash_step(True), (g, q, k, v), dynamic_shapes=(dq, dq, dkv, dkv))
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    q2, k2, v2 = qkv(b=3, lq=6, s=9)
    g2 = torch.randn(q2.shape)
    got = sess.run(None, dict(zip([i.name for i in onx.graph.input], (g2, q2, k2, v2))))
    for a, e in zip(got, reference(q2, k2, v2, g2, None, True, lower_right=True)):
        assert_close(a, e, 1e-4)


# -- dropout ----------------------------------------------------------------------------------------------------
DROPOUT = {
    "for_cpu": (lambda q, k, v: FWD(q, k, v, 0.1)[0], 3),
    "for_cpu_backward": (lambda g, q, k, v, o, lse: BWD(g, q, k, v, o, lse, 0.1, False)[0], 6),
    "efficient": (lambda q, k, v: EFF(q, k, v, None, True, 0.1)[0], 3),
    "efficient_backward": (
        lambda g, q, k, v, o, lse: EFF_BWD(
            g, q, k, v, None, o, lse, torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64),
            0.1, [True] * 4,
        )[0],
        6,
    ),
    "flash": (lambda q, k, v: FLASH(q, k, v, 0.1)[0], 3),
    "flash_backward": (
        lambda g, q, k, v, o, lse: FLASH_BWD(
            g, q, k, v, o, lse, None, None, 5, 5, 0.1, False, torch.zeros(2, dtype=torch.int64),
            torch.zeros((), dtype=torch.int64),
        )[0],
        6,
    ),
}


@pytest.mark.parametrize("name", list(DROPOUT))
def test_dropout_raises(name):
    fn, n = DROPOUT[name]
    q = torch.randn(2, 4, 5, 8)
    lse = torch.randn(2, 4, 32 if name.startswith("efficient") else 5)
    args = (q, q, q) if n == 3 else (q, q, q, q, q, lse)
    op = {"for_cpu": "flash_attention_for_cpu", "efficient": "efficient_attention", "flash": "flash_attention"}
    with pytest.raises(ConversionError, match="dropout") as info:
        to_onnx(Fn(fn), args)
    assert f"_scaled_dot_product_{op[name.replace('_backward', '')]}" in str(info.value)
    assert "not supported" in str(info.value)


# -- _scaled_dot_product_cudnn_attention (PyTorch's first choice on H100), exported on the CPU: against autograd --
CUDNN = aten._scaled_dot_product_cudnn_attention.default
CUDNN_BWD = aten._scaled_dot_product_cudnn_attention_backward.default
CUDNN_CASES = [
    "plain", "scale", "causal", "causal_L<S", "causal_L>S", "mask_2d", "mask_3d", "mask_4d", "mask_full",
    "mask_and_causal", "masked_rows", "gqa", "gqa_mask",
]


def cudnn_case(name, dtype=torch.float32):
    """(q, k, v, bias, op keyword arguments) of a cuDNN case: those of :func:`case`, and a 3-D bias [1, L, S],
    a full bias [B, H, L, S], a bias with grouped-query heads."""
    base = {"mask_3d": "mask_2d", "mask_full": "mask_4d", "gqa_mask": "gqa"}.get(name, name)
    q, k, v, mask, kw = case(base, dtype, mask_kind="full" if name == "mask_full" else None)
    if name == "mask_3d":
        mask = mask[None]
    if name == "gqa_mask":
        mask = torch.randn(q.shape[0], 1, q.shape[2], k.shape[2]).to(dtype)
    return q, k, v, mask, kw


def cudnn_step(causal, scale=None):
    """Forward then backward, as a training step's graphs chain them; the bias (if any) last."""

    def step(g, q, k, v, b=None):
        r = CUDNN(q, k, v, b, True, 0.0, causal, scale=scale)
        grads = CUDNN_BWD(g, q, k, v, r[0], r[1], r[6], r[7], b, r[2], r[3], r[4], r[5], 0.0, causal, scale=scale)
        return (r[0], r[1], *grads)

    return Fn(step)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", CUDNN_CASES)
def test_cudnn(name, dtype):
    """Causal from the top left (cuDNN's set_causal_mask, PyTorch's is_causal): with L > S every row keeps key 0;
    the logsumexp [B, H, L, 1] float32; a row whose bias is -inf everywhere gives 0, a logsumexp of -inf and
    gradients 0."""
    q, k, v, mask, kw = cudnn_case(name, dtype)
    g = torch.randn(q.shape).to(dtype)
    causal, scale = kw.get("is_causal", False), kw.get("scale")
    args = (g, q, k, v) if mask is None else (g, q, k, v, mask)
    onx = to_onnx(cudnn_step(causal, scale), args)
    assert onx.graph.output[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    got = run_onnx(cudnn_step(causal, scale), args)
    expected = reference(q, k, v, g, mask, causal, scale, hidden_lse=-math.inf)[:5]  # the bias has no gradient
    assert got[1].shape == (*q.shape[:3], 1)
    got[1] = got[1][..., 0]
    assert len(got) == 5
    for a, e in zip(got, expected):
        assert_close(a, e, TOL[dtype])
    if name == "masked_rows":
        assert (got[0][0, :, 1] == 0).all() and np.isneginf(got[1][0, :, 1]).all() and (got[2][0, :, 1] == 0).all()
        assert np.isfinite(got[1][0, :, 0]).all()


def test_cudnn_backward_from_reference():
    """The backward alone, fed the float64 reference's output and logsumexp (-inf on the masked rows, as cuDNN
    documents; +inf or a finite value give the same): autograd's gradients."""
    q, k, v, mask, _ = cudnn_case("masked_rows")
    g = torch.randn(q.shape)
    out, lse, *grads = reference(q, k, v, g, mask, hidden_lse=-math.inf)
    zeros = torch.zeros((), dtype=torch.int64)

    def bwd(g, q, k, v, out, lse, b):
        return CUDNN_BWD(g, q, k, v, out, lse, zeros, zeros, b, None, None, 5, 6, 0.0, False)

    for hidden in (-math.inf, math.inf, 3.0):
        lse4 = torch.from_numpy(np.where(np.isneginf(lse), hidden, lse)).float()[..., None]
        got = run_onnx(Fn(bwd), (g, q, k, v, torch.from_numpy(out).float(), lse4, mask))
        for a, e in zip(got, grads[:3]):
            assert_close(a, e, 1e-4)


def test_cudnn_float64():
    """Computed in float64; the logsumexp kept in float32 (the meta kernel's dtype), so the gradients, which read
    it, to float32's precision."""
    q, k, v, mask, _ = cudnn_case("masked_rows", torch.float64)
    g = torch.randn(q.shape, dtype=torch.float64)
    got = run_onnx(cudnn_step(False), (g, q, k, v, mask))
    assert got[0].dtype == np.float64 and got[1].dtype == np.float32  # the meta kernel's float32 logsumexp
    got[1] = got[1][..., 0]
    for a, e, tol in zip(got, reference(q, k, v, g, mask, hidden_lse=-math.inf), (1e-10, 1e-6, 1e-6, 1e-6, 1e-6)):
        assert_close(a, e, tol)


@pytest.mark.parametrize("name", ["causal_L<S", "mask_4d", "gqa"])
def test_cudnn_dynamic(name):
    q, k, v, mask, kw = cudnn_case(name)
    causal = kw.get("is_causal", False)
    g = torch.randn(q.shape)
    dq, dkv = {0: "batch", 2: "L"}, {0: "batch", 2: "S"}
    args, dyn = (g, q, k, v), (dq, dq, dkv, dkv)
    if mask is not None:
        args, dyn = (*args, mask), (*dyn, {0: "batch", 2: "L", 3: "S"})
    onx = to_onnx(cudnn_step(causal), args, dynamic_shapes=dyn)
    dims = [d.dim_param for d in onx.graph.output[1].type.tensor_type.shape.dim]
    assert dims[0] == "batch" and dims[2] == "L" and onx.graph.output[1].type.tensor_type.shape.dim[3].dim_value == 1
    sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
    q2, k2, v2 = qkv(b=3, lq=7, s=9, hk=k.shape[1])
    g2 = torch.randn(q2.shape)
    args2 = (g2, q2, k2, v2) if mask is None else (g2, q2, k2, v2, torch.randn(3, 1, 7, 9))
    got = sess.run(None, dict(zip([i.name for i in onx.graph.input], args2)))
    got[1] = got[1][..., 0]
    for a, e in zip(got, reference(*args2[1:4], g2, args2[4] if mask is not None else None, causal)):
        assert_close(a, e, 1e-4)


def test_cudnn_autograd_graph():
    """The backward node as autograd's formula emits it (traced on fake tensors: the bias, None for cum_seq_q and
    cum_seq_k, max_q and max_k as ints) converts and gives autograd's gradients; the forward's other outputs:
    max_q, max_k and the philox seed and offset (0-D int64)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    q, k, v, mask, _ = cudnn_case("gqa_mask")
    g = torch.randn(q.shape)

    def train(g, q, k, v, b):
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        r = CUDNN(q, k, v, b, True, 0.0, True, scale=0.3)
        return (r[0], *torch.autograd.grad(r[0], (q, k, v), g), r[4], r[5], r[6], r[7])

    gm = make_fx(train, tracing_mode="fake")(g, q, k, v, mask)
    (node,) = [n for n in gm.graph.nodes if n.target is CUDNN_BWD]
    assert node.args[8].op == "placeholder" and node.args[9:13] == (None, None, 5, 6)
    got = run_onnx(gm, (g, q, k, v, mask))
    expected = reference(q, k, v, g, mask, True, 0.3)
    for a, e in zip(got[:4], expected[:1] + expected[2:]):
        assert_close(a, e, 1e-4)
    assert [int(x) for x in got[4:6]] == [5, 6]
    assert all(x.shape == () and x.dtype == np.int64 for x in got[6:])


def test_cudnn_logsumexp_not_read():
    q, k, v, mask, _ = cudnn_case("mask_4d")
    onx = to_onnx(Fn(lambda q, k, v, b: CUDNN(q, k, v, b, False)[0]), (q, k, v, mask))
    assert "Log" not in [n.op_type for n in onx.graph.node]
    out = run_onnx(Fn(lambda q, k, v, b: CUDNN(q, k, v, b, False)[0]), (q, k, v, mask))[0]
    assert_close(out, reference(q, k, v, torch.zeros(q.shape), mask)[0], 1e-4)


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_cudnn_dropout_raises(backward):
    q = torch.randn(2, 4, 5, 8)
    lse, zeros = torch.randn(2, 4, 5, 1), torch.zeros((), dtype=torch.int64)
    if backward:

        def bwd(g, q, k, v, o, lse):
            return CUDNN_BWD(g, q, k, v, o, lse, zeros, zeros, None, None, None, 5, 5, 0.1, False)[0]

        fn, args = Fn(bwd), (q, q, q, q, q, lse)
    else:
        fn, args = Fn(lambda q, k, v: CUDNN(q, k, v, None, True, 0.1)[0]), (q, q, q)
    with pytest.raises(ConversionError, match="dropout") as info:
        to_onnx(fn, args)
    assert "_scaled_dot_product_cudnn_attention" in str(info.value) and "not supported" in str(info.value)


def test_cudnn_nested_raises():
    q, lse = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 1)
    zeros, cum = torch.zeros((), dtype=torch.int64), torch.tensor([0, 5, 10], dtype=torch.int32)

    def bwd(g, q, k, v, o, lse, c):
        return CUDNN_BWD(g, q, k, v, o, lse, zeros, zeros, None, c, c, 5, 5, 0.0, False)[0]

    with pytest.raises(ConversionError, match="packed sequences"):
        to_onnx(Fn(bwd), (q, q, q, q, q, lse, cum))
