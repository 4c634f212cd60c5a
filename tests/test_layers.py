"""The layers import each other only downward and only through their ``__init__``.

``expr <- shapes <- ops <- passes <- rewrite <- (package root, CLI)``: a module may import
its own layer's private modules, a lower layer's public package, and never a higher layer
or another layer's ``_private`` module.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "onnx_symdims"
LAYERS = ["expr", "shapes", "ops", "passes", "rewrite"]
ROOT_RANK = len(LAYERS)  # the package root and the CLI modules sit on top


def _layer_of(module: str) -> tuple[int, str | None]:
    """Rank and layer name of ``onnx_symdims[.layer[...]]`` (the root: top, ``None``)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1]), parts[1]
    return ROOT_RANK, None


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``onnx_symdims`` import in ``path`` (lazy ones too)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "onnx_symdims":
                if node.module != "onnx_symdims":  # ``from onnx_symdims import expr``
                    found.append((node.lineno, node.module))
                # ``from onnx_symdims.ops import _registry`` names a private module too
                found += [
                    (node.lineno, f"{node.module}.{a.name}")
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name)
                for a in node.names
                if a.name.split(".")[0] == "onnx_symdims"
            ]
    return found


def _violations(path: pathlib.Path) -> list[str]:
    own = ".".join(("onnx_symdims", *path.relative_to(PACKAGE).with_suffix("").parts))
    rank, layer = _layer_of(own)
    out = []
    for line, module in _imports(path):
        target_rank, target_layer = _layer_of(module)
        where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        if target_rank > rank:
            out.append(f"{where} (upward)")
        elif target_layer != layer:
            private = [p for p in module.split(".")[1:] if p.startswith("_")]
            # the root's own private modules (``onnx_symdims._api``) are the top layer's
            if private and not (target_layer is None and layer is None):
                out.append(f"{where} (private module of another layer)")
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_imports_go_down_through_public_seams(path):
    assert _violations(path) == []


def test_the_check_catches_a_private_import(tmp_path, monkeypatch):
    fake = tmp_path / "onnx_symdims"
    (fake / "ops").mkdir(parents=True)
    bad = fake / "ops" / "hook.py"
    bad.write_text(
        "from onnx_symdims.shapes._context import constant_tensor\n"
        "from onnx_symdims.passes import SymbolicShapeInferencePass\n"
        "from onnx_symdims.shapes import ShapesContext\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", fake)
    assert [v.split(" imports ")[1] for v in _violations(bad)] == [
        "onnx_symdims.shapes._context (private module of another layer)",
        "onnx_symdims.passes (upward)",
    ]
