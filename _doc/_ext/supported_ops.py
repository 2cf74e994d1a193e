"""Sphinx extension: ``.. supported-ops::`` renders ``default_registry.supported()`` at build time.

One table per converter module (``ops/activation.py``..., ``ops/torchvision/nms.py`` for a library's ops), one row per registry key with the
converter's name and the first paragraph of its docstring (the aten schema and a note). Nothing is written to
disk. The registry is read when the extension is set up, before sphinx-gallery runs the examples: converters
that an example registers (``demo::scaled_tanh``) are not the project's and do not appear.
"""

from __future__ import annotations

import collections
import inspect
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _rows():
    from experimental.torch_interpreter import default_registry

    groups: dict[str, list[tuple[str, str, str]]] = collections.defaultdict(list)
    for key in default_registry.supported():
        fn = default_registry.get(key)
        module = fn.__module__.split(".ops.", 1)[-1].replace(".", "/")  # torchvision/nms for ops/torchvision/nms.py
        groups[module].append((key, fn.__name__, (inspect.getdoc(fn) or "").strip()))
    return groups


_NAME = re.compile(r"[\w.]+\(")
_RETURN = re.compile(r"\s*->\s*(\([^)]*\)|[\w.]+(\([^)]*\))?(\[\])?)")


def _split_schema(text: str) -> tuple[str, str]:
    """``("add.Tensor(Tensor self, ...) -> Tensor", rest)`` when ``text`` starts with an aten schema."""
    match = _NAME.match(text)
    if match is None:
        return "", text
    depth, end = 0, None
    for i in range(match.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            end = i + 1
            break
    ret = _RETURN.match(text, end) if end else None
    if ret is None:
        return "", text
    return text[: ret.end()], text[ret.end():].lstrip(" :;")


def _escape(text: str) -> str:
    """reST text whose ````literals```` are kept and whose other markup characters are escaped."""
    parts = text.split("``")
    if len(parts) % 2 == 0:  # unbalanced: escape everything
        parts = [text.replace("``", "")]
    for i in range(0, len(parts), 2):
        for char in "\\*|`_[]":
            parts[i] = parts[i].replace(char, "\\" + char)
    return "``".join(parts)


def _describe(doc: str) -> str:
    """The first paragraph of a converter's docstring as reST: the schema as a literal, then the note."""
    text = " ".join(doc.split("\n\n")[0].split())
    schema, rest = _split_schema(text)
    if schema and rest:
        return f"``{schema}``: {_escape(rest)}"
    return f"``{schema}``" if schema else _escape(rest)


class SupportedOps(SphinxDirective):
    """Renders the converters of the default registry, grouped by module."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        groups = _SNAPSHOT if _SNAPSHOT is not None else _rows()
        total = sum(len(v) for v in groups.values())
        namespaces = collections.Counter(key.split("::")[0] for rows in groups.values() for key, _, _ in rows)
        lines = [
            f"**{total} registry keys** in {len(groups)} modules: "
            + ", ".join(f"{n} ``{ns}::``" for ns, n in sorted(namespaces.items(), key=lambda kv: -kv[1]))
            + ".",
            "",
        ]
        for module in sorted(groups):
            rows = groups[module]
            title = f"ops/{module}.py ({len(rows)})"
            lines += [
                title,
                "-" * len(title),  # a section: listed by the page's table of contents
                "",
                ".. list-table::",
                "   :header-rows: 1",
                "   :widths: 30 20 50",
                "",
                "   * - registry key",
                "     - converter",
                "     - schema",
            ]
            for key, name, schema in rows:
                lines += [f"   * - ``{key}``", f"     - ``{name}``", f"     - {_describe(schema)}"]
            lines.append("")
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="<supported-ops>"), container)
        return container.children


#: the registry as it was before the examples ran
_SNAPSHOT: dict[str, list[tuple[str, str, str]]] | None = None


def setup(app):
    global _SNAPSHOT
    _SNAPSHOT = _rows()
    app.add_directive("supported-ops", SupportedOps)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
