"""The supported torch range and the feature detection of ``torch_versions.py``, on the installed torch."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from experimental.torch_interpreter import UnsupportedTorchError, UntestedTorchWarning, to_onnx
from experimental.torch_interpreter import torch_versions as tv
from experimental.torch_interpreter.python_op.capture import capture_autograd_functions

ROOT = Path(__file__).resolve().parent.parent


def test_installed_torch_is_in_the_range():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tv.check_torch_version() is None, torch.__version__


@pytest.mark.parametrize("version", ["2.11.0", "2.12.0+cu126", "2.13.0+cpu", "2.14.1", "2.14.9", "2.11.0a0+git1"])
def test_versions_in_the_range(version):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tv.check_torch_version(version) is None


@pytest.mark.parametrize("version", ["2.10.0", "2.10.1+cu128", "1.13.1", "2.9.0"])
def test_older_torch_refused_with_the_range(version):
    with pytest.raises(UnsupportedTorchError) as info:
        tv.check_torch_version(version)
    assert isinstance(info.value, ImportError)
    message = str(info.value)
    assert f"torch {version} is installed" in message
    assert "torch>=2.11,<2.15" in message and "2.14.1" in message
    assert 'pip install "torch>=2.11,<2.15"' in message


@pytest.mark.parametrize("version", ["2.15.0", "2.16.0.dev20261101+cpu", "3.0.0"])
def test_newer_torch_warned_with_the_range(version):
    with pytest.warns(UntestedTorchWarning, match=re.escape(f"torch {version} is newer")) as record:
        message = tv.check_torch_version(version)
    assert message == str(record[0].message)
    assert "torch>=2.11,<2.15" in message


def test_unreadable_version():
    with pytest.raises(ValueError, match="not a torch version"):
        tv.release("nightly")


def test_pyproject_states_the_same_range():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"{tv.SUPPORTED}"' in text
    readme = (ROOT / "README.md").read_text()
    assert tv.SUPPORTED in readme
    # the install command pins a release of the range (the one the whole suite runs on)
    pinned = re.search(r'pip install torch==([0-9.]+) -e "\.\[dev\]"', readme)
    assert pinned and tv.check_torch_version(pinned.group(1)) is None


def test_original_apply_runs_torch_apply():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale=2.0):
            return x * scale

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0, None

    x = torch.ones(3, requires_grad=True)
    y = tv.original_apply(Double, x)
    assert torch.equal(y, torch.full((3,), 2.0)) and y.grad_fn is not None
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    assert torch.equal(tv.original_apply(Double, x, 3.0), Double.apply(x, 3.0))


def test_function_apply_restored_after_capture():
    class AddOne(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x + 1

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Model(torch.nn.Module):
        def forward(self, x):
            return AddOne.apply(x) * 2

    before = torch.autograd.Function.__dict__["apply"]
    with capture_autograd_functions():
        assert torch.autograd.Function.__dict__["apply"] is not before
    assert torch.autograd.Function.__dict__["apply"] is before
    onx = to_onnx(Model(), (torch.randn(2, 3),), autograd_functions="python_op")
    assert torch.autograd.Function.__dict__["apply"] is before
    assert "PythonOp" in [n.op_type for n in onx.graph.node]
    assert torch.equal(AddOne.apply(torch.zeros(2)), torch.ones(2))


def test_uses_setup_context():
    class WithSetup(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    class WithoutSetup(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    assert tv.uses_setup_context(WithSetup) and not tv.uses_setup_context(WithoutSetup)


def test_dynamo_allowed_ids_accept_a_class():
    class Marked(torch.autograd.Function):
        pass

    ids = tv.dynamo_allowed_callable_ids()
    ids.add(id(Marked))
    try:
        assert id(Marked) in ids
    finally:
        ids.remove(id(Marked))
    assert id(Marked) not in ids


def test_import_refuses_an_older_torch():
    """The package root checks the version before importing anything: a fake old torch gets the message."""
    code = (
        "import torch; torch.__version__ = '2.10.0'\n"
        "try:\n"
        "    import experimental.torch_interpreter\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.startswith("UnsupportedTorchError aten2onnx supports torch>=2.11,<2.15"), out.stdout + out.stderr
