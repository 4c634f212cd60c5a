"""The algebra's modules and its public structure queries (issue 15).

The modules import one another in one direction only (no cycle: the core never imports its
printers or parser, it reaches them through ``_atoms.late``); code outside the algebra reads
an expression's structure through queries on ``DimExpr`` (``symbol_factors``,
``has_division``, ``function_terms``, ``function``/``args``, ``without_constant``) instead
of atom kinds. Each query is checked against evaluation or the public constructors.
"""

from __future__ import annotations

import ast
import math
import pathlib

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from onnx_symdims import expr
from onnx_symdims.expr import (
    BroadcastError,
    DimExpr,
    InexactDivisionError,
    _atoms,
    add,
    broadcast,
    dmax,
    dmin,
    evaluate,
    exact_div,
    floordiv,
    mod,
    mul,
    parse_expr,
    sym,
)
from tests.expr.test_properties import (
    PROPERTY_SETTINGS,
    SYMBOLS,
    _canonical,
    assignments,
    trees,
)

EXPR_DIR = pathlib.Path(expr.__file__).parent
#: The algebra proper: below the printers, the parser, the scope and the string API.
CORE = (
    "_atoms",
    "_dimexpr",
    "_floor_bounds",
    "_ring",
    "_extremum",
    "_polygcd",
    "_divisions",
    "_sums",
    "_substitute",
)
UNDEFINED = (ZeroDivisionError, InexactDivisionError, BroadcastError)


def _expr_imports(module: str) -> set[str]:
    """The modules of ``onnx_symdims.expr`` that ``module`` imports (lazy imports too)."""
    tree = ast.parse((EXPR_DIR / f"{module}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "onnx_symdims.expr":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("onnx_symdims.expr."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("onnx_symdims.expr."):
                    found.add(alias.name.split(".")[2])
    return found


MODULES = sorted(p.stem for p in EXPR_DIR.glob("_*.py") if p.stem != "__init__")


def test_the_modules_import_each_other_without_a_cycle():
    graph = {m: _expr_imports(m) for m in MODULES}
    done: list[str] = []
    while len(done) < len(graph):
        ready = [m for m in graph if m not in done and graph[m] <= set(done)]
        assert ready, f"an import cycle among {sorted(set(graph) - set(done))}"
        done.extend(sorted(ready))


@pytest.mark.parametrize("module", CORE)
def test_the_core_knows_neither_its_printers_nor_its_parser(module):
    imported = _expr_imports(module)
    assert imported <= set(CORE), imported - set(CORE)
    assert CORE.index(module) > max((CORE.index(m) for m in imported), default=-1)


def test_no_module_of_the_package_uses_the_old_core():
    users = [m for m in MODULES if "_core" in _expr_imports(m)]
    assert users == []


def test_every_late_operation_is_wired():
    missing = [name for name in _atoms._Late.__slots__ if not hasattr(_atoms.late, name)]
    assert missing == []


def test_the_old_core_still_offers_every_name():
    from onnx_symdims.expr import _core

    for name in (
        "Atom",
        "SYM",
        "FLOOR",
        "MOD",
        "EXACT",
        "MAX",
        "MIN",
        "_from_terms",
        "_atom_expr",
        "_finish",
        "_range",
        "add",
        "substitute",
    ):
        assert hasattr(_core, name), name
    assert _core.add is expr.add and _core.DimExpr is DimExpr


# --- the structure queries -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "factors"),
    [
        ("b", ("b",)),
        ("2*b*s", ("b", "s")),
        ("3*b*b", ("b", "b")),
        ("-2*b", None),  # c > 0 only
        ("b+1", None),
        ("b*s+s", None),
        ("b*(s//2)", None),  # a function term is not a symbol
        ("max(b,s)", None),
    ],
)
def test_symbol_factors_table(text, factors):
    d = parse_expr(text)
    assert d.symbol_factors() == (None if factors is None else tuple(sorted(factors)))


@PROPERTY_SETTINGS
@given(
    st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=4),
    st.integers(-3, 4),
    st.integers(-2, 2),
    assignments,
)
def test_symbol_factors_vanish_exactly_where_a_symbol_does(names, coefficient, const, envs):
    d = add(mul(coefficient, math.prod((sym(n) for n in names), start=1)), const)
    assume(isinstance(d, DimExpr))
    factors = d.symbol_factors()
    if coefficient <= 0 or const:
        assert factors is None
        return
    assert factors == tuple(sorted(names))
    for env in envs:
        value = evaluate(d, env)
        assert value == coefficient * math.prod(env[s] for s in factors)
        assert (value == 0) == any(env[s] == 0 for s in factors)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("b*s+1", False),
        ("max(b,s)-1", False),
        ("b//2", True),
        ("b%3+s", True),
        ("max(b,s/:2)", True),  # nested in an argument
        ("broadcast(b,min(s,(b+1)//4))", True),
    ],
)
def test_has_division_table(text, expected):
    assert parse_expr(text).has_division() is expected


@PROPERTY_SETTINGS
@given(trees, assignments)
def test_without_a_division_an_expression_is_defined_everywhere(tree, envs):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        return
    assume(isinstance(d, DimExpr) and not d.has_division())
    for env in envs:
        try:
            evaluate(d, env)
        except BroadcastError:
            continue  # broadcast(a, b) with a != b, neither 1: not a division
        # ZeroDivisionError / InexactDivisionError would fail the test here.


_CONSTRUCTORS = {
    "floordiv": floordiv,
    "mod": mod,
    "exact_div": exact_div,
    "max": dmax,
    "min": dmin,
    "broadcast": broadcast,
}


@PROPERTY_SETTINGS
@given(trees)
def test_function_terms_rebuild_from_function_and_args(tree):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        return
    assume(isinstance(d, DimExpr))
    terms = d.function_terms()
    assert len(set(terms)) == len(terms)
    named = {a.key for mono, _ in d.terms for a in mono if a.kind != _atoms.SYM}
    assert {t.atom.key for t in terms} == named
    for t in terms:
        assert t.function in _CONSTRUCTORS or t.function == "call"
        if t.function in _CONSTRUCTORS:
            assert _CONSTRUCTORS[t.function](*t.args) is t
        assert t.function_terms() == (t,)


def test_function_and_args_of_non_function_terms():
    b = parse_expr("b")
    assert b.function is None and b.args == ()
    assert parse_expr("2*max(b,s)").function is None  # a coefficient: not one term
    m = parse_expr("max(b,s//2)")
    assert m.function == "max" and set(m.args) == {parse_expr("b"), parse_expr("s//2")}
    assert parse_expr("b+max(b,1)").function_terms() == (parse_expr("max(b,1)"),)


@PROPERTY_SETTINGS
@given(trees)
def test_without_constant_keeps_the_terms(tree):
    try:
        d = _canonical(tree)
    except UNDEFINED:
        return
    assume(isinstance(d, DimExpr))
    base = d.without_constant()
    assert base.const == 0 and base.terms == d.terms
    assert add(base, d.const) is d
