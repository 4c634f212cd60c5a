"""``optimize`` keeps declared output names where one value is several graph outputs.

onnx-ir's ``OutputFixPass`` (in the optimizer's tail) gives a repeated output an
``Identity`` named ``Y_alias_1`` and renames an input passed through to the outputs
(``X`` -> ``X_orig``, or ``X_alias_1`` when passed through twice): a caller feeding ``X``
or reading ``Y`` by name is refused. onnxruntime runs the original and the optimized model
on the same feeds, by name.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import onnx_symdims
from tests.cli._cli_testing import model_from_text, write_text_model

ort = pytest.importorskip("onnxruntime")

CASES = {
    "input_passed_through_twice": "g (float[N] X) => (float[N] X, float[N] X) { }",
    "output_twice": "g (float[N] X) => (float[N] Y, float[N] Y) { Y = Relu(X) }",
    "both_interleaved": (
        "g (float[N] X) => (float[N] Y, float[N] X, float[N] Y, float[N] X) { Y = Relu(X) }"
    ),
    "distinct_names_of_one_value": (
        "g (float[N] X) => (float[N] Y1, float[N] Y2) { Y1 = Identity(X)\n Y2 = Identity(X) }"
    ),
    "input_and_its_copy": "g (float[N] X) => (float[N] Y1, float[N] X) { Y1 = Identity(X) }",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_optimize_keeps_declared_input_and_output_names(name, tmp_path):
    path = write_text_model(tmp_path / "m.onnx", CASES[name])
    model = model_from_text(CASES[name])
    inputs = [v.name for v in model.graph.inputs]
    outputs = [v.name for v in model.graph.outputs]
    onnx_symdims.optimize(model)
    assert [v.name for v in model.graph.inputs] == inputs
    assert [v.name for v in model.graph.outputs] == outputs
    out = tmp_path / "out.onnx"
    ir.save(model, out)
    x = np.arange(-1, 2, dtype=np.float32)
    want = ort.InferenceSession(path).run(None, {"X": x})
    session = ort.InferenceSession(str(out))
    assert [o.name for o in session.get_outputs()] == outputs
    for got, expected in zip(session.run(None, {"X": x}), want, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_optimize_pass_refuses_two_inputs_of_one_name():
    """The tail's name fixing would rename the second ``X`` (onnxruntime refuses such a
    model, "Duplicate definition-site"): an error before any change, not a renamed input."""
    from onnx_symdims.rewrite import OptimizePass

    x = ir.Value(name="X", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N"]))
    x2 = ir.Value(name="X", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["N"]))
    add = ir.node("Add", [x2, x2], name="add")
    add.outputs[0].name = "Y"
    graph = ir.Graph([x, x2], add.outputs, nodes=[add], opset_imports={"": 18}, name="g")
    model = ir.Model(graph, ir_version=10)
    with pytest.raises(ValueError, match="graph input 'X' is declared twice"):
        OptimizePass()(model)
    assert [v.name for v in model.graph.inputs] == ["X", "X"]
