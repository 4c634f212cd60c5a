"""The modules of ``onnx_symdims.expr`` import each other without a cycle (issue 15).

The algebra (``_atoms`` ... ``_substitute`` and the ``_core`` shim) never imports, even
lazily, its printer, its parser or the package; the parser's rooms import one another only
downward: ``_lex <- _parse_tree <- _parse_lower, _parse_eval <- _parse``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

EXPR = pathlib.Path(__file__).resolve().parents[2] / "onnx_symdims" / "expr"
MODULES = sorted(p.stem for p in EXPR.glob("*.py"))
ALGEBRA = ["_atoms", "_dimexpr", "_ring", "_extremum", "_divisions", "_sums", "_substitute"]
PARSER_ORDER = ["_lex", "_parse_tree", "_parse_lower", "_parse_eval", "_parse"]
SPELLINGS = {"__init__", "_print", *PARSER_ORDER}


def _expr_imports(module: str) -> set[str]:
    """The ``expr`` modules that ``module`` imports, at top level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((EXPR / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] != ["onnx_symdims", "expr"]:
                continue
            if len(parts) == 2:  # ``from onnx_symdims.expr import _ring`` or a public name
                found.add("__init__")
                found |= {a.name for a in node.names if a.name in MODULES}
            else:
                found.add(parts[2])
        elif isinstance(node, ast.Import):
            found |= {
                a.name.split(".")[2]
                for a in node.names
                if a.name.startswith("onnx_symdims.expr.")
            }
    found.discard(module)
    return found


GRAPH = {m: _expr_imports(m) for m in MODULES}


def _reach(module: str) -> set[str]:
    seen: set[str] = set()
    stack = [module]
    while stack:
        for target in GRAPH[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_every_listed_module_exists():
    assert set(ALGEBRA + PARSER_ORDER + ["_core", "_print"]) <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_no_import_cycle(module):
    assert module not in _reach(module)


@pytest.mark.parametrize("module", [*ALGEBRA, "_core"])
def test_algebra_does_not_know_its_spellings(module):
    assert not _reach(module) & SPELLINGS


@pytest.mark.parametrize("index", range(len(PARSER_ORDER)))
def test_parser_rooms_import_downward(index):
    later = set(PARSER_ORDER[index + 1 :])
    if PARSER_ORDER[index] in ("_parse_lower", "_parse_eval"):  # siblings
        later -= {"_parse_lower", "_parse_eval"}
    assert not GRAPH[PARSER_ORDER[index]] & later
    assert not GRAPH[PARSER_ORDER[index]] & {"__init__", "_print"}


def test_tree_nodes_behave_like_frozen_dataclasses():
    import dataclasses

    from onnx_symdims.expr._parse_tree import BinOp, Call, Constant, Name

    tree = BinOp("+", Constant(1), Name(id="x"))
    assert repr(tree) == "BinOp(op='+', left=Constant(value=1), right=Name(id='x'))"
    assert tree == BinOp(op="+", left=Constant(1), right=Name("x"))
    assert hash(tree) == hash(BinOp("+", Constant(1), Name("x")))
    assert tree != BinOp("-", Constant(1), Name("x")) and Constant(1) != Name("1")
    assert len({Call("max", (Constant(1),)), Call("max", (Constant(1),))}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.op = "-"
    with pytest.raises(TypeError):
        Constant()
    with pytest.raises(TypeError):
        Constant(1, value=2)
