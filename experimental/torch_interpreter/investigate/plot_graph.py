"""Draws an ONNX graph with matplotlib, without graphviz: :func:`plot_graph`.

The layout is layered: every node sits one layer after the last of the nodes it reads, from top to bottom or
from left to right, whichever fits the page better. An edge that skips layers gets a lane of its own through
the layers it crosses, so that it does not run through the boxes in between; the order of the boxes in each
layer follows the mean position of their neighbours, which keeps crossings few.
"""

from __future__ import annotations

import logging
import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from ..errors import ArgumentError

#: the colors of the boxes: graph inputs, graph outputs, nodes, nodes holding subgraphs, nodes of another domain
COLORS = {
    "input": "#c7e9c0",
    "output": "#fdd0a2",
    "node": "#deebf7",
    "subgraph": "#e5d8f5",
    "custom": "#fff2b3",
}
#: the font size (points) the layout is measured at; the drawing scales it to fit
FONT = 9.0
#: the font size of the notes under the drawing (points)
NOTE_FONT = 7.0
#: the ``gid`` of the text holding the notes under the drawing (truncated, shrunk, subgraphs)
NOTES_GID = "plot_graph:notes"
#: below this font size (points) the drawing says it was shrunk
SMALL_FONT = 5.5
#: how much larger than FONT the text may be drawn when the space allows
MAX_SCALE = 1.1
#: the largest figure (inches) :func:`plot_graph` creates when no ``ax`` is given
MAX_FIGSIZE = (10.0, 18.0)
#: the height of a line of text in a box, at FONT (points)
LINE = 1.3 * FONT
#: characters kept of a line of a box
MAX_CHARS = 30
#: the lines of constants and weights written inside the box of the node that reads them
MAX_INLINE = 3

_DIRECTIONS = ("auto", "TB", "LR")


@dataclass
class _Item:
    """A box (graph input, node, graph output) or a bend point of a long edge (``kind == "dummy"``)."""

    kind: str
    lines: list[str] = field(default_factory=list)
    gid: str = ""
    layer: int = 0
    width: float = 0.0  # points, at FONT
    height: float = 0.0
    cross: float = 0.0  # position across the layers
    along: float = 0.0  # position along the layers
    up: list[int] = field(default_factory=list)  # connected items of the previous layer
    down: list[int] = field(default_factory=list)  # of the next one


def _graph_of(model: Any) -> ir.Graph:
    """The ``onnx_ir.Graph`` to draw, from any of the accepted forms."""
    inner = getattr(model, "model", None)  # an OnnxProgram holds its onnx_ir.Model
    if isinstance(inner, ir.Model):
        model = inner
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise FileNotFoundError(f"plot_graph: no ONNX file at {path!r}")
        model = onnx.load(path, load_external_data=False)  # the weights are not drawn, only their shapes
    if isinstance(model, onnx.ModelProto):
        return ir.from_proto(model).graph
    if isinstance(model, onnx.GraphProto):
        # a subgraph alone: the values of the enclosing graph it reads become inputs (drawn as "outer scope"),
        # which onnx_ir's reader would log as a warning for each
        reader = logging.getLogger("onnx_ir.serde")
        level = reader.level
        reader.setLevel(logging.ERROR)
        try:
            return ir.from_proto(model)
        finally:
            reader.setLevel(level)
    if isinstance(model, ir.Model):
        return model.graph
    if isinstance(model, ir.Graph):
        return model
    hint = ""
    if hasattr(model, "forward") or type(model).__module__.split(".")[0] == "torch":
        hint = ": convert it first, plot_graph(to_onnx(model, args))"
    raise ArgumentError(
        "plot_graph draws an ONNX model: an onnx.ModelProto, an onnx_ir.Model, a graph (onnx.GraphProto, "
        f"onnx_ir.Graph), an OnnxProgram or the path of an .onnx file, not {type(model).__module__}."
        f"{type(model).__qualname__}{hint}"
    )


def _short(text: str, limit: int = MAX_CHARS) -> str:
    text = text.replace("$", r"\$")  # no mathtext
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _dims(shape: ir.Shape | None) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join(str(d) if isinstance(d, int) else str(d.value or "?") for d in shape) + "]"


def _type_text(value: ir.Value) -> str:
    if value.dtype is None and value.shape is None:
        return "type unknown"
    dtype = value.dtype.name if value.dtype is not None else "?"
    return f"{dtype} {_dims(value.shape)}"


def _number(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and abs(v) >= 2**62:  # the "to the end" of Slice, the sentinels of torch
        return "INT64_MAX" if v > 0 else "INT64_MIN"
    return str(v)


def _values_text(array: np.ndarray) -> str:
    items = ", ".join(_number(v) for v in array.ravel().tolist())
    return items if array.ndim == 0 else f"[{items}]"


def _pack(texts: list[str], width: int = 24) -> list[str]:
    """Short texts share a line; at most :data:`MAX_INLINE` lines."""
    lines: list[str] = []
    for text in texts:
        if lines and len(lines[-1]) + 2 + len(text) <= width:
            lines[-1] += ", " + text
        else:
            lines.append(text)
    if len(lines) > MAX_INLINE:
        lines = lines[: MAX_INLINE - 1] + [f"+{len(lines) - MAX_INLINE + 1} more"]
    return lines


def _tensor_text(name: str, tensor: Any, dtype: ir.DataType | None, shape: Any) -> str:
    """A weight or a constant as one line: its values when it has at most 4, else its name and shape."""
    size = int(np.prod([d for d in shape])) if shape is not None and all(isinstance(d, int) for d in shape) else -1
    if tensor is not None and 0 <= size <= 4:
        try:
            return _values_text(np.asarray(tensor.numpy()))
        except Exception:  # noqa: BLE001  (a tensor stored outside the file, a type numpy lacks)
            pass
    if len(name) > MAX_CHARS - 8:  # model.layers.0.self_attn.q_proj.weight: the end tells most
        name = ".".join(name.split(".")[-2:])
    return f"{name or 'const'} {_dims(shape)}"


def _constant_text(node: ir.Node) -> str:
    for attr in node.attributes.values():
        value = attr.value
        if attr.type == ir.AttributeType.TENSOR:
            return _tensor_text("", value, value.dtype, value.shape)
        if isinstance(value, (int, float, str)):
            return _number(value)
        if isinstance(value, (list, tuple)) and len(value) <= 4:
            return "[" + ", ".join(_number(v) for v in value) + "]"
    return "const"


def _subgraphs(node: ir.Node) -> list[tuple[str, ir.Graph]]:
    found = []
    for name, attr in node.attributes.items():
        if attr.type == ir.AttributeType.GRAPH:
            found.append((name, attr.value))
        elif attr.type == ir.AttributeType.GRAPHS:
            found += [(f"{name}[{i}]", g) for i, g in enumerate(attr.value)]
    return found


def _captured(node: ir.Node, graph: ir.Graph) -> Iterator[ir.Value]:
    """The values of ``graph`` the subgraphs of ``node`` read (implicit inputs)."""
    seen: set[ir.Value] = set()
    for _, sub in _subgraphs(node):
        for inner in ir.traversal.RecursiveGraphIterator(sub):
            for value in inner.inputs:
                if value is not None and value not in seen and _defined_in(value) is graph:
                    seen.add(value)
                    yield value


def _defined_in(value: ir.Value) -> ir.Graph | None:
    producer = value.producer()
    return producer.graph if producer is not None else value.graph


def _isotonic(values: list[float]) -> list[float]:
    """The non-decreasing sequence closest to ``values`` (least squares, pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, c2 = blocks.pop()
            m1, c1 = blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    out: list[float] = []
    for mean, count in blocks:
        out += [mean] * int(count)
    return out


class _Layout:
    """Boxes, layers and edges of one graph, measured at :data:`FONT`."""

    def __init__(self, graph: ir.Graph, max_nodes: int):
        self.items: list[_Item] = []
        self.edges: list[tuple[int, int, bool]] = []  # (from, to, dashed: a value read by a subgraph)
        self.notes: list[str] = []
        self._sized = False
        producer: dict[ir.Value, int] = {}
        initializers = set(graph.initializers.values())
        inline: dict[ir.Value, str] = {
            v: _tensor_text(name, v.const_value, v.dtype, v.shape) for name, v in graph.initializers.items()
        }
        outputs = set(graph.outputs)
        nodes = []
        for node in graph:
            if (node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.outputs) == 1
                    and node.outputs[0] not in outputs):
                inline[node.outputs[0]] = _constant_text(node)
            else:
                nodes.append(node)
        if len(nodes) > max_nodes:
            self.notes.append(f"the first {max_nodes} of {len(nodes)} nodes are drawn (max_nodes={max_nodes})")
            nodes = nodes[:max_nodes]

        for value in graph.inputs:
            if value in initializers:
                continue
            producer[value] = self._add("input", [_short(value.name or "?"), _type_text(value)], f"input:{value.name}")
        with_subgraphs: list[str] = []
        for k, node in enumerate(nodes):
            op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            lines = [_short(op)]
            constants = []
            parents: list[tuple[int, bool]] = []
            for value in node.inputs:
                if value is None:
                    continue
                if value in producer:
                    parents.append((producer[value], False))
                elif value in inline:
                    constants.append(_short(inline[value]))
                elif _defined_in(value) is not graph:  # drawing a subgraph: a value of the enclosing graph
                    producer[value] = self._add("input", [_short(value.name or "?"), "outer scope"],
                                                f"input:{value.name}")
                    parents.append((producer[value], False))
            lines += _pack(constants)
            subgraphs = _subgraphs(node)
            kind = "node" if node.domain in ("", "ai.onnx") else "custom"
            if subgraphs:
                kind = "subgraph"
                with_subgraphs.append(node.op_type)
                lines += [_short(f"{name}: {len(sub)} nodes") for name, sub in subgraphs[:MAX_INLINE]]
                parents += [(producer[v], True) for v in _captured(node, graph) if v in producer]
            index = self._add(kind, lines, f"node:{node.name or k}")
            for parent, dashed in dict.fromkeys(parents):
                self.edges.append((parent, index, dashed))
            for value in node.outputs:
                producer[value] = index
        if with_subgraphs:
            ops = ", ".join(sorted(set(with_subgraphs)))
            self.notes.append(
                f"{ops}: {len(with_subgraphs)} node(s) with subgraphs, each drawn as one box (dashed: the values its "
                "subgraphs read); plot_graph(node.attributes[name].value) draws a subgraph"
            )
        missing = 0
        for value in graph.outputs:
            if value not in producer:
                missing += 1
                continue
            index = self._add("output", [_short(value.name or "?"), _type_text(value)], f"output:{value.name}")
            self.edges.append((producer[value], index, False))
        if missing:
            self.notes.append(f"{missing} output(s) computed by nodes not drawn")
        self._layers()

    def _size_boxes(self) -> None:
        from matplotlib.font_manager import FontProperties
        from matplotlib.textpath import text_to_path

        fonts = {True: FontProperties(weight="bold", size=FONT), False: FontProperties(size=FONT)}

        def width(text: str, is_bold: bool) -> float:
            return text_to_path.get_text_width_height_descent(text, fonts[is_bold], ismath=False)[0]

        for item in self.items:
            if item.kind == "dummy":
                continue
            bold_first = item.kind not in ("input", "output")
            widest = max(width(t, k == 0 and bold_first) for k, t in enumerate(item.lines))
            item.width = max(3 * FONT, widest + 1.2 * FONT)
            item.height = len(item.lines) * LINE + 0.7 * FONT
        self._sized = True

    def _add(self, kind: str, lines: list[str], gid: str) -> int:
        self.items.append(_Item(kind, lines, gid))
        return len(self.items) - 1

    def _layers(self) -> None:
        items = self.items
        parents: list[list[int]] = [[] for _ in items]
        children: list[list[int]] = [[] for _ in items]
        for a, b, _ in self.edges:
            parents[b].append(a)
            children[a].append(b)
        for i, item in enumerate(items):  # items come in topological order
            item.layer = 1 + max((items[p].layer for p in parents[i]), default=-1)
        for i in reversed(range(len(items))):  # a node reading no other node sits just before its first reader
            if items[i].kind != "input" and not parents[i] and children[i]:
                items[i].layer = min(items[c].layer for c in children[i]) - 1
        # long edges: one chain of bend points per source, shared by its readers
        self.routes: list[tuple[list[int], bool]] = []
        chains: dict[tuple[int, bool], dict[int, int]] = {}
        for a, b, dashed in self.edges:
            path, previous = [a], a
            chain = chains.setdefault((a, dashed), {})
            for layer in range(items[a].layer + 1, items[b].layer):
                if layer not in chain:
                    chain[layer] = len(items)
                    items.append(_Item("dummy", layer=layer))
                    self._link(previous, chain[layer])
                previous = chain[layer]
                path.append(previous)
            self._link(previous, b)
            self.routes.append((path + [b], dashed))
        self.layers: list[list[int]] = [[] for _ in range(1 + max((it.layer for it in items), default=0))]
        for i, item in enumerate(items):
            self.layers[item.layer].append(i)
        for _ in range(4):  # barycenters, down then up
            for order, key in ((range(1, len(self.layers)), "up"), (range(len(self.layers) - 2, -1, -1), "down")):
                for layer in order:
                    self._sort(self.layers[layer], key)

    def _link(self, a: int, b: int) -> None:
        if b not in self.items[a].down:
            self.items[a].down.append(b)
            self.items[b].up.append(a)

    def _sort(self, layer: list[int], key: str) -> None:
        position = {i: k for row in self.layers for k, i in enumerate(row)}
        current = {i: k for k, i in enumerate(layer)}

        def barycenter(i: int) -> float:
            near = getattr(self.items[i], key)
            return float(np.mean([position[n] for n in near])) if near else float(current[i])

        layer.sort(key=barycenter)

    def measure(self, direction: str) -> tuple[float, float]:
        """Sizes every box at :data:`FONT`, places the items for ``direction`` and returns the size of the
        drawing (points)."""
        if not self._sized:
            self._size_boxes()
        vertical = direction == "TB"
        gap_cross, gap_along = (1.2 * FONT, 2.2 * FONT) if vertical else (0.9 * FONT, 3.2 * FONT)
        dummy_gap = 0.6 * FONT

        def cross_size(i: int) -> float:
            item = self.items[i]
            return item.width if vertical else item.height

        def separation(a: int, b: int) -> float:
            dummy = self.items[a].kind == "dummy" or self.items[b].kind == "dummy"
            return (cross_size(a) + cross_size(b)) / 2 + (dummy_gap if dummy else gap_cross)

        for layer in self.layers:  # start: packed and centered
            offsets = np.cumsum([0.0] + [separation(a, b) for a, b in zip(layer, layer[1:])])
            for i, x in zip(layer, offsets - offsets[-1] / 2 if len(offsets) else offsets):
                self.items[i].cross = float(x)
        sweeps = [(range(1, len(self.layers)), "up"), (range(len(self.layers) - 2, -1, -1), "down")]
        for _ in range(6):
            for order, key in sweeps:
                for layer_index in order:
                    layer = self.layers[layer_index]
                    wanted = []
                    for i in layer:
                        near = getattr(self.items[i], key)
                        wanted.append(float(np.mean([self.items[n].cross for n in near])) if near
                                      else self.items[i].cross)
                    offsets = np.cumsum([0.0] + [separation(a, b) for a, b in zip(layer, layer[1:])])
                    placed = _isotonic([w - o for w, o in zip(wanted, offsets)])
                    for i, p, o in zip(layer, placed, offsets):
                        self.items[i].cross = float(p + o)
        along = 0.0
        for layer in self.layers:
            thickness = max((self.items[i].height if vertical else self.items[i].width for i in layer), default=0)
            for i in layer:
                self.items[i].along = along + thickness / 2
            along += thickness + gap_along
        boxes = [it for it in self.items if it.kind != "dummy"] or self.items
        low = min(it.cross - _cross_size(it, vertical) / 2 for it in boxes)
        high = max(it.cross + _cross_size(it, vertical) / 2 for it in boxes)
        span_along = along - gap_along
        span_cross = high - low
        return (span_cross, span_along) if vertical else (span_along, span_cross)

    def xy(self, item: _Item, direction: str) -> tuple[float, float]:
        return (item.cross, -item.along) if direction == "TB" else (item.along, -item.cross)


def _cross_size(item: _Item, vertical: bool) -> float:
    return item.width if vertical else item.height


def _boundary(center: tuple[float, float], size: tuple[float, float], toward: tuple[float, float]):
    """Where the segment from the center of a box toward a point leaves the box."""
    dx, dy = toward[0] - center[0], toward[1] - center[1]
    if dx == 0 and dy == 0:
        return center
    t = min(size[0] / 2 / abs(dx) if dx else np.inf, size[1] / 2 / abs(dy) if dy else np.inf)
    return (center[0] + t * dx, center[1] + t * dy)


def plot_graph(
    model: Any,
    ax: Any = None,
    *,
    title: str | None = None,
    direction: str = "auto",
    max_nodes: int = 100,
) -> Any:
    """Draws an ONNX graph with matplotlib: one box per node with its operator type, the graph inputs (green)
    and outputs (orange) with their types and shapes, the edges as arrows; returns the matplotlib ``Axes``.

    Constants and weights are not boxes: a ``Constant`` node or an initializer is written inside the box of the
    node reading it (its values when it has at most four, otherwise its name and shape). A node holding
    subgraphs (``If``, ``Loop``, ``Scan``) is one box (purple) listing its subgraphs, with dashed edges from the
    values they read; pass a subgraph (``node.attributes["then_branch"].value``) to draw it. Nodes of another
    domain than ONNX's are yellow.

    The layout is layered, top to bottom (``direction="TB"``) or left to right (``"LR"``); ``"auto"`` takes the
    one drawn larger in the space available. Only the first ``max_nodes`` nodes are drawn, and a graph too large
    for the space is shrunk; a note under the drawing says so (the text of gid ``"plot_graph:notes"`` in
    ``ax.texts``).

    :param model: an ``onnx.ModelProto``, an ``onnx_ir.Model``, an ``onnx.GraphProto`` or ``onnx_ir.Graph``,
        an :class:`~experimental.torch_interpreter.OnnxProgram`, or the path of an ``.onnx`` file (its external
        weights are not loaded)
    :param ax: the matplotlib ``Axes`` to draw in; a figure sized for the graph when None
    :param title: the title of the axes
    :param direction: ``"auto"``, ``"TB"`` (top to bottom) or ``"LR"`` (left to right)
    :param max_nodes: the number of nodes drawn at most (constants written inside their readers not counted)
    :raises ArgumentError: ``model`` is not an ONNX model, or ``direction`` is unknown

    >>> import os
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import torch
    >>> from experimental.torch_interpreter import plot_graph, to_onnx
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> onx = to_onnx(model, (torch.randn(3, 4),))
    >>> ax = plot_graph(onx, title="an MLP")
    >>> [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]  # one box per node
    ['Gemm', 'Relu', 'Gemm']
    >>> ax.figure.savefig(os.devnull, format="png")  # or plt.show() in a notebook
    """
    if direction not in _DIRECTIONS:
        raise ArgumentError(f"plot_graph: direction={direction!r} is not one of {', '.join(map(repr, _DIRECTIONS))}")
    if not isinstance(max_nodes, int) or max_nodes < 1:
        raise ArgumentError(f"plot_graph: max_nodes must be a positive integer, not {max_nodes!r}")
    graph = _graph_of(model)
    try:
        import matplotlib.pyplot as plt
        from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
        from matplotlib.path import Path
    except ImportError as e:  # pragma: no cover
        raise ImportError("plot_graph needs matplotlib: pip install matplotlib") from e

    layout = _Layout(graph, max_nodes)
    sizes = {d: layout.measure(d) for d in ("TB", "LR")}
    margin = 0.8 * FONT  # points, around the drawing

    def scale(size: tuple[float, float], room: tuple[float, float]) -> float:
        return min(room[0] / (size[0] + 2 * margin), room[1] / (size[1] + 2 * margin))

    if ax is None:
        room = (MAX_FIGSIZE[0] * 72, MAX_FIGSIZE[1] * 72)
    else:
        box = ax.get_position()
        fig_w, fig_h = ax.figure.get_size_inches()
        room = (box.width * fig_w * 72, box.height * fig_h * 72)
    candidates = ("TB", "LR") if direction == "auto" else (direction,)

    def preference(d: str) -> tuple[float, float]:
        s = min(MAX_SCALE, scale(sizes[d], room))
        w, h = sizes[d]
        return (round(s, 2), -abs(np.log(max(w, 1) / max(h, 1) / (room[0] / room[1]))))

    chosen = max(candidates, key=preference)
    size = layout.measure(chosen)

    def wrapped_notes(width: float) -> str:
        chars = max(30, int((width - 2 * NOTE_FONT) / (0.62 * NOTE_FONT)))
        return "\n".join(textwrap.fill(n, chars, break_long_words=False, break_on_hyphens=False)
                         for n in layout.notes)

    def add_shrink_note(s: float) -> None:
        if FONT * s < SMALL_FONT:
            layout.notes.append(
                f"shrunk to fit: {FONT * s:.1f} pt text; a larger ax or a smaller max_nodes reads better"
            )

    def notes_height(width: float) -> float:
        if not layout.notes:
            return 0.0
        return (wrapped_notes(width).count("\n") + 1) * NOTE_FONT * 1.3 + 0.6 * NOTE_FONT

    if ax is None:
        s = min(1.0, scale(size, room))
        add_shrink_note(s)
        width_in = max(3.0, (size[0] + 2 * margin) * s / 72)
        height_in = (max(72.0, (size[1] + 2 * margin) * s) + notes_height(width_in * 72)) / 72
        top_in = 0.35 if title else 0.0
        fig = plt.figure(figsize=(width_in, height_in + top_in))
        ax = fig.add_axes((0, 0, 1, height_in / (height_in + top_in)))
        room = (width_in * 72, height_in * 72)
    else:
        add_shrink_note(min(MAX_SCALE, scale(size, room)))
    # the notes are written at the bottom of the axes, under the drawing
    graph_room = (room[0], max(room[1] - notes_height(room[0]), 1.0))
    s = min(MAX_SCALE, scale(size, graph_room))
    font = FONT * s

    colors = COLORS
    line = LINE
    for item in layout.items:
        if item.kind == "dummy":
            continue
        x, y = layout.xy(item, chosen)
        rounding = item.height / 2 if item.kind in ("input", "output") else 0.25 * FONT
        patch = FancyBboxPatch(
            (x - item.width / 2, y - item.height / 2), item.width, item.height,
            boxstyle=f"round,pad=0,rounding_size={rounding}", facecolor=colors[item.kind], edgecolor="#6b6b6b",
            linewidth=0.8, zorder=2,
        )
        patch.set_gid(item.gid)
        ax.add_patch(patch)
        top = y + item.height / 2 - 0.35 * FONT
        for k, text in enumerate(item.lines):
            is_bold = k == 0 and item.kind not in ("input", "output")
            ax.text(x, top - (k + 0.5) * line, text, ha="center", va="center", fontsize=font,
                    fontweight="bold" if is_bold else "normal", color="#1a1a1a" if k == 0 else "#444444",
                    zorder=3, clip_on=True)
    for path, dashed in layout.routes:
        points = [layout.xy(layout.items[i], chosen) for i in path]
        first, last = layout.items[path[0]], layout.items[path[-1]]
        points[0] = _boundary(points[0], (first.width, first.height), points[1])
        points[-1] = _boundary(points[-1], (last.width, last.height), points[-2])
        arrow = FancyArrowPatch(
            path=Path(points), arrowstyle="-|>", mutation_scale=7 * s, linewidth=0.8 * max(s, 0.5),
            color="#7a7a7a", linestyle="--" if dashed else "-", zorder=1,
        )
        ax.add_patch(arrow)

    xs = [layout.xy(it, chosen) for it in layout.items if it.kind != "dummy"]
    boxes = [it for it in layout.items if it.kind != "dummy"]
    if boxes:
        left = min(x - it.width / 2 for (x, _), it in zip(xs, boxes))
        right = max(x + it.width / 2 for (x, _), it in zip(xs, boxes))
        bottom = min(y - it.height / 2 for (_, y), it in zip(xs, boxes))
        top = max(y + it.height / 2 for (_, y), it in zip(xs, boxes))
    else:
        left = right = bottom = top = 0.0
    cx, cy = (left + right) / 2, (bottom + top) / 2
    ceiling = cy + graph_room[1] / s / 2
    ax.set_xlim(cx - room[0] / s / 2, cx + room[0] / s / 2)
    ax.set_ylim(ceiling - room[1] / s, ceiling)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    if not boxes:
        ax.text(cx, cy, "empty graph", ha="center", va="center", fontsize=FONT)
    if title:
        ax.set_title(title, fontsize=10)
    if layout.notes:
        ax.text(0.5, 0.0, wrapped_notes(room[0]), transform=ax.transAxes, ha="center", va="bottom",
                fontsize=NOTE_FONT, color="#555555", gid=NOTES_GID)
    return ax
