"""Random small programs of everyday PyTorch ops: their generation.

A program is Python source text (a ``torch.nn.Module`` named ``Program``) built statement by statement: each
statement applies one op template (:mod:`.program_templates`: elementwise with broadcasting and Python scalars,
comparisons, reductions, softmax, matmul, views, cat/split, indexing, scatter, sort, casts, in-place ops,
convolution, pooling, normalization...) to the variables computed so far, and is kept only if eager PyTorch runs
it. Inputs have random shapes built from a few size symbols and random dtypes (float32, float16, bfloat16, int64,
bool); in a dynamic program every axis of size > 1 is ``Dim.AUTO`` and the model is checked again on inputs where
every symbol the export kept dynamic has grown (:mod:`.program_runs` exports, runs and compares them).

The choices come from a :class:`Chooser`: :class:`RandomChooser` (a seed, for ``benchmarks/fuzz.py``) or
:class:`HypothesisChooser` (hypothesis' ``data``, for ``_unittests/test_fuzz.py``).

>>> prog = generate(RandomChooser(3))
>>> "class Program(torch.nn.Module)" in prog.source
True
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import textwrap
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .program_templates import HALF_SCALARS, TEMPLATES, boundary_values, half_jump

logger = logging.getLogger(__name__)


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


class Builder:
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

    def bool_operand(self, chance: float, fallback: str | None) -> str | None:
        """The name of one of the bool variables (with probability ``chance`` when there is one), else
        ``fallback``."""
        conds = [u for u in self.vars if u.dtype == torch.bool]
        return self.ch.choice(conds).name if conds and self.ch.coin(chance) else fallback

    def dim(self, v: Var) -> int:
        """An axis of ``v``, sometimes negative."""
        d = self.ch.integer(0, max(v.rank - 1, 0))
        return d - v.rank if v.rank and self.ch.coin(0.3) else d

    def axis_with_elements(self, v: Var) -> tuple[int, int] | None:
        """An axis of ``v`` (never negative) and its size; None when ``v`` is a scalar or has no element."""
        if v.rank == 0 or v.value.numel() == 0:
            return None
        d = self.ch.integer(0, v.rank - 1)
        return d, v.shape[d]

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
    b = Builder(ch)
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
        k = late.choice(HALF_SCALARS)
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
