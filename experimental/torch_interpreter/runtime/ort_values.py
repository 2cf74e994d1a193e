"""Values crossing onnxruntime's boundary: the execution providers, onnxruntime's type strings, and the
conversions between ``OrtValue``, torch tensors and numpy arrays that the plain and the PythonOp sessions share.

Torch tensors go through DLPack without a copy (booleans excepted: onnxruntime does not read DLPack's bool);
bfloat16 becomes ``ml_dtypes.bfloat16`` on the numpy side.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import torch

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"

#: torch dtype -> onnxruntime's type string
TYPE_OF_TORCH = {
    torch.float32: "tensor(float)",
    torch.float64: "tensor(double)",
    torch.float16: "tensor(float16)",
    torch.bfloat16: "tensor(bfloat16)",
    torch.int64: "tensor(int64)",
    torch.int32: "tensor(int32)",
    torch.int16: "tensor(int16)",
    torch.int8: "tensor(int8)",
    torch.uint8: "tensor(uint8)",
    torch.bool: "tensor(bool)",
    torch.complex64: "tensor(complex64)",
    torch.complex128: "tensor(complex128)",
}

#: numpy scalar type -> onnxruntime's type string
TYPE_OF_NUMPY = {
    np.float32: "tensor(float)",
    np.float64: "tensor(double)",
    np.float16: "tensor(float16)",
    np.int64: "tensor(int64)",
    np.int32: "tensor(int32)",
    np.int16: "tensor(int16)",
    np.int8: "tensor(int8)",
    np.uint8: "tensor(uint8)",
    np.uint16: "tensor(uint16)",
    np.uint32: "tensor(uint32)",
    np.uint64: "tensor(uint64)",
    np.bool_: "tensor(bool)",
    np.complex64: "tensor(complex64)",
    np.complex128: "tensor(complex128)",
    np.str_: "tensor(string)",
    np.object_: "tensor(string)",
}

#: onnxruntime's type string -> the numpy type a Python scalar feed is converted to
NUMPY_OF = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def default_providers() -> list[str]:
    """``[CUDAExecutionProvider, CPUExecutionProvider]`` when onnxruntime and the machine have CUDA, else CPU.

    >>> default_providers()[-1]
    'CPUExecutionProvider'
    """
    if CUDA in ort.get_available_providers() and torch.cuda.is_available():
        return [CUDA, CPU]
    return [CPU]


def to_numpy(value: Any) -> np.ndarray:
    """A feed as numpy: torch tensors (bfloat16 included) are moved to the CPU without changing values.

    >>> to_numpy(torch.tensor([1.5, 2.0], dtype=torch.bfloat16)).dtype
    dtype(bfloat16)
    >>> to_numpy([1, 2])
    array([1, 2])
    """
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy().view(ir.DataType.BFLOAT16.numpy())
        return value.numpy()
    return np.asarray(value)


def ortvalue_to_torch(value: ort.OrtValue) -> torch.Tensor:
    """An ``OrtValue`` as a torch tensor sharing its buffer (DLPack), booleans included.

    >>> ortvalue_to_torch(ort.OrtValue.ortvalue_from_numpy(np.array([True, False])))
    tensor([ True, False])
    """
    tensor = torch.from_dlpack(value)
    return tensor.view(torch.bool) if value.data_type() == "tensor(bool)" else tensor


def ortvalue_to_numpy(value: ort.OrtValue) -> np.ndarray:
    """An ``OrtValue`` as a numpy array on the host (bfloat16 as ``ml_dtypes.bfloat16``).

    >>> ortvalue_to_numpy(ort.OrtValue.ortvalue_from_numpy(np.ones(3, dtype=np.float32)))
    array([1., 1., 1.], dtype=float32)
    """
    if value.data_type() == "tensor(bfloat16)":
        return to_numpy(ortvalue_to_torch(value))
    if value.device_name().lower() != "cpu":
        return to_numpy(ortvalue_to_torch(value))
    return value.numpy()


def to_torch(value: Any, device: torch.device | None = None) -> torch.Tensor:
    """A runtime value (OrtValue, torch tensor, numpy array, bfloat16 ones included, scalar) as a torch tensor,
    shared when possible.

    >>> to_torch(np.arange(3)), to_torch(2.0)
    (tensor([0, 1, 2]), tensor(2.))
    >>> to_torch(to_numpy(torch.tensor([1.5], dtype=torch.bfloat16)))
    tensor([1.5000], dtype=torch.bfloat16)
    """
    if isinstance(value, ort.OrtValue):
        tensor = ortvalue_to_torch(value)
    elif isinstance(value, torch.Tensor):
        tensor = value
    elif isinstance(value, np.ndarray) and value.dtype.name == "bfloat16":  # ml_dtypes: torch reads its bits
        tensor = torch.from_numpy(value.view(np.uint16)).view(torch.bfloat16)
    elif isinstance(value, np.ndarray):
        tensor = torch.as_tensor(value)
    else:
        tensor = torch.as_tensor(value)
    if device is not None and tensor.device != device:
        tensor = tensor.to(device)
    return tensor


def as_numpy(value: Any) -> np.ndarray:
    """A runtime value (OrtValue, torch tensor, numpy array, scalar) as a numpy array on the host.

    >>> as_numpy(ort.OrtValue.ortvalue_from_numpy(np.ones(2, dtype=np.float32))), as_numpy(torch.ones(2))
    (array([1., 1.], dtype=float32), array([1., 1.], dtype=float32))
    """
    return ortvalue_to_numpy(value) if isinstance(value, ort.OrtValue) else to_numpy(value)


def as_ortvalue(value: Any) -> ort.OrtValue:
    """A runtime value as an ``OrtValue``: tensors through DLPack without a copy (booleans copied to the host).

    >>> as_ortvalue(torch.tensor([1.0, 2.0])).numpy()
    array([1., 2.], dtype=float32)
    """
    if isinstance(value, ort.OrtValue):
        return value
    tensor = to_torch(value).detach()
    if tensor.dtype == torch.bool:  # DLPack's bool is not read by onnxruntime
        return ort.OrtValue.ortvalue_from_numpy(tensor.cpu().numpy())
    return ort.OrtValue.from_dlpack(tensor.contiguous())


def feed_to_ortvalue(value: Any, input_type: str, on_cuda: bool) -> ort.OrtValue:
    """A feed of a session's input whose type string is ``input_type`` as an ``OrtValue``: torch tensors through
    DLPack (moved to the host first when the session is not ``on_cuda``), numpy arrays as they are, Python
    scalars converted to the input's type.

    >>> feed_to_ortvalue(3, "tensor(float)", on_cuda=False).numpy()
    array(3., dtype=float32)
    """
    if isinstance(value, ort.OrtValue):
        return value
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu" and not on_cuda:
            value = value.cpu()  # a CPU session reads host memory only
        if value.dtype != torch.bool:  # DLPack's bool is not read by onnxruntime
            return ort.OrtValue.from_dlpack(value.contiguous())
        value = value.cpu().numpy()
    if not isinstance(value, np.ndarray):
        value = np.asarray(value, dtype=NUMPY_OF.get(input_type))
    # np.ascontiguousarray makes 0-D arrays 1-D
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value).reshape(value.shape))
