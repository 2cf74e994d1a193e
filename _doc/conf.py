"""Sphinx configuration of the aten2onnx documentation.

Build: ``python -m sphinx -W --keep-going -b html _doc _doc/_build/html`` (from the repository root).
Every example of ``_doc/examples`` runs during the build; a failing example fails the build.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# the package is importable without `pip install -e .`; the examples run in this process
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(HERE, "_ext"))

import matplotlib  # noqa: E402

matplotlib.use("agg")


def _quiet_root_logger() -> None:
    """accessible-pygments (a dependency of the theme, imported when the highlighting styles load) calls
    ``logging.basicConfig(level=INFO)`` at import: every INFO record of every library the examples use
    (onnx-ir's passes, the exporter's steps) was printed during the build. Imported here first, its handler is
    taken off the root logger and the root level restored, so the build prints Sphinx's progress and warnings
    only (what the examples print still shows on their pages)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import a11y_pygments  # noqa: F401
    except ImportError:
        return
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


_quiet_root_logger()

from experimental import __version__  # noqa: E402

project = "aten2onnx"
author = "aten2onnx contributors"
copyright = "2026, " + author
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "supported_ops",
    "patch_table",
    "architecture",
]

templates_path: list[str] = []
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "examples/GALLERY_HEADER.rst"]
source_suffix = {".rst": "restructuredtext"}

html_theme = "furo"
html_title = f"aten2onnx {release}"
html_static_path = ["_static"]
# code blocks and printed errors wrap instead of being cut at the right (_static/custom.css)
html_css_files = ["custom.css"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# no "members" default: with it, Sphinx 9 documents every member even where ``:members: a, b`` lists some, and
# the public names re-exported by the package appeared twice on the API page
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = False

# the examples print what PyTorch and the exporters say; noisy warnings of third-party code would only
# hide the output that matters (they are shown by the examples where they matter)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=FutureWarning)
# dynamo warns before raising Unsupported; the examples print the exception, which says the same
warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._dynamo")

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # run every example at every build, even when its file did not change: a change in the library that
    # breaks an example must fail the build
    "run_stale_examples": True,
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 1,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    # an example that raises fails the build (the default); each example runs once per build
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
}


def _torchvision_runs() -> bool:
    """torchvision is optional: the detection example is left out of a build where it is missing or its kernels
    do not load (the registry's CUDA build beside a CPU torch)."""
    try:
        import torch
        import torchvision

        torchvision.ops.nms(torch.zeros(0, 4), torch.zeros(0), 0.5)
    except Exception:  # noqa: BLE001  (ImportError, or RuntimeError from the kernels)
        return False
    return True


if not _torchvision_runs():
    sphinx_gallery_conf["ignore_pattern"] = r"plot_8_detection\.py"
