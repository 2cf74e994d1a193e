"""The README's Python snippets run as written, one after the other in one namespace (the second reads the
first's model), in an empty working directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 2, "the README lost its examples"


def test_readme_snippets_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, code in enumerate(SNIPPETS):
        try:
            exec(compile(code, f"README.md snippet {i}", "exec"), namespace)  # noqa: S102  (the README's own code)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"README snippet {i} fails: {type(e).__name__}: {e}\n{code}")
    out = capsys.readouterr().out
    assert "(7, 2)" in out, out
    assert (tmp_path / "model.onnx").exists()
