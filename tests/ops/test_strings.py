"""``StringSplit`` of constant text, against onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims.passes import SymbolicShapeInferencePass
from tests.ops._ort_oracle import (
    Inferred,
    check_against_ort,
    check_dim,
    check_runs,
    infer,
    model_text,
    run_ort,
)


def _split_model(strings: list[str], attrs: str = "", shape: str | None = None) -> str:
    shape = shape or str(len(strings))
    values = ", ".join(json.dumps(s) for s in strings)
    return model_text(
        20,
        "float[N] q",
        f"y, z = StringSplit{f'<{attrs}>' if attrs else ''}(x)",
        "string y, int64 z",
        constants=f"string[{shape}] x = {{{values}}}",
    )


# (strings, attributes, expected y)
SPLIT_CASES = [
    (["abc.com", "def.net"], 'delimiter="."', [2, 2]),
    (["o-n-n--x-", "o-n----nx"], 'delimiter="-"', [2, 6]),
    (["hello world", "def.net", "o n n x", "the quick brown fox"], "maxsplit=2", [4, 3]),
    (["a.b.c", "x"], 'delimiter=".", maxsplit=0', [2, 1]),
    (["a.b.c", "x"], 'delimiter=".", maxsplit=-1', [2, 3]),
    (["  hello   world !", " hello world   ! "], "", [2, 3]),
    (["  hello   world !", " hello world   ! "], 'delimiter=""', [2, 3]),
    (["aaa", "abcabc"], 'delimiter="aa"', [2, 2]),
    # An empty string is no substring for onnxruntime, one for the reference: the
    # other elements decide.
    (["", "a.b"], 'delimiter="."', [2, 2]),
]


@pytest.mark.parametrize(("strings", "attrs", "expected"), SPLIT_CASES, ids=str)
def test_string_split_of_constant_text(strings, attrs, expected):
    inferred = check_against_ort(_split_model(strings, attrs), [{"N": 1}])
    assert inferred.shape("y") == expected
    assert inferred.shape("z") == expected[:1]


def test_string_split_keeps_the_input_dims():
    text = _split_model(["a b", "c", "d e f", "g"], "", shape="2, 2")
    inferred = check_against_ort(text, [{"N": 1}])
    assert inferred.shape("y") == [2, 2, 3]
    assert inferred.shape("z") == [2, 2]


# Texts the runtimes count differently (or that only one element could decide).
UNDECIDED_CASES = [
    (["", ""], "."),  # onnxruntime: 0 substrings; the reference: 1
    (["a\tb\nc", "x"], ""),  # onnxruntime splits at spaces only
    (["a\x1cb", "x"], ""),
    (["caf\u00e9 au\u00a0lait"], ""),
]


@pytest.mark.parametrize(("strings", "delimiter"), UNDECIDED_CASES, ids=str)
def test_string_split_where_runtimes_differ_is_fresh(strings, delimiter):
    # The text syntax has no escapes: the constant is set on the parsed model.
    model = ir.from_onnx_text(_split_model(["placeholder"] * len(strings), 'delimiter=""'))
    encoded = np.array([s.encode() for s in strings], dtype=object)
    model.graph.initializers["x"].const_value = ir.StringTensor(encoded, name="x")
    node = next(iter(model.graph))
    node.attributes["delimiter"] = ir.AttrString("delimiter", delimiter)
    for value in model.graph.outputs:
        value.shape = None
    inferred = Inferred(model, SymbolicShapeInferencePass()(model).context)
    count = inferred.dims("y")[-1]
    assert inferred.context.is_generated(count.name)
    actual = run_ort(inferred, {"N": 1})
    assert actual["y"].shape[:-1] == (len(strings),)
    bound: dict[str, int] = {}
    check_dim(inferred.context, count, actual["y"].shape[-1], bound, "y[-1]")


def test_string_split_of_runtime_text():
    text = model_text(20, "string[B, 3] x", "y, z = StringSplit(x)", "string y, int64 z")
    inferred = infer(text)
    *kept, count = inferred.shape("y")
    assert kept == ["B", 3] and inferred.context.is_generated(count)
    assert inferred.shape("z") == ["B", 3]
    words = np.array([["a b", "c", ""], ["d e f", "g", "h"]], dtype=object)
    check_runs(inferred, [{"x": words}])
