"""Random small programs of everyday PyTorch ops, exported with ``to_onnx`` and compared with eager PyTorch.

A program is Python source text (a ``torch.nn.Module`` named ``Program``) built statement by statement: each
statement applies one op template (elementwise with broadcasting and Python scalars, comparisons, reductions,
softmax, matmul, views, cat/split, indexing, scatter, sort, casts, in-place ops, convolution, pooling,
normalization...) to the variables computed so far, and is kept only if eager PyTorch runs it. Inputs have
random shapes built from a few size symbols and random dtypes (float32, float16, bfloat16, int64, bool); in a
dynamic program every axis of size > 1 is ``Dim.AUTO`` and the model is checked again on inputs where every
symbol the export kept dynamic has grown.

The choices come from a :class:`Chooser`: :class:`RandomChooser` (a seed, for ``benchmarks/fuzz.py``) or
:class:`HypothesisChooser` (hypothesis' ``data``, for ``_unittests/test_fuzz.py``).

>>> prog = generate(RandomChooser(3))
>>> "class Program(torch.nn.Module)" in prog.source
True
>>> run_program(prog).kind in OUTCOMES
True
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import random
import re
import textwrap
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from ..convert import to_onnx
from ..runtime import InferenceSession
from ..errors import (
    ConversionError,
    ExportCaptureError,
    RuntimeFeedError,
    TorchInterpreterError,
    UnsupportedOpError,
)

logger = logging.getLogger(__name__)

#: what running a program can give
#: ``unsupported``: a project error for an op or option the converters do not handle (``UnsupportedOpError``,
#: or a converter's ``NotImplementedError``/``ValueError``); ``export_error``: ``torch.export`` refused the program
#: (``ExportCaptureError``); ``project_error``: any other project error (a converter that crashed or gave a
#: wrong type: a bug); ``mismatch`` and ``raw_exception``: bugs; ``eager_error``: the program does not run.
#: ``export_unsound``: the grown inputs break a guard of the ExportedProgram (``ep.module()`` refuses them;
#: the ONNX model carries no such check), or the ExportedProgram itself disagrees with eager there and
#: onnxruntime agrees with it (torch.export did not guard an assumption on the sizes).
OUTCOMES = ("match", "precision", "guarded", "unsupported", "export_error", "export_unsound", "project_error", "mismatch",
            "raw_exception", "eager_error")
#: the outcomes that are bugs
BUGS = ("project_error", "mismatch", "raw_exception")

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
DTYPES = (torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)


class Chooser:
    """The source of every random choice of a program."""

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        raise NotImplementedError

    def choice(self, seq: Sequence[Any]) -> Any:
        """One element of ``seq``."""
        return seq[self.integer(0, len(seq) - 1)]

    def coin(self, p: float = 0.5) -> bool:
        """True with probability about ``p``."""
        return self.integer(0, 999) < int(p * 1000)

    def fork(self) -> Chooser:
        """The chooser of the statements added after the main ones (:func:`half_jump`): for a seed, a stream of
        its own, so that the program of every seed keeps the statements it had before they existed."""
        return self


class RandomChooser(Chooser):
    """Choices from ``random.Random(seed)``.

    >>> RandomChooser(0).integer(1, 6) == RandomChooser(0).integer(1, 6)
    True
    """

    def __init__(self, seed: int):
        self.seed = seed
        self._rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self._rng.randint(low, high)

    def fork(self) -> RandomChooser:
        forked = RandomChooser(self.seed)
        forked._rng = random.Random(f"{self.seed}/fork")
        return forked


class HypothesisChooser(Chooser):
    """Choices drawn from hypothesis' ``st.data()``, so that hypothesis can shrink a failing program."""

    def __init__(self, data: Any):
        from hypothesis import strategies as st

        self._data = data
        self._st = st
        self.seed = None

    def integer(self, low: int, high: int) -> int:
        return self._data.draw(self._st.integers(low, high))


def drawn_programs(max_examples: int) -> Callable[[Callable], Callable]:
    """The decorators of a bounded run of programs drawn by hypothesis: derandomized (the same programs at every
    run), no deadline, no database, no shrinking; the test receives hypothesis' ``data`` for
    :class:`HypothesisChooser`."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    def decorate(test: Callable) -> Callable:
        return settings(
            max_examples=max_examples,
            deadline=None,
            derandomize=True,
            database=None,
            phases=(Phase.explicit, Phase.generate),
            suppress_health_check=list(HealthCheck),
        )(given(st.data())(test))

    return decorate


@dataclasses.dataclass
class Var:
    """A variable of the program: its name, its eager value (for shapes and dtypes) and whether its values
    are reproduced exactly by onnxruntime (then ops that jump on small differences may use it)."""

    name: str
    value: torch.Tensor
    exact: bool
    #: the least precise floating type the value was computed from (its error is of that type), or None
    low: torch.dtype | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.value.dtype

    @property
    def rank(self) -> int:
        return self.value.dim()

    @property
    def is_float(self) -> bool:
        return self.value.dtype.is_floating_point


@dataclasses.dataclass
class Program:
    """A generated program: its source, inputs, dynamic shapes and the inputs of the second (grown) run."""

    seed: int | None
    source: str
    inputs: tuple[torch.Tensor, ...]
    dynamic_shapes: tuple | None
    grown: Callable[[dict[int, int]], tuple[torch.Tensor, ...]] | None
    symbols: list[int]
    input_symbols: list[list[int | None]]
    ops: list[str]
    #: per output, the least precise floating type it was computed from (it sets the tolerance)
    out_low: list[torch.dtype | None] = dataclasses.field(default_factory=list)
    #: per output, whether a difference is a mismatch even where onnxruntime is closer to float64 than eager
    #: (a result of :func:`half_jump`: float64 falls where float32 does, on the other side of the jump)
    out_strict: list[bool] = dataclasses.field(default_factory=list)

    def module(self) -> torch.nn.Module:
        """The ``Program`` module defined by the source."""
        namespace: dict[str, Any] = {}
        exec(compile(self.source, f"<fuzz program seed={self.seed}>", "exec"), namespace)  # noqa: S102
        return namespace["Program"]().eval()

    def describe(self) -> str:
        """The source, the seed and the input types, as a failure prints them."""
        types = ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in self.inputs)
        return f"seed={self.seed} inputs: {types} dynamic={self.dynamic_shapes is not None}\n{self.source}"


_PRECISION = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2, torch.float64: 3}


def least_precise(dtypes: Sequence[torch.dtype | None]) -> torch.dtype | None:
    """The floating type of least precision among ``dtypes`` (None when there is none).

    >>> least_precise([torch.float32, None, torch.float16, torch.int64])
    torch.float16
    """
    floats = [d for d in dtypes if d in _PRECISION]
    return min(floats, key=_PRECISION.__getitem__) if floats else None


def make_tensor(shape: Sequence[int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """A tensor of ``shape`` and ``dtype`` drawn from ``seed``: standard normal values times 2 for floats,
    integers in [-4, 4], booleans half true.

    >>> make_tensor((2, 3), torch.int64, 0).dtype
    torch.int64
    """
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(tuple(shape), generator=gen) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-4, 5, tuple(shape), generator=gen).to(dtype)
    return (torch.randn(tuple(shape), generator=gen) * 2).to(dtype)


class _Builder:
    """Builds one program statement by statement, running each in eager PyTorch as it goes."""

    def __init__(self, ch: Chooser):
        self.ch = ch
        self.vars: list[Var] = []
        self.lines: list[str] = []
        self.init_lines: list[str] = []
        self.holder = torch.nn.Module()
        self.ops: list[str] = []
        self._count = 0
        self._buffers = 0
        self.buffer_dtypes: dict[str, torch.dtype] = {}
        #: the variables a statement reads
        self.read: set[str] = set()

    # -- helpers used by the templates
    def new_name(self) -> str:
        self._count += 1
        return f"v{self._count}"

    def buffer(self, shape: Sequence[int], dtype: torch.dtype, kind: str = "randn", high: int = 0) -> str:
        """A buffer of the module (``self.bK``): random normal (``randn``), random integers in ``[-high, high)``
        (``randint``) or ``[0, high)`` (``index``), or a random permutation along axis ``high`` (``perm``)."""
        name = f"b{self._buffers}"
        self._buffers += 1
        seed = self.ch.integer(0, 10_000)
        gen = f"generator=torch.Generator().manual_seed({seed})"
        if kind == "randint":
            expr = f"torch.randint({-high}, {high}, {tuple(shape)}, {gen})"
        elif kind == "index":
            expr = f"torch.randint(0, {high}, {tuple(shape)}, {gen})"
        elif kind == "perm":
            expr = f"torch.argsort(torch.rand({tuple(shape)}, {gen}), {high})"
        else:
            expr = f"torch.randn({tuple(shape)}, {gen})"
        if dtype != torch.float32 and kind == "randn" or kind != "randn" and dtype != torch.int64:
            expr += f".to({dtype})"
        line = f'self.register_buffer("{name}", {expr})'
        exec(line, {"torch": torch, "self": self.holder})  # noqa: S102
        self.init_lines.append(line)
        self.buffer_dtypes[f"self.{name}"] = getattr(self.holder, name).dtype
        return f"self.{name}"

    def scalar(self, v: Var) -> str:
        """A Python scalar (int, float or bool) to combine with ``v``."""
        return self.ch.choice(["2", "-1", "0.5", "1.5", "3", "True", "-2.25"])

    def broadcastable(self, v: Var, exact: bool = False) -> Var | None:
        """Another variable whose shape broadcasts with ``v``'s (possibly ``v`` itself)."""
        ok = []
        for u in self.vars:
            if exact and not u.exact:
                continue
            try:
                torch.broadcast_shapes(u.shape, v.shape)
            except RuntimeError:
                continue
            ok.append(u)
        return self.ch.choice(ok) if ok else None

    def operand(self, v: Var, exact: bool = False) -> tuple[str, bool]:
        """A second operand for ``v``: a broadcastable variable or a Python scalar; and whether it is exact."""
        if self.ch.coin(0.6):
            u = self.broadcastable(v, exact)
            if u is not None:
                return u.name, u.exact
        return self.scalar(v), True

    def dim(self, v: Var) -> int:
        """An axis of ``v``, sometimes negative."""
        d = self.ch.integer(0, max(v.rank - 1, 0))
        return d - v.rank if v.rank and self.ch.coin(0.3) else d

    # -- statements
    def try_statement(self, lines: list[str], name: str, exact: bool, op: str) -> bool:
        """Runs ``lines`` (the last one defines ``name``) in eager PyTorch; keeps them if they run."""
        env: dict[str, Any] = {"torch": torch, "F": torch.nn.functional, "self": self.holder}
        env.update({u.name: u.value.clone() for u in self.vars})
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # var() of one element warns, as eager does
                for line in lines:
                    exec(line, env)  # noqa: S102
        except Exception:  # noqa: BLE001  (the op does not apply to these operands: try another)
            return False
        value = env.get(name)
        if not isinstance(value, torch.Tensor) or value.numel() > 4096 or value.dim() > 5:
            return False
        if value.is_complex() or value.dtype in (torch.uint8, torch.int8, torch.int16):
            return False
        self.lines.extend(lines)
        used = set(re.findall(r"\b(?:x|v)\d+\b", " ".join(lines)))
        self.read |= used - {name}
        lows = [u.low for u in self.vars if u.name in used]
        lows += [dt for b, dt in self.buffer_dtypes.items() if re.search(rf"{re.escape(b)}\b", " ".join(lines))]
        lows += [value.dtype] + [dt for dt in (torch.float16, torch.bfloat16) if str(dt) in " ".join(lines)]
        self.vars.append(Var(name, value, exact, least_precise(lows)))
        self.ops.append(op)
        return True


# -- op templates: (builder, var) -> (lines, exact) or None; each defines the variable ``name``
Template = Callable[[_Builder, Var, str], tuple[list[str], bool] | None]
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
def _binary(b: _Builder, v: Var, name: str):
    other, exact = b.operand(v)
    op = b.ch.choice(["+", "-", "*", "/", "+", "*"])
    a, c = (v.name, other) if b.ch.coin(0.7) else (other, v.name)
    if a in ("True",) and op in "+-":
        a, c = c, a
    return _one(f"{a} {op} {c}", name, v.exact and exact and op != "/")


@template("binary_fn")
def _binary_fn(b: _Builder, v: Var, name: str):
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
def _compare(b: _Builder, v: Var, name: str):
    if not v.exact:
        return None
    other, _ = b.operand(v, exact=True)
    op = b.ch.choice([">", "<", ">=", "<=", "==", "!="])
    return _one(f"{v.name} {op} {other}", name, True)


@template("where")
def _where(b: _Builder, v: Var, name: str):
    conds = [u for u in b.vars if u.dtype == torch.bool]
    cond = b.ch.choice(conds).name if conds and b.ch.coin(0.6) else (f"({v.name} > 0)" if v.exact else None)
    if cond is None:
        return None
    other, exact = b.operand(v)
    return _one(f"torch.where({cond}, {v.name}, {other})", name, v.exact and exact)


@template("masked_fill")
def _masked_fill(b: _Builder, v: Var, name: str):
    conds = [u for u in b.vars if u.dtype == torch.bool]
    mask = b.ch.choice(conds).name if conds and b.ch.coin(0.5) else (f"({v.name} < 0)" if v.exact else None)
    if mask is None:
        return None
    value = b.ch.choice(["0.0", "-1", "float('-inf')", "2.5", "True"])
    return _one(f"{v.name}.masked_fill({mask}, {value})", name, v.exact)


@template("unary_exact")
def _unary_exact(b: _Builder, v: Var, name: str):
    fn = b.ch.choice(["{x}.abs()", "-{x}", "torch.relu({x})", "{x}.clamp(-1, 2)", "torch.clamp({x}, min=0.5)",
                      "torch.floor({x})", "torch.ceil({x})", "torch.round({x})", "torch.sign({x})", "{x}.square()",
                      "torch.trunc({x})", "{x}.clamp(max=1)", "~{x}", "torch.logical_not({x})"])
    if not v.exact and any(k in fn for k in ("floor", "ceil", "round", "sign", "trunc")):
        return None  # a jump: a difference of one ulp before it is a difference of 1 after it
    return _one(fn.format(x=v.name), name, v.exact)


@template("unary_math")
def _unary_math(b: _Builder, v: Var, name: str):
    fn = b.ch.choice(["torch.exp({x})", "torch.tanh({x})", "torch.sigmoid({x})", "torch.sin({x})", "torch.cos({x})",
                      "torch.sqrt({x}.abs())", "torch.log({x}.abs() + 1)", "torch.rsqrt({x}.abs() + 0.5)",
                      "torch.erf({x})", "torch.reciprocal({x})", "torch.log1p({x}.abs())", "torch.atan({x})"])
    return _one(fn.format(x=v.name), name, False)


@template("activation")
def _activation(b: _Builder, v: Var, name: str):
    fn = b.ch.choice(["F.gelu({x})", "F.gelu({x}, approximate='tanh')", "F.silu({x})", "F.softplus({x})",
                      "F.leaky_relu({x}, 0.1)", "F.hardtanh({x})", "F.elu({x})", "F.hardswish({x})",
                      "F.mish({x})", "F.relu6({x})"])
    return _one(fn.format(x=v.name), name, "hardtanh" in fn or "relu6" in fn or "leaky" in fn)


@template("reduce")
def _reduce(b: _Builder, v: Var, name: str):
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
def _softmax(b: _Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    fn = b.ch.choice(["torch.softmax({x}, {d})", "F.log_softmax({x}, {d})",
                      "torch.softmax({x}, {d}, dtype=torch.float32)",
                      "{x}.softmax(dim={d})"])
    return _one(fn.format(x=v.name, d=d), name, False)


@template("matmul")
def _matmul(b: _Builder, v: Var, name: str):
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
def _view(b: _Builder, v: Var, name: str):
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
def _cat(b: _Builder, v: Var, name: str):
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
def _split(b: _Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    d = b.dim(v)
    size = v.shape[d]
    fn = b.ch.choice(["torch.split({x}, {s}, dim={d})[-1]", "{x}.chunk(2, {d})[0]",
                      "torch.cat(torch.split({x}, {s}, {d})[::-1], {d})", "{x}.unbind({d})[0]",
                      "torch.tensor_split({x}, 2, {d})[1]"])
    return _one(fn.format(x=v.name, d=d, s=max(1, size // 2)), name, v.exact)


@template("index")
def _index(b: _Builder, v: Var, name: str):
    if v.rank == 0 or v.value.numel() == 0:
        return None
    d = b.ch.integer(0, v.rank - 1)
    size = v.shape[d]
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
def _scatter(b: _Builder, v: Var, name: str):
    if v.rank == 0 or v.value.numel() == 0:
        return None
    d = b.ch.integer(0, v.rank - 1)
    size = v.shape[d]
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
def _sort(b: _Builder, v: Var, name: str):
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
def _cast(b: _Builder, v: Var, name: str):
    to = b.ch.choice(["float()", "half()", "bfloat16()", "long()", "bool()", "to(torch.int32)", "double()",
                      "to(torch.float16)", "type_as({u})"])
    if to in ("long()", "bool()", "to(torch.int32)", "type_as({u})") and not v.exact:
        return None
    u = b.ch.choice(b.vars).name
    return _one(f"{v.name}.{to.format(u=u)}", name, v.exact)


@template("inplace")
def _inplace(b: _Builder, v: Var, name: str):
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
def _setitem(b: _Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    other, exact = b.operand(v)
    sl = b.ch.choice(["0", "1:", "..., 0", ":, :1", "-1", "..., ::2"])
    op = b.ch.choice(["=", "=", "+=", "*="])
    rhs = b.ch.choice([other, "1.5", "-2", f"{v.name}[{sl}] * 2"])
    return [f"{name} = {v.name}.clone()", f"{name}[{sl}] {op} {rhs}"], v.exact and exact and op != "*="


@template("conv_pool")
def _conv_pool(b: _Builder, v: Var, name: str):
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
def _pad(b: _Builder, v: Var, name: str):
    if v.rank == 0:
        return None
    mode = b.ch.choice(["constant", "constant", "reflect", "replicate", "circular"])
    n = 1 if mode == "constant" or v.rank < 3 else b.ch.integer(1, min(3, v.rank - 2))
    pads = tuple(b.ch.integer(0, 2) for _ in range(2 * n))
    if mode == "constant":
        return _one(f"F.pad({v.name}, {pads}, value={b.ch.choice(['0.0', '1.5', '-1'])})", name, v.exact)
    return _one(f"F.pad({v.name}, {pads}, mode='{mode}')", name, v.exact)


@template("norm")
def _norm(b: _Builder, v: Var, name: str):
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
_HALF_SCALARS = ("7", "3", "5", "6", "1.5", "-2.5", "0.75")


def boundary_values(k: str, size: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``n / k`` rounded to ``dtype`` for random integers ``n``: about 40% of the products by ``k``, exact in
    float32, fall just under an integer ``n`` that their rounding to ``dtype`` gives back.

    >>> x = boundary_values("7", 64, torch.float16, 0)
    >>> bool(((x * 7).long() != (x.float() * 7).long()).any())
    True
    """
    n = torch.randint(-60, 61, (size,), generator=torch.Generator().manual_seed(seed))
    return (n / float(k)).to(dtype)


def half_jump(b: _Builder, ch: Chooser, name: str, boundary: Var | None = None, k: str | None = None) -> bool:
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


def _half_jump(b: _Builder, ch: Chooser, name: str, boundary: Var | None, k: str | None) -> bool:
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
        k = ch.choice(_HALF_SCALARS)
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


def _input_shape(ch: Chooser, symbols: list[int]) -> list[int | None]:
    """Dimensions of one input as symbol indices (None: a dimension of size 1)."""
    rank = ch.choice([0, 1, 2, 2, 3, 3, 4])
    return [None if ch.coin(0.2) else ch.integer(0, len(symbols) - 1) for _ in range(rank)]


def generate(ch: Chooser, min_ops: int = 3, max_ops: int = 8, half_jumps: float = 0.35) -> Program:
    """A random program of ``min_ops`` to ``max_ops`` statements, its inputs and its dynamic shapes; with
    probability ``half_jumps``, then a :func:`half_jump`."""
    symbols = ch.choice([[2, 3, 5], [3, 4, 6], [5, 6, 7], [2, 4, 7], [3, 5, 7]])
    n_inputs = ch.integer(1, 3)
    input_symbols = [_input_shape(ch, symbols) for _ in range(n_inputs)]
    mixed = ch.coin(0.5)
    first = ch.choice(DTYPES)
    dtypes = [ch.choice(DTYPES) if mixed else first for _ in range(n_inputs)]
    tensor_seed = ch.integer(0, 2**31 - 1)

    def make_inputs(sizes: list[int]) -> tuple[torch.Tensor, ...]:
        return tuple(
            make_tensor([1 if s is None else sizes[s] for s in dims], dt, tensor_seed + i)
            for i, (dims, dt) in enumerate(zip(input_symbols, dtypes))
        )

    inputs = make_inputs(symbols)
    b = _Builder(ch)
    names = [f"x{i}" for i in range(n_inputs)]
    b.vars = [Var(n, t.clone(), True, least_precise([t.dtype])) for n, t in zip(names, inputs)]
    n_ops = ch.integer(min_ops, max_ops)
    attempts = 0
    keys = list(TEMPLATES)
    while len(b.ops) < n_ops and attempts < n_ops * 8:
        attempts += 1
        op = ch.choice(keys)
        recent = b.vars[-3:] if ch.coin(0.7) else b.vars
        v = ch.choice(recent)
        name = b.new_name()
        made = TEMPLATES[op](b, v, name)
        if made is None:
            continue
        lines, exact = made
        b.try_statement(lines, name, exact, op)
    # every variable no later statement reads is an output, so that no statement is dead code
    outs = [u for u in b.vars if u.name.startswith("v") and u.name not in b.read]
    outs = (outs or b.vars[-1:])[-6:]
    # then, drawn from a chooser of its own (the programs of the seeds keep their statements), float16 arithmetic
    # whose result jumps, of a variable or of an input more holding values next to the integer boundaries
    late = ch.fork()
    boundary: Var | None = None
    jumps: set[str] = set()
    if late.coin(half_jumps):
        k = late.choice(_HALF_SCALARS)
        if late.coin(0.5):
            dtype = late.choice([torch.float16, torch.float16, torch.float16, torch.bfloat16])
            value = boundary_values(k, late.integer(4, 24), dtype, late.integer(0, 10_000))
            boundary = Var(f"x{n_inputs}", value, True, dtype)
            b.vars.append(boundary)
        if half_jump(b, late, b.new_name(), boundary, k if boundary is not None else None):
            outs.append(b.vars[-1])
            jumps.add(b.vars[-1].name)
        elif boundary is not None:
            b.vars.remove(boundary)
            boundary = None
    if boundary is not None:
        names.append(boundary.name)
    dynamic = ch.coin(0.5)
    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = tuple(
            {i: torch.export.Dim.AUTO for i, s in enumerate(dims) if s is not None} or None for dims in input_symbols
        ) + ((None,) if boundary is not None else ())
    more = (boundary.value,) if boundary is not None else ()  # static: the same on the grown inputs
    body = "\n".join(b.lines) + f"\nreturn {', '.join(o.name for o in outs)}{',' if len(outs) == 1 else ''}"
    init = "\n".join(b.init_lines) or "pass"
    source = (
        "import torch\nimport torch.nn.functional as F\n\n\nclass Program(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n" + textwrap.indent(init, " " * 8) + "\n\n"
        f"    def forward(self, {', '.join(names)}):\n" + textwrap.indent(body, " " * 8) + "\n"
    )
    return Program(
        seed=getattr(ch, "seed", None),
        source=source,
        inputs=inputs + more,
        dynamic_shapes=dynamic_shapes,
        grown=lambda deltas: make_inputs([s + deltas.get(i, 0) for i, s in enumerate(symbols)]) + more,
        symbols=symbols,
        input_symbols=input_symbols,
        ops=b.ops,
        out_low=[o.low for o in outs],
        out_strict=[o.name in jumps for o in outs],
    )


# -- comparison


#: (rtol, atol relative to the largest magnitude of the expected values) per dtype
TOLERANCES = {
    torch.float64: (1e-6, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (5e-3, 2e-3),
    torch.bfloat16: (3e-2, 1.5e-2),
}


def compare(expected: torch.Tensor, got: np.ndarray, low: torch.dtype | None = None) -> str | None:
    """None when onnxruntime's ``got`` equals eager's ``expected`` (dtype, shape, values within the tolerance
    of ``expected``'s dtype, or of ``low`` when the value was computed from a less precise type, NaN where
    NaN), else what differs (never the values of the whole tensor).

    >>> compare(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0], dtype=np.float32)) is None
    True
    >>> compare(torch.tensor([1, 2]), np.array([1, 3]))
    'values differ at 1 of 2 elements, e.g. index (1,): expected 2, got 3'
    """
    want = str(expected.dtype).replace("torch.", "")
    have = "bfloat16" if got.dtype.name == "bfloat16" else str(torch.from_numpy(np.zeros(0, dtype=got.dtype)).dtype)
    have = have.replace("torch.", "")
    if want != have:
        return f"dtype {have}, expected {want}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    e = expected.detach().float().double().numpy() if expected.is_floating_point() else expected.numpy()
    g = got.astype(np.float64) if expected.is_floating_point() else got
    if not expected.is_floating_point():
        bad = g != e
    else:
        rtol, atol = TOLERANCES[least_precise([expected.dtype, low])]
        finite = np.isfinite(e)
        scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
        with np.errstate(invalid="ignore"):
            close = np.abs(g - e) <= atol * scale + rtol * np.abs(e)
        same_special = (np.isnan(e) & np.isnan(g)) | (~finite & (g == e))
        bad = ~(np.where(finite, close, same_special))
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"values differ at {int(bad.sum())} of {bad.size} elements, e.g. index {where}: "
        f"expected {e[where].item()!r}, got {g[where].item()!r}"
    )


@dataclasses.dataclass
class Outcome:
    """What running a program gave: ``kind`` (one of :data:`OUTCOMES`) and a one-line ``detail``."""

    kind: str
    detail: str = ""
    error_type: str = ""


def _eager(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = model(*copy.deepcopy(inputs))
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _compare_run(
    sess: InferenceSession, names: list[str], inputs: tuple, expected: list[torch.Tensor], lows: Sequence[Any] = ()
) -> str | None:
    feeds = {n.name: inputs[names.index(n.name)] for n in sess.get_inputs()}
    got = sess.run(None, feeds)
    if len(got) != len(expected):
        return f"{len(got)} ONNX outputs, {len(expected)} eager outputs"
    lows = list(lows) if len(lows) == len(expected) else [None] * len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        diff = compare(e, g, lows[i])
        if diff:
            return f"output {i}: {diff}"
    return None


def _grow_deltas(prog: Program, onx: Any) -> dict[int, int]:
    """Symbols to grow on the second run: those every input axis of the ONNX model kept symbolic."""
    static: set[int] = set()
    for dims, inp in zip(prog.input_symbols, onx.graph.input):
        for s, d in zip(dims, inp.type.tensor_type.shape.dim):
            if s is not None and not d.dim_param:
                static.add(s)
    return {i: 1 + (i % 2) for i in range(len(prog.symbols)) if i not in static}


def run_program(prog: Program) -> Outcome:
    """Exports ``prog`` and compares onnxruntime with eager PyTorch (on the grown inputs too when dynamic)."""
    try:
        model = prog.module()
        expected = _eager(model, prog.inputs)
    except Exception as e:  # noqa: BLE001  (not the converter's business)
        return Outcome("eager_error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    names = [f"x{i}" for i in range(len(prog.inputs))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # narrowed dynamic axes: the grown run checks them (export_unsound)
            onx = to_onnx(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    except TorchInterpreterError as e:
        return Outcome(_project_kind(e), str(e).splitlines()[0] if str(e) else "", type(e).__name__)
    except Exception as e:  # noqa: BLE001  (a raw exception is a bug: recorded as such)
        return Outcome("raw_exception", f"to_onnx: {type(e).__name__}: {_last_frame(e)}", type(e).__name__)
    try:
        sess = InferenceSession(onx, providers=["CPUExecutionProvider"])
        diff = _compare_run(sess, names, prog.inputs, expected, prog.out_low)
    except Exception as e:  # noqa: BLE001
        return Outcome("raw_exception", f"onnxruntime: {type(e).__name__}: {_last_frame(e)}", type(e).__name__)
    if diff:
        return _mismatch_or_precision(model, prog.inputs, sess, names, expected, diff, prog.out_low, prog.out_strict)
    if prog.dynamic_shapes is None or prog.grown is None:
        return Outcome("match")
    deltas = _grow_deltas(prog, onx)
    if not deltas:
        return Outcome("match", "no axis stayed dynamic")
    grown = prog.grown(deltas)
    try:
        expected = _eager(model, grown)
    except Exception:  # noqa: BLE001  (the program does not apply to the grown sizes)
        return Outcome("match", "eager fails on the grown inputs")
    try:
        diff = _compare_run(sess, names, grown, expected, prog.out_low)
    except Exception as e:  # noqa: BLE001
        detail = f"onnxruntime (grown inputs {[tuple(t.shape) for t in grown]}): {type(e).__name__}: {_last_frame(e)}"
        if isinstance(e, RuntimeFeedError):  # a size condition of the model refused them (runtime_guards.py)
            return Outcome("guarded" if _guard_is_right(model, prog, grown, expected) else "project_error", detail)
        if _export_refuses(model, prog, grown):
            return Outcome("export_unsound", detail, type(e).__name__)
        return Outcome("raw_exception", detail, type(e).__name__)
    if diff:
        if _export_agrees(model, prog, grown, sess, names):
            return Outcome("export_unsound", f"grown inputs {[tuple(t.shape) for t in grown]}: {diff}")
        return _mismatch_or_precision(
            model, grown, sess, names, expected, f"grown inputs {[tuple(t.shape) for t in grown]}: {diff}",
            prog.out_low, prog.out_strict,
        )
    return Outcome("match")


_MANTISSA_BITS = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23, torch.float64: 52, None: 52}


def _float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in FLOATS:
        return value.double()
    return value


def _mismatch_or_precision(
    model: torch.nn.Module,
    inputs: tuple,
    sess: InferenceSession,
    names: list[str],
    expected: list[torch.Tensor],
    diff: str,
    lows: Sequence[Any] = (),
    strict: Sequence[bool] = (),
) -> Outcome:
    """``precision`` when onnxruntime's worst error against the same program run in float64 is no larger
    than eager's (within half a unit in the last place of the result's type) on every output where the
    two differ, else ``mismatch``.

    onnxruntime's CPU has no float16/bfloat16 kernel for most ops: it computes them in float32 and removes
    the ``Cast`` pairs between consecutive such ops (its RemoveDuplicateCastTransformer holds float16 and
    float32 in one type group), so a chain keeps float32 where PyTorch rounds after each op. The graph
    rounds where PyTorch does; the runtime drops the roundings. Programs whose explicit casts make float64
    meaningless stay ``mismatch`` (the check only ever reclassifies in onnxruntime's favour), and so do the
    ``strict`` outputs that differ (results of a jump on half-precision values, where float64 sides with float32).
    """
    try:
        reference = _eager(copy.deepcopy(model).double(), tuple(_float64(t) for t in inputs))
        feeds = {n.name: inputs[names.index(n.name)] for n in sess.get_inputs()}
        got = sess.run(None, feeds)
    except Exception:  # noqa: BLE001  (no float64 run: the difference stays a mismatch)
        return Outcome("mismatch", diff)
    lows = list(lows) if len(lows) == len(expected) else [None] * len(expected)
    if len(reference) != len(expected):
        return Outcome("mismatch", diff)
    if any(s and compare(e, g, low) is not None for s, e, g, low in zip(strict, expected, got, lows)):
        return Outcome("mismatch", diff)
    if not closer_than_eager(expected, got, reference, lows):
        return Outcome("mismatch", diff)
    return Outcome("precision", f"closer than eager to float64: {diff}")


def closer_than_eager(
    expected: Sequence[torch.Tensor], got: Sequence[np.ndarray], reference: Sequence[torch.Tensor],
    lows: Sequence[Any],
    factor: float = 1.0,
) -> bool:
    """True when, on every float output where ``got`` and eager's ``expected`` differ, ``got``'s worst error
    against the float64 ``reference`` is no larger than ``factor`` times eager's (within half a unit in the last
    place of the least precise type); other outputs must be equal."""
    for e, g, r, low in zip(expected, got, reference, lows):
        if not e.is_floating_point() or r.shape != e.shape:
            if compare(e, g) is not None:
                return False
            continue
        e64, g64, r64 = e.detach().double().numpy(), g.astype(np.float64), r.detach().double().numpy()
        with np.errstate(invalid="ignore"):
            differ = ~np.isclose(e64, g64, rtol=1e-3, atol=1e-4, equal_nan=True)
            finite = np.isfinite(r64) & np.isfinite(g64)
            # eager overflowed (an intermediate float16 value) where float64 and onnxruntime stay finite: its error
            # there is infinite
            eager_error = np.where(np.isfinite(e64), np.abs(e64 - r64), np.inf)
            # half a unit in the last place of the least precise type: the rounding of the result itself
            bits = _MANTISSA_BITS[least_precise([e.dtype, low])]
            half_ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(r64), 2.0**-14))) - bits - 1)
            if (differ & ~finite).any():
                return False
            if differ.any() and float((np.abs(g64 - r64) - half_ulp)[finite].max()) > factor * float(
                eager_error[finite].max()
            ):
                return False
    return True


def _guard_is_right(model: torch.nn.Module, prog: Program, grown: tuple, expected: list[torch.Tensor]) -> bool:
    """True when the ExportedProgram fails on ``grown`` or gives other results than eager: the size
    condition that refused them kept the ONNX model from returning wrong numbers."""
    if _export_refuses(model, prog, grown):
        return True
    ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    got = _eager(ep.module(), grown)
    return len(got) != len(expected) or any(
        g.shape != e.shape or not torch.equal(g.float().nan_to_num(), e.float().nan_to_num())
        for g, e in zip(got, expected)
    )


def _export_refuses(model: torch.nn.Module, prog: Program, grown: tuple) -> bool:
    """True when the ExportedProgram fails on ``grown`` too (a number of outputs fixed at export)."""
    try:
        ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
        _eager(ep.module(), grown)
    except Exception:  # noqa: BLE001
        return True
    return False


def _export_agrees(
    model: torch.nn.Module, prog: Program, grown: tuple, sess: InferenceSession, names: list[str]
) -> bool:
    """True when the ExportedProgram itself gives onnxruntime's results on ``grown``: torch.export assumed
    something of the sizes it did not guard (``split`` into a number of chunks fixed at export), the ONNX
    model follows the exported graph faithfully."""
    try:
        ep = torch.export.export(model, copy.deepcopy(prog.inputs), dynamic_shapes=prog.dynamic_shapes)
    except Exception:  # noqa: BLE001
        return False
    try:
        expected = _eager(ep.module(), grown)
    except Exception:  # noqa: BLE001  (a guard of the exported program fails: the inputs are outside its domain)
        return True
    return _compare_run(sess, names, grown, expected, prog.out_low) is None


def _project_kind(e: TorchInterpreterError) -> str:
    if isinstance(e, UnsupportedOpError):
        return "unsupported"
    if isinstance(e, ExportCaptureError):
        return "export_error"
    if isinstance(e, ConversionError) and isinstance(e.__cause__, (NotImplementedError, ValueError)):
        return "unsupported"
    return "project_error"


def _last_frame(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" ({frames[-1].filename.split('/')[-1]}:{frames[-1].lineno})" if frames else ""
    return (str(e).splitlines()[0] if str(e) else "") [:300] + where
