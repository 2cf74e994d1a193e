"""The architecture's boundaries, checked on the source (see ``_doc/design.rst``, "Layout and rules")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from experimental.torch_interpreter.registry import default_registry

PACKAGE = Path(__file__).resolve().parent.parent / "experimental" / "torch_interpreter"
OPS = PACKAGE / "ops"
FAMILIES = sorted(p for p in OPS.glob("*.py") if p.name != "__init__.py")
#: what a converter family may import inside the package
ALLOWED = {"._common", "..context", "..registry", "..dtypes", "..errors", "..python_op", "..python_op.attributes"}


def _relative_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append("." * node.level + (node.module or ""))
    return found


@pytest.mark.parametrize("path", FAMILIES, ids=lambda p: p.stem)
def test_family_imports_only_the_shared_layer(path):
    bad = [m for m in _relative_imports(path) if m not in ALLOWED]
    assert not bad, f"ops/{path.name} imports {bad}; a family imports only {sorted(ALLOWED)}"


def test_shared_layer_imports_no_family():
    for path in (OPS / "_common").glob("*.py"):
        allowed = {".kernels", ".shapes", ".spatial", ".tensors", ".types", "...context", "...dtypes", "...dims"}
        bad = [m for m in _relative_imports(path) if m not in allowed]
        assert not bad, f"ops/_common/{path.name} imports {bad}"


def test_no_private_torch_op_names_in_converters():
    for path in [*FAMILIES, *(OPS / "_common").glob("*.py")]:
        assert "_opname" not in path.read_text(), f"{path.name} reads torch's private _opname: use ctx.key / ctx.op_name"


@pytest.mark.parametrize("name", ["capture.py", "capture_kernels.py", "runtime.py", "runtime_python_op.py"])
def test_capture_and_runtime_do_not_load_converters(name):
    imports = _relative_imports(PACKAGE / name)
    assert not [m for m in imports if m == ".ops" or m.startswith(".ops.")], f"{name} imports converters: {imports}"
    if name.startswith("runtime"):
        assert ".python_op.capture" not in imports, f"{name} imports the export hook: {imports}"


def _expected_names(key: str) -> list[str]:
    namespace, _, rest = key.partition("::")
    op = rest.partition(".")[0]
    return [f"{namespace}_{op}", re.sub(r"(\D)\d+d(?=_|$)", r"\1", f"{namespace}_{op}")]


def test_converter_names_follow_the_rule():
    """``<namespace>_<op>`` of one of its keys, optionally followed by ``_<variant>``; numbered ops
    (conv1d/2d/3d) may share the name without the number (``aten_conv``)."""
    keys_of: dict = {}
    for key in default_registry.supported():
        keys_of.setdefault(default_registry.get(key), []).append(key)
    wrong = []
    for fn, keys in keys_of.items():
        name = fn.__name__
        stems = {s for key in keys for s in _expected_names(key)}
        if not any(name == s or name.startswith(s + "_") for s in stems):
            wrong.append(f"{fn.__module__}.{name} for {keys[:3]}")
    assert not wrong, "converters not named after their op:\n" + "\n".join(sorted(wrong))
