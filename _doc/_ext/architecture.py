"""Sphinx extension: ``.. architecture::`` draws the package's layers and the imports between them, read from the
source at build time with the rules of ``_unittests/test_layout.py`` (the one place the layers are declared), and
lists each layer's rule and modules. The picture cannot drift from the code: the layout test checks the same graph.
"""

from __future__ import annotations

import importlib.util
import os
from collections import Counter

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

HERE = os.path.dirname(os.path.abspath(__file__))
LAYOUT_TEST = os.path.join(HERE, "..", "..", "_unittests", "test_layout.py")

#: where each layer is drawn (column, row), the pipeline from left to right, the front on top
POSITIONS = {
    "front": (1.5, 3),
    "investigate": (2.6, 2),
    "capture": (0, 1),
    "translation": (1.2, 1),
    "optimize": (2.4, 1),
    "runtime": (3.6, 1),
    "patches": (0, 0),
    "base": (1.8, 0),
}


def _layout():
    spec = importlib.util.spec_from_file_location("_layout_rules", LAYOUT_TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def layer_imports(layout) -> Counter:
    """``{(from_layer, to_layer): number of module imports}`` between different layers."""
    counts: Counter = Counter()
    for module, targets in layout.GRAPH.items():
        for target in targets:
            a, b = layout.layer_of(module), layout.layer_of(target)
            if a != b and a is not None and b is not None:  # a module without a layer fails the layout test
                counts[a, b] += 1
    return counts


def draw(layout, path: str) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    counts = layer_imports(layout)
    modules = Counter(layout.layer_of(m) for m in layout.MODULES)
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width, height = 0.95, 0.42
    for layer, (x, y) in POSITIONS.items():
        ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02",
                                    facecolor="#e8f0fe" if layer != "front" else "#fde8d8", edgecolor="#345"))
        ax.text(x, y + 0.06, layer, ha="center", va="center", fontsize=12, weight="bold")
        ax.text(x, y - 0.11, f"{modules[layer]} modules", ha="center", va="center", fontsize=9, color="#444")
    for (a, b), n in sorted(counts.items()):
        if a == "front":  # the front imports every layer: drawn once, as a legend, not as 7 arrows
            continue
        (x0, y0), (x1, y1) = POSITIONS[a], POSITIONS[b]
        ax.annotate("", xy=(x1, y1 + (height / 2 if y1 < y0 else 0)), xytext=(x0, y0 - (height / 2 if y1 < y0 else 0)),
                    arrowprops=dict(arrowstyle="->", color="#567", lw=0.8 + 0.08 * min(n, 30),
                                    shrinkA=2, shrinkB=2, connectionstyle="arc3,rad=0.08"))
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, str(n), fontsize=8, color="#a33", ha="center",
                bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none"))
    ax.text(1.5, 3.33, "the front (to_onnx, cli, bypass_export_some_errors) imports every layer", ha="center",
            fontsize=9, color="#444")
    ax.set_xlim(-0.6, 4.2)
    ax.set_ylim(-0.4, 3.5)
    ax.axis("off")
    ax.set_title("Layers of experimental.torch_interpreter: an arrow is 'imports', its number the module imports",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def rules_table(layout) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 12 44 44", "", "   * - layer", "     - rule",
             "     - modules"]
    for layer, rule in layout.RULES.items():
        members = sorted(m for m in layout.MODULES if layout.layer_of(m) == layer and m != "__init__")
        folders = sorted({m.split(".")[0] + "/" for m in members if "." in m or m in layout.FOLDERS})
        roots = [f"``{m}.py``" for m in members if "." not in m and m not in layout.FOLDERS]
        shown = ", ".join([f"``{f}``" for f in folders] + roots)
        lines += [f"   * - **{layer}**", f"     - {rule}", f"     - {shown}"]
    return lines


class Architecture(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        layout = _layout()
        out_dir = os.path.join(self.env.srcdir, "_static")
        os.makedirs(out_dir, exist_ok=True)
        draw(layout, os.path.join(out_dir, "architecture.png"))
        lines = [".. image:: _static/architecture.png", "   :alt: the layers of the package and the imports between them",
                 "   :width: 100%", "", *rules_table(layout)]
        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(StringList(lines, "<architecture>"), 0, container)
        return container.children


def setup(app):
    app.add_directive("architecture", Architecture)
    return {"parallel_read_safe": True}
