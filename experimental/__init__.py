"""aten2onnx: PyTorch to ONNX through torch.export, see :mod:`experimental.torch_interpreter`."""

__version__ = "0.1.0"
