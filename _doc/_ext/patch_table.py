"""Sphinx extension: ``.. patch-table::`` renders the patches of ``bypass_export_some_errors`` at build time."""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


class PatchTable(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from experimental.torch_interpreter.onnx_export_errors import patch_table

        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(StringList(patch_table().splitlines(), "<patch-table>"), 0, container)
        return container.children


def setup(app):
    app.add_directive("patch-table", PatchTable)
    return {"parallel_read_safe": True}
