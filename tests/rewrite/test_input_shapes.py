"""``optimize(input_shapes=...)``: input shapes given by input name (onnxsim's overwrite).

An int for a declared symbol fixes the symbol everywhere; an int or a name for an
anonymous dim is written on that dim; a contradiction is an error before any change.
Outputs are compared in onnxruntime on the given shapes.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import onnx_symdims
from onnx_symdims.rewrite import InputShapeError, OptimizePass
from tests.rewrite._rewrite_testing import model, ops, proto, run, session


def _dims(value) -> list:
    return [d if isinstance(d, int) else d.value for d in value.shape.dims]


#: The anonymous batch read as data: a constant once the dim is given.
ANONYMOUS = """
    g (float[?, 4] x, float[?, 4] w) => (float[?, 4] y) {
        s = Shape<start = 0, end = 1>(x)
        n = Cast<to = 1>(s)
        a = Mul(x, n)
        y = Add(a, w)
    }
"""


def test_a_given_size_on_an_anonymous_dim_folds_the_shape_read_from_it():
    free = model(ANONYMOUS)
    OptimizePass()(free)
    assert "Shape" in ops(free)
    given = model(ANONYMOUS)
    before = proto(given)
    OptimizePass(input_shapes={"x": [1, 4]})(given)
    assert "Shape" not in ops(given)
    assert _dims(given.graph.inputs[0]) == [1, 4]
    assert given.graph.inputs[1].shape.dims[0].value is None  # w's dim: not given
    feeds = {"x": np.full((1, 4), 3, np.float32), "w": np.arange(4, dtype=np.float32)[None]}
    np.testing.assert_array_equal(run(given, feeds)[0], run(before, feeds)[0])
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument):
        session(given).run(None, {"x": np.ones((2, 4), np.float32), "w": feeds["w"]})


def test_a_name_on_anonymous_dims_ties_them_and_names_the_outputs():
    m = model(ANONYMOUS)
    before = proto(m)
    OptimizePass(input_shapes={"x": ["n", None], "w": ["n", "?"]})(m)
    assert _dims(m.graph.inputs[0]) == ["n", 4]
    assert _dims(m.graph.inputs[1]) == ["n", 4]
    assert _dims(m.graph.outputs[0]) == ["n", 4]
    for n in (0, 1, 3):
        feeds = {"x": np.ones((n, 4), np.float32), "w": np.ones((n, 4), np.float32)}
        np.testing.assert_array_equal(run(m, feeds)[0], run(before, feeds)[0])


def test_a_size_for_a_declared_symbol_fixes_it_in_every_input_and_output():
    body = """
        g (float[batch, seq] x, int64[batch, seq] ids) => (float[batch, seq] y) {
            c = Cast<to = 1>(ids)
            y = Add(x, c)
        }
    """
    m = model(body)
    result = OptimizePass(input_shapes={"ids": [1, None]})(m)
    assert result.modified
    assert [_dims(v) for v in (*m.graph.inputs, *m.graph.outputs)] == [
        [1, "seq"],
        [1, "seq"],
        [1, "seq"],
    ]
    assert [v.name for v in m.graph.inputs] == ["x", "ids"]


def test_shapes_that_change_nothing_modify_nothing():
    m = model("g (float[batch, 4] x) => (float[batch, 4] y) { y = Relu(x) }")
    result = OptimizePass(input_shapes={"x": ["batch", 4]})(m)
    assert not result.modified
    assert _dims(m.graph.inputs[0]) == ["batch", 4]


@pytest.mark.parametrize(
    ("shapes", "ranges", "message"),
    [
        ({"y": [1, 4]}, {}, "no such input"),
        ({"x": [1]}, {}, "1 dims given, the input has rank 2"),
        ({"x": [1, 5]}, {}, "the model declares 4, 5 was given"),
        ({"x": ["n", 4]}, {}, "the model declares 'batch', 'n' was given"),
        ({"x": [1, 4], "z": [2, None]}, {}, "'batch' was given 1 and 2"),
        ({"x": [-1, 4]}, {}, "negative size"),
        ({"x": ["2*n", 4]}, {}, "neither a size, a symbol name nor '?'"),
        ({"x": [1, 4]}, {"batch": (2, 8)}, "outside its range 2:8"),
    ],
)
def test_a_contradiction_is_an_error_before_any_change(shapes, ranges, message):
    body = "g (float[batch, 4] x, float[batch, 3] z) => (float[batch, 4] y) { y = Relu(x) }"
    m = model(body)
    before = proto(m)
    with pytest.raises(InputShapeError, match=message.replace("(", r"\(").replace("*", r"\*")):
        OptimizePass(input_shapes=shapes, symbol_ranges=ranges)(m)
    assert proto(m) == before


def test_the_public_function_takes_input_shapes():
    m = model("g (float[?, 4] x) => (float[?, 4] y) { y = Relu(x) }")
    out = onnx_symdims.optimize(proto(m), input_shapes={"x": [2, 4]})
    assert [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim] == [2, 4]
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [2, 4]
    assert issubclass(onnx_symdims.InputShapeError, ValueError)


def test_given_shapes_keep_the_dims_denotations():
    m = model("g (float[?, 4] x) => (float[?, 4] y) { y = Relu(x) }")
    shape = m.graph.inputs[0].shape
    m.graph.inputs[0].shape = type(shape)(shape.dims, denotations=["DATA_BATCH", None])
    OptimizePass(input_shapes={"x": [2, 4]})(m)
    assert _dims(m.graph.inputs[0]) == [2, 4]
    assert m.graph.inputs[0].shape.get_denotation(0) == "DATA_BATCH"
