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

#: where each layer is drawn (column, row): the front on top, the pipeline from left to right, the base below all
POSITIONS = {
    "front": (1.8, 3.0),
    "investigate": (3.0, 2.15),
    "training": (0.0, 3.0),
    "capture": (0.0, 1.3),
    "translation": (1.2, 1.3),
    "optimize": (2.4, 1.3),
    "runtime": (3.6, 1.3),
    "patches": (0.0, 0.45),
    "contract": (2.4, 0.45),
    "checkpoint": (1.2, 0.45),
    "testing": (3.6, 3.0),
}
#: layers that may import every other one: their imports are said in a caption, not drawn
IMPORT_ALL = ("front", "testing")
#: the base layer, a bar under the others (every layer imports it: its counts are written in it)
BASE_Y = -0.35


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
    """The layers as boxes, the imports between them as arrows with their count; the base layer as a bar."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    counts = layer_imports(layout)
    modules = Counter(layout.layer_of(m) for m in layout.MODULES)
    fig, ax = plt.subplots(figsize=(9.5, 5.2))
    width, height = 0.95, 0.42

    def box(x, y, w, label, sub, color):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - height / 2), w, height, boxstyle="round,pad=0.02",
                                    facecolor=color, edgecolor="#345"))
        ax.text(x, y + 0.07 + 0.04 * sub.count("\n"), label, ha="center", va="center", fontsize=12, weight="bold")
        ax.text(x, y - 0.11 + 0.01 * sub.count("\n"), sub, ha="center", va="center", fontsize=8.5, color="#444")

    for layer, (x, y) in POSITIONS.items():
        color = {"front": "#fde8d8", "testing": "#fdf3d8", "contract": "#eef7e8"}.get(layer, "#e8f0fe")
        box(x, y, width, layer, f"{modules[layer]} modules", color)
    into = [f"{a} {n}" for (a, b), n in sorted(counts.items()) if b == "base"]
    half = (len(into) + 1) // 2
    box(1.8, BASE_Y, 4.6, "base", f"{modules['base']} modules, imported by every layer: {', '.join(into[:half])},\n"
        f"{', '.join(into[half:])}", "#f4f4f4")
    for (a, b), n in sorted(counts.items()):
        if a in IMPORT_ALL or b == "base":  # drawn as the captions and the base bar, not as arrows
            continue
        (x0, y0), (x1, y1) = POSITIONS[a], POSITIONS[b]
        if y0 == y1:  # side by side: from one box's edge to the other's
            step = width / 2 if x1 > x0 else -width / 2
            start, end = (x0 + step, y0), (x1 - step, y1)
        else:
            down = y1 < y0
            start = (x0, y0 - height / 2 if down else y0 + height / 2)
            end = (x1, y1 + height / 2 if down else y1 - height / 2)
        ax.annotate("", xy=end, xytext=start,
                    arrowprops=dict(arrowstyle="-|>", color="#567", lw=1 + 0.1 * min(n, 20), shrinkA=1, shrinkB=1))
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, str(n), fontsize=9, color="#a33", ha="center",
                va="center", bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none"))
    ax.text(1.8, 3.33, "the front (to_onnx, cli, bypass_export_some_errors) may import every layer", ha="center",
            fontsize=9, color="#444")
    ax.text(3.6, 2.62, "tests and benchmarks import it;\nno layer does", ha="center", va="top", fontsize=8.5,
            color="#444")
    ax.set_xlim(-0.6, 4.2)
    ax.set_ylim(-0.65, 3.45)
    ax.axis("off")
    ax.set_title("The layers of experimental.torch_interpreter: an arrow means 'imports', its number counts the "
                 "module imports", fontsize=10)
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
