"""Edge cases of the com.microsoft ops of contrib_misc, checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from onnx_symdims import expr
from onnx_symdims.passes import SymbolicShapeInferencePass
from tests.ops._ort_oracle import Inferred, check_runs, infer, model_text

TOKENIZE = 'y = com.microsoft.Tokenizer<mark={mark}, mincharnum=1, pad_value="#", {split}>(x)'
SPLITS = ['separators=[" "]', 'tokenexp="[a-z]"']


def _model(inputs: str, body: str) -> str:
    return model_text(
        17, inputs, body, "string y", ir_version=10, domains={"com.microsoft": 1}
    )


def _strings(shape: tuple[int, ...]) -> np.ndarray:
    words = ["a b", "", "c d e", "f"]
    flat = [words[k % len(words)] for k in range(int(np.prod(shape)))]
    return np.array(flat, dtype=object).reshape(shape)


@pytest.mark.parametrize("mark", [0, 1])
@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize(
    ("x", "run_shape", "expected"),
    [
        ("[0]", (0,), [0]),
        ("[3, 0]", (3, 0), [3, 0]),
        ("[0, 5]", (0, 5), [0, 0]),
        ("[N, 0]", (2, 0), ["N", 0]),
    ],
)
def test_tokenizer_of_an_empty_input_keeps_its_rank(mark, split, x, run_shape, expected):
    # onnxruntime 1.32 gives [0] for [0], and [N, 0] for an empty [N, C] (a non-empty
    # X gains the token axis): the engine wrote [N, 0, tokens] (rank 3) before.
    inferred = infer(_model(f"string{x} x", TOKENIZE.format(mark=mark, split=split)))
    assert inferred.shape("y") == expected
    check_runs(inferred, [{"x": _strings(run_shape)}])


@pytest.mark.parametrize("split", SPLITS)
def test_tokenizer_rank_unknown_where_x_may_be_empty(split):
    inferred = infer(_model("string[N, C] x", TOKENIZE.format(mark=0, split=split)))
    assert inferred.dims("y") is None
    check_runs(inferred, [{"x": _strings((2, 3))}, {"x": _strings((0, 3))}])


def test_tokenizer_of_a_provably_nonempty_input_gains_the_token_axis():
    model = ir.from_onnx_text(
        _model("string[2, C] x", TOKENIZE.format(mark=1, split=SPLITS[0]))
    )
    for value in model.graph.outputs:
        value.shape = None
    result = SymbolicShapeInferencePass(symbol_ranges={"C": (1, None)})(model)
    inferred = Inferred(model, result.context)
    dims = inferred.dims("y")
    assert dims[:2] == (2, expr.sym("C")) and inferred.context.is_generated(dims[2].name)
    check_runs(inferred, [{"x": _strings((2, 1))}, {"x": _strings((2, 4))}])
