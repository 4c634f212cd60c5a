"""Fuzzing the parser: random text and token soups give clean errors or opaque symbols.

``parse_expr`` may only raise the algebra's errors (``ExprError`` subclasses) or an
``ArithmeticError`` (overflow, division by zero, inexact exact division); ``parse_dim`` never
raises and falls back to one opaque symbol named by the text. A generous hypothesis deadline
turns a hang or an exponential blow-up into a failure.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnx_symdims.expr import DimExpr, ExprError, sym, to_onnx, to_seed
from onnx_symdims.expr._parse import parse_dim, parse_expr
from onnx_symdims.expr._seed_api import (
    parse_expression_tokens,
    rename_dynamic_expression,
    simplify_expression,
)

FUZZ_SETTINGS = settings(
    max_examples=1500,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow],
)

ALPHABET = "abcxyzNS_.0123456789+-*/%^&(),: \t?#=é" + "\u00a0"

TOKENS = [
    "a",
    "b",
    "seq",
    "s0",
    "x.y",
    "0",
    "1",
    "2",
    "7",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "+",
    "-",
    "*",
    "//",
    "/:",
    "/",
    "%",
    "^",
    "&",
    "**",
    "(",
    ")",
    ",",
    "max(",
    "Min(",
    "floor(",
    "ceiling(",
    "CeilToInt(",
    "FloorDiv(",
    "ModularIndexing(",
    "IntTrueDiv(",
    "broadcast(",
    "foo(",
    ":",
    "?",
    "::",
]

token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).flatmap(
    lambda toks: st.lists(
        st.sampled_from(["", " "]), min_size=len(toks), max_size=len(toks)
    ).map(lambda seps: "".join(t + s for t, s in zip(toks, seps)))
)
random_text = st.text(alphabet=ALPHABET, max_size=60)


def _check(text: str) -> None:
    try:
        d = parse_expr(text)
    except (ExprError, ArithmeticError):
        if text:  # the empty string is the caller's business
            assert parse_dim(text) is sym(text)
        return
    assert isinstance(d, (int, DimExpr))
    assert parse_dim(text) is d or parse_dim(text) == d
    if isinstance(d, DimExpr) and not d.is_unknown:
        # whatever was read can be printed and read back
        assert parse_expr(to_seed(d)) is d
        assert parse_expr(to_onnx(d)) is d


@FUZZ_SETTINGS
@given(random_text)
def test_random_text(text):
    _check(text)


@FUZZ_SETTINGS
@given(token_soup)
def test_token_soup(text):
    _check(text)


@FUZZ_SETTINGS
@given(st.one_of(random_text, token_soup))
def test_best_effort_string_api_never_raises_on_text(text):
    if not text:
        return
    # undefined everywhere (7/:2, a//0) or overflow: documented errors
    with contextlib.suppress(ExprError, ArithmeticError):
        simplify_expression(text)
    assert rename_dynamic_expression(text, {"a": "b"}) is not None
    assert isinstance(parse_expression_tokens(text), set)


PATHOLOGICAL = [
    "(" * 10_000 + "a" + ")" * 10_000,
    "-" * 10_000 + "a",
    "+-" * 5_000 + "a",
    "a+" * 10_000 + "a",
    "a*" * 10_000 + "a",
    "a**" * 1_000 + "2",
    "max(" * 1_000 + "a" + ")" * 1_000,
    "(a+b)**32",
    "(a+b+c+d)**32",
    "*".join(f"(a{i}+b{i})" for i in range(40)),
    "*".join(f"(a{i}+b{i})" for i in range(40)) + "//7",
    "+".join(f"x{i}//{i + 2}" for i in range(90)),
    "2**62*2",
    "9223372036854775807*9223372036854775807",
    "a" * 100_000,
    "1" * 100_000,
    "a/" * 500 + "b",
    "floor(" + "a/" * 90 + "b)",
]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_pathological_inputs_terminate_cleanly(text):
    _check(text)
