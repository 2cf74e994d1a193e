"""Mapping between torch dtypes and ONNX element types."""

from __future__ import annotations

import onnx_ir as ir
import torch

_TORCH_TO_ONNX: dict[torch.dtype, ir.DataType] = {
    torch.float32: ir.DataType.FLOAT,
    torch.float16: ir.DataType.FLOAT16,
    torch.bfloat16: ir.DataType.BFLOAT16,
    torch.float64: ir.DataType.DOUBLE,
    torch.int8: ir.DataType.INT8,
    torch.int16: ir.DataType.INT16,
    torch.int32: ir.DataType.INT32,
    torch.int64: ir.DataType.INT64,
    torch.uint8: ir.DataType.UINT8,
    torch.uint16: ir.DataType.UINT16,
    torch.uint32: ir.DataType.UINT32,
    torch.uint64: ir.DataType.UINT64,
    torch.bool: ir.DataType.BOOL,
    torch.complex64: ir.DataType.COMPLEX64,
    torch.complex128: ir.DataType.COMPLEX128,
    torch.float8_e4m3fn: ir.DataType.FLOAT8E4M3FN,
    torch.float8_e5m2: ir.DataType.FLOAT8E5M2,
}
_ONNX_TO_TORCH = {v: k for k, v in _TORCH_TO_ONNX.items()}

FLOAT_TYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE}
)


def onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    """ONNX element type of a torch dtype.

    >>> onnx_dtype(torch.float16).name
    'FLOAT16'
    """
    try:
        return _TORCH_TO_ONNX[dtype]
    except KeyError:
        raise TypeError(f"torch dtype {dtype} has no ONNX equivalent") from None


def torch_dtype(dtype: ir.DataType) -> torch.dtype:
    """torch dtype of an ONNX element type.

    >>> torch_dtype(ir.DataType.INT64)
    torch.int64
    """
    try:
        return _ONNX_TO_TORCH[dtype]
    except KeyError:
        raise TypeError(f"ONNX type {dtype} has no torch equivalent") from None


def value_type(val: object) -> ir.DataType | None:
    """ONNX element type of what PyTorch computed for an FX value (``node.meta["val"]``): a (Fake)Tensor's
    dtype, BOOL for a (Sym)bool, INT64 for a (Sym)int, FLOAT for a (Sym)float; None for anything else.

    >>> value_type(torch.zeros(2, dtype=torch.bfloat16)).name, value_type(3).name, value_type(True).name
    ('BFLOAT16', 'INT64', 'BOOL')
    """
    if isinstance(val, torch.Tensor):
        return onnx_dtype(val.dtype)
    if isinstance(val, (torch.SymBool, bool)):
        return ir.DataType.BOOL
    if isinstance(val, (torch.SymInt, int)):
        return ir.DataType.INT64
    if isinstance(val, (torch.SymFloat, float)):
        return ir.DataType.FLOAT
    return None
