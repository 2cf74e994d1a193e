"""The op templates of the random programs (:mod:`.random_programs`): each one, given the program's builder and
a variable, writes the statements of one op applied to it (or declines), and says whether the result is exact
enough to be compared at the tolerance of its dtype; then the float16 arithmetic whose result jumps across an
integer boundary (:func:`half_jump`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .random_programs import Builder, Chooser, Var

# -- op templates: (builder, var) -> (lines, exact) or None; each defines the variable ``name``
Template = Callable[["Builder", "Var", str], "tuple[list[str], bool] | None"]
TEMPLATES: dict[str, Template] = {}


def template(name: str) -> Callable[[Template], Template]:
    """Registers an op template under ``name`` in :data:`TEMPLATES` (a decorator)."""

    def deco(f: Template) -> Template:
        TEMPLATES[name] = f
        return f

    return deco


def _one(expr: str, name: str, exact: bool) -> tuple[list[str], bool]:
    return [f"{name} = {expr}"], exact


@template("binary")
def _binary(b: Builder, v: Var, name: str):
    other, exact = b.operand(v)
    op = b.ch.choice(["+", "-", "*", "/", "+", "*"])
    a, c = (v.name, other) if b.ch.coin(0.7) else (other, v.name)
    if a in ("True",) and op in "+-":
        a, c = c, a
    return _one(f"{a} {op} {c}", name, v.exact and exact and op != "/")


@template("binary_fn")
def _binary_fn(b: Builder, v: Var, name: str):
    other, exact = b.operand(v)
    fn = b.ch.choice(["torch.add({a}, {b}, alpha=2)", "torch.sub({a}, {b}, alpha=0.5)", "torch.maximum({a}, {c})",
                      "torch.minimum({a}, {c})", "torch.pow({a}, 2)", "torch.remainder({a}, {b})",
                      "torch.floor_divide({a}, {b})", "torch.fmod({a}, {b})", "torch.lerp({a}, {c}, 0.3)"])
    if any(k in fn for k in ("remainder", "floor_divide", "fmod")) and not (v.exact and exact):
        return None  # jumps at multiples of the divisor
    c = other if other[0].isalpha() and other != "True" else f"torch.full_like({v.name}, {other})"
    expr = fn.format(a=v.name, b=other, c=c)
    return _one(expr, name, v.exact and exact and ("maximum" in fn or "minimum" in fn or "pow" in fn))


@template("compare")
def _compare(b: Builder, v: Var, name: str):
    if not v.exact:
        return None
    other, _ = b.operand(v, exact=True)
    op = b.ch.choice([">", "<", ">=", "<=", "==", "!="])
    return _one(f"{v.name} {op} {other}", name, True)


@template("where")
def _where(b: Builder, v: Var, name: str):
    cond = b.bool_operand(0.6, f"({v.name} > 0)" if v.exact else None)
    if cond is None:
        return None
    other, exact = b.operand(v)
    return _one(f"torch.where({cond}, {v.name}, {other})", name, v.exact and exact)


@template("masked_fill")
def _masked_fill(b: Builder, v: Var, name: str):
    mask = b.bool_operand(0.5, f"({v.name} < 0)" if v.exact else None)
    if mask is None:
        return None
    value = b.ch.choice(["0.0", "-1", "float('-inf')", "2.5", "True"])
    return _one(f"{v.name}.masked_fill({mask}, {value})", name, v.exact)


@template("unary_exact")
def _unary_exact(b: Builder, v: Var, name: str):
    fn = b.ch.choice(["{x}.abs()", "-{x}", "torch.relu({x})", "{x}.clamp(-1, 2)", "torch.clamp({x}, min=0.5)",
                      "torch.floor({x})", "torch.ceil({x})", "torch.round({x})", "torch.sign({x})", "{x}.square()",
                      "torch.trunc({x})", "{x}.clamp(max=1)", "~{x}", "torch.logical_not({x})"])
    if not v.exact and any(k in fn for k in ("floor", "ceil", "round", "sign", "trunc")):
        return None  # a jump: a difference of one ulp before it is a difference of 1 after it
    return _one(fn.format(x=v.name), name, v.exact)


@template("unary_math")
def _unary_math(b: Builder, v: Var, name: str):
    fn = b.ch.choice(["torch.exp({x})", "torch.tanh({x})", "torch.sigmoid({x})", "torch.sin({x})", "torch.cos({x})",
                      "torch.sqrt({x}.abs())", "torch.log({x}.abs() + 1)", "torch.rsqrt({x}.abs() + 0.5)",
                      "torch.erf({x})", "torch.reciprocal({x})", "torch.log1p({x}.abs())", "torch.atan({x})"])
    return _one(fn.format(x=v.name), name, False)


@template("activation")
def _activation(b: Builder, v: Var, name: str):
    fn = b.ch.choice(["F.gelu({x})", "F.gelu({x}, approximate='tanh')", "F.silu({x})", "F.softplus({x})",
                      "F.leaky_relu({x}, 0.1)", "F.hardtanh({x})", "F.elu({x})", "F.hardswish({x})",
                      "F.mish({x})", "F.relu6({x})"])
    return _one(fn.format(x=v.name), name, "hardtanh" in fn or "relu6" in fn or "leaky" in fn)


@template("reduce")
def _reduce(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    keep = b.ch.choice(["False", "True"])
    fn = b.ch.choice(["{x}.sum({d}, keepdim={k})", "{x}.sum()", "{x}.mean({d}, keepdim={k})", "{x}.amax({d})",
                      "{x}.amin({d}, keepdim={k})", "{x}.prod({d})", "{x}.max(dim={d}).values",
                      "{x}.min({d}, keepdim={k})[0]", "torch.var({x}, {d})", "torch.std({x}, {d}, keepdim={k})",
                      "torch.logsumexp({x}, {d})", "{x}.norm(dim={d})", "{x}.sum({d}, dtype=torch.float32)",
                      "{x}.any({d})", "{x}.all()", "{x}.mean()", "{x}.sum(({d},))", "{x}.argmax({d})",
                      "{x}.argmin({d}, keepdim={k})", "{x}.count_nonzero({d})"])
    exact_ok = any(k in fn for k in ("amax", "amin", "max(", "min(", "any", "all", "argm", "count"))
    if any(k in fn for k in ("arg", "any", "all", "count")) and not v.exact:
        return None
    int_sum = not v.is_float and ("sum" in fn and "float32" not in fn or "prod" in fn)
    return _one(fn.format(x=v.name, d=d, k=keep), name, v.exact and (exact_ok or int_sum))


@template("softmax")
def _softmax(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    fn = b.ch.choice(["torch.softmax({x}, {d})", "F.log_softmax({x}, {d})",
                      "torch.softmax({x}, {d}, dtype=torch.float32)",
                      "{x}.softmax(dim={d})"])
    return _one(fn.format(x=v.name, d=d), name, False)


@template("matmul")
def _matmul(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    dtype = v.dtype if v.dtype != torch.bool else torch.float32
    kind = b.ch.choice(["self_t", "weight", "linear", "vector"])
    if kind == "self_t" and v.rank >= 2:
        return _one(f"{v.name} @ {v.name}.transpose(-1, -2)", name, False)
    n = b.ch.integer(1, 5)
    if kind == "linear" and v.is_float:
        w = b.buffer((n, v.shape[-1]), dtype)
        bias = b.buffer((n,), dtype) if b.ch.coin() else "None"
        return _one(f"F.linear({v.name}, {w}, {bias})", name, False)
    if kind == "vector":
        w = b.buffer((v.shape[-1],), dtype)
        return _one(f"torch.matmul({v.name}, {w})", name, False)
    w = b.buffer((v.shape[-1], n), dtype)
    return _one(f"{v.name} @ {w}", name, False)


@template("view")
def _view(b: Builder, v: Var, name: str):
    r = v.rank
    options = ["{x}.reshape(-1)", "{x}.unsqueeze({d1})", "{x}.contiguous()", "{x}.squeeze()"]
    if r >= 1:
        options += ["{x}.flip({d})", "{x}[1:]", "{x}[..., ::2]", "{x}.narrow({d}, 0, 1)", "{x}[-1]",
                    "{x}.unsqueeze(0).expand(2, *{x}.shape)", "{x}.roll(1, {d})"]
    if r >= 2:
        options += ["{x}.transpose({d}, {e})", "{x}.flatten({d0})", "{x}.permute({perm})", "{x}.mT",
                    "{x}.reshape(*{x}.shape[:-2], -1)", "{x}[:, None]", "{x}.movedim(0, -1)"]
    fn = b.ch.choice(options)
    perm = list(range(r))
    for i in range(r - 1, 0, -1):
        j = b.ch.integer(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    expr = fn.format(x=v.name, d=b.dim(v), e=b.dim(v), d0=b.ch.integer(0, max(r - 2, 0)),
                     d1=b.ch.integer(0, r), perm=tuple(perm))
    return _one(expr, name, v.exact)


@template("cat")
def _cat(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    same = [u for u in b.vars if u.rank == v.rank and all(
        a == c for i, (a, c) in enumerate(zip(u.shape, v.shape)) if i != d % v.rank)]
    u = b.ch.choice(same)
    fn = b.ch.choice(["torch.cat([{x}, {u}], dim={d})", "torch.cat(({u}, {x}, {x}), {d})",
                      "torch.stack([{x}, {x} * 2], {d})", "torch.concat([{x}, {u}], {d})"])
    return _one(fn.format(x=v.name, u=u.name, d=d), name, v.exact and u.exact)


@template("split")
def _split(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    size = v.shape[d]
    fn = b.ch.choice(["torch.split({x}, {s}, dim={d})[-1]", "{x}.chunk(2, {d})[0]",
                      "torch.cat(torch.split({x}, {s}, {d})[::-1], {d})", "{x}.unbind({d})[0]",
                      "torch.tensor_split({x}, 2, {d})[1]"])
    return _one(fn.format(x=v.name, d=d, s=max(1, size // 2)), name, v.exact)


@template("index")
def _index(b: Builder, v: Var, name: str):
    axis = b.axis_with_elements(v)
    if axis is None:
        return None
    d, size = axis
    m = b.ch.integer(1, 4)
    kind = b.ch.choice(["getitem", "index_select", "gather", "take_along", "getitem_neg"])
    if kind == "getitem" and d == 0:
        idx = b.buffer((m,), torch.int64, "index", size)
        return _one(f"{v.name}[{idx}]", name, v.exact)
    if kind == "getitem_neg":
        idx = b.buffer((m,), torch.int64, "randint", size)
        return _one(f"{v.name}[{':, ' * d}{idx}]", name, v.exact)
    if kind == "index_select" or kind == "getitem":
        idx = b.buffer((m,), torch.int64, "index", size)
        return _one(f"{v.name}.index_select({d}, {idx})", name, v.exact)
    shape = list(v.shape)
    shape[d] = m
    idx = b.buffer(tuple(shape), torch.int64, "index", size)
    if kind == "gather":
        return _one(f"torch.gather({v.name}, {d}, {idx})", name, v.exact)
    return _one(f"torch.take_along_dim({v.name}, {idx}, {d})", name, v.exact)


@template("scatter")
def _scatter(b: Builder, v: Var, name: str):
    axis = b.axis_with_elements(v)
    if axis is None:
        return None
    d, size = axis
    kind = b.ch.choice(["scatter_src", "scatter_value", "scatter_add", "index_add", "index_fill", "scatter_reduce"])
    if kind in ("index_add", "index_fill"):
        m = b.ch.integer(1, size)
        idx = b.buffer((m,), torch.int64, "index", size)
        if kind == "index_fill":
            return _one(f"{v.name}.index_fill({d}, {idx}, -1.5)", name, v.exact)
        shape = list(v.shape)
        shape[d] = m
        src = b.buffer(tuple(shape), v.dtype if v.is_float else torch.float32)
        return _one(f"{v.name}.index_add({d}, {idx}, {src}.to({v.name}.dtype))", name, False)
    idx = b.buffer(v.shape, torch.int64, "index", size)
    src = b.buffer(v.shape, v.dtype if v.is_float else torch.float32)
    if kind == "scatter_value":
        return _one(f"{v.name}.scatter({d}, {idx}, 2.0)", name, v.exact)
    if kind == "scatter_src":
        # duplicate indices make scatter nondeterministic: a permutation along d
        perm = b.buffer(v.shape, torch.int64, "perm", d)
        return _one(f"{v.name}.scatter({d}, {perm}, {src}.to({v.name}.dtype))", name, v.exact)
    if kind == "scatter_reduce":
        red = b.ch.choice(["sum", "amax", "amin", "mean", "prod"])
        inc = b.ch.choice(["True", "False"])
        return _one(f"{v.name}.scatter_reduce({d}, {idx}, {src}.to({v.name}.dtype), '{red}', include_self={inc})",
                    name, False)
    return _one(f"{v.name}.scatter_add({d}, {idx}, {src}.to({v.name}.dtype))", name, False)


@template("sort")
def _sort(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    k = b.ch.integer(1, v.shape[d]) if v.shape[d] else 1
    fn = b.ch.choice(["{x}.sort({d}, stable=True)[0]", "{x}.sort({d}, descending=True, stable=True).values",
                      "{x}.topk({k}, {d}).values", "{x}.topk({k}, {d}, largest=False)[0]",
                      "torch.argsort({x}, {d}, stable=True)", "{x}.sort({d}, stable=True)[1]",
                      "{x}.cumsum({d})", "torch.cumprod({x}, {d})", "torch.cummax({x}, {d}).values",
                      "torch.kthvalue({x}, {k}, {d}).values"])
    if ("[1]" in fn or "argsort" in fn) and not v.exact:
        return None
    exact = v.exact and ("cum" not in fn or not v.is_float)
    return _one(fn.format(x=v.name, d=d, k=k), name, exact)


@template("cast")
def _cast(b: Builder, v: Var, name: str):
    to = b.ch.choice(["float()", "half()", "bfloat16()", "long()", "bool()", "to(torch.int32)", "double()",
                      "to(torch.float16)", "type_as({u})"])
    if to in ("long()", "bool()", "to(torch.int32)", "type_as({u})") and not v.exact:
        return None
    u = b.ch.choice(b.vars).name
    return _one(f"{v.name}.{to.format(u=u)}", name, v.exact)


@template("inplace")
def _inplace(b: Builder, v: Var, name: str):
    other, exact = b.operand(v)
    fn = b.ch.choice(["{n}.add_({o})", "{n}.mul_({o})", "{n}.sub_({o}, alpha=2)", "{n}.div_({o})",
                      "{n}.clamp_(-1, 1)", "{n}.relu_()", "{n} += {o}", "{n} *= {o}",
                      "{n}.masked_fill_({n} > 0, {o})", "{n}.copy_({o})", "{n}.abs_()", "{n}.neg_()"])
    if "masked_fill_" in fn and (not v.exact or not other[0].isdigit() and other not in ("-1", "-2.25", "True")):
        return None
    line = fn.format(n=name, o=other)
    exact = v.exact and exact and any(k in fn for k in ("clamp", "relu", "add_", "+=", "masked", "copy", "abs", "neg"))
    return [f"{name} = {v.name}.clone()", line], exact


@template("setitem")
def _setitem(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    other, exact = b.operand(v)
    sl = b.ch.choice(["0", "1:", "..., 0", ":, :1", "-1", "..., ::2"])
    op = b.ch.choice(["=", "=", "+=", "*="])
    rhs = b.ch.choice([other, "1.5", "-2", f"{v.name}[{sl}] * 2"])
    return [f"{name} = {v.name}.clone()", f"{name}[{sl}] {op} {rhs}"], v.exact and exact and op != "*="


@template("conv_pool")
def _conv_pool(b: Builder, v: Var, name: str):
    if not v.is_float or v.rank not in (3, 4):
        return None
    c = v.shape[1]
    spatial = v.rank - 2
    kind = b.ch.choice(["conv", "max_pool", "avg_pool", "interpolate", "adaptive", "conv", "interpolate_linear"])
    if kind == "conv":
        oc = b.ch.integer(1, 4)
        k = b.ch.integer(1, 3)
        groups = b.ch.choice([1, c]) if c > 1 else 1
        w = b.buffer((oc * groups if groups > 1 else oc, c // groups) + (k,) * spatial, v.dtype)
        bias = b.buffer((oc * groups if groups > 1 else oc,), v.dtype) if b.ch.coin() else "None"
        pad = b.ch.choice(["0", "1", "'same'"])
        stride = b.ch.choice([1, 1, 2]) if pad != "'same'" else 1
        return _one(f"F.conv{spatial}d({v.name}, {w}, {bias}, stride={stride}, padding={pad}, groups={groups})",
                    name, False)
    if kind == "max_pool":
        k = b.ch.integer(1, 3)
        ceil = b.ch.choice(["False", "True"])
        pad = b.ch.integer(0, k // 2)
        stride = b.ch.integer(1, 2)
        return _one(f"F.max_pool{spatial}d({v.name}, {k}, stride={stride}, padding={pad}, ceil_mode={ceil})",
                    name, v.exact)
    if kind == "avg_pool":
        k = b.ch.integer(1, 3)
        pad = b.ch.integer(0, k // 2)
        ceil = b.ch.choice(["False", "True"])
        cip = b.ch.choice(["True", "False"])
        return _one(f"F.avg_pool{spatial}d({v.name}, {k}, stride={b.ch.integer(1, 2)}, padding={pad}, "
                    f"ceil_mode={ceil}, count_include_pad={cip})", name, False)
    if kind == "adaptive":
        out = b.ch.integer(1, 3)
        fn = b.ch.choice(["avg", "max"])
        return _one(f"F.adaptive_{fn}_pool{spatial}d({v.name}, {out})", name, fn == "max" and v.exact)
    if kind == "interpolate":
        return _one(f"F.interpolate({v.name}, scale_factor=2, mode='nearest')", name, v.exact)
    mode = "linear" if spatial == 1 else b.ch.choice(["bilinear", "bicubic"])
    ac = b.ch.choice(["False", "True"])
    size = tuple(s + b.ch.integer(-1, 3) for s in v.shape[2:])
    if min(size) < 1:
        return None
    return _one(f"F.interpolate({v.name}, size={size}, mode='{mode}', align_corners={ac})", name, False)


@template("pad")
def _pad(b: Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    mode = b.ch.choice(["constant", "constant", "reflect", "replicate", "circular"])
    n = 1 if mode == "constant" or v.rank < 3 else b.ch.integer(1, min(3, v.rank - 2))
    pads = tuple(b.ch.integer(0, 2) for _ in range(2 * n))
    if mode == "constant":
        return _one(f"F.pad({v.name}, {pads}, value={b.ch.choice(['0.0', '1.5', '-1'])})", name, v.exact)
    return _one(f"F.pad({v.name}, {pads}, mode='{mode}')", name, v.exact)


@template("norm")
def _norm(b: Builder, v: Var, name: str):
    if not v.is_float or v.rank == 0:
        return None
    kind = b.ch.choice(["layer_norm", "layer_norm_affine", "rms_norm", "normalize", "group_norm", "batch_norm"])
    last = v.shape[-1]
    if kind == "layer_norm":
        return _one(f"F.layer_norm({v.name}, {v.name}.shape[-1:])", name, False)
    if kind == "layer_norm_affine":
        w, bias = b.buffer((last,), v.dtype), b.buffer((last,), v.dtype)
        return _one(f"F.layer_norm({v.name}, ({last},), {w}, {bias}, eps=1e-3)", name, False)
    if kind == "rms_norm":
        w = b.buffer((last,), v.dtype)
        return _one(f"F.rms_norm({v.name}, ({last},), {w})", name, False)
    if kind == "normalize":
        return _one(f"F.normalize({v.name}, dim=-1)", name, False)
    if v.rank < 2:
        return None
    c = v.shape[1]
    if kind == "group_norm":
        return _one(f"F.group_norm({v.name}, 1)", name, False)
    mean, var = b.buffer((c,), v.dtype), b.buffer((c,), v.dtype)
    return _one(f"F.batch_norm({v.name}, {mean}, {var}.abs() + 0.5, training=False)", name, False)


#: Python scalars exact in float16 and bfloat16 (PyTorch multiplies by the scalar in float32: another scalar would
#: differ from the ONNX constant, rounded to the tensor's type)
HALF_SCALARS = ("7", "3", "5", "6", "1.5", "-2.5", "0.75")


def boundary_values(k: str, size: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``n / k`` rounded to ``dtype`` for random integers ``n``: about 40% of the products by ``k``, exact in
    float32, fall just under an integer ``n`` that their rounding to ``dtype`` gives back.

    >>> x = boundary_values("7", 64, torch.float16, 0)
    >>> bool(((x * 7).long() != (x.float() * 7).long()).any())
    True
    """
    n = torch.randint(-60, 61, (size,), generator=torch.Generator().manual_seed(seed))
    return (n / float(k)).to(dtype)


def half_jump(b: Builder, ch: Chooser, name: str, boundary: Var | None = None, k: str | None = None) -> bool:
    """Appends float16/bfloat16 arithmetic whose result jumps: ``.long()`` (the index of a ``gather`` or
    ``scatter_add`` after ``% m``), a comparison, ``floor``/``ceil``/``round``/``trunc``, ``argmax``/``argmin``,
    ``sort`` indices. PyTorch rounds the product to half precision before it jumps: ``(x.abs() * 7).long()`` is
    4 for ``x = 0.5713`` in float16 (3.999 in float32). The product is of a variable of the program, or of
    ``boundary`` (an input of :func:`boundary_values` by ``k``, which the random inputs hardly ever are);
    the index of ``gather``/``scatter_add`` reads a variable of the program. Its result is an output more; the
    variables it reads stay outputs if they were. Draws from ``ch`` only. Returns whether a statement was added."""
    main, b.ch = b.ch, ch  # the main chooser's stream stays as it was without this statement
    try:
        return _half_jump(b, ch, name, boundary, k)
    finally:
        b.ch = main


def _half_jump(b: Builder, ch: Chooser, name: str, boundary: Var | None, k: str | None) -> bool:
    candidates = [
        u for u in b.vars
        if u.exact and u.value.numel() and u is not boundary
        and (not u.is_float or bool(torch.isfinite(u.value).all()) and float(u.value.abs().max()) <= 1024)
    ]
    floats = [u for u in candidates if u.is_float]
    if boundary is None and not floats:
        return False
    u = ch.choice(floats[-3:] if ch.coin(0.7) else floats) if floats else None
    if boundary is not None:
        half = boundary.name
    else:
        to_half = ch.choice(["half()", "half()", "half()", "bfloat16()"])
        half = u.name if u.dtype in (torch.float16, torch.bfloat16) else f"{u.name}.{to_half}"
        k = ch.choice(HALF_SCALARS)
    p = ch.choice([f"({half} * {k})", f"({half}.abs() * {k})"])
    positive = f"({half}.abs() * {k.lstrip('-')})"
    source = u if boundary is None else boundary
    indexed = ch.choice(candidates) if candidates else None
    kinds = ["long", "compare", "round"] + (["index"] if source.rank else [])
    if indexed is not None and indexed.rank and (boundary is not None or indexed.shape == source.shape):
        kinds += ["gather", "scatter_add"]
    kind = ch.choice(kinds)
    if kind == "long":
        lines = [f"{name} = {p}.{ch.choice(['long()', 'long()', 'int()'])}"]
    elif kind == "compare":
        test = ch.choice(["{p} < {p}.round()", "{p} > {p}.round()", "{p} == {p}.round()", "{p} != {p}.floor()",
                          "{p} >= {p}.ceil()", "{p} <= 3"])
        lines = [f"{name} = {test.format(p=p)}"]
    elif kind == "round":
        lines = [f"{name} = {ch.choice(['torch.floor', 'torch.ceil', 'torch.round', 'torch.trunc'])}({p})"]
    elif kind == "gather" and boundary is None:
        d = b.dim(indexed)
        lines = [f"{name}_i = {positive}.long() % {max(1, indexed.shape[d])}",
                 f"{name} = torch.gather({indexed.name}, {d}, {name}_i)"]
    elif kind == "gather":  # a flat index into the variable: valid on grown inputs too
        lines = [f"{name}_i = {positive}.long() % {indexed.value.numel()}",
                 f"{name} = {indexed.name}.reshape(-1)[{name}_i]"]
    elif kind == "scatter_add":
        m = ch.integer(2, 7)
        src = f"{indexed.name}.float().reshape(-1)"
        if boundary is not None:
            src = f"{src}[:{min(indexed.value.numel(), boundary.value.numel())}]"
            positive = f"{positive}.reshape(-1)[:{min(indexed.value.numel(), boundary.value.numel())}]"
        lines = [f"{name}_i = ({positive}.long() % {m}).reshape(-1)",
                 f"{name} = torch.zeros({m}).scatter_add(0, {name}_i, {src})"]
    else:
        d = b.dim(source)
        fn = ch.choice(["{p}.argmax({d})", "{p}.argmin({d})", "torch.sort({p}, dim={d}, stable=True)[1]",
                        "torch.argsort({p}, dim={d}, stable=True)"])
        lines = [f"{name} = {fn.format(p=p, d=d)}"]
    read = set(b.read)
    kept = b.try_statement(lines, name, kind != "scatter_add", "half_jump")
    b.read = read  # the variables it reads stay outputs if they were
    return kept
