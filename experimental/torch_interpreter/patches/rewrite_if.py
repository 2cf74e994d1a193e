"""Opt-in rewrite of data-dependent Python ``if`` into ``torch.cond``.

``if x.sum() > 0: return a`` ... ``return b`` in ``forward`` fails torch.export (the condition depends on
tensor values). :func:`rewrite_tensor_ifs` recompiles a function so that such an ``if``, when its condition
evaluates to a tensor, becomes ``torch.cond(condition, true_branch, false_branch, ())``; when the condition
is a Python bool (or a SymBool of shapes), the original ``if`` runs unchanged. A branch that does not
``return`` goes on with the code after the ``if`` (copied into its branch function); the rewrite applies when
every path then ends with ``return``. A function with closure variables (``super()`` included) or a branch
storing attributes or items (``self.n = ...``, ``x[0] = ...``), ``global`` or ``yield`` is left alone.
Branch functions receive the variables bound before the ``if`` as default arguments, so that a branch may
reassign them. torch.cond requires both branches to return tensors of the same structure, dtype and rank.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap
import types
from collections.abc import Callable
from typing import Any

import torch

_TORCH = "__aten2onnx_torch__"
_counter = itertools.count()


def _stored(nodes: list[ast.stmt]) -> set[str]:
    names = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(sub.name)
    return names


def _ends_with_return(stmts: list[ast.stmt]) -> bool:
    """Every path through ``stmts`` ends with ``return``."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.If):
        return _ends_with_return(last.body) and _ends_with_return(last.orelse)
    return isinstance(last, ast.Return)


def _unsafe(stmts: list[ast.stmt]) -> bool:
    """Statements a branch function cannot hold: global/nonlocal, yield, attribute or subscript stores."""
    for node in stmts:
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await)):
                return True
            if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
                return True
    return False


def _branch(name: str, body: list[ast.stmt], bound: set[str]) -> ast.FunctionDef:
    params = sorted(bound)
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=p) for p in params],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[ast.Name(id=p, ctx=ast.Load()) for p in params],
    )
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None, type_params=[])


def _rewrite_block(stmts: list[ast.stmt], bound: set[str]) -> tuple[list[ast.stmt], int]:
    out: list[ast.stmt] = []
    count = 0
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.If):
            rest = stmts[i + 1 :]
            # a branch that does not return goes on with the statements after the `if`
            true_body = stmt.body if _ends_with_return(stmt.body) else stmt.body + rest
            false_body = stmt.orelse if _ends_with_return(stmt.orelse) else stmt.orelse + rest
            if (
                _ends_with_return(true_body)
                and _ends_with_return(false_body)
                and not _unsafe(true_body)
                and not _unsafe(false_body)
            ):
                k = next(_counter)
                pred, t_name, f_name = f"__aten2onnx_pred_{k}", f"__aten2onnx_true_{k}", f"__aten2onnx_false_{k}"
                t_body, n1 = _rewrite_block(true_body, set(bound))
                f_body, n2 = _rewrite_block(false_body, set(bound))
                count += 1 + n1 + n2
                template = ast.parse(
                    f"{pred} = 0\n"
                    f"if isinstance({pred}, {_TORCH}.Tensor):\n"
                    f"    return {_TORCH}.cond({pred}, {t_name}, {f_name}, ())\n"
                )
                for node in ast.walk(template):
                    ast.copy_location(node, stmt.test)  # tracebacks and provenance point at the `if` line
                template.body[0].value = stmt.test
                guarded = template.body[1]
                guarded.body[:0] = [_branch(t_name, t_body, bound), _branch(f_name, f_body, bound)]
                original = ast.If(test=ast.Name(id=pred, ctx=ast.Load()), body=stmt.body, orelse=stmt.orelse)
                out += [template.body[0], guarded, original]
                bound = bound | {pred}
                continue
        out.append(stmt)
        bound = bound | _stored([stmt])
    return out, count


def rewrite_tensor_ifs(fn: Callable) -> Callable:
    """``fn`` recompiled with its data-dependent ``if`` statements as ``torch.cond`` (see the module doc).

    Returns ``fn`` itself when nothing can be rewritten.

    >>> def f(x):
    ...     if x.sum() > 0:
    ...         return x * 2
    ...     return x - 1
    >>> g = rewrite_tensor_ifs(f)
    >>> g is not f, g(torch.ones(2)).tolist(), g(-torch.ones(2)).tolist()
    (True, [2.0, 2.0], [-2.0, -2.0])
    """
    func = getattr(fn, "__func__", fn)
    if func.__code__.co_freevars:
        return fn
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return fn
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        return fn
    params = {a.arg for a in [*fdef.args.posonlyargs, *fdef.args.args, *fdef.args.kwonlyargs]}
    params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    body, count = _rewrite_block(fdef.body, params)
    if not count:
        return fn
    fdef.body = body
    fdef.decorator_list = []
    # a factory taking torch as argument: the new function keeps the module's globals (dynamo reads them
    # through the module) and finds torch in a closure cell, whatever the module imported
    factory = ast.FunctionDef(
        name="__aten2onnx_factory__",
        args=ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=_TORCH)], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
            defaults=[],
        ),
        body=[fdef, ast.copy_location(ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load())), fdef)],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    ast.copy_location(factory, fdef)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.increment_lineno(module, func.__code__.co_firstlineno - 1)
    ast.fix_missing_locations(module)
    scratch: dict[str, Any] = {}
    exec(compile(module, inspect.getsourcefile(func) or "<rewritten>", "exec"), scratch)
    make = types.FunctionType(scratch["__aten2onnx_factory__"].__code__, func.__globals__)
    new = functools.wraps(func)(make(torch))
    new.__aten2onnx_rewritten__ = count  # type: ignore[attr-defined]
    return new


def rewrite_forward(cls: type) -> Callable[[], None]:
    """Replaces ``cls.forward`` by its rewritten version; returns the undo. Raises ``ValueError`` when
    nothing in ``cls.forward`` can be rewritten."""
    original = cls.__dict__.get("forward")
    if original is None:
        raise ValueError(f"{cls.__name__} does not define forward itself")
    new = rewrite_tensor_ifs(original)
    if new is original:
        raise ValueError(
            f"{cls.__name__}.forward has no `if` whose branches both end with `return` (or it uses closure "
            "variables or super()): nothing to rewrite into torch.cond"
        )
    cls.forward = new

    def undo() -> None:
        cls.forward = original

    return undo


def rewritten_count(fn: Any) -> int:
    return getattr(fn, "__aten2onnx_rewritten__", 0)
