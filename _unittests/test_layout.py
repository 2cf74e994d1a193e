"""The architecture's boundaries, checked on the source (see ``_doc/design.rst``, "Layout and rules").

The package is cut into layers that follow the pipeline (capture -> translation -> optimize, the runtime apart,
investigation and the front on top). :data:`LAYERS` says which layer each module belongs to, :data:`MAY_IMPORT`
which layers each one may import; the import graph (imports inside functions count, ``if TYPE_CHECKING:`` ones
do not, importing ``a.b.c`` also imports the package ``a.b``) must follow it and hold no cycle.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experimental.torch_interpreter.translation.registry import default_registry

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "experimental" / "torch_interpreter"
PKG = "experimental.torch_interpreter"
OPS = PACKAGE / "ops"
FAMILIES = sorted(p for p in OPS.glob("*.py") if p.name != "__init__.py")
#: the folders of ops/ named after a library, holding the converters of that library's own ops (``torch.ops.<library>``)
LIBRARY_FOLDERS = sorted(p for p in OPS.iterdir() if p.is_dir() and not p.name.startswith("_"))
LIBRARY_MODULES = sorted(p for folder in LIBRARY_FOLDERS for p in folder.glob("*.py"))

#: the layers and the rule of each, as the design page states them
RULES = {
    "base": "errors, logging, dtypes, metadata keys, unique names, opsets, onnxruntime's kernel tables, saving, "
            "provenance, torch versions: "
            "import nothing else of the package",
    "patches": "the patch registry, read by bypass_export_some_errors and the capture strategies: base only",
    "capture": "torch.export and what is retried when it refuses a model: base and patches",
    "checkpoint": "weights read where they lie (safetensors headers, a model's meta tensors, lazy conversions): "
                  "base only",
    "contract": "what a PythonOp node means (python_op's table, attributes, call encoding), written by the "
                "translation and read by the runtime: base only",
    "translation": "FX graph -> ONNX (translation/: the interpreter, its one entry point, the builder, the registry; "
                   "ops/: the converters; the PythonOp export side): base, contract, and optimize for the rewrites "
                   "every translation ends with (its \"translation\" stage)",
    "optimize": "the rewrite pipeline after translation: base only",
    "runtime": "InferenceSession and PythonOp at run time: base and contract",
    "investigate": "comparison engine, repro, report: base, translation, runtime; find_discrepancies exports too",
    "training": "the torch.compile backend (AOTAutograd's graphs translated and run in onnxruntime): base, contract, "
                "translation, optimize, runtime, investigate (verify=True compares a graph node by node)",
    "front": "to_onnx, the command line, bypass_export_some_errors, the package root, genai/ (onnxruntime-genai "
             "packages, made with to_onnx): anything",
    "testing": "what the tests and the benchmarks share (model builders, comparisons, random programs, the OpInfo "
               "sweep): anything; nothing else imports it",
}

#: the modules of python_op/ both the translation and the runtime read
CONTRACT = {"python_op", "python_op.table", "python_op.attributes", "python_op.encoding", "python_op.contexts"}
#: the root modules of each layer (the folders are layers of their own, except python_op/ and ops/)
ROOT_MODULES = {
    "base": {"torch_versions", "errors", "logs", "dtypes", "metadata", "names", "opsets", "ort_kernels", "saving",
             "provenance", "providers"},
    "front": {"__init__", "__main__", "convert", "cli", "onnx_export_errors", "torch_onnx_arguments", "program"},
}
FOLDERS = {
    "patches": "patches",
    "capture": "capture",
    "checkpoint": "checkpoint",
    "translation": "translation",
    "python_op": "translation",
    "ops": "translation",
    "optimize": "optimize",
    "runtime": "runtime",
    "investigate": "investigate",
    "training": "training",
    "genai": "front",
    "testing": "testing",
}

MAY_IMPORT = {
    "base": {"base"},
    "patches": {"base", "patches"},
    "capture": {"base", "patches", "capture"},
    "checkpoint": {"base", "checkpoint"},
    "contract": {"base", "contract"},
    "translation": {"base", "contract", "optimize", "translation"},
    "optimize": {"base", "optimize"},
    "runtime": {"base", "contract", "runtime"},
    "investigate": {"base", "contract", "translation", "runtime", "investigate"},
    "training": {"base", "contract", "translation", "optimize", "runtime", "investigate", "training"},
    "front": set(RULES) - {"testing"},
    "testing": set(RULES),
}
#: single modules allowed one more import: find_discrepancies exports the model it compares
EXCEPTIONS = {("investigate.discrepancies", "convert")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    if module in CONTRACT:
        return "contract"
    head = module.split(".")[0]
    if "." in module or (PACKAGE / head).is_dir():
        return FOLDERS.get(head)
    return next((layer for layer, names in ROOT_MODULES.items() if module in names), None)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    return skipped


def _absolute(module: str, path: Path, level: int, name: str | None) -> str:
    base = module.split(".") if module != "__init__" else []
    if path.name != "__init__.py":
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str) -> set[str]:
    """The package modules ``module`` imports (relative to the package: ``capture.loop``), parent packages
    included, TYPE_CHECKING imports excluded."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skipped = _type_checking_nodes(tree)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = _absolute(module, path, node.level, node.module)
            elif (node.module or "").startswith(PKG + ".") or node.module == PKG:
                target = (node.module or "")[len(PKG) + 1:]
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                targets.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            targets.update(a.name[len(PKG) + 1:] for a in node.names if a.name.startswith(PKG + "."))
    found = set()
    for target in targets:
        if target not in MODULES:
            continue
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            ancestor = ".".join(parts[:i])
            if ancestor in MODULES and ancestor != module and not module.startswith(ancestor + "."):
                found.add(ancestor)
    return found


GRAPH = {m: imports_of(m) for m in MODULES if m != "__init__"}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_the_package_root():
    """``from .. import metadata`` runs the package's ``__init__``, which imports the front and every phase: a
    module of a folder names the module it reads (``from ..metadata import read``)."""
    bad = []
    for module, path in MODULES.items():
        if "." not in module:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level and not node.module:
                if _absolute(module, path, node.level, None) == "":
                    bad.append(f"{module}: from {'.' * node.level} import {', '.join(a.name for a in node.names)}")
    assert not bad, "\n".join(bad)


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if layer_of(m) is None]
    assert not missing, f"modules without a layer {missing}: add them to ROOT_MODULES or FOLDERS in test_layout.py"


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_follow_its_rule(layer):
    bad = []
    for module in sorted(m for m in GRAPH if layer_of(m) == layer):
        for target in sorted(GRAPH[module]):
            if layer_of(target) not in MAY_IMPORT[layer] and (module, target) not in EXCEPTIONS:
                bad.append(f"{module} ({layer}) imports {target} ({layer_of(target)})")
    assert not bad, f"{layer}: {RULES[layer]}\n" + "\n".join(bad)


LIBRARIES = ("onnxscript", "onnx_ir", "onnxruntime")


def _private_uses(tree: ast.AST) -> list[str]:
    """Private modules or names of :data:`LIBRARIES` imported or read (``rewriter._RULES``)."""
    found, names = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    names.add(alias.asname or alias.name.split(".")[0])
                    if any(p.startswith("_") for p in alias.name.split(".")):
                        found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            for alias in node.names:
                names.add(alias.asname or alias.name)
                if any(p.startswith("_") for p in [*node.module.split("."), alias.name]):
                    found.append(f"from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in names:
                found.append(ast.unparse(node))
    return found


def test_no_private_module_of_other_libraries():
    """onnxscript, onnx_ir and onnxruntime are used through their public API only."""
    bad = [f"{m}: {use}" for m, p in MODULES.items() for use in _private_uses(ast.parse(p.read_text()))]
    assert not bad, "\n".join(bad)


#: the most modules the package root holds besides ``__init__`` and ``__main__``: the front and the base, every
#: other layer in its folder
ROOT_LIMIT = 16


def test_root_holds_the_front_and_the_base_only():
    """The package root is the front (``to_onnx``, the command line) and the base layer; the translation, like
    every other phase, lives in its folder."""
    root = sorted(m for m in MODULES if "." not in m and not (PACKAGE / m).is_dir() and not m.startswith("__"))
    layers = {m: layer_of(m) for m in root}
    assert set(layers.values()) <= {"base", "front"}, layers
    assert len(root) <= ROOT_LIMIT, f"{len(root)} modules in the package root (at most {ROOT_LIMIT}): {root}"


def test_one_entry_point_builds_a_model():
    """A graph becomes a model in one place, ``Interpreter.for_model(...)`` ... ``.to_model()`` (inputs typed once,
    outputs, the providers in the metadata, the "translation" stage's rewrites), used by ``to_onnx`` and the
    ``torch.compile`` backend; subgraphs go through ``Interpreter.translate_subgraph`` / ``child()``: no other
    module builds a ``GraphBuilder`` or runs the "translation" stage."""
    bad = []
    for module, path in MODULES.items():
        if module in ("translation.interpreter", "translation.builder", "optimize.pipeline"):
            continue
        source = path.read_text()
        for pattern in (r"\bGraphBuilder\(", r"run_stage\([^)]*[\"']translation[\"']"):
            if re.search(pattern, source):
                bad.append(f"{module}: {pattern}")
    assert not bad, "\n".join(bad)


def test_design_page_lists_every_folder():
    page = (ROOT / "_doc" / "design.rst").read_text()
    missing = [f"{name}/" for name in FOLDERS if f"``{name}/" not in page]
    missing += [f"{m}.py" for names in ROOT_MODULES.values() for m in names
                if not m.startswith("__") and f"{m}.py" not in page]
    assert not missing, f"the design page's layout table does not mention {missing}"


# -- ops/: families on one shared layer -----------------------------------------------------------------------

#: what a converter family may import inside the package
ALLOWED = {"._common", "..translation.context", "..translation.registry", "..dtypes", "..errors", "..python_op",
           "..python_op.attributes", "..ort_kernels"}


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


@pytest.mark.parametrize("path", LIBRARY_MODULES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_library_folder_imports_the_shared_layer_and_its_helpers(path):
    """``ops/<library>/`` (``ops/torchvision/``): one module per family of the library's ops and the helpers they
    share (``_<name>.py`` in the folder); a module imports what a family imports, one level up, and those helpers,
    never a family of ``ops/`` and never the library itself, even inside a function: a registry key is a string, and
    the converters load whether or not the library (or its kernels) does."""
    helpers = {f".{p.stem}" for p in path.parent.glob("_*.py") if p.name != "__init__.py"}
    allowed = {"." + m for m in ALLOWED} | helpers | ({"."} if path.name == "__init__.py" else set())
    bad = [m for m in _relative_imports(path) if m not in allowed]
    library = path.parent.name
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        bad += [name for name in names if name.split(".")[0] == library]
    assert not bad, f"ops/{library}/{path.name} imports {bad}; it imports only {sorted(allowed)}"


def test_library_folders_load_only_with_their_library():
    """``ops/__init__.py`` imports a library's folder inside ``if importlib.util.find_spec("<library>") is not None``
    only, and the folder registers keys of the library's namespace only (``torchvision::nms.default``)."""
    tree = ast.parse((OPS / "__init__.py").read_text())
    guarded, imported = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module:
            imported.update(a.name for a in node.names)
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.level == 1 and not inner.module:
                    guarded.update(a.name for a in inner.names if f"find_spec({a.name!r})" in test)
    libraries = {p.name for p in LIBRARY_FOLDERS}
    assert imported & libraries == guarded & libraries == libraries, (imported, guarded)
    for key in default_registry.supported():
        module = default_registry.get(key).__module__
        library = module.removeprefix(f"{PKG}.ops.").split(".")[0]
        if library in libraries:
            assert key.startswith(f"{library}::"), f"{module} registers {key}, outside the {library}:: namespace"


def _fresh_registry(hidden: list[str]) -> tuple[list[str], list[str]]:
    """The keys a new process registers with the modules ``hidden``, and the nodes of a Linear it exports (the
    registry of this process holds what other tests registered: it is no reference)."""
    code = (
        "import json, sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in hidden)
        + "import torch\n"
        "from experimental.torch_interpreter import default_registry, to_onnx\n"
        "onx = to_onnx(torch.nn.Linear(3, 2), (torch.randn(4, 3),))\n"
        "print(json.dumps([default_registry.supported(), [n.op_type for n in onx.graph.node]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    keys, nodes = json.loads(done.stdout.strip().splitlines()[-1])
    return keys, nodes


def test_library_ops_without_the_library():
    """With the library hidden, the package imports, registers every key but the library's, and exports as before."""
    libraries = [p.name for p in LIBRARY_FOLDERS]
    keys, nodes = _fresh_registry(libraries)
    every, _ = _fresh_registry([])
    assert keys == [k for k in every if k.split("::")[0] not in libraries]
    assert nodes == ["Gemm"]


def test_shared_layer_imports_no_family():
    shared = {f".{p.stem}" for p in (OPS / "_common").glob("*.py") if p.stem != "__init__"}
    for path in (OPS / "_common").glob("*.py"):
        allowed = shared | {"...translation.context", "...dtypes", "...translation.dims", "...providers",
                            "...ort_kernels"}
        bad = [m for m in _relative_imports(path) if m not in allowed]
        assert not bad, f"ops/_common/{path.name} imports {bad}"


def _families_of(name: str, families: set[str]) -> list[str] | None:
    """``name`` cut into family names (``convolution_pooling`` -> convolution, pooling), None if it cannot be."""
    if not name:
        return []
    for family in sorted(families, key=len, reverse=True):
        if name == family or name.startswith(family + "_"):
            rest = _families_of(name[len(family) + 1:], families)
            if rest is not None:
                return [family, *rest]
    return None


def test_converter_test_files_are_named_after_their_families():
    """``_unittests/test_ops_<families>.py``: one family of ``ops/`` or several joined by ``_``; a file of
    gradients ends with ``_backward`` and tests ``<family>_backward.py`` of each family it names."""
    families = {p.stem for p in FAMILIES} | {p.name for p in LIBRARY_FOLDERS}  # a library's ops: one file
    bad = []
    for path in sorted((ROOT / "_unittests").glob("test_ops_*.py")):
        name = path.stem[len("test_ops_"):]
        if name.endswith("_backward"):  # the families with a gradients module
            found = _families_of(name.removesuffix("_backward"),
                                 {f.removesuffix("_backward") for f in families if f.endswith("_backward")})
        else:
            found = _families_of(name, families)
        if not found:
            bad.append(path.name)
    assert not bad, f"test files not named after families of ops/: {bad}"


def test_no_private_torch_op_names_in_converters():
    for path in [*FAMILIES, *LIBRARY_MODULES, *(OPS / "_common").glob("*.py")]:
        assert "_opname" not in path.read_text(), f"{path.name} reads torch's private _opname: use ctx.key / ctx.op_name"


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
