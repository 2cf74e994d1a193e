"""Aliasing semantics of in-place ops: a mutation is seen through every view of the tensor it changes.

torch.export without functionalization keeps in-place ops, often applied to views::

    slice_1 = aten.slice.Tensor(add_, 1, 1, 3)
    mul_ = aten.mul_.Tensor(slice_1, 2)          # changes add_ through slice_1
    gt = aten.gt.Scalar(add_, 3)                 # reads the changed values

ONNX values never change, so for graphs with in-place ops the interpreter's environment is an
:class:`AliasEnv`. It keeps a :class:`View` for every FX node that shares its storage with another one
(views, outputs of in-place ops): its base node and the root of its chain of views. A mutation writes
the new value back, view by view, into the root (``ScatterElements`` at the positions of a slice or a
select, the inverse ``Transpose`` or ``Reshape``, else a scatter at the positions the view picks from a
numbered base); the root's value is replaced, and every other alias of it is recomputed from the new
root when it is read next. Which node aliases which comes from the aten schemas (``Tensor(a)``,
``Tensor(a!)``, ``Tensor(a -> *)``), confirmed by the storages of the FakeTensors in ``meta['val']``
(``reshape`` may copy); the storages alone tell which outputs alias an input although the schema says new
tensors (``dropout`` in eval mode, a one-operand ``einsum``, each item of ``meshgrid``'s or
``broadcast_tensors``' list).

An in-place op returns its mutated argument (``add_(Tensor(a!) self) -> Tensor(a!)``): the value its
converter returns is written into that argument. A converter mutating another argument calls
:meth:`NodeContext.mutate`. Graphs without any mutable op keep a plain dict: nothing here runs for them.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx_ir as ir
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

from ..errors import ConversionError
from ..provenance import describe, node_metadata, target_key
from .context import NodeContext
from .dims import static_dim

if TYPE_CHECKING:
    from .interpreter import Interpreter

INT64 = ir.DataType.INT64
INT64_MAX = 9223372036854775807

# views written back by a Reshape to the base's shape, or by an inverse Transpose
_RESHAPES = frozenset(
    f"aten::{k}"
    for k in (
        *("view.default", "_unsafe_view.default", "reshape.default", "view_as.default", "reshape_as.default"),
        *("alias.default", "detach.default", "contiguous.default", "lift_fresh.default", "_reshape_alias.default"),
        *("unsqueeze.default", "squeeze.default", "squeeze.dim", "squeeze.dims"),
        *("flatten.using_ints", "unflatten.int", "ravel.default"),
        *("unsqueeze_.default", "squeeze_.default", "squeeze_.dim", "squeeze_.dims"),
        # ``to`` aliases its input only when it changes nothing (same dtype, device and layout)
        *("to.dtype", "to.dtype_layout", "to.device", "to.other"),
    )
)
_PERMUTES = frozenset(
    f"aten::{k}"
    for k in (
        *("transpose.int", "swapaxes.default", "swapdims.default", "permute.default", "t.default"),
        *("numpy_T.default", "mT.default", "adjoint.default"),
        *("movedim.int", "movedim.intlist", "moveaxis.int", "moveaxis.intlist"),
        *("t_.default", "transpose_.default", "swapdims_.default", "swapaxes_.default"),
    )
)

#: in-place ops that change the metadata of their argument, not its data: for aliasing, views of it
_METADATA_INPLACE = frozenset(
    f"aten::{k}"
    for k in (
        *("unsqueeze_.default", "squeeze_.default", "squeeze_.dim", "squeeze_.dims"),
        *("t_.default", "transpose_.default", "swapdims_.default", "swapaxes_.default"),
    )
)

#: ops whose schema returns a new tensor but ATen returns the input itself when ``train`` is False or p is 0
_DROPOUTS = frozenset(
    f"aten::{name}.default" for name in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
)

_MUTABLE: dict[Any, bool] = {}
_ALIASES: dict[Any, tuple[int, str] | None] = {}


def is_mutable(target: Any) -> bool:
    """Whether the aten op ``target`` writes into one of its arguments (``Tensor(a!)``)."""
    found = _MUTABLE.get(target)
    if found is None:
        found = _MUTABLE[target] = isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable
    return found


def alias_of(target: Any) -> tuple[int, str] | None:
    """``(argument index, kind)`` when the output of ``target`` aliases one of its arguments, else None.

    ``kind`` is ``"inplace"`` (the op returns the argument it mutated), ``"view"`` or ``"views"`` (a list
    of views: split, unbind...).

    >>> alias_of(torch.ops.aten.add_.Tensor), alias_of(torch.ops.aten.slice.Tensor)
    ((0, 'inplace'), (0, 'view'))
    >>> alias_of(torch.ops.aten.split.Tensor), alias_of(torch.ops.aten.add.Tensor)
    ((0, 'views'), None)
    """
    if target in _ALIASES:
        return _ALIASES[target]
    found = None
    if isinstance(target, torch._ops.OpOverload) and len(target._schema.returns) == 1:
        ret = target._schema.returns[0]
        for i, arg in enumerate(target._schema.arguments):
            info = arg.alias_info
            if info is None or ret.alias_info is None:
                continue
            if ret.alias_info.before_set & info.before_set:
                found = (i, "inplace" if ret.alias_info.is_write else "view")
                break
            if "*" in info.after_set and isinstance(ret.type, torch.ListType):
                found = (i, "views")
                break
    _ALIASES[target] = found
    return found


def needs_tracking(graph: torch.fx.Graph) -> bool:
    """Whether ``graph`` has an in-place op (the only case where aliasing matters)."""
    return any(node.op == "call_function" and is_mutable(node.target) for node in graph.nodes)


def _storage(val: Any) -> Any:
    if isinstance(val, (list, tuple)):
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return val.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # tensors without storage: trust the schema
        return -1


@dataclass(eq=False)
class View:
    """How an FX node aliases another one.

    ``kind``: ``"inplace"`` (the output of an in-place op: the base itself), ``"view"``, ``"views"`` (a
    tuple of views), ``"item"`` (one of them, through ``getitem``). ``version`` is the number of
    mutations of ``root`` the node's value has seen.
    """

    kind: str
    base: torch.fx.Node
    root: torch.fx.Node
    version: int


class AliasEnv(dict):
    """The interpreter's environment (FX node -> value) for a graph with in-place ops.

    Reading a node whose root was mutated after its value was computed recomputes it (the view op
    again, on the new base); storing a node's value records what it aliases and, for an in-place op,
    writes its result into the argument it mutated.
    """

    def __init__(self, interpreter: Interpreter, env: dict[torch.fx.Node, Any]):
        super().__init__(env)
        self.interpreter = interpreter
        self.views: dict[torch.fx.Node, View] = {}
        self.versions: dict[torch.fx.Node, int] = {}
        # a list output whose schema says new tensors but whose items are views of the inputs (meshgrid,
        # broadcast_tensors): item index -> its View, the list recomputed when one of their roots changes
        self.listed: dict[torch.fx.Node, dict[int, View]] = {}
        self._applied: set[tuple[torch.fx.Node, torch.fx.Node]] = set()  # (op, argument) set by ctx.mutate

    @classmethod
    def create(cls, interpreter: Interpreter, graph: torch.fx.Graph, env: dict) -> AliasEnv | None:
        """An AliasEnv when ``graph`` mutates something, else None (the plain dict does)."""
        return cls(interpreter, env) if needs_tracking(graph) else None

    # -- dict hooks --------------------------------------------------------------------------------------
    def __getitem__(self, node: torch.fx.Node) -> Any:
        view = self.views.get(node)
        if view is not None and view.version != self.versions.get(view.root, 0):
            self._refresh(node, view)
        items = self.listed.get(node)
        if items is not None and any(v.version != self.versions.get(v.root, 0) for v in items.values()):
            dict.__setitem__(self, node, self.interpreter.call_function(node, self))
            for v in items.values():
                v.version = self.versions.get(v.root, 0)
        return dict.__getitem__(self, node)

    def __setitem__(self, node: torch.fx.Node, value: Any) -> None:
        dict.__setitem__(self, node, value)
        if node.op != "call_function":
            return
        if isinstance(node.meta.get("val"), (list, tuple)) and alias_of(node.target) is None:
            self._list_items(node)
            return
        found = self._aliased(node)
        if found is None:
            return
        kind, base = found
        if kind == "inplace" and (node, base) not in self._applied and isinstance(value, ir.Value):
            self.mutate(base, value, node)
        root = self.views[base].root if base in self.views else base
        self.views[node] = View(kind, base, root, self.versions.get(root, 0))

    # -- mutation --------------------------------------------------------------------------------------
    def mutate(self, node: Any, value: ir.Value, by: torch.fx.Node) -> None:
        """``by`` (an FX node) wrote ``value`` into ``node``: writes it back into the root of ``node``'s views;
        the other aliases of that root are recomputed when read."""
        if not isinstance(node, torch.fx.Node) or not isinstance(value, ir.Value):
            raise ConversionError(f"{describe(by)} mutates {node!r}, which is not a tensor of the graph")
        self._applied.add((by, node))
        if dict.get(self, node) is value:
            return  # nothing changed (clamp_ without bounds...)
        ctx = NodeContext(self.interpreter, by, target_key(by.target))
        chain: list[View] = []
        with self.interpreter.builder.scope(by.name, node_metadata(by)):
            while node in self.views:
                view = self.views[node]
                dict.__setitem__(self, node, value)
                chain.append(view)
                if view.kind == "item":  # one output of split/unbind...: write into the base of the list
                    listed = self.views[view.base]
                    value = self._write_back(ctx, view.base, listed.base, value, item=node.args[1])
                    node = listed.base
                elif view.base in self.views and _overlaps(view.base):
                    # a write through a view of an expand(): its positions in the first base that does not
                    # repeat elements (the chain of views applied to that base numbered) are all distinct
                    path = [node]
                    while path[-1] in self.views and _overlaps(self.views[path[-1]].base):
                        path.append(self.views[path[-1]].base)
                    node = self._check_composable(ctx, path)
                    value = self._write_through(ctx, path, node, value)
                else:
                    value = self._write_back(ctx, node, view.base, value)
                    node = view.base
            dict.__setitem__(self, node, value)
        version = self.versions[node] = self.versions.get(node, 0) + 1
        for view in chain:
            view.version = version

    # -- internals -----------------------------------------------------------------------------------------
    def _aliased(self, node: torch.fx.Node) -> tuple[str, torch.fx.Node] | None:
        """``(kind, base)`` when ``node`` aliases another node, else None."""
        if node.target is operator.getitem:
            seq = node.args[0]
            if seq in self.listed and node.args[1] in self.listed[seq]:
                item = self.listed[seq][node.args[1]]
                return item.kind, item.base
            view = self.views.get(seq) if isinstance(seq, torch.fx.Node) else None
            return ("item", seq) if view is not None and view.kind == "views" else None
        found = alias_of(node.target)
        if found is None:
            return self._runtime_alias(node)
        if found[0] >= len(node.args):
            return None
        index, kind = found
        base = node.args[index]
        if not isinstance(base, torch.fx.Node):
            return None
        if target_key(node.target) in _METADATA_INPLACE:  # unsqueeze_: a new view, the data unchanged
            return "view", base
        if kind != "inplace":
            mine, theirs = _storage(node.meta.get("val")), _storage(base.meta.get("val"))
            if mine is None or theirs is None or mine != theirs:
                return None  # reshape or contiguous that copied
        return kind, base

    def _runtime_alias(self, node: torch.fx.Node) -> tuple[str, torch.fx.Node] | None:
        """An op whose schema returns a new tensor may return its input all the same (``dropout`` in eval
        mode, ``.to()`` to the same dtype, an ``einsum`` that only permutes): the storages of the FakeTensors
        tell. ``("identity", arg)`` when the output is the argument itself, ``("hidden_view", arg)`` when it
        is another view of it (a write through it goes back through a one-operand einsum's equation, and
        is refused otherwise: its positions are not known)."""
        if not isinstance(node.target, torch._ops.OpOverload) or is_mutable(node.target):
            return None
        if target_key(node.target) in _DROPOUTS:
            p, train = _args(node, ("p", 0.5), ("train", True))
            # ATen returns the input itself when nothing is dropped; the FakeTensor is a copy
            return ("identity", node.args[0]) if (not train or p == 0) and isinstance(node.args[0], torch.fx.Node) else None
        return _same_storage(node.meta.get("val"), node)

    def _list_items(self, node: torch.fx.Node) -> None:
        """Records the items of ``node``'s list output that are views of its inputs although its schema says
        new tensors (``meshgrid`` and ``broadcast_tensors`` expand them): each item, read through ``getitem``, is
        an ``"identity"`` or a ``"hidden_view"`` of the input sharing its storage, and the list is recomputed
        when one of these inputs changes."""
        if not isinstance(node.target, torch._ops.OpOverload) or is_mutable(node.target):
            return
        items = {}
        for i, val in enumerate(node.meta["val"]):
            found = _same_storage(val, node)
            if found is not None:
                kind, base = found
                root = self.views[base].root if base in self.views else base
                items[i] = View(kind, base, root, self.versions.get(root, 0))
        if items:
            self.listed[node] = items

    def _refresh(self, node: torch.fx.Node, view: View) -> None:
        """Recomputes a stale alias from its (refreshed) base."""
        if view.kind in ("inplace", "identity"):
            value = self[view.base]
        else:
            value = self.interpreter.call_function(node, self)
        dict.__setitem__(self, node, value)
        view.version = self.versions.get(view.root, 0)

    def _write_back(
        self, ctx: NodeContext, node: torch.fx.Node, base: torch.fx.Node, value: ir.Value, item: int | None = None
    ) -> ir.Value:
        """The new value of ``base`` once its view ``node`` (its output ``item``) holds ``value``."""
        old = self[base]
        val, base_val = node.meta.get("val"), base.meta.get("val")
        if item is not None:
            val = val[item]
        if val.dtype != base_val.dtype:
            raise ConversionError(
                f"{describe(ctx.node)} writes into a view of another dtype ({describe(node)}): not supported"
            )
        key = target_key(node.target)
        same = self.interpreter.onnx_shape(val) == self.interpreter.onnx_shape(base_val)
        if self.views[node].kind == "hidden_view" and item is None and _einsum_view(node) is not None:
            # einsum("ij->ji") or ("ii->i"): the same equation on the numbered base gives the positions
            shape = self._shape(ctx, old, base_val)
            positions = ctx.op("Einsum", _numbered(ctx, old, shape), equation=_einsum_view(node))
            return _scatter_flat(ctx, old, positions, value, shape)
        if self.views[node].kind == "hidden_view":
            raise ConversionError(
                f"{describe(ctx.node)} writes into the output of {describe(node)}, which PyTorch returns as a "
                "view of its input although its schema says it returns a new tensor; the positions it covers "
                "are not known here, so the write cannot be carried to the input. Write into a .clone() of "
                "it in the model (or do not write in place)"
            )
        if item is None and (self.views[node].kind in ("inplace", "identity") or (key in _RESHAPES and same)):
            new = value
        elif item is None and key in _RESHAPES:
            new = ctx.op("Reshape", value, self._shape(ctx, old, base_val), allowzero=1)
        elif item is None and key in _PERMUTES:
            perm = _permutation(node, base_val.dim())
            new = ctx.op("Transpose", value, perm=[perm.index(i) for i in range(len(perm))])
        elif item is None and key in ("aten::slice.Tensor", "aten::narrow.default", "aten::narrow.Tensor"):
            new = self._write_slice(ctx, node, old, base_val, value)
        elif item is None and key == "aten::select.int":
            dim, index = _args(node, ("dim", 0), ("index", 0))
            axis = dim % base_val.dim()
            index = self._arg(index)
            if isinstance(index, int) and index < 0 and static_dim(base_val.shape[axis]) is not None:
                index += static_dim(base_val.shape[axis])
            index = ctx.op("Reshape", ctx.operand(index, INT64), ctx.const([1], INT64))
            value = ctx.op("Unsqueeze", value, ctx.const([axis], INT64))
            new = self._scatter_along(ctx, old, index, value, axis, [*val.shape[:axis], 1, *val.shape[axis:]])
        else:
            new = self._write_positions(ctx, node, old, base_val, value, item)
        if new.shape is None:
            new.shape = old.shape
        if new.dtype is None:
            new.dtype = old.dtype
        return new

    def _shape(self, ctx: NodeContext, value: ir.Value, val: torch.Tensor) -> ir.Value:
        """The shape of ``value`` (whose FakeTensor is ``val``) as a 1-D INT64 tensor."""
        dims = self.interpreter.onnx_shape(val)
        if all(isinstance(d, int) for d in dims):
            return ctx.const(dims, INT64)
        return ctx.op("Shape", value)

    def _scatter_along(
        self, ctx: NodeContext, data: ir.Value, positions: ir.Value, value: ir.Value, axis: int, shape: Any
    ) -> ir.Value:
        """``data`` with ``value`` written at ``positions`` (1-D) of axis ``axis``; ``shape``: value's shape."""
        rank = len(shape)
        index = ctx.op("Reshape", positions, ctx.const([-1 if i == axis else 1 for i in range(rank)], INT64))
        sizes = [static_dim(d) for d in shape]
        target = ctx.const(sizes, INT64) if None not in sizes else ctx.op("Shape", value)
        index = ctx.op("Expand", index, target)
        return ctx.op("ScatterElements", data, index, value, axis=axis)

    def _write_slice(
        self, ctx: NodeContext, node: torch.fx.Node, old: ir.Value, base_val: torch.Tensor, value: ir.Value
    ) -> ir.Value:
        """Write-back of ``slice.Tensor`` and ``narrow``: a scatter at the positions along the axis."""
        rank = base_val.dim()
        if target_key(node.target) == "aten::slice.Tensor":
            dim, start, end, step = _args(node, ("dim", 0), ("start", None), ("end", None), ("step", 1))
            start = 0 if start is None else self._arg(start)
            end = INT64_MAX if end is None else self._arg(end)
            step = self._arg(step)
        else:
            dim, start, length = _args(node, ("dim", 0), ("start", 0), ("length", 0))
            start, length = self._arg(start), self._arg(length)
        axis = dim % rank
        size = static_dim(base_val.shape[axis])
        if target_key(node.target) != "aten::slice.Tensor":
            if isinstance(start, int) and start < 0 and size is not None:
                start += size
            if isinstance(start, int) and isinstance(length, int):
                end = start + length
            else:
                end = ctx.op("Add", ctx.operand(start, INT64), ctx.operand(length, INT64))
            step = 1
        if all(isinstance(v, int) for v in (size, start, end, step)):
            first, last, stride = slice(start, end, step).indices(size)
            positions = ctx.op("Range", ctx.const(first, INT64), ctx.const(last, INT64), ctx.const(stride, INT64))
        else:
            dim = size
            if dim is None:
                dim = ctx.op("Squeeze", ctx.op("Shape", old, start=axis, end=axis + 1), ctx.const([0], INT64))
            numbered = ctx.op("Range", ctx.const(0, INT64), ctx.operand(dim, INT64), ctx.const(1, INT64))
            positions = ctx.op(
                "Slice", numbered, ctx.int64s([start]), ctx.int64s([end]), ctx.const([0], INT64), ctx.int64s([step])
            )
        return self._scatter_along(ctx, old, positions, value, axis, list(node.meta["val"].shape))

    def _write_positions(
        self,
        ctx: NodeContext,
        node: torch.fx.Node,
        old: ir.Value,
        base_val: torch.Tensor,
        value: ir.Value,
        item: int | None,
    ) -> ir.Value:
        """Any other view: the view op applied to the numbered base gives the positions it picks."""
        shape = self._shape(ctx, old, base_val)
        args = list(self.interpreter.lookup(node.args, self))
        args[alias_of(node.target)[0]] = _numbered(ctx, old, shape)
        positions = self.interpreter.convert(node, args, self.interpreter.lookup(node.kwargs, self))
        if item is not None:
            positions = positions[item]
        return _scatter_flat(ctx, old, positions, value, shape)

    def _check_composable(self, ctx: NodeContext, path: list[torch.fx.Node]) -> torch.fx.Node:
        """The base under the views of ``path`` (each a plain view of the next one); raises otherwise."""
        for node in path:
            view = self.views.get(node)
            if view is None or view.kind != "view" or node.meta.get("val") is None:
                raise ConversionError(
                    f"{describe(ctx.node)} writes through {describe(node)}, a view of a tensor that repeats "
                    "elements (expand): the write cannot be carried to its input here. Write into a .clone() "
                    "of the expanded tensor in the model, or write into the tensor before expanding it"
                )
        return self.views[path[-1]].base

    def _write_through(
        self, ctx: NodeContext, path: list[torch.fx.Node], base: torch.fx.Node, value: ir.Value
    ) -> ir.Value:
        """The new value of ``base`` once ``path[0]``, a view of a view ... ``path[-1]`` of ``base``, holds
        ``value``: a scatter at the positions the chain of views picks from the numbered base."""
        old = self[base]
        base_val = base.meta.get("val")
        shape = self._shape(ctx, old, base_val)
        positions = _numbered(ctx, old, shape)
        for node in reversed(path):
            args = list(self.interpreter.lookup(node.args, self))
            args[alias_of(node.target)[0]] = positions
            positions = self.interpreter.convert(node, args, self.interpreter.lookup(node.kwargs, self))
            if positions.shape is None:
                positions.shape = ir.Shape(self.interpreter.onnx_shape(node.meta["val"]))
            positions.dtype = INT64
        return _scatter_flat(ctx, old, positions, value, shape)

    def _arg(self, arg: Any) -> Any:
        """A size argument: a Python int, or the value of the FX node computing it."""
        return self[arg] if isinstance(arg, torch.fx.Node) else arg


def _same_storage(val: Any, node: torch.fx.Node) -> tuple[str, torch.fx.Node] | None:
    """``("identity", arg)`` when the FakeTensor ``val`` (one output of ``node``) is an argument of ``node``
    itself, ``("hidden_view", arg)`` when it is another view of its storage, None when it shares no argument's
    storage (or is no tensor)."""
    mine = _storage(val) if isinstance(val, torch.Tensor) else None
    if mine is None or mine == -1:
        return None
    args = [a for arg in node.args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]
    for arg in args:
        base = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if isinstance(base, torch.Tensor) and _storage(base) == mine:
            # equal for every value of the symbols (unknown is not equal): ``==`` on symbolic sizes would add the
            # example's answer to the shape environment as a guard (a view of [h, w] as [w, h] refused every
            # square image)
            layout = (*val.shape, *val.stride(), val.storage_offset())
            same = val.dtype == base.dtype and statically_known_true(
                sym_eq(layout, (*base.shape, *base.stride(), base.storage_offset())))
            return ("identity" if same else "hidden_view"), arg
    return None


def _numbered(ctx: NodeContext, old: ir.Value, shape: ir.Value) -> ir.Value:
    """``arange(numel).reshape(shape)``: each element of ``old`` replaced by its flat position, so that a view
    op applied to it gives the positions the view picks."""
    numel = ctx.op("ReduceProd", shape, keepdims=0)  # not Size: onnxruntime has no bfloat16 Size kernel
    numbered = ctx.op("Reshape", ctx.op("Range", ctx.const(0, INT64), numel, ctx.const(1, INT64)), shape)
    numbered.shape = old.shape
    return numbered


def _scatter_flat(ctx: NodeContext, old: ir.Value, positions: ir.Value, value: ir.Value, shape: ir.Value) -> ir.Value:
    """``old`` of ``shape`` with ``value`` written at the flat ``positions``."""
    flat = ctx.const([-1], INT64)
    out = ctx.op(
        "ScatterElements",
        ctx.op("Reshape", old, flat),
        ctx.op("Reshape", positions, flat),
        ctx.op("Reshape", value, flat),
        axis=0,
    )
    new = ctx.op("Reshape", out, shape, allowzero=1)
    new.shape, new.dtype = old.shape, old.dtype
    return new

def _args(node: torch.fx.Node, *spec: tuple[str, Any]) -> list[Any]:
    """The arguments after ``self`` of ``node``, by position or keyword, with their defaults."""
    return [
        node.args[i + 1] if i + 1 < len(node.args) else node.kwargs.get(name, default)
        for i, (name, default) in enumerate(spec)
    ]


def _einsum_view(node: torch.fx.Node) -> str | None:
    """The equation of an ``einsum`` of one operand without ellipsis (a permutation or a diagonal, when
    PyTorch returns a view of its input), else None."""
    if target_key(node.target) != "aten::einsum.default" or len(node.args) < 2:
        return None
    equation, operands = node.args[0], node.args[1]
    if not isinstance(equation, str) or "..." in equation or len(operands) != 1:
        return None
    equation = equation.replace(" ", "")
    lhs, _, rhs = equation.partition("->")
    if not rhs or len(set(rhs)) != len(rhs) or set(rhs) != set(lhs):  # a sum would copy
        return None
    return equation


def _overlaps(node: torch.fx.Node) -> bool:
    """Whether the FakeTensor of ``node`` may see one element at two positions (a stride 0 on an axis
    longer than 1, as ``expand`` makes)."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return False
    try:
        return any(static_dim(st) == 0 and static_dim(sz) != 1 for sz, st in zip(val.shape, val.stride()))
    except (RuntimeError, NotImplementedError):
        return False


def _permutation(node: torch.fx.Node, rank: int) -> list[int]:
    """The permutation a transpose-like view applies, read from the strides of the op run on a probe."""
    probe = torch.empty((2,) * rank, device="meta")
    strides = probe.stride()
    out = node.target(probe, *node.args[1:], **node.kwargs)
    return [strides.index(s) for s in out.stride()]
